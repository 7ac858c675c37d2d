//! Orphan collection: every `orphan_gc_period`, list each cloud's instances
//! tagged for this cluster and terminate those no PoolNode accounts for and
//! older than `orphan_grace` (the decision is
//! `muster_planner::orphans::orphans`), then delete the placement groups no
//! PoolNode names (`muster_planner::orphans::unused_placement_groups`). Orphans appear when a PoolNode is
//! deleted by hand with its finalizer removed, or when an instance outlives
//! a crash of the process that launched it.

use std::collections::BTreeSet;

use kube::ResourceExt;
use muster_planner::orphans::{Known, orphans, unused_placement_groups};
use muster_planner::{Dur, Time};
use muster_provider_api::{CloudProvider, ProviderError, owned_instances};

use crate::controller::base::metrics::Metrics;
use crate::controller::base::objects::Kind;
use crate::controller::base::objects::PoolNodeSpec;
use crate::controller::cloud::work::{Job, Progress};
use crate::controller::ctx::{Ctx, CycleProviders};
use crate::controller::observe::Observed;
use crate::controller::translate::node::poolnode_status;
use crate::controller::translate::pool::spec;

/// What the PoolNodes in the caches account for.
pub(crate) fn known(observed: &Observed) -> Known {
    let pns = observed.of(Kind::PoolNode);
    Known {
        pool_nodes: pns.iter().map(|p| p.name_any()).collect(),
        provider_ids: pns
            .iter()
            .filter_map(|p| poolnode_status(p).provider_id)
            .collect(),
        placement_groups: pns
            .iter()
            .filter_map(|p| spec::<PoolNodeSpec>(Kind::PoolNode, p).ok())
            .filter_map(|s| s.placement_group)
            .collect(),
    }
}

/// Starts one collection per cloud off the planning path (list, decide,
/// terminate), unless one still runs; returns the provider ids that the
/// collections finished since the last call terminated.
pub(crate) async fn collect(
    ctx: &Ctx,
    observed: &Observed,
    providers: &CycleProviders,
    now: Time,
) -> Vec<String> {
    let known = known(observed);
    let grace = Dur::secs(ctx.config.orphan_grace.as_secs());
    let mut done: BTreeSet<String> = BTreeSet::new();
    for (node_class, provider) in providers.ready() {
        let job = Job::Orphans(node_class.to_string());
        let start = || {
            let (provider, known) = (provider.clone(), known.clone());
            let (cluster, metrics) = (ctx.config.cluster.clone(), ctx.deps.metrics.clone());
            let node_class = node_class.to_string();
            move || async move {
                collect_one(
                    provider.as_ref(),
                    &node_class,
                    &cluster,
                    &known,
                    now,
                    grace,
                    &metrics,
                )
                .await
            }
        };
        let quiet = |_: &Vec<String>| false;
        if let Progress::Done(terminated) =
            ctx.cloud.work.poll(job.clone(), node_class, quiet, start())
        {
            done.extend(terminated);
            // the finished one is taken: the next one starts now
            let _ = ctx.cloud.work.poll(job, node_class, quiet, start());
        }
    }
    done.into_iter().collect()
}

/// One cloud's collection: list, decide, terminate.
async fn collect_one(
    provider: &dyn CloudProvider,
    node_class: &str,
    cluster: &str,
    known: &Known,
    now: Time,
    grace: Dur,
    metrics: &Metrics,
) -> Vec<String> {
    let owned = match owned_instances(provider, cluster).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(node_class = %node_class, error = %e, "could not list instances");
            return Vec::new();
        }
    };
    let mut done = Vec::new();
    for pid in orphans(&owned, known, now, grace) {
        match provider.terminate(&pid).await {
            Ok(()) | Err(ProviderError::NotFound { .. }) => {
                tracing::info!(instance = %pid, "orphan terminated");
                metrics.orphans_terminated.inc();
                done.push(pid);
            }
            Err(e) => tracing::warn!(instance = %pid, error = %e, "could not terminate orphan"),
        }
    }
    // placement groups no PoolNode names any more (their last node is gone)
    match provider.placement_groups(cluster).await {
        Ok(listed) => {
            for group in unused_placement_groups(&listed, known) {
                match provider.delete_placement_group(cluster, &group).await {
                    Ok(()) => tracing::info!(placement_group = %group, "placement group deleted"),
                    // its instances are still terminating: next round
                    Err(e) => {
                        tracing::debug!(placement_group = %group, error = %e, "placement group not deleted yet")
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(node_class = %node_class, error = %e, "could not list placement groups")
        }
    }
    // groups of machines (GKE node pools) empty for their time to live
    match provider.delete_empty_groups().await {
        Ok(gone) => {
            for group in gone {
                tracing::info!(node_class = %node_class, group = %group, "empty machine group deleted");
            }
        }
        Err(e) => {
            tracing::warn!(node_class = %node_class, error = %e, "could not delete empty machine groups")
        }
    }
    done
}
