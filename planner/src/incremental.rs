//! Re-planning between cycles: a [`Planner`] keeps the world and the tries
//! of its last plan, takes changes (or a whole new snapshot, which it
//! compares with the one it has), and plans again taking over the tries
//! the changes cannot have touched.
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
//! Any other change (nodes, queues, pools, offerings, the policy, gangs
//! that hold or reserve capacity, another time — plan messages state times
//! as durations from now) plans from scratch. The result is
//! the plan [`crate::plan()`] gives for the same snapshot, policy and time:
//! `planner/tests/incremental.rs` checks that over random change
//! sequences.
//!
//! How much this saves depends on where the change enters the loop and on
//! how many later decisions it really changes: docs/benchmarks.md has the
//! figures of one arrival in each queue of the 10k reference snapshot.

use std::collections::{BTreeMap, BTreeSet};

use crate::cycle::run_traced;
use crate::model::{Gang, GangId, Node};
use crate::plan::Plan;
use crate::replay::{Step, Trace};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;

/// Keeps the world between planning cycles and plans again from changes.
///
/// Deterministic like [`crate::plan()`]: [`Planner::plan`] returns exactly
/// the plan `plan(planner.snapshot(), planner.policy(), planner.now())`
/// would.
#[derive(Debug)]
pub struct Planner {
    snapshot: Snapshot,
    policy: Policy,
    now: Time,
    /// The tries of the last plan and the time it was made at.
    last: Option<(Vec<Step>, Time)>,
    /// The last plan.
    plan: Plan,
    /// Free-floating pending gangs changed since the last plan.
    changed: BTreeSet<GangId>,
    /// Something else changed: plan from scratch.
    rebuild: bool,
    reused: usize,
    tried: usize,
}

/// How the last [`Planner::plan`] went.
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
            last: None,
            plan: Plan::default(),
            changed: BTreeSet::new(),
            rebuild: true,
            reused: 0,
            tried: 0,
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
        ReplanStats {
            reused: self.reused,
            steps: self.tried,
        }
    }

    /// Forgets the earlier tries: the next plan is made from scratch.
    pub fn invalidate(&mut self) {
        self.rebuild = true;
    }

    /// Sets the time of the next plan.
    pub fn set_now(&mut self, now: Time) {
        self.now = now;
    }

    /// Replaces the policy.
    pub fn set_policy(&mut self, policy: Policy) {
        if policy != self.policy {
            self.policy = policy;
            self.rebuild = true;
        }
    }

    fn note_gang(&mut self, before: Option<&Gang>, after: Option<&Gang>) {
        let id = match (before, after) {
            (Some(g), _) | (None, Some(g)) => g.id.clone(),
            (None, None) => return,
        };
        if before.is_some_and(|g| !floating(g)) || after.is_some_and(|g| !floating(g)) {
            self.rebuild = true;
        }
        self.changed.insert(id);
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
            self.rebuild = true;
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
            self.rebuild = true;
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
                self.rebuild = true;
            }
            None => {
                self.snapshot.nodes.push(node);
                self.rebuild = true;
            }
        }
    }

    /// Removes the node with this name.
    pub fn remove_node(&mut self, name: &str) {
        let before = self.snapshot.nodes.len();
        self.snapshot.nodes.retain(|n| n.name != name);
        if self.snapshot.nodes.len() != before {
            self.rebuild = true;
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
            self.rebuild = true;
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
        let mut notes: Vec<(Option<Gang>, Option<Gang>)> = Vec::new();
        for (id, b) in &before {
            let a = after.get(id);
            if a.is_some_and(|a| a == b) {
                continue;
            }
            if b.len() > 1 || a.is_some_and(|a| a.len() > 1) {
                // Duplicate ids: which copy counts is decided in the cycle.
                self.rebuild = true;
                continue;
            }
            notes.push((
                b.first().map(|g| (*g).clone()),
                a.and_then(|a| a.first()).map(|g| (*g).clone()),
            ));
        }
        for (id, a) in &after {
            if !before.contains_key(id) {
                if a.len() > 1 {
                    self.rebuild = true;
                    continue;
                }
                notes.push((None, a.first().map(|g| (*g).clone())));
            }
        }
        for (b, a) in notes {
            self.note_gang(b.as_ref(), a.as_ref());
        }
    }

    /// True when the state before the fair-share loop may differ from the
    /// last plan's.
    fn must_rebuild(&self, last_now: Time) -> bool {
        if self.rebuild {
            return true;
        }
        // A changed gang named by a node's reservation is held (or its
        // reservation orphaned or taken) before the loop.
        if !self.changed.is_empty()
            && self.snapshot.nodes.iter().any(|n| {
                n.reserved_for
                    .as_ref()
                    .is_some_and(|g| self.changed.contains(g))
            })
        {
            return true;
        }
        // The plan's messages state times as durations from now (an
        // offering unavailable "for another 4m28s", a gang queued again "in
        // 8m20s"), so no try of a plan made at another time is taken over.
        if last_now != self.now {
            return true;
        }
        false
    }

    /// Plans the snapshot held, taking over the tries the changes since the
    /// last plan cannot have touched.
    pub fn plan(&mut self) -> &Plan {
        let (earlier, earlier_plan) = match self.last.take() {
            Some((steps, at)) if !self.must_rebuild(at) => (steps, std::mem::take(&mut self.plan)),
            _ => (Vec::new(), Plan::default()),
        };
        let mut trace = Trace {
            record: true,
            earlier,
            earlier_plan,
            changed: std::mem::take(&mut self.changed),
            ..Trace::default()
        };
        self.plan = run_traced(&self.snapshot, &self.policy, self.now, &mut trace);
        self.reused = trace.reused;
        self.tried = trace.steps.len();
        self.last = Some((trace.steps, self.now));
        self.rebuild = false;
        &self.plan
    }

    /// The last plan made (empty before the first).
    pub fn last_plan(&self) -> &Plan {
        &self.plan
    }
}
