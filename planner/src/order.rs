//! Fair-share ordering across queues and FIFO rules within a queue.
//!
//! Across queues: the next gang tried is the head of the queue with the
//! lowest dominant-resource share divided by weight (usage, borrowed
//! capacity included, over the cohort's total nominal — or every queue's
//! total nominal without a cohort, or the cluster's allocatable when no
//! nominal is set), then the head's priority (higher first), arrival
//! (earlier first) and id. Shares are updated after every admission or
//! launch, and as many gangs are admitted per cycle as fit.
//!
//! Within a queue: priority (higher first), arrival, id.
//! - `StrictFIFO`: once a gang is *blocked* (it waits for quota, capacity,
//!   offerings, pool limits, the launch budget, or preemption), every later
//!   gang of the queue waits `BehindHead`.
//! - `BestEffortFIFO`: a later gang G may pass blocked gangs only when it
//!   cannot delay any of them. G delays a blocked gang H when
//!   1. H waits for quota on resources R and G asks for a non-zero amount of
//!      any resource in R (a preempting H counts as waiting for every
//!      resource it asks for), or
//!   2. H waits for capacity (no offering, pool limit, launch budget,
//!      preemption) and G would put a pod on an existing node some pod set
//!      of H could use, or launch a node in a pool H may use that has a
//!      limit (or, when H waits for the launch budget, launch any node).
//!
//!   Gangs that wait as `Unsatisfiable` never block: nothing can fit them.

use std::rc::Rc;

use crate::admission::{Attempt, Decision};
use crate::index::World;
use crate::model::{QueueingStrategy, QuotaResource};
use crate::quota::QuotaBook;

/// The queue-ordering key of a gang (within its queue).
pub(crate) fn within_queue_cmp(w: &World<'_>, a: usize, b: usize) -> std::cmp::Ordering {
    let (x, y) = (w.gangs[a].gang, w.gangs[b].gang);
    y.priority
        .cmp(&x.priority)
        .then(x.arrival.cmp(&y.arrival))
        .then(x.id.cmp(&y.id))
}

/// What a blocked gang waits for.
#[derive(Debug, Clone)]
pub(crate) struct Blocker {
    pub gang: usize,
    pub quota: Vec<QuotaResource>,
    pub nodes: Vec<Rc<Vec<bool>>>,
    pub pools: Vec<usize>,
    pub capacity: bool,
    pub any_launch: bool,
}

impl Blocker {
    /// True when `a` (a later gang's try) could delay this blocked gang.
    pub fn delayed_by(&self, w: &World<'_>, a: &Attempt) -> bool {
        if self
            .quota
            .iter()
            .any(|r| a.generic.get(r).copied().unwrap_or(0) > 0)
        {
            return true;
        }
        if !self.capacity {
            return false;
        }
        let (existing, launch) = match &a.decision {
            Decision::Admit(t) => (t.as_slice(), None),
            Decision::Launch(c) => (c.existing.as_slice(), Some(c)),
        };
        if existing
            .iter()
            .any(|t| self.nodes.iter().any(|e| e[t.node]))
        {
            return true;
        }
        if let Some(c) = launch
            && !c.new.is_empty()
        {
            if self.any_launch {
                return true;
            }
            let l = &w.pools[c.pool].limits;
            let limited =
                l.max_gpus.is_some() || l.max_nodes.is_some() || l.max_price_per_hour.is_some();
            if limited && self.pools.contains(&c.pool) {
                return true;
            }
        }
        false
    }
}

/// Per-queue cursor over its pending gangs.
#[derive(Debug)]
pub(crate) struct Cursor {
    pub gangs: Vec<usize>,
    pub pos: usize,
    pub strict_blocked: Option<usize>,
    pub blockers: Vec<Blocker>,
    pub strategy: QueueingStrategy,
}

/// Picks the queue whose head goes next, or None when every queue is done.
pub(crate) fn pick(w: &World<'_>, book: &QuotaBook, cursors: &[Cursor]) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (q, c) in cursors.iter().enumerate() {
        if c.pos >= c.gangs.len() || c.strict_blocked.is_some() {
            continue;
        }
        let share = book.weighted_share(q);
        let better = match best {
            None => true,
            Some((s, bq)) => match share.total_cmp(&s) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => {
                    let (h, bh) = (c.gangs[c.pos], cursors[bq].gangs[cursors[bq].pos]);
                    within_queue_cmp(w, h, bh) == std::cmp::Ordering::Less
                }
            },
        };
        if better {
            best = Some((share, q));
        }
    }
    best.map(|(_, q)| q)
}
