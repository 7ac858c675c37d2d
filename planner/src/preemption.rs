//! Preemption: evicting whole gangs so a waiting gang fits.
//!
//! Candidates (Admitted or Running gangs, never ones already chosen this
//! cycle):
//! - within the queue, when its policy is `LowerPriority`: gangs of lower
//!   priority;
//! - reclaim, when the queue's `reclaim` is not `Never`, it is in a cohort,
//!   and admitting the preemptor keeps the queue within its nominal quota:
//!   gangs of other queues of the cohort that borrow (use more than their
//!   nominal) a resource the preemptor asks for — of lower priority only
//!   under `LowerPriority`.
//!
//! Victims are preferred most recently started first, then lower priority,
//! then id. The planner takes the first single victim that makes the
//! preemptor fit (quota and capacity, existing or launchable); otherwise it
//! adds victims in preference order until the preemptor fits, then drops
//! every victim that is not needed (least preferred first). If even all
//! candidates do not make it fit, nobody is preempted.

use crate::admission::try_gang;
use crate::decided::Cycle;
use crate::index::World;
use crate::model::{GangPhase, PreemptionPolicy, ReclaimPolicy};
use crate::plan::PreemptionReason;
use crate::quota::QuotaBook;

/// Most candidates considered (deterministic cut-off for large clusters).
const MAX_CANDIDATES: usize = 64;

/// The node and requests of every assigned pod of gang `vi`.
fn placed_pods<'a>(w: &World<'a>, vi: usize) -> Vec<(usize, &'a crate::resources::Resources)> {
    let g = w.gangs[vi].gang;
    w.gangs[vi]
        .assigned
        .iter()
        .zip(&w.gangs[vi].assigned_sets)
        .filter_map(|(&at, &si)| Some((at?, &g.pod_sets.get(si?)?.requests)))
        .collect()
}

fn unhold(w: &mut World<'_>, book: &mut QuotaBook, vi: usize) {
    for (ni, requests) in placed_pods(w, vi) {
        w.give(ni, requests, 1);
    }
    if let Some(q) = w.gangs[vi].queue {
        let amounts = held(w, book, vi, q);
        book.sub(q, &amounts);
    }
}

fn rehold(w: &mut World<'_>, book: &mut QuotaBook, vi: usize) {
    for (ni, requests) in placed_pods(w, vi) {
        w.take(ni, requests, 1);
    }
    if let Some(q) = w.gangs[vi].queue {
        let amounts = held(w, book, vi, q);
        book.add(q, &amounts);
    }
}

fn held(
    w: &World<'_>,
    book: &QuotaBook,
    vi: usize,
    q: usize,
) -> std::collections::BTreeMap<crate::model::QuotaResource, u64> {
    let g = w.gangs[vi].gang;
    if g.assignments.is_empty() {
        return book.amounts(q, g.pod_sets.iter().map(|p| (&p.requests, p.count, None)));
    }
    book.amounts(
        q,
        g.assignments
            .iter()
            .zip(&w.gangs[vi].assigned)
            .filter_map(|(a, &at)| {
                let ps = g.pod_set(&a.pod_set)?;
                let model = at.and_then(|ni| w.nodes[ni].node.gpu_model.as_ref());
                Some((&ps.requests, 1, model))
            }),
    )
}

fn fits_without(w: &mut World<'_>, book: &mut QuotaBook, gi: usize, victims: &[usize]) -> bool {
    for &v in victims {
        unhold(w, book, v);
    }
    let ok = try_gang(w, book, gi, false).is_ok();
    for &v in victims.iter().rev() {
        rehold(w, book, v);
    }
    ok
}

/// Chooses victims for gang `gi`, or None when preemption would not help.
pub(crate) fn choose(
    w: &mut World<'_>,
    book: &mut QuotaBook,
    cx: &Cycle,
    gi: usize,
) -> Option<Vec<(usize, PreemptionReason)>> {
    let q = w.gangs[gi].queue?;
    let queue = w.queues[q];
    let me = w.gangs[gi].gang;
    let want = book.amounts(q, me.pod_sets.iter().map(|p| (&p.requests, p.count, None)));
    let mut cands: Vec<(usize, PreemptionReason)> = Vec::new();
    let eligible = |w: &World<'_>, vi: usize| {
        let g = &w.gangs[vi];
        vi != gi
            && g.holds
            && matches!(g.gang.phase, GangPhase::Admitted | GangPhase::Running)
            && !cx.victims.contains(&vi)
            && !cx.outcome.contains_key(&vi)
    };
    if queue.preemption == PreemptionPolicy::LowerPriority {
        for vi in 0..w.gangs.len() {
            if eligible(w, vi)
                && w.gangs[vi].queue == Some(q)
                && w.gangs[vi].gang.priority < me.priority
            {
                cands.push((vi, PreemptionReason::WithinQueue));
            }
        }
    }
    if queue.reclaim != ReclaimPolicy::Never
        && queue.cohort.is_some()
        && book.within_nominal(q, &want)
    {
        for vi in 0..w.gangs.len() {
            let Some(vq) = w.gangs[vi].queue else {
                continue;
            };
            if vq == q || !book.cohort_members[q].contains(&vq) || !eligible(w, vi) {
                continue;
            }
            if queue.reclaim == ReclaimPolicy::LowerPriority
                && w.gangs[vi].gang.priority >= me.priority
            {
                continue;
            }
            if book.borrowing_any(vq, &want) {
                cands.push((vi, PreemptionReason::ReclaimWithinCohort));
            }
        }
    }
    if cands.is_empty() {
        return None;
    }
    cands.sort_by(|&(a, _), &(b, _)| {
        let (x, y) = (w.gangs[a].gang, w.gangs[b].gang);
        let start =
            |g: &crate::model::Gang| g.started_at.or(g.admitted_at).map_or(i64::MAX, |t| t.0);
        start(y)
            .cmp(&start(x))
            .then(x.priority.cmp(&y.priority))
            .then(x.id.cmp(&y.id))
    });
    cands.truncate(MAX_CANDIDATES);
    for &(v, r) in &cands {
        if fits_without(w, book, gi, &[v]) {
            return Some(vec![(v, r)]);
        }
    }
    let mut chosen: Vec<(usize, PreemptionReason)> = Vec::new();
    let mut fits = false;
    for &c in &cands {
        chosen.push(c);
        let ids: Vec<usize> = chosen.iter().map(|c| c.0).collect();
        if fits_without(w, book, gi, &ids) {
            fits = true;
            break;
        }
    }
    if !fits {
        return None;
    }
    let mut i = chosen.len();
    while i > 0 {
        i -= 1;
        let mut without = chosen.clone();
        without.remove(i);
        let ids: Vec<usize> = without.iter().map(|c| c.0).collect();
        if !ids.is_empty() && fits_without(w, book, gi, &ids) {
            chosen = without;
        }
    }
    Some(chosen)
}
