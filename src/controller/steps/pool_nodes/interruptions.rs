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
//! PoolNode are ignored.

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
    observed: &Observed,
    providers: &CycleProviders,
    now: Time,
) -> usize {
    let mut handled = 0;
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
            match handle(ctx, observed, &n, now).await {
                Ok(true) => handled += 1,
                Ok(false) => {
                    tracing::debug!(instance = %n.provider_id, "interruption for no PoolNode")
                }
                Err(e) => tracing::warn!(instance = %n.provider_id, error = %e, "interruption"),
            }
        }
    }
    handled
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
    ctx.deps
        .metrics
        .interruptions
        .get_or_create(&KindLabels { kind: kind.clone() })
        .inc();
    let st = poolnode_status(pn);
    let s: PoolNodeSpec = spec(Kind::PoolNode, pn)
        .map_err(|i| crate::controller::base::api::ActError::Missing(i.message))?;
    let offering = offering_key(&s);
    let message = format!(
        "{kind} for instance {} ({offering}) at {}",
        n.provider_id,
        time::format(n.at)
    );
    ctx.events
        .warn(Kind::PoolNode, pn, &kind, message.clone())
        .await;
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
            status.message = Some(message);
        }
    }
    if let Some(patch) = crate::controller::base::api::status_patch(&st, &status) {
        patch_status(&ctx.client, Kind::PoolNode, None, &pn.name_any(), patch).await?;
    }
    Ok(true)
}
