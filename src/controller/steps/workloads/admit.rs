//! Admission: label the reserved nodes for the gang (and for each pod set
//! placed on them), then bring its workload to run on them through the
//! workload life cycle ([`crate::controller::steps::workloads`]):
//! pin each pod set's template to its nodes (see
//! [`crate::controller::workloads::template::pin`]) while the workload is
//! suspended and not started, recording the submitted templates, then
//! unsuspend in a separate write. A workload already running on the same
//! nodes is left alone.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use muster_planner::Snapshot;
use muster_planner::lifecycle::workload::{Pins, Want};
use muster_planner::plan::Admission;

use crate::controller::base::api::{ActError, gang_label_value, params};
use crate::controller::base::objects::GANG_LABEL;
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::steps::workloads::Started;
use crate::controller::workloads::template::pod_set_label;

/// Carries out every admission. Returns how many workloads it wrote.
pub(crate) async fn run(
    ctx: &Ctx,
    started: &Started,
    admissions: &[Admission],
    snapshot: &Snapshot,
    observed: &Observed,
) -> usize {
    let mut done = 0;
    for a in admissions {
        match admit(ctx, started, a, snapshot, observed).await {
            Ok(true) => done += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(gang = %a.gang, error = %e, "admission failed"),
        }
    }
    done
}

async fn admit(
    ctx: &Ctx,
    started: &Started,
    a: &Admission,
    snapshot: &Snapshot,
    observed: &Observed,
) -> Result<bool, ActError> {
    let Some((ns, name)) = a.gang.as_str().split_once('/') else {
        return Err(ActError::Missing(format!("gang id {}", a.gang)));
    };
    let w = crate::controller::observe::workloads::find(observed, ns, name)
        .ok_or_else(|| ActError::Missing(format!("workload of gang {}", a.gang)))?;
    let mut pins = Pins::new();
    for x in &a.assignments {
        pins.entry(x.pod_set.clone())
            .or_default()
            .insert(x.node.clone());
    }
    let nodes: BTreeSet<String> = pins.values().flatten().cloned().collect();
    let known: BTreeSet<String> = observed.nodes.iter().map(|n| n.name_any()).collect();
    if let Some(missing) = nodes.iter().find(|n| !known.contains(*n)) {
        return Err(ActError::Missing(format!("Node {missing}")));
    }
    label_nodes(ctx, a.gang.as_str(), &pins, observed).await?;
    let counts =
        crate::controller::steps::workloads::counts_of(a.assignments.iter().map(|x| &x.pod_set));
    let gang_version = observed
        .of(crate::controller::base::objects::Kind::Gang)
        .iter()
        .find(|g| g.metadata.namespace.as_deref() == Some(ns) && g.name_any() == name)
        .and_then(|g| g.metadata.resource_version.clone());
    let writes = crate::controller::steps::workloads::drive(
        ctx,
        started,
        w,
        &Want::Run(pins),
        counts,
        snapshot,
        gang_version.as_deref(),
    )
    .await?;
    Ok(writes > 0)
}

/// Labels each known node of `pins` for the gang `gang_id` (`ns/name`)
/// and for each pod set placed on it (what a pin by node selector names),
/// skipping nodes that already carry the labels. Idempotent: the workload
/// life cycle calls it again every cycle an admitted gang is driven, so a
/// label write refused once (a 409, 429 or 500) is made the next cycle
/// rather than leaving pods that select the label unschedulable.
pub(crate) async fn label_nodes(
    ctx: &Ctx,
    gang_id: &str,
    pins: &Pins,
    observed: &Observed,
) -> Result<(), ActError> {
    let nodes: BTreeSet<&String> = pins.values().flatten().collect();
    let label = gang_label_value(gang_id);
    let node_api: Api<KubeNode> = Api::all(ctx.client.clone());
    for n in nodes {
        let Some(current) = observed.nodes.iter().find(|k| &k.name_any() == n) else {
            continue;
        };
        let mut want: Vec<String> = vec![GANG_LABEL.to_string()];
        want.extend(
            pins.iter()
                .filter(|(_, ns)| ns.contains(n))
                .map(|(set, _)| pod_set_label(set)),
        );
        if want
            .iter()
            .all(|key| current.labels().get(key) == Some(&label))
        {
            continue;
        }
        let labels: serde_json::Map<String, serde_json::Value> = want
            .into_iter()
            .map(|k| (k, serde_json::Value::String(label.clone())))
            .collect();
        node_api
            .patch(
                n,
                &params(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": labels}})),
            )
            .await
            .map_err(ActError::api("label node"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn gang_label_values_are_valid_and_stable() {
        assert_eq!(
            crate::controller::base::api::gang_label_value("ns/g"),
            "ns.g"
        );
        let long = format!("ns/{}", "x".repeat(80));
        let v = crate::controller::base::api::gang_label_value(&long);
        assert!(v.len() <= 63, "{v}");
        assert_eq!(v, crate::controller::base::api::gang_label_value(&long));
        assert_ne!(
            v,
            crate::controller::base::api::gang_label_value(&format!("{long}y"))
        );
    }
}
