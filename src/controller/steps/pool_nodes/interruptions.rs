//! Interruption notices: each cloud's stream of spot interruptions,
//! rebalance recommendations, preemptions, scheduled maintenance and
//! out-of-band terminations is
//! read every `interruption_poll`, mapped to the PoolNode recording the
//! instance, and handled as the planner's interruption table
//! (`muster_planner::lifecycle::interruption`) says: an `Interrupted`
//! condition and a Warning Event always; for a reclaimed machine, the
//! PoolNode goes `Draining` with reason `Interrupted` (its gangs are then
//! evicted whole and requeued at once, see `status`) and the offering is
//! marked unavailable so the re-plan goes elsewhere. Notices naming no
//! PoolNode are ignored. A notice whose handling failed (the status write
//! refused, the PoolNode's spec unreadable) is kept in [`Unhandled`] and
//! handled again at the next poll: a provider delivers each notice once,
//! so dropping it would leave a reclaimed machine's PoolNode `Ready` for
//! good.

use std::sync::Arc;

use kube::ResourceExt;
use muster_planner::Time;
use muster_planner::lifecycle::interruption::{self, Notice, Step};
use muster_planner::lifecycle::pool_node::Unavailable;
use muster_provider_api::{CloudProvider, Interruption, InterruptionKind, ProviderError};

use crate::controller::base::api::{patch_status, with_condition};
use crate::controller::base::conditions::ConditionType;
use crate::controller::base::metrics::KindLabels;
use crate::controller::base::objects::{Kind, PoolNodeSpec};
use crate::controller::base::time;
use crate::controller::cloud::work::{Job, Progress};
use crate::controller::ctx::{Ctx, CycleProviders};
use crate::controller::observe::Observed;
use crate::controller::translate::node::{node_phase, offering_key, poolnode_status};
use crate::controller::translate::pool::spec;

/// Most notices kept for another try; beyond it the oldest are dropped
/// (with a warning), so a write path that keeps failing cannot grow it
/// without bound.
const MAX_UNHANDLED: usize = 1024;

/// Notices whose handling failed, owned by the cycle's memory and tried
/// again before the next read's.
#[derive(Debug, Default)]
pub(crate) struct Unhandled(std::sync::Mutex<Vec<Interruption>>);

impl Unhandled {
    fn take(&self) -> Vec<Interruption> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn keep(&self, n: Interruption) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.push(n);
        if g.len() > MAX_UNHANDLED {
            let dropped = g.remove(0);
            tracing::warn!(instance = %dropped.provider_id, "interruption dropped after failed tries");
        }
    }
}

/// The planner's notice for a provider's interruption kind.
pub(crate) fn notice(kind: InterruptionKind) -> Notice {
    match kind {
        InterruptionKind::SpotInterruption => Notice::SpotInterruption,
        InterruptionKind::RebalanceRecommendation => Notice::RebalanceRecommendation,
        InterruptionKind::Preempted => Notice::Preempted,
        InterruptionKind::Terminated => Notice::Terminated,
        InterruptionKind::ScheduledMaintenance => Notice::ScheduledMaintenance,
    }
}

/// Handles the notices every provider delivered since the last call and
/// starts the next read (off the planning path: a read that has not
/// answered yet is handled by a later cycle). Returns how many notices
/// named a PoolNode.
pub(crate) async fn poll(
    ctx: &Ctx,
    unhandled: &Unhandled,
    observed: &Observed,
    providers: &CycleProviders,
    now: Time,
) -> usize {
    let mut handled = 0;
    for n in unhandled.take() {
        handled += handle_or_keep(ctx, unhandled, observed, n, now).await;
    }
    for (node_class, provider) in providers.ready() {
        let job = Job::Interruptions(node_class.to_string());
        let read = |provider: Arc<dyn CloudProvider>| {
            move || async move { provider.interruptions().await }
        };
        let never = |_: &Result<Vec<Interruption>, ProviderError>| false;
        let outcome =
            match ctx
                .cloud
                .work
                .poll(job.clone(), node_class, never, read(provider.clone()))
            {
                Progress::Waiting => continue,
                Progress::Done(outcome) => {
                    // the next read starts at once; this one's notices are handled now
                    let _ = ctx
                        .cloud
                        .work
                        .poll(job, node_class, never, read(provider.clone()));
                    outcome
                }
            };
        let notices = match outcome {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(node_class = %node_class, error = %e, "could not read interruptions");
                continue;
            }
        };
        for n in notices {
            handled += handle_or_keep(ctx, unhandled, observed, n, now).await;
        }
    }
    handled
}

/// Handles one notice; 1 when it named a PoolNode, and kept for the next
/// poll when its handling failed.
async fn handle_or_keep(
    ctx: &Ctx,
    unhandled: &Unhandled,
    observed: &Observed,
    n: Interruption,
    now: Time,
) -> usize {
    match handle(ctx, observed, &n, now).await {
        Ok(true) => 1,
        Ok(false) => {
            tracing::debug!(instance = %n.provider_id, "interruption for no PoolNode");
            0
        }
        Err(e) => {
            tracing::warn!(instance = %n.provider_id, error = %e, "interruption not handled; tried again at the next poll");
            unhandled.keep(n);
            0
        }
    }
}

async fn handle(
    ctx: &Ctx,
    observed: &Observed,
    n: &Interruption,
    now: Time,
) -> Result<bool, crate::controller::base::api::ActError> {
    let Some(pn) = observed
        .of(Kind::PoolNode)
        .iter()
        .find(|p| poolnode_status(p).provider_id.as_deref() == Some(n.provider_id.as_str()))
    else {
        return Ok(false);
    };
    let kind = n.kind.as_str().to_string();
    let st = poolnode_status(pn);
    let s: PoolNodeSpec = spec(Kind::PoolNode, pn)
        .map_err(|i| crate::controller::base::api::ActError::Missing(i.message))?;
    let offering = offering_key(&s);
    let message = format!(
        "{kind} for instance {} ({offering}) at {}",
        n.provider_id,
        time::format(n.at)
    );
    let mut status = st.clone();
    if let Some(conds) = with_condition(
        pn,
        crate::controller::base::api::condition(
            ConditionType::Interrupted,
            true,
            &kind,
            message.clone(),
            now,
            pn.metadata.generation,
        ),
    ) {
        status.conditions = conds;
    }
    match interruption::on_notice(
        notice(n.kind),
        node_phase(st.phase),
        &offering,
        &ctx.config.policy,
        now,
    ) {
        Step::Record => {}
        Step::Drain { mark_unavailable } => {
            if let Some((key, until)) = mark_unavailable {
                ctx.cloud.offerings.mark_unavailable(
                    Unavailable::Offering(key),
                    until,
                    "interrupted",
                );
            }
            status.phase = muster_crds::PoolNodePhase::Draining;
            status.reason = Some(crate::controller::base::reasons::INTERRUPTED.to_string());
            status.message = Some(message.clone());
        }
    }
    if let Some(patch) = crate::controller::base::api::status_patch(&st, &status) {
        patch_status(&ctx.client, Kind::PoolNode, None, &pn.name_any(), patch).await?;
    }
    // counted and told once the status holds it: a notice tried again is not
    // counted twice
    ctx.deps
        .metrics
        .interruptions
        .get_or_create(&KindLabels { kind: kind.clone() })
        .inc();
    ctx.events.warn(Kind::PoolNode, pn, &kind, message).await;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice_for(i: usize) -> Interruption {
        Interruption {
            provider_id: format!("i-{i}"),
            kind: InterruptionKind::Terminated,
            at: Time(0),
        }
    }

    #[test]
    fn unhandled_notices_are_taken_once_and_bounded_dropping_the_oldest() {
        let u = Unhandled::default();
        for i in 0..MAX_UNHANDLED + 2 {
            u.keep(notice_for(i));
        }
        let kept = u.take();
        assert_eq!(kept.len(), MAX_UNHANDLED);
        assert_eq!(kept[0].provider_id, "i-2");
        assert_eq!(
            kept.last().map(|n| n.provider_id.as_str()),
            Some(format!("i-{}", MAX_UNHANDLED + 1).as_str())
        );
        assert!(u.take().is_empty(), "a notice is tried once per poll");
    }
}
