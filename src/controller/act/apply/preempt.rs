//! Eviction of a whole gang (preemption, pods-ready timeout, interruption,
//! drain): its workload is brought back to queued through the workload life
//! cycle ([`crate::controller::act::reconcile::workloads`]): for a Job,
//! suspended (the Job controller then deletes its pods), `startTime` cleared
//! through the status, the submitted template restored.

use muster_planner::Snapshot;
use muster_planner::lifecycle::workload::Want;
use muster_planner::plan::Preemption;

use super::super::ActError;
use crate::controller::ctx::Ctx;
use crate::controller::translate::Observed;

/// Carries out every preemption. Returns how many Jobs it wrote.
pub async fn run(
    ctx: &Ctx,
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
        match suspend(ctx, ns, name, observed, snapshot).await {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(gang = %p.victim, error = %e, "eviction failed"),
        }
    }
    n
}

/// Brings the gang's workload back to queued; true when it wrote.
pub async fn suspend(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    observed: &Observed,
    snapshot: &Snapshot,
) -> Result<bool, ActError> {
    let Some(w) = crate::controller::workloads::find(observed, ns, name) else {
        return Ok(false);
    };
    Ok(super::super::reconcile::workloads::drive(
        ctx,
        w,
        &Want::Queued,
        Default::default(),
        snapshot,
        None,
    )
    .await?
        > 0)
}
