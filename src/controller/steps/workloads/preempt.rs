//! Eviction of a whole gang (preemption, pods-ready timeout, interruption,
//! drain): its workload is brought back to queued through the workload life
//! cycle ([`crate::controller::steps::workloads`]): for a Job,
//! suspended (the Job controller then deletes its pods), `startTime` cleared
//! through the status, the submitted template restored.

use muster_planner::Snapshot;
use muster_planner::lifecycle::workload::Want;
use muster_planner::plan::Preemption;

use crate::controller::base::api::ActError;
use crate::controller::base::metrics::ReasonLabels;
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::steps::workloads::Started;

/// Carries out every preemption. Returns how many Jobs it wrote.
pub(crate) async fn run(
    ctx: &Ctx,
    started: &Started,
    preemptions: &[Preemption],
    observed: &Observed,
    snapshot: &Snapshot,
) -> usize {
    let mut n = 0;
    for p in preemptions {
        let Some((ns, name)) = p.victim.as_str().split_once('/') else {
            tracing::warn!(gang = %p.victim, "gang id without namespace");
            continue;
        };
        match suspend(ctx, started, ns, name, observed, snapshot).await {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(gang = %p.victim, error = %e, "eviction failed"),
        }
    }
    n
}

/// Stops the workloads of the gangs the Gang step evicted, each given as
/// (namespace, Gang name, reason), their status already `Evicted`; a
/// failure is left to the workload life cycle, which stops an `Evicted`
/// gang's workload next cycle.
pub(crate) async fn evict(
    ctx: &Ctx,
    started: &Started,
    evictions: &[(&str, &str, &str)],
    observed: &Observed,
    snapshot: &Snapshot,
) {
    for &(ns, name, reason) in evictions {
        if let Err(err) = suspend(ctx, started, ns, name, observed, snapshot).await {
            tracing::warn!(gang = %name, error = %err, "could not evict gang");
        }
        ctx.deps
            .metrics
            .evictions
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }
}

/// Brings the gang's workload back to queued; true when it wrote.
pub(crate) async fn suspend(
    ctx: &Ctx,
    started: &Started,
    ns: &str,
    name: &str,
    observed: &Observed,
    snapshot: &Snapshot,
) -> Result<bool, ActError> {
    let Some(w) = crate::controller::observe::workloads::find(observed, ns, name) else {
        return Ok(false);
    };
    Ok(crate::controller::steps::workloads::drive(
        ctx,
        started,
        w,
        &Want::Queued,
        Default::default(),
        snapshot,
        None,
    )
    .await?
        > 0)
}
