//! Orphan collection: every `orphan_gc_period`, list each cloud's instances
//! tagged for this cluster and terminate those no PoolNode accounts for and
//! older than `orphan_grace` (the decision is
//! `muster_planner::orphans::orphans`). Orphans appear when a PoolNode is
//! deleted by hand with its finalizer removed, or when an instance outlives
//! a crash of the process that launched it.

use std::collections::BTreeSet;

use kube::ResourceExt;
use muster_planner::orphans::{Known, orphans};
use muster_planner::{Dur, Time};
use muster_provider_api::{ProviderError, owned_instances};

use crate::controller::ctx::{Ctx, CycleProviders};
use crate::controller::objects::Kind;
use crate::controller::translate::Observed;
use crate::controller::translate::node::poolnode_status;

/// What the PoolNodes in the caches account for.
pub fn known(observed: &Observed) -> Known {
    let pns = observed.of(Kind::PoolNode);
    Known {
        pool_nodes: pns.iter().map(|p| p.name_any()).collect(),
        provider_ids: pns
            .iter()
            .filter_map(|p| poolnode_status(p).provider_id)
            .collect(),
    }
}

/// Lists, decides and terminates once. Returns the provider ids terminated.
pub async fn collect(
    ctx: &Ctx,
    observed: &Observed,
    providers: &CycleProviders,
    now: Time,
) -> Vec<String> {
    let known = known(observed);
    let grace = Dur::secs(ctx.config.orphan_grace.as_secs());
    let mut done: BTreeSet<String> = BTreeSet::new();
    for (node_class, provider) in providers.ready() {
        let owned = match owned_instances(provider.as_ref(), &ctx.config.cluster).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(node_class = %node_class, error = %e, "could not list instances");
                continue;
            }
        };
        for pid in orphans(&owned, &known, now, grace) {
            if done.contains(&pid) {
                continue;
            }
            match provider.terminate(&pid).await {
                Ok(()) | Err(ProviderError::NotFound { .. }) => {
                    tracing::info!(instance = %pid, "orphan terminated");
                    ctx.deps.metrics.orphans_terminated.inc();
                    done.insert(pid);
                }
                Err(e) => tracing::warn!(instance = %pid, error = %e, "could not terminate orphan"),
            }
        }
    }
    done.into_iter().collect()
}
