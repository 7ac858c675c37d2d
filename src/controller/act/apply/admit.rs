//! Admission: label the reserved nodes for the gang, then bring its Job to
//! run on them through the Job life cycle ([`super::jobs`]): pin the pod
//! template (required node affinity on the node names, a `muster.dev/gang`
//! node selector, tolerations of the nodes' taints) while the Job is
//! suspended and not started, recording the submitted template, then
//! unsuspend in a separate write. A Job already running on the same nodes
//! is left alone.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, Node as KubeNode, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, PodTemplateSpec, Toleration,
};
use kube::ResourceExt;
use kube::api::{Api, Patch};
use muster_planner::lifecycle::job::Want;
use muster_planner::plan::Admission;
use muster_planner::{Snapshot, TaintEffect};

use super::super::{ActError, gang_label_value, params};
use crate::controller::ctx::Ctx;
use crate::controller::objects::GANG_LABEL;
use crate::controller::translate::{Observed, gang};

/// Carries out every admission. Returns how many Jobs it wrote.
pub async fn run(
    ctx: &Ctx,
    admissions: &[Admission],
    snapshot: &Snapshot,
    observed: &Observed,
) -> usize {
    let mut done = 0;
    for a in admissions {
        match admit(ctx, a, snapshot, observed).await {
            Ok(true) => done += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(gang = %a.gang, error = %e, "admission failed"),
        }
    }
    done
}

async fn admit(
    ctx: &Ctx,
    a: &Admission,
    snapshot: &Snapshot,
    observed: &Observed,
) -> Result<bool, ActError> {
    let Some((ns, name)) = a.gang.as_str().split_once('/') else {
        return Err(ActError::Missing(format!("gang id {}", a.gang)));
    };
    let job = observed
        .jobs
        .iter()
        .find(|j| j.namespace().as_deref() == Some(ns) && j.name_any() == name)
        .ok_or_else(|| ActError::Missing(format!("Job {}", a.gang)))?;
    let nodes: BTreeSet<String> = a.assignments.iter().map(|x| x.node.clone()).collect();
    let known: BTreeSet<String> = observed.nodes.iter().map(|n| n.name_any()).collect();
    if let Some(missing) = nodes.iter().find(|n| !known.contains(*n)) {
        return Err(ActError::Missing(format!("Node {missing}")));
    }
    let label = gang_label_value(a.gang.as_str());
    let node_api: Api<KubeNode> = Api::all(ctx.client.clone());
    for n in &nodes {
        let current = observed.nodes.iter().find(|k| &k.name_any() == n);
        if current.is_some_and(|k| k.labels().get(GANG_LABEL) == Some(&label)) {
            continue;
        }
        node_api
            .patch(
                n,
                &params(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {GANG_LABEL: label}}})),
            )
            .await
            .map_err(ActError::api("label node"))?;
    }
    let writes =
        super::super::reconcile::jobs::drive(ctx, job, &Want::Run(nodes), snapshot).await?;
    Ok(writes > 0)
}

/// The pod template pinned to `nodes`.
pub fn pin(
    mut template: PodTemplateSpec,
    nodes: &BTreeSet<String>,
    label: &str,
    taints: &[muster_planner::Taint],
) -> PodTemplateSpec {
    let spec = template.spec.get_or_insert_with(Default::default);
    spec.node_selector
        .get_or_insert_with(Default::default)
        .insert(GANG_LABEL.to_string(), label.to_string());
    let by_name = NodeSelectorRequirement {
        key: "metadata.name".to_string(),
        operator: "In".to_string(),
        values: Some(nodes.iter().cloned().collect()),
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = na
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(|| NodeSelector {
            node_selector_terms: Vec::new(),
        });
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    // terms are ORed: every term must carry the pin
    for term in &mut required.node_selector_terms {
        let fields = term.match_fields.get_or_insert_with(Vec::new);
        fields.retain(|f| f.key != "metadata.name");
        fields.push(by_name.clone());
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let planner_tols: Vec<muster_planner::Toleration> =
        tolerations.iter().map(gang::toleration).collect();
    for t in taints {
        if t.effect == TaintEffect::PreferNoSchedule || planner_tols.iter().any(|x| x.tolerates(t))
        {
            continue;
        }
        let effect = match t.effect {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        };
        let tol = Toleration {
            key: Some(t.key.clone()),
            operator: Some("Equal".to_string()),
            value: Some(t.value.clone()),
            effect: Some(effect.to_string()),
            toleration_seconds: None,
        };
        if !tolerations.contains(&tol) {
            tolerations.push(tol);
        }
    }
    template
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pin_adds_to_every_term_and_tolerates_each_taint_once() {
        let template: PodTemplateSpec = serde_json::from_value(json!({"spec": {
            "containers": [{"name": "c"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
            ]}}}
        }}))
        .expect("template");
        let nodes: BTreeSet<String> = ["n1".to_string(), "n2".to_string()].into();
        let taints = vec![
            muster_planner::Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            },
            muster_planner::Taint {
                key: "pool".into(),
                value: "a100".into(),
                effect: TaintEffect::NoSchedule,
            },
            muster_planner::Taint {
                key: "pool".into(),
                value: "a100".into(),
                effect: TaintEffect::NoSchedule,
            },
            muster_planner::Taint {
                key: "soft".into(),
                value: String::new(),
                effect: TaintEffect::PreferNoSchedule,
            },
        ];
        let pinned = pin(template, &nodes, "ns.g", &taints);
        let spec = pinned.spec.expect("spec");
        assert_eq!(
            spec.node_selector
                .expect("selector")
                .get(GANG_LABEL)
                .map(String::as_str),
            Some("ns.g")
        );
        let terms = spec
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .expect("required")
            .node_selector_terms;
        assert_eq!(terms.len(), 2, "the user's alternatives are kept");
        for t in &terms {
            let f = t.match_fields.as_ref().expect("fields");
            assert_eq!(
                f[0].values.as_deref(),
                Some(&["n1".to_string(), "n2".to_string()][..])
            );
            assert_eq!(t.match_expressions.as_ref().map(Vec::len), Some(1));
        }
        let tols = spec.tolerations.expect("tolerations");
        // the existing Exists toleration covers nvidia.com/gpu; one new for pool; none for soft
        assert_eq!(tols.len(), 2, "{tols:?}");
        assert_eq!(tols[1].key.as_deref(), Some("pool"));
    }

    #[test]
    fn gang_label_values_are_valid_and_stable() {
        assert_eq!(super::super::super::gang_label_value("ns/g"), "ns.g");
        let long = format!("ns/{}", "x".repeat(80));
        let v = super::super::super::gang_label_value(&long);
        assert!(v.len() <= 63, "{v}");
        assert_eq!(v, super::super::super::gang_label_value(&long));
        assert_ne!(
            v,
            super::super::super::gang_label_value(&format!("{long}y"))
        );
    }
}
