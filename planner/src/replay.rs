//! Taking the tries of an earlier cycle's fair-share loop over.
//!
//! Every try of the loop is recorded ([`Step`]): the gang, what the try
//! returned, the plan item its commit made, and what the try read of the
//! quota book. A later cycle whose state before the loop is the same (see
//! [`crate::incremental`]) walks the earlier steps alongside its own loop:
//!
//! - **Same**: while the loop picks the gangs the earlier loop picked, in
//!   the same order, and none of them changed, the state before each try is
//!   the earlier one, so the earlier try and plan item are taken over as
//!   they are.
//! - **Drift**: from the first changed (or new) gang on, the states may
//!   differ, but only in what the commits that went differently touched —
//!   nodes, pools, queues' quota usage, new node names ([`Drift`]). A try
//!   reads the free capacity and reservations of the nodes its pod sets are
//!   eligible for, the usage of its cohort's queues (through the quota check
//!   and the GPU models that check excludes) and the usage of the limited
//!   pools its queue may launch in. An earlier try that succeeded at full
//!   size is taken over when none of those differ, or when the quota check
//!   gives the same answer on the new usage. An earlier launch whose only
//!   difference is the free capacity of nodes it may use (and did not use
//!   where they no longer fit) is taken over when the searches of
//!   existing capacity a launch makes give what they gave before
//!   ([`crate::provisioning::reads_same_nodes`]). Any other try is computed
//!   again, and when its commit differs from the earlier one, what either
//!   touched joins the drift. A try computed again that gives the earlier
//!   answer commits as the earlier one did: its plan item is reused under
//!   the rules for a try taken over.
//! - **Off**: once the loop picks a gang the earlier loop did not pick at
//!   that point (the order changed), or when a cycle's launch budget could
//!   see the drift, every remaining try is computed.
//!
//! The tries after a take-over are the tries a full cycle would make, so the
//! plan is the same; `planner/tests/incremental.rs` checks that.

use std::collections::BTreeMap;

use crate::admission::{Added, Attempt, Decision, Fail, Made};
use crate::decided::Cycle;
use crate::index::{FastSet, PoolUsage, World};
use crate::model::{GangId, GpuModel, QuotaResource};
use crate::plan::{Admission, Launch, Plan};
use crate::quota::QuotaBook;
use crate::resources::Resources;

/// One try of the fair-share loop.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub gang: GangId,
    pub tried: Tried,
    /// The plan item its commit made: an index into the plan's admissions
    /// (`Ok`) or launches (`Err`); `None` when nothing was committed.
    pub made: Option<Result<usize, usize>>,
    /// The try succeeded with every pod set at its full count.
    pub full: bool,
    /// GPU models the quota excluded for it (read by the try).
    pub excluded: Vec<GpuModel>,
    /// Its new nodes got the first names derived for them (no name was
    /// skipped because it was taken).
    pub names_clean: bool,
    /// What its commit added to the queue's quota usage (empty without a
    /// commit).
    pub added: Added,
}

/// A try's result in a form that outlives the cycle (no per-cycle
/// eligibility vectors: the commit and the FIFO checks after a try never
/// read them).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tried {
    Fit {
        /// (pod set, shape, count) of every group.
        groups: Vec<(usize, Resources, u32)>,
        decision: Decision,
        generic: BTreeMap<QuotaResource, u64>,
    },
    Fail(Fail, Vec<u32>),
}

impl Tried {
    /// True when a try's result is this one (what [`Tried::from_owned`]
    /// of it would equal).
    pub fn answers(&self, r: &Result<Attempt, (Fail, Vec<u32>)>) -> bool {
        match (self, r) {
            (
                Tried::Fit {
                    groups,
                    decision,
                    generic,
                },
                Ok(a),
            ) => {
                groups.len() == a.groups.len()
                    && groups
                        .iter()
                        .zip(&a.groups)
                        .all(|(g, h)| g.0 == h.set && g.1 == h.shape && g.2 == h.count)
                    && *decision == a.decision
                    && *generic == a.generic
            }
            (Tried::Fail(f, c), Err((g, d))) => f == g && c == d,
            _ => false,
        }
    }

    /// A try's result, as kept.
    pub fn from_owned(r: Result<Attempt, (Fail, Vec<u32>)>) -> Tried {
        match r {
            Ok(a) => Tried::Fit {
                groups: a
                    .groups
                    .into_iter()
                    .map(|g| (g.set, g.shape, g.count))
                    .collect(),
                decision: a.decision,
                generic: a.generic,
            },
            Err((f, c)) => Tried::Fail(f, c),
        }
    }

    /// The try's result (with empty eligibility: nothing after a try reads
    /// it).
    #[allow(clippy::result_large_err)]
    pub fn into_result(self) -> Result<Attempt, (Fail, Vec<u32>)> {
        match self {
            Tried::Fit {
                groups,
                decision,
                generic,
            } => Ok(Attempt {
                groups: groups
                    .into_iter()
                    .map(|(set, shape, count)| crate::placement::Group {
                        set,
                        shape,
                        count,
                        elig: std::rc::Rc::default(),
                    })
                    .collect(),
                decision,
                generic,
            }),
            Tried::Fail(f, c) => Err((f, c)),
        }
    }
}

/// The tries of one cycle's fair-share loop, and those of an earlier cycle
/// to take over.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// Record the tries of this cycle in `steps`.
    pub record: bool,
    /// This cycle's tries, in loop order.
    pub steps: Vec<Step>,
    /// An earlier cycle whose state before the loop was this cycle's.
    pub earlier: Vec<Step>,
    /// The earlier cycle's plan, whose items the taken-over commits reuse
    /// (moved out of it).
    pub earlier_plan: Plan,
    /// Gangs whose content differs from the earlier cycle's.
    pub changed: std::collections::BTreeSet<GangId>,
    /// The time the earlier cycle planned at.
    pub earlier_now: Option<crate::time::Time>,
    /// How many tries were taken over.
    pub reused: usize,
    /// Of those, launch tries whose existing capacity was searched again
    /// and read the same.
    pub rechecked: usize,
    /// Caches an earlier cycle left, to start from (`carry.rs`); a recorded
    /// cycle leaves its own here.
    pub carried: Option<crate::carry::Carried>,
}

/// What an earlier try read, compared with what it would read now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// Nothing it reads differs, or it reads the same answer.
    Same,
    /// Only the free capacity of nodes it may use may differ (its quota
    /// and pool limits read the same).
    Nodes,
    /// It must be computed again.
    Differ,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Same,
    Drift,
    Off,
}

/// Where the working state may differ from the earlier cycle's at the same
/// point of the loop.
#[derive(Debug, Default)]
struct Drift {
    /// For every node whose free capacity may differ: its free capacity in
    /// the earlier cycle at this point.
    earlier_free: Vec<Option<Resources>>,
    node_list: Vec<usize>,
    /// For every pool whose usage may differ: its usage in the earlier
    /// cycle at this point.
    earlier_usage: Vec<Option<PoolUsage>>,
    queues: Vec<bool>,
    names: FastSet<String>,
}

/// (node, shape, pods) taken from existing nodes by a committed try.
fn takes(t: &Tried) -> Vec<(usize, &Resources, u32)> {
    let Tried::Fit {
        groups, decision, ..
    } = t
    else {
        return Vec::new();
    };
    let existing = match decision {
        Decision::Admit(t) => t.as_slice(),
        Decision::Launch(c) => c.existing.as_slice(),
    };
    existing
        .iter()
        .filter_map(|t| groups.get(t.group).map(|g| (t.node, &g.1, t.n)))
        .collect()
}

/// The pool a committed try launches new nodes in, and what they add to
/// its usage (as the commit counts it).
fn launch_usage(w: &World<'_>, t: &Tried) -> Option<(usize, PoolUsage)> {
    match t {
        Tried::Fit {
            decision: Decision::Launch(c),
            ..
        } if !c.new.is_empty() => {
            let mut u = PoolUsage::default();
            for nn in &c.new {
                let off = w.offerings[nn.offering];
                u.nodes += 1;
                u.gpus += u64::from(off.gpu_count);
                u.price += off.price.unwrap_or_default().0;
            }
            Some((c.pool, u))
        }
        _ => None,
    }
}

impl Drift {
    /// A step committed `earlier` in the earlier cycle and `now` in this
    /// one (after `now` was applied to `w`), and they differ. Returns true
    /// when a launch budget could see the difference, or a capacity
    /// reservation could (how many machines are left in it is read by every
    /// later launch search, and not tracked as drift).
    fn differ(&mut self, w: &World<'_>, earlier: Option<&Tried>, now: Option<&Tried>) -> bool {
        let old = earlier.map(takes).unwrap_or_default();
        let new = now.map(takes).unwrap_or_default();
        for &(ni, _, _) in old.iter().chain(&new) {
            if self.earlier_free[ni].is_none() {
                // Both cycles had the same free capacity before this step.
                let mut f = w.nodes[ni].free.clone();
                for &(nj, shape, n) in &new {
                    if nj == ni {
                        f.add(&shape.times(u64::from(n)));
                    }
                }
                self.earlier_free[ni] = Some(f);
                self.node_list.push(ni);
            }
        }
        for (ni, shape, n) in old {
            if let Some(f) = &mut self.earlier_free[ni] {
                f.saturating_sub(&shape.times(u64::from(n)));
            }
        }
        let old = earlier.and_then(|t| launch_usage(w, t));
        let new = now.and_then(|t| launch_usage(w, t));
        for (p, _) in old.iter().chain(&new) {
            if self.earlier_usage[*p].is_none() {
                let mut u = w.pool_usage[*p].clone();
                if let Some((q, add)) = &new
                    && q == p
                {
                    u.nodes = u.nodes.saturating_sub(add.nodes);
                    u.gpus = u.gpus.saturating_sub(add.gpus);
                    u.price = u.price.saturating_sub(add.price);
                }
                self.earlier_usage[*p] = Some(u);
            }
        }
        if let Some((p, add)) = &old
            && let Some(u) = &mut self.earlier_usage[*p]
        {
            u.nodes += add.nodes;
            u.gpus += add.gpus;
            u.price += add.price;
        }
        (old.is_some() || new.is_some())
            && (w.policy.max_new_nodes_per_cycle.is_some() || w.has_reservations())
    }

    /// A step committed the same try in both cycles: its takes on drifting
    /// nodes happen in the earlier cycle too.
    fn same(&mut self, w: &World<'_>, t: &Tried) {
        if let Some((p, add)) = launch_usage(w, t)
            && let Some(u) = &mut self.earlier_usage[p]
        {
            u.nodes += add.nodes;
            u.gpus += add.gpus;
            u.price += add.price;
        }
        if self.node_list.is_empty() {
            return;
        }
        for (ni, shape, n) in takes(t) {
            if let Some(f) = &mut self.earlier_free[ni] {
                f.saturating_sub(&shape.times(u64::from(n)));
            }
        }
    }
}

/// The earlier steps walked alongside a cycle's loop.
pub(crate) struct Replay {
    earlier: std::iter::Peekable<std::vec::IntoIter<Step>>,
    mode: Mode,
    drift: Drift,
    /// The most GPUs of any offering.
    max_gpus: u64,
    /// The steps are recorded.
    record: bool,
}

/// What the loop does for one pick: the earlier step for the same gang at
/// the same point, and whether its try (and plan item) is taken over.
pub(crate) struct Turn {
    old: Option<Step>,
    pub take: bool,
    pub made: Option<Made>,
    excluded: Vec<GpuModel>,
    /// What this pick's commit added to the quota usage.
    pub added: Added,
    /// The earlier try was not taken over although its gang did not change
    /// (the drift may have changed its answer): computed again, it may give
    /// the same answer.
    recheck: bool,
    /// Computed again, the try gave the earlier answer.
    same_try: bool,
}

impl Turn {
    /// What the commit of the try taken over added to the quota usage (the
    /// same try adds the same).
    pub fn take_added(&mut self) -> Option<Added> {
        match (&mut self.old, self.take || self.same_try) {
            (Some(s), true) if s.made.is_some() => Some(std::mem::take(&mut s.added)),
            _ => None,
        }
    }

    /// Whether the taken-over plan item's nodes got their first names.
    pub fn names_clean(&self) -> bool {
        self.old.as_ref().is_none_or(|s| s.names_clean)
    }

    /// The try taken over, moved out of the earlier step (which keeps a
    /// placeholder: only the try's result is read after this, and
    /// [`Replay::done`] records it from that result).
    #[allow(clippy::result_large_err)]
    pub fn tried(&mut self) -> Option<Result<Attempt, (Fail, Vec<u32>)>> {
        if !self.take {
            return None;
        }
        self.old.as_mut().map(|s| {
            let placeholder = Tried::Fail(
                Fail::Launch(crate::provisioning::LaunchFail::LaunchBudget { need: 0 }),
                Vec::new(),
            );
            std::mem::replace(&mut s.tried, placeholder).into_result()
        })
    }
}

fn item_names(made: &Made) -> Vec<&str> {
    match made {
        Made::Admission(_) => Vec::new(),
        Made::Launch(l) => l.nodes.iter().map(|n| n.name.as_str()).collect(),
    }
}

fn plan_names(plan: &Plan, at: Result<usize, usize>) -> Vec<&str> {
    match at {
        Ok(_) => Vec::new(),
        Err(i) => plan
            .launches
            .get(i)
            .map(|l| l.nodes.iter().map(|n| n.name.as_str()).collect())
            .unwrap_or_default(),
    }
}

/// Moves a plan item out of an earlier plan (leaving an empty one).
fn take_made(plan: &mut Plan, at: Result<usize, usize>) -> Option<Made> {
    match at {
        Ok(i) => plan.admissions.get_mut(i).map(|a| {
            Made::Admission(Admission {
                gang: GangId(std::mem::take(&mut a.gang.0)),
                assignments: std::mem::take(&mut a.assignments),
            })
        }),
        Err(i) => plan.launches.get_mut(i).map(|l| {
            Made::Launch(Launch {
                gang: GangId(std::mem::take(&mut l.gang.0)),
                nodes: std::mem::take(&mut l.nodes),
                reserve: std::mem::take(&mut l.reserve),
                assignments: std::mem::take(&mut l.assignments),
                price_per_hour: l.price_per_hour,
                message: std::mem::take(&mut l.message),
                deadline: l.deadline,
            })
        }),
    }
}

impl Replay {
    /// Starts walking `trace.earlier` (empty: every try is computed).
    pub fn new(trace: &mut Trace, w: &World<'_>, book: &QuotaBook) -> Replay {
        let earlier = std::mem::take(&mut trace.earlier);
        let mode = if earlier.is_empty() {
            Mode::Off
        } else {
            Mode::Same
        };
        Replay {
            earlier: earlier.into_iter().peekable(),
            mode,
            record: trace.record,
            max_gpus: w
                .offerings
                .iter()
                .map(|o| u64::from(o.gpu_count))
                .max()
                .unwrap_or(0),
            drift: Drift {
                earlier_free: vec![None; w.nodes.len()],
                node_list: Vec::new(),
                earlier_usage: vec![None; w.pools.len()],
                queues: vec![false; book.usage.len()],
                names: FastSet::default(),
            },
        }
    }

    /// Before the try of gang `gi`: whether the earlier try is taken over.
    pub fn turn(
        &mut self,
        trace: &mut Trace,
        w: &mut World<'_>,
        book: &QuotaBook,
        gi: usize,
    ) -> Turn {
        let mut turn = Turn {
            old: None,
            take: false,
            made: None,
            excluded: Vec::new(),
            added: Added::new(),
            recheck: false,
            same_try: false,
        };
        if self.mode == Mode::Off {
            return turn;
        }
        let gang = w.gangs[gi].gang;
        let changed = trace.changed.contains(&gang.id);
        let aligned = self.earlier.peek().is_some_and(|s| s.gang == gang.id);
        if !aligned {
            // A new gang is tried where no earlier step stands; any other
            // gang out of step means the order changed.
            self.mode = if changed { Mode::Drift } else { Mode::Off };
            return turn;
        }
        let Some(old) = self.earlier.next() else {
            return turn;
        };
        if changed {
            self.mode = Mode::Drift;
            turn.old = Some(old);
            return turn;
        }
        let (take, keep_item) = match self.mode {
            Mode::Same => (true, true),
            _ => {
                let take = match self.reads(w, book, gi, &old) {
                    Reads::Same => true,
                    Reads::Differ => false,
                    Reads::Nodes => {
                        let same = self.launch_reads_same(w, gi, &old);
                        trace.rechecked += usize::from(same);
                        same
                    }
                };
                let keep = take
                    && old.names_clean
                    && old.made.is_none_or(|at| {
                        plan_names(&trace.earlier_plan, at)
                            .iter()
                            .all(|n| !self.drift.names.contains(*n))
                    });
                (take, keep)
            }
        };
        if take {
            trace.reused += 1;
            if keep_item {
                turn.made = old
                    .made
                    .and_then(|at| take_made(&mut trace.earlier_plan, at));
            }
        }
        turn.take = take;
        turn.recheck = !take;
        turn.old = Some(old);
        turn
    }

    /// After a try computed again for an unchanged gang: when it gave the
    /// earlier answer, its commit is the earlier commit, and the earlier
    /// plan item is reused under the rules for a try taken over (its new
    /// nodes got their first names, none of which the drift touched).
    pub fn reuse(
        &self,
        trace: &mut Trace,
        turn: &mut Turn,
        tried: &Result<Attempt, (Fail, Vec<u32>)>,
    ) {
        if !turn.recheck {
            return;
        }
        let Some(old) = &turn.old else {
            return;
        };
        let Some(at) = old.made else {
            return;
        };
        if !old.names_clean || !old.tried.answers(tried) {
            return;
        }
        if plan_names(&trace.earlier_plan, at)
            .iter()
            .any(|n| self.drift.names.contains(*n))
        {
            return;
        }
        turn.same_try = true;
        turn.made = take_made(&mut trace.earlier_plan, at);
    }

    /// True when an earlier try of gang `gi` was a launch whose searches of
    /// existing capacity read the same now. It succeeded at full size
    /// ([`Reads::Nodes`]), so it was made at the pod sets' counts.
    fn launch_reads_same(&self, w: &mut World<'_>, gi: usize, old: &Step) -> bool {
        let Tried::Fit {
            decision: Decision::Launch(c),
            ..
        } = &old.tried
        else {
            return false;
        };
        let counts: Vec<u32> = w.gangs[gi].gang.pod_sets.iter().map(|p| p.count).collect();
        crate::provisioning::reads_same_nodes(
            w,
            gi,
            &counts,
            &old.excluded,
            c,
            &self.drift.node_list,
        )
    }

    /// Whether an earlier try of gang `gi` reads nothing the drift
    /// touched, or reads it with the same answer.
    fn reads(&self, w: &mut World<'_>, book: &QuotaBook, gi: usize, old: &Step) -> Reads {
        let Tried::Fit {
            generic, groups, ..
        } = &old.tried
        else {
            return Reads::Differ;
        };
        if !old.full {
            return Reads::Differ;
        }
        let Some(q) = w.gangs[gi].queue else {
            return Reads::Differ;
        };
        if book.cohort_members[q].iter().any(|&m| self.drift.queues[m]) {
            let gpu = generic.get(&QuotaResource::Gpu).copied().unwrap_or(0);
            if book.check(q, generic).is_err() || book.excluded_models(q, gpu) != old.excluded {
                return Reads::Differ;
            }
        }
        // A pool's usage is read only against its limits, for launches of
        // at most one machine per pod: when no such launch reaches a limit
        // in either cycle, the difference is not seen.
        if self.drift.earlier_usage.iter().any(Option::is_some) {
            let pods: u64 = groups.iter().map(|g| u64::from(g.2)).sum();
            let max_gpus = self.max_gpus;
            for p in w.queue_pools(Some(q)) {
                let Some(before) = &self.drift.earlier_usage[p] else {
                    continue;
                };
                let l = &w.pools[p].limits;
                if l.max_price_per_hour.is_some() {
                    return Reads::Differ;
                }
                for u in [before, &w.pool_usage[p]] {
                    if l.max_nodes
                        .is_some_and(|m| u.nodes.saturating_add(pods) > m)
                        || l.max_gpus.is_some_and(|m| {
                            u.gpus.saturating_add(pods.saturating_mul(max_gpus)) > m
                        })
                    {
                        return Reads::Differ;
                    }
                }
            }
        }
        // A node whose free capacity differs matters only when one of the
        // gang's pods may go there and fits in either cycle: the searches
        // over existing capacity skip every other node.
        if !self.drift.node_list.is_empty() {
            // It took pods where they no longer fit: it differs.
            for (ni, shape, n) in takes(&old.tried) {
                if self.drift.earlier_free[ni].is_some()
                    && !shape.times(u64::from(n)).fits_in(&w.nodes[ni].free)
                {
                    return Reads::Differ;
                }
            }
            for (set, shape, count) in groups {
                if *count == 0 {
                    continue;
                }
                let e = w.eligible_nodes(gi, *set);
                for &ni in &self.drift.node_list {
                    if !e.get(ni).copied().unwrap_or(true) {
                        continue;
                    }
                    // Nodes of GPU models the quota excludes for the gang
                    // are never used (the same models in both cycles: the
                    // quota check above).
                    if let Some(m) = &w.nodes[ni].node.gpu_model
                        && old.excluded.iter().any(|x| m.satisfies(x))
                    {
                        continue;
                    }
                    // (`fits_in` is `fit_count(..) > 0`, without divisions.)
                    let fits_now = shape.fits_in(&w.nodes[ni].free);
                    let fitted = self.drift.earlier_free[ni]
                        .as_ref()
                        .is_none_or(|f| shape.fits_in(f));
                    if fits_now || fitted {
                        return Reads::Nodes;
                    }
                }
            }
        }
        Reads::Same
    }

    /// Right after the try (before its commit): what the step records of
    /// the quota book.
    pub fn tried(
        &self,
        turn: &mut Turn,
        w: &World<'_>,
        book: &QuotaBook,
        gi: usize,
        tried: &Result<Attempt, (Fail, Vec<u32>)>,
    ) {
        if !self.record {
            return;
        }
        if let (Some(old), true) = (&turn.old, turn.take) {
            turn.excluded = old.excluded.clone();
            return;
        }
        if let (Ok(a), Some(q)) = (tried, w.gangs[gi].queue) {
            let gpu = a.generic.get(&QuotaResource::Gpu).copied().unwrap_or(0);
            turn.excluded = book.excluded_models(q, gpu);
        }
    }

    /// After the commit (or the wait) of gang `gi` of queue `q`: records the
    /// step and adds to the drift what went differently from the earlier
    /// cycle. `unused` is a taken-over plan item the commit did not use.
    #[allow(clippy::too_many_arguments)]
    pub fn done(
        &mut self,
        trace: &mut Trace,
        w: &World<'_>,
        cx: &Cycle,
        gi: usize,
        q: usize,
        turn: Turn,
        tried: Result<Attempt, (Fail, Vec<u32>)>,
        committed: bool,
        names_clean: bool,
        unused: Option<Made>,
    ) {
        if !self.record && self.mode != Mode::Drift {
            return;
        }
        let gang = w.gangs[gi].gang;
        let made = committed.then(|| match &tried {
            Ok(Attempt {
                decision: Decision::Admit(_),
                ..
            }) => Ok(cx.plan.admissions.len().saturating_sub(1)),
            _ => Err(cx.plan.launches.len().saturating_sub(1)),
        });
        let Turn {
            old,
            take,
            excluded,
            added,
            ..
        } = turn;
        let full = match &tried {
            Ok(a) => {
                a.groups.len() == gang.pod_sets.len()
                    && a.groups.iter().all(|g| {
                        gang.pod_sets
                            .get(g.set)
                            .is_some_and(|ps| ps.count == g.count)
                    })
            }
            Err(_) => false,
        };
        // This step's try; the earlier step's try if its commit happened;
        // whether the two commits are the same.
        // The earlier step is the same gang's: its id is moved over.
        let mut old_gang: Option<GangId> = None;
        let (new_tried, old_committed, same) = match old {
            Some(o) if take => {
                old_gang = Some(o.gang);
                // The try taken over, moved out of the earlier step and back.
                let new_tried = Tried::from_owned(tried);
                let same = o.made.is_some() == committed;
                let old_committed = if same {
                    None
                } else {
                    o.made.map(|at| (new_tried.clone(), at))
                };
                (new_tried, old_committed, same)
            }
            Some(o) => {
                old_gang = Some(o.gang);
                let new_tried = Tried::from_owned(tried);
                let same = match (o.made.is_some(), committed) {
                    (false, false) => true,
                    (true, true) => o.tried == new_tried,
                    _ => false,
                };
                let old_committed = o.made.map(|at| (o.tried, at));
                (new_tried, old_committed, same)
            }
            None => (Tried::from_owned(tried), None, !committed),
        };
        if self.mode == Mode::Drift && !same {
            let off = self.drift.differ(
                w,
                old_committed.as_ref().map(|(t, _)| t),
                committed.then_some(&new_tried),
            );
            if let Some((_, at)) = &old_committed {
                for n in plan_names(&trace.earlier_plan, *at) {
                    self.drift.names.insert(n.to_string());
                }
            }
            self.drift.queues[q] = true;
            if let Some(m) = &unused {
                for n in item_names(m) {
                    self.drift.names.insert(n.to_string());
                }
            }
            if let Some(at) = made {
                for n in plan_names(&cx.plan, at) {
                    self.drift.names.insert(n.to_string());
                }
            }
            if off {
                self.mode = Mode::Off;
            }
        } else if self.mode == Mode::Drift && committed {
            self.drift.same(w, &new_tried);
        }
        if trace.record {
            trace.steps.push(Step {
                gang: old_gang.unwrap_or_else(|| gang.id.clone()),
                tried: new_tried,
                made,
                full,
                excluded,
                names_clean,
                added,
            });
        }
    }
}
