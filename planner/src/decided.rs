//! Everything decided so far in one cycle: the plan being built, each
//! gang's outcome, and the nodes each decision used. Every step of the
//! cycle (`cycle.rs`) writes into one [`Cycle`]: a try's commit
//! (`admission.rs`), hand-overs, preemptions, scale-to-zero and
//! consolidation.

use std::collections::{BTreeMap, BTreeSet};

use crate::by_index::ByIndex;
use crate::plan::{Plan, WaitReason};
use crate::reasons;

/// Outcome of a gang in this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Admitted,
    Launched,
    Waiting(WaitReason, String),
}

/// Everything decided so far in the cycle.
#[derive(Debug, Default)]
pub(crate) struct Cycle {
    pub plan: Plan,
    pub outcome: ByIndex<Outcome>,
    /// Released (timed-out / orphan) nodes taken by a gang this cycle.
    pub handed: BTreeMap<usize, usize>,
    /// Gangs chosen as preemption victims.
    pub victims: BTreeSet<usize>,
    /// Nodes used by each gang's decision this cycle, sorted.
    pub used_nodes: ByIndex<Vec<usize>>,
    /// Every node used by a decision this cycle.
    pub all_used: ByIndex<()>,
    /// The plan items taken over were made at another time: their messages
    /// are rendered again.
    pub retimed: bool,
    /// Launch-message notes rendered this cycle
    /// ([`reasons::retime_launch_message`]).
    pub notes: reasons::Notes,
}

impl Cycle {
    /// Records why a gang waits.
    pub fn wait(&mut self, gi: usize, reason: WaitReason, message: String) {
        self.outcome.insert(gi, Outcome::Waiting(reason, message));
    }

    /// Records the nodes gang `gi`'s decision uses ([`node_set`]).
    pub fn record_used(&mut self, gi: usize, nodes: Vec<usize>) {
        for &ni in &nodes {
            self.all_used.insert(ni, ());
        }
        self.used_nodes.insert(gi, nodes);
    }
}

/// Node indexes sorted, without repeats.
pub(crate) fn node_set(mut nodes: Vec<usize>) -> Vec<usize> {
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}
