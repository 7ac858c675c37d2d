//! Releases: reserved capacity a gang gives up. The reservation goes (PoolNode
//! `spec.gang`, the node's `muster.dev/gang` label and its
//! `pod-set.muster.dev/*` labels), or moves to the gang it is handed to. A
//! machine released to no gang while still in flight (`Pending`, `Launched`,
//! `Registered`) is cancelled: its PoolNode is deleted and the finalizer
//! terminates the instance, as the planner's driver contract says; the
//! planner never hands on a machine that missed its gang's provisioning
//! deadline without registering, so such machines go here. A Ready machine
//! stays as free capacity until the planner removes it (consolidation).

use kube::ResourceExt;
use kube::api::{Api, Patch};
use muster_planner::plan::Release;

use crate::controller::base::api::{ActError, api, gang_label_value, params};
use crate::controller::base::objects::{GANG_LABEL, Kind};
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::translate::Translation;
use crate::controller::translate::node::poolnode_status;
use crate::controller::workloads::template::POD_SET_LABEL_PREFIX;
use muster_crds::PoolNodePhase;

/// Carries out every release. Returns how many nodes it changed.
pub(crate) async fn run(
    ctx: &Ctx,
    releases: &[Release],
    observed: &Observed,
    tr: &Translation,
) -> usize {
    let mut n = 0;
    for r in releases {
        for node in &r.nodes {
            match release(ctx, r, node, observed, tr).await {
                Ok(()) => n += 1,
                Err(e) => tracing::warn!(gang = %r.gang, node, error = %e, "release failed"),
            }
        }
    }
    n
}

async fn release(
    ctx: &Ctx,
    r: &Release,
    node: &str,
    observed: &Observed,
    tr: &Translation,
) -> Result<(), ActError> {
    let to = r.handed_to.as_ref().map(|g| g.as_str().to_string());
    let label = to.as_deref().map(gang_label_value);
    // the PoolNode is the node itself (in flight) or registered as it
    let poolnode = observed.of(Kind::PoolNode).iter().find(|p| {
        p.name_any() == node || tr.registered.get(&p.name_any()).map(String::as_str) == Some(node)
    });
    if let Some(p) = poolnode
        && to.is_none()
        && matches!(
            poolnode_status(p).phase,
            PoolNodePhase::Pending | PoolNodePhase::Launched | PoolNodePhase::Registered
        )
    {
        return crate::controller::steps::pool_nodes::removal::delete_poolnode(ctx, p).await;
    }
    if let Some(p) = poolnode {
        api(&ctx.client, Kind::PoolNode, None)
            .patch(
                &p.name_any(),
                &params(),
                &Patch::Merge(serde_json::json!({
                    "metadata": {"labels": {GANG_LABEL: label}},
                    // every field named (uid null when unknown): a merge patch
                    // keeps what it does not name
                    "spec": {"gang": to.as_deref().and_then(|g| crate::controller::steps::pool_nodes::launch::gang_ref(g, &tr.snapshot)).map(
                        |r| serde_json::json!({"namespace": r.namespace, "name": r.name, "uid": r.uid})
                    )},
                })),
            )
            .await
            .map_err(ActError::api("release PoolNode"))?;
    }
    if let Some(n) = observed.nodes.iter().find(|n| n.name_any() == node) {
        // the gang's label moves (or goes); the pod-set labels of the gang
        // that gives the node up go with it
        let mut labels = serde_json::Map::new();
        labels.insert(GANG_LABEL.to_string(), serde_json::json!(label));
        for key in n.labels().keys() {
            if key.starts_with(POD_SET_LABEL_PREFIX) {
                labels.insert(key.clone(), serde_json::Value::Null);
            }
        }
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ctx.client.clone());
        nodes
            .patch(
                node,
                &params(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": labels}})),
            )
            .await
            .map_err(ActError::api("release node"))?;
    }
    Ok(())
}
