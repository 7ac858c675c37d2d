//! Scale to zero: a pool with no work releases all its nodes.
//!
//! A pool is *idle* when none of its nodes (other than Draining or
//! Terminating ones) hosts a gang's pod, is reserved, runs a non-daemon pod,
//! or is used by a decision of this cycle; no launch into it is planned
//! this cycle; and no waiting gang could use it (a gang whose queue may use
//! the pool, that is not Unsatisfiable nor in a stopped or unknown queue,
//! and each of whose pod sets fits some offering of the pool or some node of
//! it).
//!
//! The pool has been idle since the latest `emptySince` of its nodes (a node
//! without `emptySince` that hosts nothing — e.g. still in flight — counts
//! from its `phaseSince`). Once idle for `scaleToZeroAfter`, every node of
//! the pool except `doNotDisrupt` ones is removed (`ScaleToZero`),
//! regardless of disruption budgets.

use crate::decided::{Cycle, Outcome};
use crate::index::World;
use crate::model::NodePhase;
use crate::plan::{Removal, RemovalKind, WaitReason};
use crate::resources::fit_count;

fn pool_wanted(w: &mut World<'_>, cx: &Cycle, p: usize, pool_nodes: &[usize]) -> bool {
    let launching = cx
        .plan
        .launches
        .iter()
        .any(|l| l.nodes.iter().any(|n| n.pool == w.pools[p].name));
    if launching {
        return true;
    }
    let waiting: Vec<usize> = cx
        .outcome
        .iter()
        .filter(|(_, o)| match o {
            Outcome::Waiting(r, _) => !matches!(
                r,
                WaitReason::Unsatisfiable | WaitReason::QueueStopped | WaitReason::UnknownQueue
            ),
            _ => false,
        })
        .map(|(g, _)| g)
        .collect();
    for gi in waiting {
        let q = w.gangs[gi].queue;
        if !w.queue_pools(q).contains(&p) {
            continue;
        }
        let gang = w.gangs[gi].gang;
        let mut all = true;
        for (si, ps) in gang.pod_sets.iter().enumerate() {
            let elig = w.eligible_nodes(gi, si);
            let on_node = pool_nodes
                .iter()
                .any(|&ni| elig[ni] && fit_count(&w.nodes[ni].node.allocatable, &ps.requests) > 0);
            let offs = w.pool_offerings[p].clone();
            let on_offering = offs.iter().any(|&o| {
                w.eligible_new(gi, si, p, o)
                    && fit_count(&w.offerings[o].resources, &ps.requests) > 0
            });
            all &= on_node || on_offering;
        }
        if all {
            return true;
        }
    }
    false
}

/// Adds scale-to-zero removals.
pub(crate) fn plan(w: &mut World<'_>, cx: &mut Cycle) {
    for p in 0..w.pools.len() {
        let pool_nodes: Vec<usize> = (0..w.nodes.len())
            .filter(|&ni| {
                let n = &w.nodes[ni];
                n.pool == Some(p)
                    && !n.removed
                    && !matches!(n.node.phase, NodePhase::Draining | NodePhase::Terminating)
            })
            .collect();
        if pool_nodes.is_empty() {
            continue;
        }
        let mut idle_since = crate::time::Time(i64::MIN);
        let mut busy = false;
        for &ni in &pool_nodes {
            let n = &w.nodes[ni];
            let used_now = cx.all_used.contains_key(&ni);
            if !n.gangs.is_empty()
                || n.exclusive.is_some()
                || n.node.pods.iter().any(|p| !p.daemon)
                || used_now
            {
                busy = true;
                break;
            }
            let since = match n.node.empty_since {
                Some(t) => t,
                None if n.node.phase == NodePhase::Ready => {
                    // Ready with nothing counted but not marked empty: busy.
                    busy = true;
                    break;
                }
                None => n.node.phase_since,
            };
            idle_since = idle_since.max(since);
        }
        if busy || pool_wanted(w, cx, p, &pool_nodes) {
            continue;
        }
        let after = w.pools[p].disruption.scale_to_zero_after;
        if w.now < idle_since + after {
            continue;
        }
        for ni in pool_nodes {
            if w.nodes[ni].node.do_not_disrupt {
                continue;
            }
            w.mark_removed(ni);
            let n = w.nodes[ni].node;
            cx.plan.removals.push(Removal {
                node: n.name.clone(),
                pool: w.pools[p].name.clone(),
                kind: RemovalKind::ScaleToZero,
                saves_per_hour: n.price.unwrap_or_default(),
                message: format!(
                    "pool {} has had no work since {idle_since} (scaleToZeroAfter {after})",
                    w.pools[p].name
                ),
            });
        }
    }
}
