//! Re-planning between cycles, taking over the tries of the last plan that
//! the changes since cannot have touched. Two forms:
//!
//! - a [`Planner`] keeps the snapshot and takes changes one by one (or a
//!   whole new snapshot, which it compares with the one it has);
//! - a [`Replanner`] is for drivers that build a new snapshot every cycle
//!   (the controller, from its watch caches): it is handed each snapshot
//!   by reference and keeps only fingerprints of the last one, not a copy.
//!
//! # What is taken over, and why the plan is the same
//!
//! A plan's cost is almost all in the fair-share loop over pending gangs:
//! one try per gang (quota, placement on existing nodes, the launch search)
//! in an order that depends on the tries before. A try is a function of the
//! working state before it and of its gang; the state before the loop is a
//! function of the snapshot, the policy and what the time decides (which
//! offerings are usable, which deadlines have passed).
//!
//! So when only *free-floating pending gangs* changed — gangs in a pending
//! phase (`Queued`, `Evicted`, `Unsatisfiable`) with no assignments and no
//! node reserved for them, which add nothing to the state before the loop —
//! and the time is the same, the loop starts from the same state. It
//! then picks the same gangs in the same order, with the same tries, until
//! it picks a gang that changed: up to there the earlier tries and plan
//! items are taken over as they are. From there on the state may differ,
//! but only where the commits that went differently touched it; an earlier
//! try is still taken over when it reads none of that, or reads it with the
//! same answer, and every other try is computed (the rules are in
//! `replay.rs`). When the loop picks a different gang than last time (the
//! order changed), every remaining try is computed. Everything else in a
//! cycle (releases, consolidation, waiting messages) runs as in
//! [`crate::plan()`].
//!
//! Time passing is a change only where it decides something before the
//! loop ([`crate::time_facts`]): an evicted pending gang whose backoff
//! ended is a changed gang; an offering usable again, a deadline or a
//! machine's timeout passed plans from scratch. What the time only renders
//! (durations from now in messages, the deadline of a launch) the loop
//! renders again for the tries it takes over, so a controller that plans
//! at a new time every cycle still takes tries over.
//!
//! A plan that takes tries over also starts from the caches the last plan
//! filled — eligibility, pod-set signatures, machine kinds, covers
//! ([`crate::carry`]) — since everything they are computed from is the
//! same; the signatures of changed gangs are dropped.
//!
//! Any other change (nodes, queues, pools, offerings, the policy, gangs
//! that hold or reserve capacity) plans from scratch. The result is
//! the plan [`crate::plan()`] gives for the same snapshot, policy and time:
//! `planner/tests/incremental.rs` checks that over random change
//! sequences.
//!
//! How much this saves depends on where the change enters the loop and on
//! how many later decisions it really changes: docs/benchmarks.md has the
//! figures of one arrival in each queue of the 10k reference snapshot.

use std::collections::{BTreeMap, BTreeSet};

use crate::carry::Carried;
use crate::cycle::run_traced;
use crate::model::{Gang, GangId, Node};
use crate::plan::Plan;
use crate::prints::Prints;
use crate::replay::{Step, Trace};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;
use crate::time_facts;

/// What a re-plan keeps of the last plan: its tries, its time, the plan,
/// and what changed since.
#[derive(Debug)]
struct Memory {
    /// The tries of the last plan and the time it was made at.
    last: Option<(Vec<Step>, Time)>,
    /// The last plan.
    plan: Plan,
    /// Free-floating pending gangs changed since the last plan.
    changed: BTreeSet<GangId>,
    /// Something else changed: plan from scratch.
    rebuild: bool,
    /// The last plan's caches (`carry.rs`).
    carried: Option<Carried>,
    reused: usize,
    /// Of those, launch tries taken over after their existing capacity was
    /// searched again (`replay.rs`).
    rechecked: usize,
    tried: usize,
}

impl Memory {
    fn new() -> Memory {
        Memory {
            last: None,
            plan: Plan::default(),
            changed: BTreeSet::new(),
            rebuild: true,
            carried: None,
            reused: 0,
            rechecked: 0,
            tried: 0,
        }
    }

    /// Drops what only a plan taking tries over reads — the tries and the
    /// carried caches — keeping the plan: the next plan is made from
    /// scratch, so they would only hold memory until then.
    fn forget(&mut self) {
        self.last = None;
        self.carried = None;
    }

    /// A gang changed: `before` and `after` say whether it was and is
    /// free-floating (`None`: absent).
    fn note_gang(&mut self, id: &GangId, before: Option<bool>, after: Option<bool>) {
        if before == Some(false) || after == Some(false) {
            self.rebuild = true;
        }
        self.changed.insert(id.clone());
    }

    /// True when the state before the fair-share loop may differ from the
    /// last plan's.
    fn must_rebuild(&self, s: &Snapshot) -> bool {
        if self.rebuild {
            return true;
        }
        // A changed gang named by a node's reservation is held (or its
        // reservation orphaned or taken) before the loop.
        !self.changed.is_empty()
            && s.nodes.iter().any(|n| {
                n.reserved_for
                    .as_ref()
                    .is_some_and(|g| self.changed.contains(g))
            })
    }

    /// Plans `s`, taking over the tries the changes noted since the last
    /// plan cannot have touched.
    ///
    /// Time passing is a change only where it decides something before the
    /// loop: gangs whose backoff began or ended count as changed; anything
    /// else plans from scratch. What the time only renders (durations in
    /// messages, new deadlines) the loop renders again for every try it
    /// takes over.
    fn plan(&mut self, s: &Snapshot, policy: &Policy, now: Time) -> &Plan {
        if let Some((_, at)) = &self.last {
            match time_facts::changes(s, policy, *at, now) {
                time_facts::Changes::Backoffs(gangs) => self.changed.extend(gangs),
                time_facts::Changes::Other => self.rebuild = true,
            }
        }
        let carried = self.carried.take();
        let (earlier, earlier_plan, earlier_now, mut carried) = match self.last.take() {
            Some((steps, at)) if !self.must_rebuild(s) => {
                (steps, std::mem::take(&mut self.plan), Some(at), carried)
            }
            _ => (Vec::new(), Plan::default(), None, None),
        };
        if let Some(c) = &mut carried {
            c.forget(&self.changed);
        }
        let mut trace = Trace {
            record: true,
            // As many tries as last time, give or take the changes: the
            // steps are large, and growing the list copies them all.
            steps: Vec::with_capacity(earlier.len() + self.changed.len()),
            earlier,
            earlier_plan,
            earlier_now,
            changed: std::mem::take(&mut self.changed),
            carried,
            ..Trace::default()
        };
        self.plan = run_traced(s, policy, now, &mut trace);
        self.carried = trace.carried.take();
        self.reused = trace.reused;
        self.rechecked = trace.rechecked;
        self.tried = trace.steps.len();
        self.last = Some((trace.steps, now));
        self.rebuild = false;
        &self.plan
    }

    fn stats(&self) -> ReplanStats {
        ReplanStats {
            reused: self.reused,
            steps: self.tried,
        }
    }
}

/// Keeps the snapshot and the tries of its last plan between planning
/// cycles, and plans again from changes.
///
/// Deterministic like [`crate::plan()`]: [`Planner::plan`] returns exactly
/// the plan `plan(planner.snapshot(), planner.policy(), planner.now())`
/// would.
#[derive(Debug)]
pub struct Planner {
    snapshot: Snapshot,
    policy: Policy,
    now: Time,
    memory: Memory,
}

/// How the last plan went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplanStats {
    /// Tries of the fair-share loop taken over from the plan before.
    pub reused: usize,
    /// Tries in the loop, taken over or computed.
    pub steps: usize,
}

/// True when two lists hold the same items, in any order (the order of a
/// snapshot's lists does not matter to a plan).
fn same_items<'a, T: PartialEq, K: Ord>(a: &'a [T], b: &'a [T], key: impl Fn(&'a T) -> K) -> bool {
    if a == b {
        return true;
    }
    if a.len() != b.len() {
        return false;
    }
    let sorted = |v: &'a [T]| {
        let mut r: Vec<(K, &'a T)> = v.iter().map(|x| (key(x), x)).collect();
        r.sort_by(|x, y| x.0.cmp(&y.0));
        r
    };
    let (x, y) = (sorted(a), sorted(b));
    // Items with equal keys are compared in the order given; a difference
    // there only costs a plan from scratch.
    x.iter().zip(&y).all(|(p, q)| p.0 == q.0 && p.1 == q.1)
}

/// A pending gang that adds nothing to the state before the fair-share
/// loop (its node reservations are checked separately).
fn floating(g: &Gang) -> bool {
    g.phase.pending() && g.assignments.is_empty()
}

impl Planner {
    /// A planner over `snapshot`; the first [`plan`](Planner::plan) plans
    /// from scratch.
    pub fn new(snapshot: Snapshot, policy: Policy, now: Time) -> Planner {
        Planner {
            snapshot,
            policy,
            now,
            memory: Memory::new(),
        }
    }

    /// The snapshot the next plan is of.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The time of the next plan.
    pub fn now(&self) -> Time {
        self.now
    }

    /// How the last plan went (tries taken over, tries in all).
    pub fn stats(&self) -> ReplanStats {
        self.memory.stats()
    }

    /// Forgets the earlier tries: the next plan is made from scratch.
    pub fn invalidate(&mut self) {
        self.memory.rebuild = true;
    }

    /// Sets the time of the next plan.
    pub fn set_now(&mut self, now: Time) {
        self.now = now;
    }

    /// Replaces the policy.
    pub fn set_policy(&mut self, policy: Policy) {
        if policy != self.policy {
            self.policy = policy;
            self.memory.rebuild = true;
        }
    }

    fn note_gang(&mut self, before: Option<&Gang>, after: Option<&Gang>) {
        let id = match (before, after) {
            (Some(g), _) | (None, Some(g)) => g.id.clone(),
            (None, None) => return,
        };
        self.memory
            .note_gang(&id, before.map(floating), after.map(floating));
    }

    /// Adds a gang, or replaces the gang with its id.
    pub fn upsert_gang(&mut self, gang: Gang) {
        if self
            .snapshot
            .gangs
            .iter()
            .filter(|g| g.id == gang.id)
            .count()
            > 1
        {
            // Duplicate ids: which copy counts is decided in the cycle.
            self.memory.rebuild = true;
        }
        match self.snapshot.gangs.iter().position(|g| g.id == gang.id) {
            Some(i) => {
                if self.snapshot.gangs[i] == gang {
                    return;
                }
                let old = std::mem::replace(&mut self.snapshot.gangs[i], gang);
                let new = self.snapshot.gangs[i].clone();
                self.note_gang(Some(&old), Some(&new));
            }
            None => {
                self.note_gang(None, Some(&gang));
                self.snapshot.gangs.push(gang);
            }
        }
    }

    /// Removes every gang with this id (finished or deleted).
    pub fn remove_gang(&mut self, id: &GangId) {
        let mut removed = Vec::new();
        if self.snapshot.gangs.iter().filter(|g| g.id == *id).count() > 1 {
            self.memory.rebuild = true;
        }
        self.snapshot.gangs.retain(|g| {
            if g.id == *id {
                removed.push(g.clone());
                false
            } else {
                true
            }
        });
        for g in &removed {
            self.note_gang(Some(g), None);
        }
    }

    /// Adds a node, or replaces the node with its name.
    pub fn upsert_node(&mut self, node: Node) {
        match self.snapshot.nodes.iter().position(|n| n.name == node.name) {
            Some(i) if self.snapshot.nodes[i] == node => {}
            Some(i) => {
                self.snapshot.nodes[i] = node;
                self.memory.rebuild = true;
            }
            None => {
                self.snapshot.nodes.push(node);
                self.memory.rebuild = true;
            }
        }
    }

    /// Removes the node with this name.
    pub fn remove_node(&mut self, name: &str) {
        let before = self.snapshot.nodes.len();
        self.snapshot.nodes.retain(|n| n.name != name);
        if self.snapshot.nodes.len() != before {
            self.memory.rebuild = true;
        }
    }

    /// Replaces the whole snapshot (as a driver reads it each cycle),
    /// comparing it with the one held to find what changed.
    pub fn replace(&mut self, snapshot: Snapshot) {
        let old = std::mem::replace(&mut self.snapshot, snapshot);
        let s = &self.snapshot;
        if !same_items(&old.queues, &s.queues, |q| &q.name)
            || !same_items(&old.pools, &s.pools, |p| &p.name)
            || !same_items(&old.offerings, &s.offerings, |o| o.key())
            || !same_items(&old.nodes, &s.nodes, |n| &n.name)
        {
            self.memory.rebuild = true;
        }
        if old.gangs == s.gangs {
            return;
        }
        let mut before: BTreeMap<&GangId, Vec<&Gang>> = BTreeMap::new();
        for g in &old.gangs {
            before.entry(&g.id).or_default().push(g);
        }
        let mut after: BTreeMap<&GangId, Vec<&Gang>> = BTreeMap::new();
        for g in &s.gangs {
            after.entry(&g.id).or_default().push(g);
        }
        let mut notes: Vec<(GangId, Option<bool>, Option<bool>)> = Vec::new();
        let mut dup = false;
        for (id, b) in &before {
            let a = after.get(id);
            if a.is_some_and(|a| a == b) {
                continue;
            }
            if b.len() > 1 || a.is_some_and(|a| a.len() > 1) {
                // Duplicate ids: which copy counts is decided in the cycle.
                dup = true;
                continue;
            }
            notes.push((
                (*id).clone(),
                b.first().map(|g| floating(g)),
                a.and_then(|a| a.first()).map(|g| floating(g)),
            ));
        }
        for (id, a) in &after {
            if !before.contains_key(id) {
                if a.len() > 1 {
                    dup = true;
                    continue;
                }
                notes.push(((*id).clone(), None, a.first().map(|g| floating(g))));
            }
        }
        self.memory.rebuild |= dup;
        for (id, b, a) in notes {
            self.memory.note_gang(&id, b, a);
        }
    }

    /// Plans the snapshot held, taking over the tries the changes since the
    /// last plan cannot have touched.
    pub fn plan(&mut self) -> &Plan {
        self.memory.plan(&self.snapshot, &self.policy, self.now)
    }

    /// The last plan made (empty before the first).
    pub fn last_plan(&self) -> &Plan {
        &self.memory.plan
    }
}

/// Re-plans a snapshot the driver builds anew every cycle, keeping
/// fingerprints of the last one instead of a copy.
///
/// Each [`plan`](Replanner::plan) compares the snapshot it is given with
/// the fingerprints of the last one — every queue, pool, offering and node
/// as a multiset, every gang by its id — and takes the tries over as a
/// [`Planner`] does (`prints.rs`). Fingerprints are 128-bit XXH3 hashes of
/// each item's fields: a change that left an item's fingerprint as it was
/// would go unseen, which for 128 bits is not a practical concern. The
/// plan is the plan [`crate::plan()`] gives for the same snapshot, policy
/// and time (`planner/tests/incremental.rs`).
///
/// Fingerprinting a snapshot costs about as much as building its working
/// state when its gangs hold nothing, and pays only when the next plan can
/// take many tries over. So fingerprints are kept only after a plan whose
/// fair-share loop had at least [`Replanner::DEFAULT_MIN_TRIES`] tries (a
/// backlog of pending gangs); after a smaller loop the next plan is made from scratch, which
/// costs the same as taking its few tries over.
#[derive(Debug)]
pub struct Replanner {
    policy: Option<Policy>,
    prints: Option<Prints>,
    memory: Memory,
    min_tries: usize,
}

impl Default for Replanner {
    fn default() -> Replanner {
        Replanner::new()
    }
}

impl Replanner {
    /// Tries of the fair-share loop from which the snapshot is fingerprinted
    /// for the next plan to take them over.
    pub const DEFAULT_MIN_TRIES: usize = 32;

    /// A re-planner whose first plan is made from scratch.
    pub fn new() -> Replanner {
        Replanner::with_min_tries(Replanner::DEFAULT_MIN_TRIES)
    }

    /// A re-planner that keeps fingerprints after loops of at least
    /// `min_tries` tries (0: after every plan).
    pub fn with_min_tries(min_tries: usize) -> Replanner {
        Replanner {
            policy: None,
            prints: None,
            memory: Memory::new(),
            min_tries,
        }
    }

    /// How the last plan went (tries taken over, tries in all).
    pub fn stats(&self) -> ReplanStats {
        self.memory.stats()
    }

    /// Plans `s`, taking over the tries of the last plan that what changed
    /// since cannot have touched.
    pub fn plan(&mut self, s: &Snapshot, policy: &Policy, now: Time) -> &Plan {
        if self.policy.as_ref() != Some(policy) {
            self.policy = Some(policy.clone());
            self.memory.rebuild = true;
        }
        let new = match self.prints.take() {
            Some(old) => {
                let new = Prints::of(s, floating);
                self.note(&old, &new);
                Some(new)
            }
            None => {
                self.memory.rebuild = true;
                None
            }
        };
        self.memory.plan(s, policy, now);
        self.prints = if self.memory.tried >= self.min_tries {
            Some(new.unwrap_or_else(|| Prints::of(s, floating)))
        } else {
            self.memory.forget();
            None
        };
        &self.memory.plan
    }

    fn note(&mut self, old: &Prints, new: &Prints) {
        let changes = new.since(old);
        self.memory.rebuild |= changes.other;
        for (id, before, after) in changes.gangs {
            self.memory.note_gang(&id, before, after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Toleration, TolerationOperator};
    use crate::synthetic::{self, Params};

    /// What a driver keeps between cycles may move between threads (the
    /// controller's planning runs on its own thread).
    #[test]
    fn planners_are_send() {
        fn send<T: Send>() {}
        send::<Replanner>();
        send::<Planner>();
    }

    /// After a loop too small to fingerprint for, a `Replanner` keeps the
    /// plan and nothing else (the next plan is made from scratch); after a
    /// loop it fingerprints for, it keeps the tries and the caches.
    #[test]
    fn a_replanner_keeps_only_the_plan_after_a_small_loop() {
        let s = synthetic::generate(&Params {
            pods: 40,
            gangs: 4,
            nodes: 6,
            offerings: 40,
            seed: 5,
        });
        let policy = Policy::default();
        let mut small = Replanner::new();
        let plan = small.plan(&s, &policy, synthetic::NOW).clone();
        assert!(small.memory.tried < Replanner::DEFAULT_MIN_TRIES);
        assert!(small.prints.is_none());
        assert!(small.memory.last.is_none());
        assert!(small.memory.carried.is_none());
        assert_eq!(small.memory.plan, plan);
        let mut every = Replanner::with_min_tries(0);
        every.plan(&s, &policy, synthetic::NOW);
        assert!(every.prints.is_some());
        assert!(every.memory.last.is_some());
        assert!(every.memory.carried.is_some());
    }

    /// When an arrival takes room on nodes that later launches may use but
    /// did not, those launch tries search existing capacity again and are
    /// taken over when it gives them what it gave before; every plan is
    /// the full plan of its snapshot.
    #[test]
    fn launches_are_taken_over_when_existing_capacity_reads_the_same() {
        let p = Params {
            pods: 1000,
            gangs: 100,
            nodes: 200,
            ..Params::default()
        };
        // Rechecks belong to the hole-first search; size-matched placement
        // searches without the bigger nodes first, which no recheck reuses.
        let policy = Policy {
            size_matched_placement: false,
            ..Policy::default()
        };
        let s = synthetic::generate(&p);
        let later = Time(synthetic::NOW.0 + 1);
        let mut rechecked = Vec::new();
        for q in 0..8 {
            let mut r = Replanner::with_min_tries(0);
            r.plan(&s, &policy, synthetic::NOW);
            let mut next = s.clone();
            next.gangs.push(synthetic::arrival(&p, q));
            let got = r.plan(&next, &policy, later).clone();
            assert_eq!(
                got,
                crate::plan(&next, &policy, later),
                "arrival in team-{q}"
            );
            assert!(
                r.stats().reused > 0,
                "arrival in team-{q}: nothing taken over"
            );
            rechecked.push(r.memory.rechecked);
        }
        assert!(
            rechecked.iter().any(|&n| n > 0),
            "no launch taken over after a search of existing capacity: {rechecked:?}"
        );
    }

    /// Over a long run of re-plans in which every arrival brings a new
    /// pod-set signature and a new demand and an older arrival leaves, the
    /// caches carried stay within their bound (`carry.rs`), more
    /// signatures arrive than the bound would let them keep, tries are still
    /// taken over, and every plan is the full plan.
    #[test]
    fn carried_caches_stay_bounded_over_many_arrivals() {
        let p = Params {
            pods: 200,
            gangs: 20,
            nodes: 6,
            offerings: 40,
            seed: 11,
        };
        let policy = Policy::default();
        let s = synthetic::generate(&p);
        let gangs = s.gangs.len();
        let mut planner = Planner::new(s, policy.clone(), synthetic::NOW);
        planner.plan();
        let scratch = planner.memory.carried.as_ref().map(|c| c.scratch);
        let scratch = scratch.expect("a plan carries its caches");
        assert_eq!(scratch.gangs, gangs);
        let steps = 400;
        let (mut max_sigs, mut reused, mut dropped) = (0, 0, 0);
        let mut last_sigs = 0;
        for step in 0..steps {
            let mut g = synthetic::arrival(&p, step % 4);
            g.id = GangId(format!("ns-new/job-{step}"));
            for ps in &mut g.pod_sets {
                ps.requests.cpu_millis += u64::from(step) + 1;
                ps.tolerations.push(Toleration {
                    key: format!("muster.test/step-{step}"),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: None,
                });
            }
            planner.upsert_gang(g);
            if step >= 3 {
                planner.remove_gang(&GangId(format!("ns-new/job-{}", step - 3)));
            }
            let got = planner.plan().clone();
            let want = crate::plan(planner.snapshot(), &policy, planner.now());
            assert_eq!(
                got, want,
                "re-plan differs from the full plan at step {step}"
            );
            reused += planner.stats().reused;
            let c = planner.memory.carried.as_ref().expect("carried");
            assert_eq!(c.scratch, scratch, "no plan from scratch at step {step}");
            let now = c.sizes(planner.snapshot().gangs.len());
            assert!(
                now.within(&scratch),
                "{now:?} outgrew {scratch:?} at step {step}"
            );
            if now.sigs < last_sigs {
                dropped += 1;
            }
            last_sigs = now.sigs;
            max_sigs = max_sigs.max(now.sigs);
        }
        assert!(max_sigs < steps as usize, "signatures kept: {max_sigs}");
        assert!(dropped > 0, "the caches were never dropped");
        assert!(reused > steps as usize, "tries taken over: {reused}");
    }
}
