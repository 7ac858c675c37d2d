//! What a gang's record (its Gang status) becomes after a plan: the one
//! mapping from plan items to gang phases that every driver applies.
//!
//! | the gang, this cycle | record after |
//! |---|---|
//! | its workload finished (or the idle policy's `Stop`) while it held capacity, or `Finished` already | `Finished`, `finishedAt` = now |
//! | admitted by the plan | `Admitted` with the admission's assignments; reserved nodes those nodes; `admittedAt` kept or now; no deadline |
//! | launched for by the plan | `Provisioning`; a new launch set (first, or not within the nodes it holds) counts one more `launchAttempts` and sets the deadline (the launch's, else its pool's or the policy's timeout from now) |
//! | preempted by the plan | `Evicted`, queued again at once, not counted in `evictions` |
//! | holds capacity and a node it holds drains | the gang life cycle ([`super::gang`]): evicted whole |
//! | `Running` and found idle with `Requeue` / `Stop` | evicted whole and requeued after `notBefore` / `Finished`, left stopped |
//! | `Admitted` | the gang life cycle on a pods check: `Running`, stay, or evicted whole |
//! | `Provisioning` and releasing its capacity (or timed out) without a launch or admission | `Queued`, assignments, reserved nodes and deadline cleared; then as waiting |
//! | waiting in the plan | its position, reason and message; `Queued`, `Provisioning` (still), `Unsatisfiable`, `Evicted` (backoff), or the phase it holds capacity in |
//! | none of these and never recorded | `Queued` |
//!
//! Pure: the drivers observe the facts ([`Seen`]) and carry out the
//! eviction the [`Outcome`] asks for (stop the workload). The controller
//! keeps records as Gang status; the simulator and the reference driver
//! ([`crate::apply`]) keep planner gangs and read and write their records
//! through [`GangRecord::of_gang`] and [`GangRecord::write_to`].

use std::collections::{BTreeMap, BTreeSet};

use crate::lifecycle::gang::{self as lifecycle, Event, Step};
use crate::model::{Assignment, Gang, GangId, GangPhase, IdleAction};
use crate::plan::{Admission, IdleGang, Launch, Plan, WaitReason, Waiting};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;

/// A gang's record as a driver keeps it between cycles (the Gang status
/// the controller writes; the simulator's own book).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GangRecord {
    /// Its phase; `None` before anything was recorded.
    pub phase: Option<GangPhase>,
    /// 1-based position in its queue while it waits.
    pub position: Option<u32>,
    /// Bounded reason it waits, was evicted or stopped.
    pub reason: Option<String>,
    /// The same for people.
    pub message: Option<String>,
    /// Nodes (or new nodes' names) held for it.
    pub reserved_nodes: Vec<String>,
    /// Where its pods go.
    pub assignments: Vec<Assignment>,
    /// While provisioning: when the capacity must be complete.
    pub provisioning_deadline: Option<Time>,
    /// When it was admitted.
    pub admitted_at: Option<Time>,
    /// When all its pods ran.
    pub started_at: Option<Time>,
    /// When it finished.
    pub finished_at: Option<Time>,
    /// Launch sets planned for it so far (part of new nodes' names).
    pub launch_attempts: u32,
    /// Evictions that count for backoff.
    pub evictions: u32,
    /// After an eviction: queued again from this time.
    pub requeue_after: Option<Time>,
}

impl GangRecord {
    /// The record of a driver that keeps planner gangs as its book: what
    /// `g` holds, with `reserved` the names of the nodes reserved for it.
    /// A gang has no queue position, reason or message; they start empty.
    pub fn of_gang(g: &Gang, reserved: &[String]) -> GangRecord {
        let mut reserved_nodes: BTreeSet<String> = reserved.iter().cloned().collect();
        reserved_nodes.extend(g.assignments.iter().map(|a| a.node.clone()));
        GangRecord {
            phase: Some(g.phase),
            position: None,
            reason: None,
            message: None,
            reserved_nodes: reserved_nodes.into_iter().collect(),
            assignments: g.assignments.clone(),
            provisioning_deadline: g.provisioning_deadline,
            admitted_at: g.admitted_at,
            started_at: g.started_at,
            finished_at: None,
            launch_attempts: g.launch_attempts,
            evictions: g.evictions,
            requeue_after: g.not_before,
        }
    }

    /// Writes this record back into the planner gang it was read from
    /// ([`GangRecord::of_gang`]); reserved nodes are the driver's to keep on
    /// its nodes.
    pub fn write_to(&self, g: &mut Gang) {
        g.phase = self.phase.unwrap_or_default();
        g.assignments.clone_from(&self.assignments);
        g.provisioning_deadline = self.provisioning_deadline;
        g.admitted_at = self.admitted_at;
        g.started_at = self.started_at;
        g.launch_attempts = self.launch_attempts;
        g.evictions = self.evictions;
        g.not_before = self.requeue_after;
    }
}

/// What a driver saw of one gang this cycle, besides its record and the
/// plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// Its workload completed or failed for good.
    pub finished: bool,
    /// Every pod it was admitted with runs (read while `Admitted`).
    pub all_running: bool,
}

/// The record after the plan, and whether the driver must evict the gang's
/// workload (stop it, its record already saying why).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The gang's record after this plan.
    pub record: GangRecord,
    /// Its workload is to be stopped: the record says `Evicted` (or
    /// `Finished` by the idle policy's `Stop`).
    pub evict: bool,
}

/// Why a node is going away, as the driver observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaving {
    /// Its cloud is taking it back (a spot interruption).
    Interrupted,
    /// The reserved capacity it runs on is about to end.
    CapacityEnding,
    /// Drained for any other reason (empty, consolidated, lost, deleted).
    Drained,
}

/// What every gang's mapping reads from one plan and snapshot, gathered
/// once per cycle ([`Context::new`]): the plan's items indexed by gang, so
/// mapping every gang of a large plan costs one lookup each.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The snapshot planned (its pools' provisioning timeouts, its queues'
    /// pods-ready timeouts).
    snapshot: &'a Snapshot,
    /// Nodes going away (PoolNode and Node names), and why.
    draining: &'a BTreeMap<String, Leaving>,
    /// Planner policy.
    policy: &'a Policy,
    /// Now.
    now: Time,
    /// The plan's items, by the gang they name.
    items: BTreeMap<&'a GangId, Items<'a>>,
}

/// The items of one plan that name one gang.
#[derive(Debug, Clone, Copy, Default)]
struct Items<'a> {
    admission: Option<&'a Admission>,
    launch: Option<&'a Launch>,
    preempted: bool,
    released: bool,
    idle: Option<&'a IdleGang>,
    waiting: Option<&'a Waiting>,
}

impl<'a> Context<'a> {
    /// The context of `plan`, planned from `snapshot` at `now`; `draining`
    /// names the nodes going away (PoolNode and Node names) and why.
    pub fn new(
        plan: &'a Plan,
        snapshot: &'a Snapshot,
        draining: &'a BTreeMap<String, Leaving>,
        policy: &'a Policy,
        now: Time,
    ) -> Context<'a> {
        let mut items: BTreeMap<&'a GangId, Items<'a>> = BTreeMap::new();
        // the first item of a kind wins, as a search of the plan would find it
        for a in &plan.admissions {
            items.entry(&a.gang).or_default().admission.get_or_insert(a);
        }
        for l in &plan.launches {
            items.entry(&l.gang).or_default().launch.get_or_insert(l);
        }
        for p in &plan.preemptions {
            items.entry(&p.victim).or_default().preempted = true;
        }
        for r in &plan.releases {
            items.entry(&r.gang).or_default().released = true;
        }
        for v in &plan.idle {
            items.entry(&v.gang).or_default().idle.get_or_insert(v);
        }
        for w in &plan.waiting {
            items.entry(&w.gang).or_default().waiting.get_or_insert(w);
        }
        Context {
            snapshot,
            draining,
            policy,
            now,
            items,
        }
    }

    /// Whether [`after_plan`] keeps every record of gang `id` in `phase` as
    /// it is (and asks for no eviction) while its workload has not
    /// finished: the plan names nothing for it, it is not `Admitted` (a pods
    /// check), and it holds no capacity while nodes drain. A driver with
    /// many gangs maps only the others.
    pub fn keeps(&self, id: &GangId, phase: Option<GangPhase>) -> bool {
        let Some(phase) = phase else { return false };
        !self.items.contains_key(id)
            && phase != GangPhase::Admitted
            && (self.draining.is_empty() || !phase.holds_capacity())
    }
}

/// The record of gang `id` after the plan of `cx`. `gang` is the gang as
/// its driver read it (its phase, queue, admission time, evictions and
/// assignments drive the gang life cycle).
pub fn after_plan(
    id: &GangId,
    record: &GangRecord,
    gang: Option<&Gang>,
    seen: Seen,
    cx: &Context<'_>,
) -> Outcome {
    let pods_ready_timeout = gang.and_then(|g| {
        cx.snapshot
            .queues
            .iter()
            .find(|q| q.name == g.queue)
            .and_then(|q| q.pods_ready_timeout)
    });
    let (policy, now) = (cx.policy, cx.now);
    let items = cx.items.get(id).copied().unwrap_or_default();
    let mut st = record.clone();
    let current = st.phase.unwrap_or_default();
    let step = |event| {
        gang.map(|g| lifecycle::on_event(g, pods_ready_timeout, event, policy, now))
            .unwrap_or(Step::Stay)
    };
    let stay = |st: GangRecord| Outcome {
        record: st,
        evict: false,
    };
    let evict = |st: GangRecord| Outcome {
        record: st,
        evict: true,
    };
    let finish = seen.finished
        && (current == GangPhase::Finished
            || matches!(step(Event::Completed), Step::Finish)
            || !current.holds_capacity());
    if finish {
        if current != GangPhase::Finished {
            st.phase = Some(GangPhase::Finished);
            st.finished_at = Some(now);
            st.position = None;
            st.reason = None;
            st.message = None;
        }
        return stay(st);
    }
    if let Some(a) = items.admission {
        st.phase = Some(GangPhase::Admitted);
        st.assignments = a.assignments.clone();
        st.reserved_nodes = a
            .assignments
            .iter()
            .map(|x| x.node.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        st.admitted_at.get_or_insert(now);
        // the deadline holds only while provisioning
        st.provisioning_deadline = None;
        st.position = None;
        st.reason = None;
        st.message = None;
        return stay(st);
    }
    if let Some(l) = items.launch {
        let set: BTreeSet<&str> = l.nodes.iter().map(|n| n.name.as_str()).collect();
        let held: BTreeSet<&str> = st.reserved_nodes.iter().map(String::as_str).collect();
        // a new launch set (first, or planned again after a failure) counts as an attempt
        if current != GangPhase::Provisioning || !set.is_subset(&held) {
            st.launch_attempts += 1;
            let timeout = l
                .nodes
                .first()
                .and_then(|n| cx.snapshot.pools.iter().find(|p| p.name == n.pool))
                .and_then(|p| p.provisioning_timeout)
                .unwrap_or(policy.provisioning_timeout);
            st.provisioning_deadline = Some(l.deadline.unwrap_or(now + timeout));
        }
        st.phase = Some(GangPhase::Provisioning);
        st.assignments = l.assignments.clone();
        let mut reserved: BTreeSet<String> = l.nodes.iter().map(|n| n.name.clone()).collect();
        reserved.extend(l.reserve.iter().cloned());
        st.reserved_nodes = reserved.into_iter().collect();
        st.position = None;
        st.reason = Some(WaitReason::Provisioning.as_str().to_string());
        st.message = Some(l.message.clone());
        return stay(st);
    }
    if items.preempted {
        // driver contract: queued again at once, and not counted in
        // `evictions` (the count the backoff of a later eviction grows with)
        st.phase = Some(GangPhase::Evicted);
        st.requeue_after = Some(now);
        st.assignments.clear();
        st.reserved_nodes.clear();
        st.provisioning_deadline = None;
        st.admitted_at = None;
        st.started_at = None;
        return stay(st);
    }
    // a node the gang holds is going (interrupted, or drained for
    // consolidation): the life-cycle table evicts the whole gang
    if current.holds_capacity() {
        let losing = gang
            .iter()
            .flat_map(|g| &g.assignments)
            .find_map(|a| cx.draining.get(&a.node).copied());
        if let Some(leaving) = losing {
            let event = match leaving {
                Leaving::Interrupted => Event::SpotInterruption,
                Leaving::CapacityEnding => Event::CapacityEnding,
                Leaving::Drained => Event::NodeLost,
            };
            if let Step::Evict {
                reason,
                not_before,
                counts,
            } = step(event)
            {
                evicted(&mut st, reason.as_str().to_string(), not_before, counts);
                return evict(st);
            }
        }
    }
    // the planner found its GPUs idle past its queue's window: the queue's
    // idle policy evicts it whole (requeued, or stopped and left suspended)
    if current == GangPhase::Running
        && let Some(v) = items.idle
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
                return evict(st);
            }
            IdleAction::Stop => {
                st.phase = Some(GangPhase::Finished);
                st.finished_at = Some(now);
                st.reason = Some(v.reason.as_str().to_string());
                st.message = Some(v.message.clone());
                st.position = None;
                st.assignments.clear();
                st.reserved_nodes.clear();
                return evict(st);
            }
        }
    }
    if current == GangPhase::Admitted {
        // the planner's gang life-cycle table decides: running, wait, or evict
        match step(Event::PodsCheck {
            all_running: seen.all_running,
        }) {
            Step::MarkRunning => {
                st.phase = Some(GangPhase::Running);
                st.started_at.get_or_insert(now);
            }
            Step::Evict {
                reason,
                not_before,
                counts,
            } => {
                evicted(&mut st, reason.as_str().to_string(), not_before, counts);
                return evict(st);
            }
            _ => {}
        }
        return stay(st);
    }
    // a provisioning gang that gives up its capacity and is not planned
    // again in this plan (its deadline passed, or a node of its launch set
    // went and nothing else holds it) queues again (driver contract)
    let current = if (items.released
        || items
            .waiting
            .is_some_and(|w| w.reason == WaitReason::ProvisioningTimeout))
        && current == GangPhase::Provisioning
    {
        st.phase = Some(GangPhase::Queued);
        st.assignments.clear();
        st.reserved_nodes.clear();
        st.provisioning_deadline = None;
        GangPhase::Queued
    } else {
        current
    };
    if let Some(w) = items.waiting {
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
        st.phase = Some(phase);
        st.position = Some(w.position);
        st.reason = Some(w.reason.as_str().to_string());
        st.message = Some(w.message.clone());
        return stay(st);
    }
    if st.phase.is_none() {
        st.phase = Some(GangPhase::Queued);
    }
    stay(st)
}

/// A gang's record after an eviction by its life-cycle table.
fn evicted(st: &mut GangRecord, reason: String, not_before: Time, counts: bool) {
    st.phase = Some(GangPhase::Evicted);
    if counts {
        st.evictions += 1;
    }
    st.requeue_after = Some(not_before);
    st.reason = Some(reason);
    st.assignments.clear();
    st.reserved_nodes.clear();
    st.provisioning_deadline = None;
    st.admitted_at = None;
    st.started_at = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CapacityType, OfferingKey, Price, Provider};
    use crate::plan::{NewNode, Preemption, PreemptionReason, Release, ReleaseReason};
    use crate::time::Dur;

    const NOW: Time = Time(1_000);

    fn id() -> GangId {
        GangId::new("ns/g")
    }

    fn at(node: &str) -> Assignment {
        Assignment {
            pod_set: "w".to_string(),
            index: 0,
            node: node.to_string(),
        }
    }

    fn phase(p: GangPhase) -> GangRecord {
        GangRecord {
            phase: Some(p),
            ..GangRecord::default()
        }
    }

    fn launch(nodes: &[&str], deadline: Option<Time>) -> Launch {
        Launch {
            gang: id(),
            nodes: nodes
                .iter()
                .map(|n| NewNode {
                    name: n.to_string(),
                    idempotency_key: format!("key-{n}"),
                    pool: "gpu".to_string(),
                    offering: OfferingKey {
                        provider: Provider::Sim,
                        zone: "z".to_string(),
                        instance_type: "t".to_string(),
                        capacity_type: CapacityType::OnDemand,
                        reservation: None,
                    },
                    price: Price::default(),
                    placement_group: None,
                    grant: None,
                })
                .collect(),
            reserve: Vec::new(),
            assignments: vec![at(nodes[0])],
            price_per_hour: Price::default(),
            message: "launching".to_string(),
            deadline,
        }
    }

    fn waiting(reason: WaitReason) -> Waiting {
        Waiting {
            gang: id(),
            queue: "q".to_string(),
            position: 3,
            reason,
            message: "waits".to_string(),
        }
    }

    /// The record of `ns/g` after `plan`, with `seen`.
    fn after(record: &GangRecord, gang: Option<&Gang>, plan: &Plan, seen: Seen) -> Outcome {
        let snapshot = Snapshot::default();
        let draining = BTreeMap::new();
        let policy = Policy::default();
        let cx = Context::new(plan, &snapshot, &draining, &policy, NOW);
        after_plan(&id(), record, gang, seen, &cx)
    }

    #[test]
    fn a_gang_never_recorded_is_queued() {
        let out = after(
            &GangRecord::default(),
            None,
            &Plan::default(),
            Seen::default(),
        );
        assert_eq!(out.record.phase, Some(GangPhase::Queued));
        assert!(!out.evict);
    }

    #[test]
    fn an_admission_records_its_nodes_and_keeps_an_earlier_admission_time() {
        let plan = Plan {
            admissions: vec![Admission {
                gang: id(),
                assignments: vec![at("n2"), at("n1"), at("n2")],
            }],
            ..Plan::default()
        };
        let mut rec = phase(GangPhase::Provisioning);
        rec.admitted_at = Some(Time(5));
        rec.provisioning_deadline = Some(Time(9_000));
        rec.reason = Some("Provisioning".to_string());
        let out = after(&rec, None, &plan, Seen::default());
        assert_eq!(out.record.phase, Some(GangPhase::Admitted));
        assert_eq!(out.record.reserved_nodes, ["n1", "n2"]);
        assert_eq!(out.record.admitted_at, Some(Time(5)));
        assert_eq!(out.record.provisioning_deadline, None);
        assert_eq!(out.record.reason, None);
    }

    #[test]
    fn only_a_new_launch_set_counts_an_attempt() {
        let plan = Plan {
            launches: vec![launch(&["a-0", "a-1"], None)],
            ..Plan::default()
        };
        let first = after(&GangRecord::default(), None, &plan, Seen::default()).record;
        assert_eq!(first.phase, Some(GangPhase::Provisioning));
        assert_eq!(first.launch_attempts, 1);
        // the policy's provisioning timeout from now
        assert_eq!(
            first.provisioning_deadline,
            Some(NOW + Policy::default().provisioning_timeout)
        );
        // the same set planned again (after a restart) is the same attempt
        let again = after(&first, None, &plan, Seen::default()).record;
        assert_eq!(again.launch_attempts, 1);
        // another set is another attempt, with the launch's own deadline
        let other = Plan {
            launches: vec![launch(&["b-0"], Some(Time(4_000)))],
            ..Plan::default()
        };
        let next = after(&again, None, &other, Seen::default()).record;
        assert_eq!(next.launch_attempts, 2);
        assert_eq!(next.provisioning_deadline, Some(Time(4_000)));
    }

    #[test]
    fn a_preempted_gang_is_requeued_at_once_without_counting() {
        let plan = Plan {
            preemptions: vec![Preemption {
                victim: id(),
                for_gang: GangId::new("ns/other"),
                reason: PreemptionReason::WithinQueue,
                message: String::new(),
            }],
            ..Plan::default()
        };
        let mut rec = phase(GangPhase::Running);
        rec.assignments = vec![at("n1")];
        let out = after(&rec, None, &plan, Seen::default());
        assert_eq!(out.record.phase, Some(GangPhase::Evicted));
        assert_eq!(out.record.requeue_after, Some(NOW));
        assert_eq!(out.record.evictions, 0);
        assert!(out.record.assignments.is_empty());
        // the preemption step stops the workload itself: no eviction asked
        assert!(!out.evict);
    }

    #[test]
    fn a_provisioning_gang_that_releases_without_a_new_plan_queues_again() {
        let release = Release {
            gang: id(),
            nodes: vec!["a-0".to_string()],
            reason: ReleaseReason::Replanned,
            handed_to: None,
            message: String::new(),
        };
        let mut rec = phase(GangPhase::Provisioning);
        rec.assignments = vec![at("a-0")];
        rec.reserved_nodes = vec!["a-0".to_string()];
        rec.provisioning_deadline = Some(Time(9_000));
        // released, waiting for capacity that holds it
        let plan = Plan {
            releases: vec![release.clone()],
            waiting: vec![waiting(WaitReason::NoOffering)],
            ..Plan::default()
        };
        let out = after(&rec, None, &plan, Seen::default()).record;
        assert_eq!(out.phase, Some(GangPhase::Queued));
        assert!(out.assignments.is_empty() && out.reserved_nodes.is_empty());
        assert_eq!(out.provisioning_deadline, None);
        assert_eq!(out.position, Some(3));
        // released with no other item at all: queued all the same
        let bare = Plan {
            releases: vec![release.clone()],
            ..Plan::default()
        };
        let out = after(&rec, None, &bare, Seen::default()).record;
        assert_eq!(out.phase, Some(GangPhase::Queued));
        // released and planned again: the new launch decides
        let again = Plan {
            releases: vec![release],
            launches: vec![launch(&["b-0"], None)],
            ..Plan::default()
        };
        let out = after(&rec, None, &again, Seen::default()).record;
        assert_eq!(out.phase, Some(GangPhase::Provisioning));
        assert_eq!(out.reserved_nodes, ["b-0"]);
        assert_eq!(out.launch_attempts, 1);
    }

    #[test]
    fn a_record_the_context_keeps_is_kept() {
        let other = GangId::new("ns/other");
        let plans = [
            Plan::default(),
            Plan {
                launches: vec![launch(&["a-0"], None)],
                ..Plan::default()
            },
            Plan {
                waiting: vec![waiting(WaitReason::Backoff)],
                ..Plan::default()
            },
        ];
        let snapshot = Snapshot::default();
        let policy = Policy::default();
        let none = BTreeMap::new();
        let some = BTreeMap::from([("n1".to_string(), Leaving::Drained)]);
        let mut kept = 0;
        for plan in &plans {
            for draining in [&none, &some] {
                let cx = Context::new(plan, &snapshot, draining, &policy, NOW);
                for p in [
                    GangPhase::Queued,
                    GangPhase::Provisioning,
                    GangPhase::Admitted,
                    GangPhase::Running,
                    GangPhase::Evicted,
                    GangPhase::Unsatisfiable,
                ] {
                    let mut g = Gang::new(id(), "q", Time(0), Vec::new());
                    g.phase = p;
                    g.assignments = vec![at("n1")];
                    g.admitted_at = Some(Time(0));
                    let rec = GangRecord::of_gang(&g, &[]);
                    let out = after_plan(&id(), &rec, Some(&g), Seen::default(), &cx);
                    if cx.keeps(&id(), Some(p)) {
                        kept += 1;
                        assert_eq!(out.record, rec, "{p:?}");
                        assert!(!out.evict);
                    }
                    // another gang's items do not concern this one
                    assert!(!cx.keeps(&other, None));
                }
            }
        }
        // the check is not vacuous: Running gangs of a plan naming nothing
        // for them, draining or not, and waiting phases without drains
        assert!(kept >= 8, "{kept}");
    }

    #[test]
    fn a_planner_gang_reads_and_writes_its_record_unchanged() {
        let mut g = Gang::new(id(), "q", Time(0), Vec::new());
        g.phase = GangPhase::Provisioning;
        g.assignments = vec![at("n2")];
        g.provisioning_deadline = Some(Time(77));
        g.launch_attempts = 3;
        g.evictions = 2;
        g.not_before = Some(Time(5));
        let rec = GangRecord::of_gang(&g, &["n1".to_string()]);
        assert_eq!(rec.reserved_nodes, ["n1", "n2"]);
        assert_eq!(rec.requeue_after, Some(Time(5)));
        let mut back = Gang::new(id(), "q", Time(0), Vec::new());
        rec.write_to(&mut back);
        assert_eq!(back, g);
    }

    #[test]
    fn waiting_reasons_map_to_phases() {
        for (current, reason, want) in [
            (
                GangPhase::Queued,
                WaitReason::Unsatisfiable,
                GangPhase::Unsatisfiable,
            ),
            (GangPhase::Evicted, WaitReason::Backoff, GangPhase::Evicted),
            (
                GangPhase::Provisioning,
                WaitReason::Provisioning,
                GangPhase::Provisioning,
            ),
            (
                GangPhase::Provisioning,
                WaitReason::ProvisioningTimeout,
                GangPhase::Queued,
            ),
            (
                GangPhase::Unsatisfiable,
                WaitReason::QuotaExhausted,
                GangPhase::Queued,
            ),
        ] {
            let plan = Plan {
                waiting: vec![waiting(reason)],
                ..Plan::default()
            };
            let out = after(&phase(current), None, &plan, Seen::default());
            assert_eq!(out.record.phase, Some(want), "{current:?} + {reason:?}");
            assert_eq!(out.record.position, Some(3));
        }
    }

    #[test]
    fn a_finished_workload_finishes_the_gang_and_an_admitted_one_runs_or_times_out() {
        let done = after(
            &phase(GangPhase::Queued),
            None,
            &Plan::default(),
            Seen {
                finished: true,
                all_running: false,
            },
        );
        assert_eq!(done.record.phase, Some(GangPhase::Finished));
        assert_eq!(done.record.finished_at, Some(NOW));

        let mut g = Gang::new(id(), "q", Time(0), Vec::new());
        g.phase = GangPhase::Admitted;
        g.admitted_at = Some(Time(0));
        let rec = phase(GangPhase::Admitted);
        let running = after(
            &rec,
            Some(&g),
            &Plan::default(),
            Seen {
                finished: false,
                all_running: true,
            },
        );
        assert_eq!(running.record.phase, Some(GangPhase::Running));
        assert_eq!(running.record.started_at, Some(NOW));
        // not all running past the pods-ready timeout: evicted whole, counted
        let mut late = g.clone();
        late.admitted_at = Some(NOW - Policy::default().pods_ready_timeout - Dur(1));
        let out = after(&rec, Some(&late), &Plan::default(), Seen::default());
        assert_eq!(out.record.phase, Some(GangPhase::Evicted));
        assert_eq!(out.record.evictions, 1);
        assert!(out.evict);
    }
}
