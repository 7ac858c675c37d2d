//! Removals: nodes the plan takes away (empty past `consolidateAfter`,
//! underutilized, replaced by a cheaper machine, the pool scaling to zero,
//! or the reserved capacity they run on about to end).
//!
//! [`mark`] records the decision first: the PoolNode goes to phase
//! `Draining` with the removal's kind as its reason (the planner never plans
//! onto a Draining node and counts it against the pool's disruption budget).
//! A `Replace` writes the replacement PoolNode as well, and the old node is
//! drained only once the replacement is Ready; if the replacement failed,
//! the old node is put back to `Ready`.
//!
//! [`drain`] then walks every Draining PoolNode, each cycle, until it is
//! gone: cordon the Node; wait for a muster gang on it to go (the gang's
//! life cycle evicts it whole when a node it holds is Draining, whatever
//! the reason — for `CapacityEnding` as for an interruption, disruptible
//! or not, requeued at once without backoff: see `status`); evict other
//! pods through the
//! Eviction API, which honours PodDisruptionBudgets; never evict a pod
//! annotated `muster.dev/do-not-disrupt` (the node waits, with an Event).
//! When only DaemonSet and mirror pods are left, the PoolNode is deleted and
//! its finalizer terminates the instance and deletes the Node.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::controller::workloads::pod::CachedPod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, EvictParams, Patch};
use muster_crds::PoolNodePhase;
use muster_planner::plan::{Removal, RemovalKind};

use crate::controller::base::api::{ActError, api, is_not_found, params, patch_status};
use crate::controller::base::objects::{Kind, QUEUE_LABEL};
use crate::controller::base::reasons::{
    CAPACITY_ENDING, EMPTY, REPLACED, REPLACEMENT_FAILED, SCALE_TO_ZERO, UNDERUTILIZED,
};
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::translate::Translation;
use crate::controller::translate::node::{pod_active, poolnode_status};
use crate::controller::workloads::pod_gang;

/// Annotation on a pod or Node: never evict or remove it voluntarily.
pub(crate) const DO_NOT_DISRUPT: &str = "muster.dev/do-not-disrupt";
/// Annotation on a Draining PoolNode: the PoolNode replacing it.
pub(crate) const REPLACED_BY_ANNOTATION: &str = "muster.dev/replaced-by";
/// How long one eviction call may take (the client retries `429` by itself;
/// a PodDisruptionBudget that keeps refusing ends the attempt, and the next
/// cycle tries again).
pub(crate) const EVICTION_TIMEOUT: Duration = Duration::from_secs(20);

/// Evictions in flight (pod `namespace/name`), so a slow eviction is not
/// started twice by consecutive cycles.
#[derive(Debug, Default)]
pub(crate) struct InFlight(Mutex<BTreeSet<String>>);

impl InFlight {
    fn begin(&self, key: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string())
    }

    fn end(&self, key: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

/// The reason a removal is recorded with (PoolNode status, Event).
pub(crate) fn reason(kind: &RemovalKind) -> &'static str {
    match kind {
        RemovalKind::Empty => EMPTY,
        RemovalKind::Underutilized => UNDERUTILIZED,
        RemovalKind::Replace { .. } => REPLACED,
        RemovalKind::ScaleToZero => SCALE_TO_ZERO,
        RemovalKind::CapacityEnding { .. } => CAPACITY_ENDING,
    }
}

/// Marks every removed node's PoolNode `Draining` (and writes replacements).
/// Returns how many it marked.
pub(crate) async fn mark(
    ctx: &Ctx,
    removals: &[Removal],
    observed: &Observed,
    tr: &Translation,
) -> usize {
    let mut n = 0;
    for r in removals {
        let Some(pn) = poolnode_of(observed, tr, &r.node) else {
            tracing::warn!(node = %r.node, "removal of a node muster did not launch: skipped");
            continue;
        };
        match mark_one(ctx, r, pn, tr).await {
            Ok(()) => n += 1,
            Err(e) => tracing::warn!(node = %r.node, error = %e, "could not mark removal"),
        }
    }
    n
}

async fn mark_one(
    ctx: &Ctx,
    r: &Removal,
    pn: &DynamicObject,
    tr: &Translation,
) -> Result<(), ActError> {
    let why = reason(&r.kind);
    if let RemovalKind::Replace { with } = &r.kind {
        crate::controller::steps::pool_nodes::launch::create(ctx, with, None, None, &tr.snapshot)
            .await?;
        api(&ctx.client, Kind::PoolNode, None)
            .patch(
                &pn.name_any(),
                &params(),
                &Patch::Merge(serde_json::json!({
                    "metadata": {"annotations": {REPLACED_BY_ANNOTATION: with.name}}
                })),
            )
            .await
            .map_err(ActError::api("annotate PoolNode"))?;
    }
    let before = poolnode_status(pn);
    let after = muster_crds::PoolNodeStatus {
        phase: PoolNodePhase::Draining,
        reason: Some(why.to_string()),
        message: Some(r.message.clone()),
        ..before.clone()
    };
    if let Some(patch) = crate::controller::base::api::status_patch(&before, &after) {
        patch_status(&ctx.client, Kind::PoolNode, None, &pn.name_any(), patch).await?;
    }
    ctx.events
        .normal(Kind::PoolNode, pn, why, r.message.clone())
        .await;
    Ok(())
}

/// The PoolNode behind a planner node name (its own name while in flight, or
/// the Node it registered as).
fn poolnode_of<'a>(
    observed: &'a Observed,
    tr: &Translation,
    node: &str,
) -> Option<&'a std::sync::Arc<DynamicObject>> {
    observed.of(Kind::PoolNode).iter().find(|p| {
        p.name_any() == node || tr.registered.get(&p.name_any()).map(String::as_str) == Some(node)
    })
}

/// Drains every Draining PoolNode one step. Returns how many PoolNodes it
/// deleted.
pub(crate) async fn drain(ctx: &Ctx, evicting: &Arc<InFlight>, observed: &Observed) -> usize {
    let mut deleted = 0;
    for pn in observed.of(Kind::PoolNode) {
        if pn.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let st = poolnode_status(pn);
        if st.phase != PoolNodePhase::Draining {
            continue;
        }
        match drain_one(ctx, evicting, observed, pn, st.node_name.as_deref()).await {
            Ok(true) => deleted += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(poolnode = %pn.name_any(), error = %e, "drain step failed"),
        }
    }
    deleted
}

/// What to do with one pod of a draining node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PodAction {
    /// DaemonSet, mirror or finished pod: goes with the node.
    Ignore,
    /// Pod of a muster gang: evict the whole gang (namespace, Job).
    Gang(String, String),
    /// Annotated `muster.dev/do-not-disrupt`: never evicted.
    Keep,
    /// Anything else: the Eviction API.
    Evict,
}

/// Classifies a pod on a draining node; `gang_jobs` are the Jobs with a
/// muster queue label.
pub(crate) fn classify(pod: &CachedPod, gang_jobs: &BTreeSet<(String, String)>) -> PodAction {
    let daemon = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
    let mirror = pod
        .annotations()
        .contains_key("kubernetes.io/config.mirror");
    if daemon || mirror || !pod_active(pod) {
        return PodAction::Ignore;
    }
    if pod.annotations().contains_key(DO_NOT_DISRUPT) {
        return PodAction::Keep;
    }
    match pod_gang(pod) {
        Some(job) if gang_jobs.contains(&job) => PodAction::Gang(job.0, job.1),
        _ => PodAction::Evict,
    }
}

async fn drain_one(
    ctx: &Ctx,
    evicting: &Arc<InFlight>,
    observed: &Observed,
    pn: &std::sync::Arc<DynamicObject>,
    node_name: Option<&str>,
) -> Result<bool, ActError> {
    // a replacement goes first: wait until it is Ready, or give up the removal
    if let Some(with) = pn.annotations().get(REPLACED_BY_ANNOTATION) {
        let replacement = observed
            .of(Kind::PoolNode)
            .iter()
            .find(|p| &p.name_any() == with);
        match replacement.map(|p| poolnode_status(p).phase) {
            Some(PoolNodePhase::Ready) => {}
            Some(_) => return Ok(false),
            None => {
                // the replacement failed: the node serves on
                let before = poolnode_status(pn);
                let after = muster_crds::PoolNodeStatus {
                    phase: PoolNodePhase::Ready,
                    reason: Some(REPLACEMENT_FAILED.to_string()),
                    message: Some(format!("replacement {with} failed; node kept")),
                    ..before.clone()
                };
                if let Some(patch) = crate::controller::base::api::status_patch(&before, &after) {
                    patch_status(&ctx.client, Kind::PoolNode, None, &pn.name_any(), patch).await?;
                }
                if let Some(node) = node_name {
                    cordon(ctx, observed, node, false).await?;
                }
                return Ok(false);
            }
        }
    }
    let Some(node) = node_name.filter(|n| observed.nodes.iter().any(|k| k.name_any() == *n)) else {
        // never registered (or its Node is gone): nothing to drain
        delete_poolnode(ctx, pn).await?;
        return Ok(true);
    };
    cordon(ctx, observed, node, true).await?;
    let gang_jobs: BTreeSet<(String, String)> = observed
        .jobs
        .iter()
        .filter(|j| j.labels().contains_key(QUEUE_LABEL))
        .map(|j| (j.namespace().unwrap_or_default(), j.name_any()))
        .collect();
    let mut remaining = 0;
    for pod in observed
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node))
    {
        match classify(pod, &gang_jobs) {
            PodAction::Ignore => {}
            PodAction::Keep => {
                remaining += 1;
                ctx.events
                    .warn(
                        Kind::PoolNode,
                        pn,
                        crate::controller::base::reasons::DRAIN_BLOCKED,
                        format!(
                            "pod {}/{} is annotated {DO_NOT_DISRUPT}; the node waits for it",
                            pod.namespace().unwrap_or_default(),
                            pod.name_any()
                        ),
                    )
                    .await;
            }
            PodAction::Gang(..) => {
                // the gang's life cycle evicts it whole (Gang status update)
                remaining += 1;
            }
            PodAction::Evict => {
                remaining += 1;
                start_eviction(ctx, evicting, pn, pod);
            }
        }
    }
    if remaining > 0 {
        return Ok(false);
    }
    delete_poolnode(ctx, pn).await?;
    Ok(true)
}

/// Starts one eviction in the background (bounded by [`EVICTION_TIMEOUT`]);
/// its outcome shows in the caches and, when refused, as an Event.
fn start_eviction(
    ctx: &Ctx,
    evicting: &Arc<InFlight>,
    pn: &std::sync::Arc<DynamicObject>,
    pod: &CachedPod,
) {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let key = format!("{ns}/{name}");
    if !evicting.begin(&key) {
        return;
    }
    let client = ctx.client.clone();
    let events = ctx.events.clone();
    let evicting = evicting.clone();
    let pn = pn.clone();
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        let outcome =
            tokio::time::timeout(EVICTION_TIMEOUT, pods.evict(&name, &EvictParams::default()))
                .await;
        match outcome {
            Ok(Ok(_)) => tracing::info!(pod = %key, "evicted"),
            Ok(Err(e)) if is_not_found(&e) => {}
            Ok(Err(e)) => {
                events
                    .warn(
                        Kind::PoolNode,
                        &pn,
                        crate::controller::base::reasons::DRAIN_BLOCKED,
                        format!("eviction of pod {key} refused: {e}"),
                    )
                    .await;
            }
            Err(_) => {
                events
                    .warn(
                        Kind::PoolNode,
                        &pn,
                        crate::controller::base::reasons::DRAIN_BLOCKED,
                        format!(
                            "eviction of pod {key} still refused after {}s (PodDisruptionBudget?); retrying",
                            EVICTION_TIMEOUT.as_secs()
                        ),
                    )
                    .await;
            }
        }
        evicting.end(&key);
    });
}

/// Sets (or clears) `spec.unschedulable` on a Node when it differs.
async fn cordon(ctx: &Ctx, observed: &Observed, node: &str, on: bool) -> Result<(), ActError> {
    let current = observed
        .nodes
        .iter()
        .find(|n| n.name_any() == node)
        .and_then(|n| n.spec.as_ref()?.unschedulable)
        .unwrap_or(false);
    if current == on {
        return Ok(());
    }
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    match nodes
        .patch(
            node,
            &params(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": on}})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(ActError::api("cordon Node")(e)),
    }
}

pub(super) async fn delete_poolnode(ctx: &Ctx, pn: &DynamicObject) -> Result<(), ActError> {
    match api(&ctx.client, Kind::PoolNode, None)
        .delete(&pn.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(ActError::api("delete PoolNode")(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> CachedPod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn pods_on_a_draining_node_are_classified() {
        let jobs: BTreeSet<(String, String)> = [("a".to_string(), "train".to_string())].into();
        let owned = |kind: &str, name: &str| serde_json::json!([{"apiVersion": "v1", "kind": kind, "name": name, "uid": "u"}]);
        let cases = [
            (
                serde_json::json!({"metadata": {"name": "d", "namespace": "a", "ownerReferences": owned("DaemonSet", "dcgm")}}),
                PodAction::Ignore,
            ),
            (
                serde_json::json!({"metadata": {"name": "m", "namespace": "a", "annotations": {"kubernetes.io/config.mirror": "x"}}}),
                PodAction::Ignore,
            ),
            (
                serde_json::json!({"metadata": {"name": "f", "namespace": "a"}, "status": {"phase": "Succeeded"}}),
                PodAction::Ignore,
            ),
            (
                serde_json::json!({"metadata": {"name": "k", "namespace": "a", "annotations": {DO_NOT_DISRUPT: "true"}, "ownerReferences": owned("Job", "train")}}),
                PodAction::Keep,
            ),
            (
                serde_json::json!({"metadata": {"name": "g", "namespace": "a", "ownerReferences": owned("Job", "train")}}),
                PodAction::Gang("a".into(), "train".into()),
            ),
            (
                serde_json::json!({"metadata": {"name": "o", "namespace": "b", "ownerReferences": owned("Job", "train")}}),
                PodAction::Evict,
            ),
            (
                serde_json::json!({"metadata": {"name": "p", "namespace": "a"}}),
                PodAction::Evict,
            ),
        ];
        for (p, want) in cases {
            let p = pod(p);
            assert_eq!(classify(&p, &jobs), want, "{}", p.name_any());
        }
    }

    #[test]
    fn removal_reasons_are_bounded() {
        let all = [
            RemovalKind::Empty,
            RemovalKind::Underutilized,
            RemovalKind::ScaleToZero,
        ];
        let names: BTreeSet<&str> = all.iter().map(reason).collect();
        assert_eq!(names.len(), 3);
    }
}
