//! Status: Gang status from the plan (phase, position, reason, reserved
//! nodes, assignments, timestamps) and from what is observed (all pods
//! Running, Job finished); `Valid` conditions and Events for objects the
//! translation had to leave out. Writes only what changed.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::gang as lifecycle;
use muster_planner::{GangPhase, IdleAction, Plan, Policy, Snapshot, Time, plan::WaitReason};

use crate::controller::base::api::patch_status;
use crate::controller::base::metrics::GangLabels;
use crate::controller::base::objects::{AssignmentStatus, Condition, GangSpec, GangView, Kind};
use crate::controller::base::time;
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::translate::node::pod_active;
use crate::controller::translate::pool::spec;
use crate::controller::translate::{Issue, gang};
use crate::controller::workloads::pod_gang;

fn phase_name(p: GangPhase) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// What the status of every Gang is decided from besides the Gang itself,
/// gathered once per cycle from the same observation.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Nodes going away ([`draining_nodes`]).
    pub draining: BTreeMap<String, bool>,
    /// Gang ids whose workload completed or failed for good
    /// ([`finished_gangs`]).
    pub finished: BTreeSet<String>,
}

/// The status a Gang should have after this plan, given the cycle's `facts`.
pub fn desired(
    obj: &DynamicObject,
    plan: &Plan,
    snapshot: &Snapshot,
    observed: &Observed,
    facts: &Facts,
    now: Time,
    policy: &Policy,
) -> (GangView, bool) {
    let draining = &facts.draining;
    let policy_timeout = policy.provisioning_timeout;
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let id = format!("{ns}/{name}");
    let mut st = gang::status_of(obj);
    let current = gang::phase(st.phase.as_deref()).unwrap_or_default();
    let finished = facts.finished.contains(&id);
    let assignments = |list: &[muster_planner::Assignment]| -> Vec<AssignmentStatus> {
        list.iter()
            .map(|a| AssignmentStatus {
                pod_set: a.pod_set.clone(),
                index: a.index,
                node: a.node.clone(),
            })
            .collect()
    };
    let set_phase = |st: &mut GangView, p: GangPhase| st.phase = Some(phase_name(p));
    let as_planned = gang::gang(obj).ok().flatten();
    let pods_ready_timeout = as_planned.as_ref().and_then(|g| {
        snapshot
            .queues
            .iter()
            .find(|q| q.name == g.queue)
            .and_then(|q| q.pods_ready_timeout)
    });
    let step = |event| {
        as_planned
            .as_ref()
            .map(|g| lifecycle::on_event(g, pods_ready_timeout, event, policy, now))
            .unwrap_or(lifecycle::Step::Stay)
    };
    let finish = finished
        && (current == GangPhase::Finished
            || matches!(step(lifecycle::Event::Completed), lifecycle::Step::Finish)
            || !current.holds_capacity());
    if finish {
        if current != GangPhase::Finished {
            set_phase(&mut st, GangPhase::Finished);
            st.finished_at = Some(time::format(now));
            st.position = None;
            st.reason = None;
            st.message = None;
        }
        return (st, false);
    }
    if let Some(a) = plan.admissions.iter().find(|a| a.gang.as_str() == id) {
        set_phase(&mut st, GangPhase::Admitted);
        st.assignments = assignments(&a.assignments);
        st.reserved_nodes = a
            .assignments
            .iter()
            .map(|x| x.node.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        st.admitted_at.get_or_insert_with(|| time::format(now));
        st.position = None;
        st.reason = None;
        st.message = None;
        return (st, false);
    }
    if let Some(l) = plan.launches.iter().find(|l| l.gang.as_str() == id) {
        let set: BTreeSet<String> = l.nodes.iter().map(|n| n.name.clone()).collect();
        let held: BTreeSet<String> = st.reserved_nodes.iter().cloned().collect();
        // a new launch set (first, or planned again after a failure) counts as an attempt
        if current != GangPhase::Provisioning || !set.is_subset(&held) {
            st.launch_attempts += 1;
            let timeout = l
                .nodes
                .first()
                .and_then(|n| snapshot.pools.iter().find(|p| p.name == n.pool))
                .and_then(|p| p.provisioning_timeout)
                .unwrap_or(policy_timeout);
            let deadline = l.deadline.unwrap_or(now + timeout);
            st.provisioning_deadline = Some(time::format(deadline));
        }
        set_phase(&mut st, GangPhase::Provisioning);
        st.assignments = assignments(&l.assignments);
        let mut reserved: BTreeSet<String> = l.nodes.iter().map(|n| n.name.clone()).collect();
        reserved.extend(l.reserve.iter().cloned());
        st.reserved_nodes = reserved.into_iter().collect();
        st.position = None;
        st.reason = Some(WaitReason::Provisioning.as_str().to_string());
        st.message = Some(l.message.clone());
        return (st, false);
    }
    if plan.preemptions.iter().any(|p| p.victim.as_str() == id) {
        // driver contract: queued again at once, and not counted in
        // `evictions` (the count the backoff of a later eviction grows with)
        set_phase(&mut st, GangPhase::Evicted);
        st.requeue_after = Some(time::format(now));
        st.assignments.clear();
        st.reserved_nodes.clear();
        st.admitted_at = None;
        st.started_at = None;
        return (st, false);
    }
    // a node the gang holds is going (interrupted, or drained for
    // consolidation): the life-cycle table evicts the whole gang
    if current.holds_capacity() {
        let losing = as_planned
            .iter()
            .flat_map(|g| &g.assignments)
            .find_map(|a| draining.get(&a.node).copied());
        if let Some(interrupted) = losing {
            let event = if interrupted {
                lifecycle::Event::SpotInterruption
            } else {
                lifecycle::Event::NodeLost
            };
            if let lifecycle::Step::Evict {
                reason,
                not_before,
                counts,
            } = step(event)
            {
                evicted(&mut st, reason.as_str().to_string(), not_before, counts);
                return (st, true);
            }
        }
    }
    // the planner found its GPUs idle past its queue's window: the queue's
    // idle policy evicts it whole (requeued, or stopped and left suspended)
    if current == GangPhase::Running
        && let Some(v) = plan.idle.iter().find(|v| v.gang.as_str() == id)
    {
        match v.action {
            IdleAction::Report => {}
            IdleAction::Requeue => {
                evicted(
                    &mut st,
                    v.reason.as_str().to_string(),
                    v.not_before.unwrap_or(now),
                    true,
                );
                st.message = Some(v.message.clone());
                return (st, true);
            }
            IdleAction::Stop => {
                set_phase(&mut st, GangPhase::Finished);
                st.finished_at = Some(time::format(now));
                st.reason = Some(v.reason.as_str().to_string());
                st.message = Some(v.message.clone());
                st.position = None;
                st.assignments.clear();
                st.reserved_nodes.clear();
                return (st, true);
            }
        }
    }
    if current == GangPhase::Admitted {
        // the pods admitted (fewer than submitted for an elastic gang
        // admitted at its least count), else the full size
        let want: u64 = if st.assignments.is_empty() {
            spec::<GangSpec>(Kind::Gang, obj)
                .map(|s| {
                    s.pod_sets
                        .iter()
                        .map(|p| u64::try_from(p.count).unwrap_or(0))
                        .sum()
                })
                .unwrap_or(u64::MAX)
        } else {
            st.assignments.len() as u64
        };
        let running = observed
            .pods
            .iter()
            .filter(|p| pod_gang(p).is_some_and(|j| j == (ns.clone(), name.clone())))
            .filter(|p| pod_active(p) && p.phase.as_deref() == Some("Running"))
            .count() as u64;
        // the planner's gang life-cycle table decides: running, wait, or evict
        match step(lifecycle::Event::PodsCheck {
            all_running: running >= want,
        }) {
            lifecycle::Step::MarkRunning => {
                set_phase(&mut st, GangPhase::Running);
                st.started_at.get_or_insert_with(|| time::format(now));
            }
            lifecycle::Step::Evict {
                reason,
                not_before,
                counts,
            } => {
                evicted(&mut st, reason.as_str().to_string(), not_before, counts);
                return (st, true);
            }
            _ => {}
        }
        return (st, false);
    }
    if let Some(w) = plan.waiting.iter().find(|w| w.gang.as_str() == id) {
        if w.reason == WaitReason::ProvisioningTimeout {
            // released by this plan (driver contract): back to Queued
            st.assignments.clear();
            st.reserved_nodes.clear();
            st.provisioning_deadline = None;
        }
        let phase = match w.reason {
            WaitReason::Provisioning if current == GangPhase::Provisioning => {
                GangPhase::Provisioning
            }
            WaitReason::ProvisioningTimeout => GangPhase::Queued,
            WaitReason::Unsatisfiable => GangPhase::Unsatisfiable,
            WaitReason::Backoff => GangPhase::Evicted,
            _ if current.holds_capacity() => current,
            _ => GangPhase::Queued,
        };
        set_phase(&mut st, phase);
        st.position = Some(w.position);
        st.reason = Some(w.reason.as_str().to_string());
        st.message = Some(w.message.clone());
        return (st, false);
    }
    if st.phase.is_none() {
        set_phase(&mut st, GangPhase::Queued);
    }
    (st, false)
}

/// A gang's status after an eviction by its life-cycle table.
fn evicted(st: &mut GangView, reason: String, not_before: Time, counts: bool) {
    st.phase = Some(phase_name(GangPhase::Evicted));
    if counts {
        st.evictions += 1;
    }
    st.requeue_after = Some(time::format(not_before));
    st.reason = Some(reason);
    st.assignments.clear();
    st.reserved_nodes.clear();
    st.admitted_at = None;
    st.started_at = None;
}

impl Facts {
    /// The facts of one observation, gathered once per cycle.
    pub fn of(observed: &Observed) -> Facts {
        Facts {
            draining: draining_nodes(observed),
            finished: finished_gangs(observed),
        }
    }
}

/// Names (PoolNode and Node) of the PoolNodes being drained, and whether
/// each was interrupted by its cloud.
pub fn draining_nodes(observed: &Observed) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for pn in observed.of(Kind::PoolNode) {
        let st = crate::controller::translate::node::poolnode_status(pn);
        if st.phase != muster_crds::PoolNodePhase::Draining {
            continue;
        }
        let interrupted =
            st.reason.as_deref() == Some(crate::controller::base::reasons::INTERRUPTED);
        out.insert(pn.name_any(), interrupted);
        if let Some(n) = st.node_name {
            out.insert(n, interrupted);
        }
    }
    out
}

/// Gang ids (`namespace/name`) whose workload completed or failed for good,
/// as its adapter observes it.
pub fn finished_gangs(observed: &Observed) -> BTreeSet<String> {
    crate::controller::observe::workloads::all(observed)
        .iter()
        .filter(|w| w.observe().finished)
        .map(|w| format!("{}/{}", w.namespace(), w.gang_name()))
        .collect()
}

/// Writes, before their workloads are written, the status of the gangs in
/// `ids` that this plan evicts (`Evicted`) or admits (`Admitted`): intent
/// before action, as a PoolNode is written before its cloud call. A kill
/// between the two leaves a Gang whose phase says what its workload is to
/// become, and the next process's workload life cycle
/// ([`crate::controller::steps::workloads::reconcile`]) carries it out. Returns the ids
/// recorded (written now, or already so); a gang whose write failed is
/// left out, and its workload is not to be written this cycle.
pub async fn record(
    ctx: &Ctx,
    plan: &Plan,
    snapshot: &Snapshot,
    observed: &Observed,
    facts: &Facts,
    now: Time,
    ids: &BTreeSet<&str>,
) -> BTreeSet<String> {
    let mut recorded = BTreeSet::new();
    for obj in observed.of(Kind::Gang) {
        let id = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
        if !ids.contains(id.as_str()) {
            continue;
        }
        let (after, _) = desired(
            obj,
            plan,
            snapshot,
            observed,
            facts,
            now,
            &ctx.config.policy,
        );
        let phase = gang::phase(after.phase.as_deref());
        if !matches!(phase, Some(GangPhase::Admitted | GangPhase::Evicted)) {
            // finished meanwhile: nothing to carry out
            continue;
        }
        if write(ctx, obj, &gang::status_of(obj), &after).await.is_ok() {
            recorded.insert(id);
        }
    }
    recorded
}

/// Writes `after` over `before` when they differ; `Ok(false)` when there
/// was nothing to write.
async fn write(
    ctx: &Ctx,
    obj: &DynamicObject,
    before: &GangView,
    after: &GangView,
) -> Result<bool, ()> {
    if before == after {
        return Ok(false);
    }
    let Some(status) = gang::write_view(before, after) else {
        return Ok(false);
    };
    let ns = obj.namespace();
    match patch_status(
        &ctx.client,
        Kind::Gang,
        ns.as_deref(),
        &obj.name_any(),
        status,
    )
    .await
    {
        Ok(()) => Ok(true),
        Err(e) => {
            tracing::warn!(gang = %obj.name_any(), error = %e, "could not write gang status");
            Err(())
        }
    }
}

/// A gang whose life-cycle table evicts it: its status says `Evicted`
/// already; its workload is to be stopped by the workloads step
/// ([`crate::controller::steps::workloads::evict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// The Gang's namespace.
    pub namespace: String,
    /// The Gang's name.
    pub name: String,
    /// The reason written on the Gang (a metric label).
    pub reason: String,
}

/// Writes Gang statuses that changed (all but those [`record`] wrote this
/// cycle, `recorded`) and refreshes the gangs gauge. Returns the gangs its
/// life-cycle table evicts, written `Evicted` first: the workloads step
/// stops their workloads after.
pub async fn update(
    ctx: &Ctx,
    plan: &Plan,
    snapshot: &Snapshot,
    observed: &Observed,
    facts: &Facts,
    now: Time,
    recorded: &BTreeSet<String>,
) -> Vec<Eviction> {
    let mut evictions = Vec::new();
    let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
    for obj in observed.of(Kind::Gang) {
        let before = gang::status_of(obj);
        let (after, evict) = desired(
            obj,
            plan,
            snapshot,
            observed,
            facts,
            now,
            &ctx.config.policy,
        );
        let queue = spec::<GangSpec>(Kind::Gang, obj)
            .map(|s| s.queue)
            .unwrap_or_default();
        *counts
            .entry((queue, after.phase.clone().unwrap_or_default()))
            .or_default() += 1;
        let id = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
        if recorded.contains(&id) {
            continue;
        }
        match write(ctx, obj, &before, &after).await {
            Ok(_) => {}
            // an eviction not recorded is not carried out: decided again next cycle
            Err(()) => continue,
        }
        if evict {
            evictions.push(Eviction {
                namespace: obj.namespace().unwrap_or_default(),
                name: obj.name_any(),
                reason: after
                    .reason
                    .clone()
                    .unwrap_or_else(|| "Unknown".to_string()),
            });
        }
    }
    ctx.deps.metrics.gangs.clear();
    for ((queue, phase), n) in counts {
        ctx.deps
            .metrics
            .gangs
            .get_or_create(&GangLabels { queue, phase })
            .set(n);
    }
    evictions
}

/// Sets `Valid=False` (and publishes a Warning Event) on objects left out of
/// the snapshot; sets `Valid=True` on pools, queues and NodeClasses that read.
pub async fn report_issues(ctx: &Ctx, issues: &[Issue], observed: &Observed, now: Time) {
    for kind in [
        Kind::NodeClass,
        Kind::GpuPool,
        Kind::GpuQueue,
        Kind::Gang,
        Kind::PoolNode,
    ] {
        for obj in observed.of(kind) {
            let issue = issues.iter().find(|i| {
                i.kind == kind && i.name == obj.name_any() && i.namespace == obj.namespace()
            });
            let conds: Vec<Condition> = crate::controller::base::api::conditions(obj);
            let current = conds.iter().find(|c| c.type_ == "Valid");
            let (ok, reason, message) = match issue {
                Some(i) => (false, i.reason.as_str(), i.message.clone()),
                None if matches!(kind, Kind::Gang | Kind::PoolNode) && current.is_none() => {
                    continue;
                }
                None => (true, "Valid", "read and part of planning".to_string()),
            };
            let cond = crate::controller::base::api::condition(
                "Valid",
                ok,
                reason,
                message.clone(),
                now,
                obj.metadata.generation,
            );
            if current.is_some_and(|c| {
                c.status == cond.status && c.reason == reason && c.message == message
            }) {
                continue;
            }
            let mut next: Vec<Condition> = conds
                .iter()
                .filter(|c| c.type_ != "Valid")
                .cloned()
                .collect();
            next.push(cond);
            let ns = obj.namespace();
            if let Err(e) = patch_status(
                &ctx.client,
                kind,
                ns.as_deref(),
                &obj.name_any(),
                serde_json::json!({"conditions": next}),
            )
            .await
            {
                tracing::warn!(name = %obj.name_any(), error = %e, "could not write condition");
            }
            if issue.is_some() {
                ctx.events.warn(kind, obj, reason, message).await;
            }
        }
    }
}
