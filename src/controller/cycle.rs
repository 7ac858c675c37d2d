//! The singleton planning loop and its cycle: after the caches synced,
//! while leader (a cycle in flight is cancelled the moment leadership is
//! lost), wait for a change (or the periodic tick), wait for a quiet period
//! of the debounce (capped, so a constant stream of events cannot starve
//! planning), then run one cycle: bookkeeping steps, snapshot, plan, act.
//!
//! This is the only code that orders the steps (`crate::controller::steps`)
//! and hands what one step found to the next; it also owns what each step
//! remembers between cycles ([`Memory`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use muster_planner::Offering;
use tokio::sync::watch;

use crate::controller::base::objects::Kind;
use crate::controller::base::time;
use crate::controller::cloud::providers::list_offerings;
use crate::controller::cloud::work::Job;
use crate::controller::ctx::{Ctx, CycleProviders};
use crate::controller::observe::Observed;
use crate::controller::steps::{gangs, gpu_usage, pool_nodes, status, workloads};
use crate::controller::translate;

/// What the steps remember from one cycle to the next, owned by the loop
/// (for the life of the process, across leadership changes).
#[derive(Default)]
pub(crate) struct Memory {
    /// Pod evictions in flight (drains), so a slow eviction is not started
    /// twice by consecutive cycles.
    evicting: Arc<pool_nodes::removal::InFlight>,
    /// Interruption notices whose handling failed, tried again.
    notices: pool_nodes::interruptions::Unhandled,
    /// When each NodeClass was last resolved.
    resolved: status::classes::Resolved,
    /// Workloads this process started lately, so a watch cache that shows
    /// the workload started but not yet its Gang admitted is not taken for
    /// one running without admission.
    started: workloads::Started,
    /// The last GPU utilisation read from Prometheus (idle detection).
    gpu_usage: gpu_usage::Cache,
    /// The 24-hour window and last report time of the per-cycle figures.
    report: status::report::Reporter,
    /// When periodic housekeeping last ran.
    housekeeping: std::sync::Mutex<Housekeeping>,
}

/// When each periodic housekeeping step last ran.
#[derive(Debug, Default)]
struct Housekeeping {
    /// Orphan collection.
    orphans: Option<Instant>,
    /// Interruption polling.
    interruptions: Option<Instant>,
}

impl Memory {
    /// True (and noted) when the housekeeping step `step` last ran at least
    /// `period` ago.
    fn due(&self, period: Duration, step: fn(&mut Housekeeping) -> &mut Option<Instant>) -> bool {
        let mut h = self.housekeeping.lock().unwrap_or_else(|e| e.into_inner());
        let slot = step(&mut h);
        if slot.is_some_and(|t| t.elapsed() < period) {
            return false;
        }
        *slot = Some(Instant::now());
        true
    }
}

/// Runs the loop until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>, mut leader: watch::Receiver<bool>) {
    let memory = Memory::default();
    if let Err(e) = ctx.caches.wait_synced().await {
        tracing::error!(error = %e, "watch caches never synced");
        return;
    }
    ctx.deps.metrics.set_synced();
    tracing::info!("caches synced");
    let mut first = true;
    loop {
        while !*leader.borrow() {
            if leader.changed().await.is_err() {
                return;
            }
            first = true;
        }
        if !first {
            tokio::select! {
                _ = ctx.caches.changes.notified() => {}
                _ = tokio::time::sleep(ctx.config.tick.min(ctx.config.interruption_poll)) => {}
                _ = leader.changed() => continue,
            }
        }
        first = false;
        quiet_period(&ctx.caches.changes, ctx.config.debounce).await;
        if !*leader.borrow() {
            continue;
        }
        // Losing the Lease cancels the cycle in flight: its futures (API
        // requests and cloud calls included) are dropped, and every step is
        // idempotent, so the next leader resumes from what was written.
        if crate::controller::leader::while_leading(&mut leader, cycle(&ctx, &memory))
            .await
            .is_none()
        {
            tracing::warn!("leadership lost: planning cycle cancelled");
        }
        if !*leader.borrow() {
            // the cloud work of a leader goes with its leadership
            ctx.cloud.work.abort_all();
        }
    }
}

/// Waits until no change arrived for `debounce`, but never longer than
/// [`MAX_WAIT_DEBOUNCES`] debounces in all, so a constant stream of events
/// cannot starve planning.
pub(crate) async fn quiet_period(changes: &tokio::sync::Notify, debounce: std::time::Duration) {
    let deadline = tokio::time::Instant::now() + debounce * MAX_WAIT_DEBOUNCES;
    loop {
        let quiet_until = (tokio::time::Instant::now() + debounce).min(deadline);
        tokio::select! {
            _ = changes.notified() => {
                if tokio::time::Instant::now() >= deadline {
                    return;
                }
            }
            _ = tokio::time::sleep_until(quiet_until) => return,
        }
    }
}

/// The longest wait for quiet, in debounces.
pub(crate) const MAX_WAIT_DEBOUNCES: u32 = 5;

/// One planning cycle.
pub(crate) async fn cycle(ctx: &Ctx, memory: &Memory) {
    let now = time::now();
    let mut observed = ctx.caches.observed();
    let providers = CycleProviders::resolve(ctx, &observed).await;
    let created = gangs::sync(ctx, &observed).await;
    // planned in this cycle, as the caches will show them
    observed
        .objects
        .entry(Kind::Gang)
        .or_default()
        .extend(created.into_iter().map(Arc::new));
    ctx.cloud.work.retain_pool_nodes(|name| {
        observed
            .of(Kind::PoolNode)
            .iter()
            .any(|p| p.name_any() == name)
    });
    pool_nodes::lifecycle(ctx, &observed, &providers, now).await;
    if memory.due(ctx.config.interruption_poll, |h| &mut h.interruptions) {
        pool_nodes::interruptions::poll(ctx, &memory.notices, &observed, &providers, now).await;
    }
    if memory.due(ctx.config.orphan_gc_period, |h| &mut h.orphans) {
        pool_nodes::orphans::collect(ctx, &observed, &providers, now).await;
    }
    let catalog = translate::catalog(&observed);
    let Some(offerings) = refresh_offerings(ctx, &catalog, &providers) else {
        // a pool was never listed and its first listing runs: planning
        // without its offerings would take its gangs for unsatisfiable and
        // its nodes for unwanted; the listing wakes the loop when done
        tracing::debug!("waiting for the first listing of offerings");
        return;
    };
    let mut tr = translate::snapshot_with(&observed, &catalog, &offerings, now);
    for o in &mut tr.snapshot.offerings {
        if let Some(until) = ctx.cloud.offerings.unavailable_until(&o.key(), now) {
            o.unavailable_until = Some(until);
        }
    }
    gpu_usage::gather(ctx, &memory.gpu_usage, &observed, &mut tr.snapshot, now).await;
    workloads::reconcile(ctx, &memory.started, &observed, &tr).await;
    gangs::status::report_issues(ctx, &tr.issues, &observed, now).await;
    let started = Instant::now();
    let plan = (ctx.deps.planner)(&tr.snapshot, &ctx.config.policy, now);
    ctx.deps
        .metrics
        .plan_duration
        .observe(started.elapsed().as_secs_f64());
    ctx.deps.metrics.cycles.inc();
    tracing::debug!(
        admissions = plan.admissions.len(),
        launches = plan.launches.len(),
        waiting = plan.waiting.len(),
        "planned"
    );
    let facts = gangs::status::Facts::of(&observed);
    let decided = gangs::status::Decided::of(
        &plan,
        &tr.snapshot,
        &observed,
        &facts,
        &ctx.config.policy,
        now,
    );
    let recorded = apply(ctx, memory, &plan, &observed, &tr, &decided).await;
    let evictions = gangs::status::update(ctx, &decided, &recorded).await;
    let evictions: Vec<(&str, &str, &str)> = evictions
        .iter()
        .map(|e| (e.namespace.as_str(), e.name.as_str(), e.reason.as_str()))
        .collect();
    workloads::preempt::evict(ctx, &memory.started, &evictions, &observed, &tr.snapshot).await;
    gpu_usage::report(ctx, &plan.idle, &observed, now).await;
    memory
        .report
        .merge_from_status(observed.of(Kind::GpuQueue), now);
    let figures = memory
        .report
        .report(&ctx.deps.metrics, &tr.snapshot, &plan, now);
    status::pools::update(ctx, &tr.snapshot, &observed, &figures, now).await;
    status::classes::update(ctx, &memory.resolved, &observed, &providers, now).await;
    status::capacity_types::update(ctx, &observed, now).await;
}

/// Carries out the plan's items in the contract's order; returns the gangs
/// whose status was recorded before their workload was written.
async fn apply(
    ctx: &Ctx,
    memory: &Memory,
    plan: &muster_planner::Plan,
    observed: &Observed,
    tr: &translate::Translation,
    decided: &gangs::status::Decided,
) -> BTreeSet<String> {
    let mut recorded = BTreeSet::new();
    for step in APPLY_ORDER {
        match step {
            Applier::Preemptions => {
                let items = intended(ctx, decided, &plan.preemptions).await;
                workloads::preempt::run(ctx, &memory.started, &items, observed, &tr.snapshot).await;
                recorded.extend(items.iter().map(|p| p.gang().to_string()));
            }
            Applier::Releases => {
                pool_nodes::release::run(ctx, &plan.releases, observed, tr).await;
            }
            Applier::Launches => {
                pool_nodes::launch::write(ctx, &plan.launches, &tr.snapshot).await;
            }
            Applier::Admissions => {
                let items = intended(ctx, decided, &plan.admissions).await;
                workloads::admit::run(ctx, &memory.started, &items, &tr.snapshot, observed).await;
                recorded.extend(items.iter().map(|a| a.gang().to_string()));
            }
            Applier::Removals => {
                pool_nodes::removal::mark(ctx, &plan.removals, observed, tr).await;
                pool_nodes::removal::drain(ctx, &memory.evicting, observed).await;
            }
        }
    }
    recorded
}

trait GangItem: Clone {
    /// The gang whose workload the item writes.
    fn gang(&self) -> &str;
}

impl GangItem for muster_planner::plan::Preemption {
    fn gang(&self) -> &str {
        self.victim.as_str()
    }
}

impl GangItem for muster_planner::plan::Admission {
    fn gang(&self) -> &str {
        self.gang.as_str()
    }
}

/// The plan items among `items` whose Gang is recorded first
/// ([`gangs::status::record`]): those whose workload may be
/// written now.
async fn intended<T: GangItem>(ctx: &Ctx, decided: &gangs::status::Decided, items: &[T]) -> Vec<T> {
    let ids = items.iter().map(GangItem::gang).collect();
    let done = gangs::status::record(ctx, decided, &ids).await;
    items
        .iter()
        .filter(|x| done.contains(x.gang()))
        .cloned()
        .collect()
}

/// One kind of plan item a driver carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Applier {
    /// `Plan::preemptions`.
    Preemptions,
    /// `Plan::releases`.
    Releases,
    /// `Plan::launches`.
    Launches,
    /// `Plan::admissions`.
    Admissions,
    /// `Plan::removals` (and the drains they start).
    Removals,
}

/// The order of the driver contract in `muster_planner::plan`.
pub(crate) const APPLY_ORDER: [Applier; 5] = [
    Applier::Preemptions,
    Applier::Releases,
    Applier::Launches,
    Applier::Admissions,
    Applier::Removals,
];

/// The offerings of every valid pool as last listed. A pool whose listing
/// is older than the TTL (or missing) gets a listing started off the
/// planning path; the cycle goes on with what it has, and the finished
/// listing wakes the loop. `None` while a pool's first listing runs.
fn refresh_offerings(
    ctx: &Ctx,
    catalog: &translate::Catalog,
    providers: &CycleProviders,
) -> Option<BTreeMap<String, Vec<Offering>>> {
    let mut out = BTreeMap::new();
    let mut first_pending = false;
    for pool in &catalog.pools {
        if let Some(fresh) = ctx
            .cloud
            .offerings
            .fresh(&pool.name, ctx.config.offerings_ttl)
        {
            out.insert(pool.name.clone(), fresh);
            continue;
        }
        match providers.get(&pool.node_class) {
            Ok(provider) => {
                let cache = ctx.cloud.offerings.clone();
                let (name, of_pool) = (pool.name.clone(), pool.clone());
                let list = move || async move {
                    match list_offerings(provider.as_ref(), &of_pool).await {
                        Ok(list) => {
                            cache.store(&name, list);
                            true
                        }
                        Err(e) => {
                            tracing::warn!(pool = %name, error = %e, "could not list offerings");
                            cache.failed(&name);
                            false
                        }
                    }
                };
                // the outcome is in the cache (a finished listing's own
                // outcome says nothing more): stale means list again
                let job = Job::Offerings(pool.name.clone());
                ctx.cloud.work.forget(&job);
                let _ = ctx
                    .cloud
                    .work
                    .poll(job, &pool.node_class, |listed: &bool| *listed, list);
            }
            Err(e) => tracing::warn!(pool = %pool.name, error = %e, "could not list offerings"),
        }
        first_pending |= !ctx.cloud.offerings.attempted(&pool.name)
            && ctx.cloud.work.running(&Job::Offerings(pool.name.clone()));
        out.insert(
            pool.name.clone(),
            ctx.cloud.offerings.listed(&pool.name).unwrap_or_default(),
        );
    }
    (!first_pending).then_some(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::Notify;

    use super::*;

    /// The appliers run in the order the planner's driver contract lists
    /// (the numbered list in `planner/src/plan.rs`).
    #[test]
    fn plan_is_applied_in_the_contract_order() {
        let contract = include_str!("../../planner/src/plan.rs");
        let listed: Vec<&str> = contract
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//! "))
            .filter_map(|l| {
                let (n, rest) = l.split_once(". **")?;
                n.parse::<u32>().ok()?;
                rest.split_once("**").map(|(name, _)| name)
            })
            .collect();
        let ours: Vec<String> = APPLY_ORDER.iter().map(|a| format!("{a:?}")).collect();
        assert_eq!(
            &listed[..ours.len()],
            ours.as_slice(),
            "contract: {listed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_period_waits_for_silence_and_is_capped() {
        let debounce = Duration::from_millis(100);
        // silence: returns after one debounce
        let n = Notify::new();
        let t0 = tokio::time::Instant::now();
        quiet_period(&n, debounce).await;
        assert_eq!(t0.elapsed(), debounce);
        // one event 60 ms in: the quiet period restarts from it
        let n = Arc::new(Notify::new());
        let n2 = n.clone();
        let t0 = tokio::time::Instant::now();
        let poke = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            n2.notify_one();
        });
        quiet_period(&n, debounce).await;
        poke.await.expect("poke");
        assert_eq!(t0.elapsed(), Duration::from_millis(160));
        // an endless stream every 50 ms: capped at MAX_WAIT_DEBOUNCES debounces
        let n = Arc::new(Notify::new());
        let n2 = n.clone();
        let stream = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                n2.notify_one();
            }
        });
        let t0 = tokio::time::Instant::now();
        quiet_period(&n, debounce).await;
        stream.abort();
        assert_eq!(t0.elapsed(), debounce * MAX_WAIT_DEBOUNCES);
    }
}
