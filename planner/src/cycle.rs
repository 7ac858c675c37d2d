//! One planning cycle, in order:
//! 1. Provisioning gangs: hand Ready nodes to earlier gangs of the same
//!    shape still waiting for theirs ([`crate::handover`]); start those
//!    still waiting on Ready nodes that freed room for them, cancelling
//!    their machines in flight ([`crate::freed_room`]); admit those
//!    whose nodes are all Ready; re-plan
//!    those that lost a node; time out those past their deadline.
//! 2. Pending gangs in fair-share order ([`crate::order`]): quota, existing
//!    capacity, launch; preemption when that fails.
//! 3. Releases: nodes of timed-out gangs (handed to the gang that took them,
//!    if any), orphan reservations, reservations of pending gangs not used.
//! 4. Scale to zero, then consolidation, on what is left.
//! 5. A `Waiting` entry, with its position in its queue, for every gang not
//!    admitted or launched.
//! 6. Idle GPU holders ([`crate::idle`]), but for gangs preempted above.
//!
//! Step 2 can be traced: every try of the fair-share loop is recorded with
//! the gang it was for, and a later cycle may be given that trace to take
//! tries over from it instead of computing them again (`replay.rs`; see
//! [`crate::incremental`] for when that is allowed).

use std::collections::BTreeMap;

use crate::admission::{
    Decision, commit, commit_again, commit_counted, fail_message, released_label, try_gang,
};
use crate::decided::{Cycle, Outcome};
use crate::index::{ProvState, ReleasedFrom, World};
use crate::model::{Assignment, QueueingStrategy, QuotaResource};
use crate::order::{Blocker, Cursor, pick, within_queue_cmp};
use crate::plan::{Admission, Plan, Preemption, Release, ReleaseReason, WaitReason, Waiting};
use crate::quota::QuotaBook;
use crate::replay::{Replay, Trace};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;
use crate::{consolidation, preemption, scale_to_zero};

/// Runs one cycle.
pub(crate) fn run(s: &Snapshot, policy: &Policy, now: Time) -> Plan {
    let mut trace = Trace::default();
    run_traced(s, policy, now, &mut trace)
}

/// Runs one cycle, taking tries over from `trace.earlier` where allowed and
/// recording this cycle's tries when `trace.record` is set.
///
/// Taking a try over is exact when the working state before the loop is
/// the same as in the earlier cycle: the state before step `t` is then the
/// same too (the same gangs were committed before it the same way), and a
/// try is a function of that state and of its gang.
pub(crate) fn run_traced(s: &Snapshot, policy: &Policy, now: Time, trace: &mut Trace) -> Plan {
    let mut w = World::build(s, policy, now);
    let scratch = trace.carried.take().map(|c| w.carry_in(c));
    let mut book = QuotaBook::build(&w);
    let mut cx = Cycle {
        retimed: trace.earlier_now.is_some_and(|t| t != now),
        ..Cycle::default()
    };

    crate::capacity_end::plan(&mut w, &mut cx);
    drained_gangs(&w, &mut cx);
    provisioning_gangs(&mut w, &mut book, &mut cx);
    pending_gangs(&mut w, &mut book, &mut cx, trace);
    releases(&w, &mut cx);
    scale_to_zero::plan(&mut w, &mut cx);
    consolidation::plan(&mut w, &mut cx);
    waiting(&w, &mut cx);
    if trace.record {
        trace.carried = Some(w.carry_out(scratch));
    }
    let mut plan = cx.plan;
    plan.idle = crate::idle::decide(s, policy, now)
        .into_iter()
        .filter(|i| !plan.preemptions.iter().any(|p| p.victim == i.gang))
        .collect();
    plan
}

/// Every gang that holds capacity in a drained queue (`stopPolicy:
/// HoldAndDrain`, as Kueue's) is evicted whole and queued again, where the
/// queue's hold keeps it until the policy is lifted; in gang order.
fn drained_gangs(w: &World<'_>, cx: &mut Cycle) {
    for (gi, wg) in w.gangs.iter().enumerate() {
        let Some(q) = wg.queue else {
            continue;
        };
        if !(w.queues[q].stopped && w.queues[q].drain && wg.gang.phase.holds_capacity()) {
            continue;
        }
        cx.victims.insert(gi);
        cx.plan.preemptions.push(crate::plan::Preemption {
            victim: wg.gang.id.clone(),
            for_gang: wg.gang.id.clone(),
            reason: crate::plan::PreemptionReason::QueueDrained,
            message: format!(
                "queue {} is drained by its spec.stopPolicy HoldAndDrain: {} is evicted whole and waits, queued, until spec.stopPolicy is None",
                wg.gang.queue, wg.gang.id
            ),
        });
    }
}

fn provisioning_gangs(w: &mut World<'_>, book: &mut QuotaBook, cx: &mut Cycle) {
    crate::handover::plan(w, cx);
    crate::freed_room::plan(w, book, cx);
    for gi in 0..w.gangs.len() {
        if cx.outcome.contains_key(&gi) || cx.victims.contains(&gi) {
            continue;
        }
        let g = w.gangs[gi].gang;
        match w.gangs[gi].prov {
            ProvState::None => {}
            ProvState::AllReady if !g.assignments.is_empty() => {
                let mut assignments: Vec<Assignment> = g.assignments.clone();
                assignments.sort();
                cx.plan.admissions.push(Admission {
                    gang: g.id.clone(),
                    assignments,
                });
                cx.outcome.insert(gi, Outcome::Admitted);
            }
            ProvState::Waiting | ProvState::AllReady => {
                let mut pending: Vec<&str> = Vec::new();
                for &ni in w.gangs[gi].assigned.iter().flatten() {
                    if !w.nodes[ni].node.schedulable()
                        && !pending.contains(&w.nodes[ni].node.name.as_str())
                    {
                        pending.push(&w.nodes[ni].node.name);
                    }
                }
                pending.sort_unstable();
                let deadline = g
                    .provisioning_deadline
                    .map_or(String::new(), |d| {
                        format!(
                            "; released and planned again if not all Ready by its deadline, {} from now",
                            d.since(w.now)
                        )
                    });
                cx.wait(
                    gi,
                    WaitReason::Provisioning,
                    format!(
                        "waiting for {} node(s) to become Ready: {}{deadline}",
                        pending.len(),
                        pending.join(", ")
                    ),
                );
            }
            ProvState::TimedOut => {
                cx.wait(
                    gi,
                    WaitReason::ProvisioningTimeout,
                    format!(
                        "its capacity was not all Ready by its provisioning deadline ({} ago): the nodes are released and the gang queues again; if this repeats, the PoolNodes' Events say why (launch errors, nodes that never register or never turn Ready)",
                        w.now.since(g.provisioning_deadline.unwrap_or(w.now))
                    ),
                );
            }
            ProvState::Replan => {}
        }
    }
    // Re-plans: a node the gang was promised is gone.
    for gi in 0..w.gangs.len() {
        if w.gangs[gi].prov != ProvState::Replan {
            continue;
        }
        let g = w.gangs[gi].gang;
        let reserved: Vec<usize> = w.gangs[gi].reserved.clone();
        match try_gang(w, book, gi, true) {
            Ok(a) => {
                commit(w, book, cx, gi, &a);
                let used = cx.used_nodes.get(&gi).cloned().unwrap_or_default();
                let unused: Vec<String> = reserved
                    .iter()
                    .filter(|ni| !used.contains(ni))
                    .map(|&ni| w.nodes[ni].node.name.clone())
                    .collect();
                if !unused.is_empty() {
                    cx.plan.releases.push(Release {
                        gang: g.id.clone(),
                        nodes: unused,
                        reason: ReleaseReason::Replanned,
                        handed_to: None,
                        message: "a node of the launch set is gone; the gang was planned again and no longer needs these".into(),
                    });
                }
                if let Decision::Launch(_) = a.decision
                    && let Some(l) = cx.plan.launches.last_mut()
                {
                    l.message = format!("re-planned after losing a node: {}", l.message);
                }
            }
            Err((f, counts)) => {
                let names: Vec<String> = reserved
                    .iter()
                    .map(|&ni| w.nodes[ni].node.name.clone())
                    .collect();
                for &ni in &reserved {
                    w.nodes[ni].exclusive = None;
                }
                {
                    cx.plan.releases.push(Release {
                        gang: g.id.clone(),
                        nodes: names,
                        reason: ReleaseReason::Replanned,
                        handed_to: None,
                        message: "a node of the launch set is gone and no other capacity holds the gang; everything is released".into(),
                    });
                }
                let m = fail_message(w, gi, &f, &counts);
                cx.wait(
                    gi,
                    f.reason(),
                    format!("lost a node while provisioning; {m}"),
                );
            }
        }
    }
}

fn blocker_for(
    w: &mut World<'_>,
    book: &QuotaBook,
    gi: usize,
    reason: WaitReason,
    quota: Vec<QuotaResource>,
) -> Blocker {
    let g = w.gangs[gi].gang;
    let q = w.gangs[gi].queue;
    let capacity = matches!(
        reason,
        WaitReason::NoOffering
            | WaitReason::PoolLimit
            | WaitReason::LaunchBudget
            | WaitReason::Preempting
    );
    let quota = if reason == WaitReason::Preempting {
        q.map(|q| {
            book.amounts(q, g.pod_sets.iter().map(|p| (&p.requests, p.count, None)))
                .into_keys()
                .collect()
        })
        .unwrap_or_default()
    } else {
        quota
    };
    let nodes = if capacity {
        (0..g.pod_sets.len())
            .map(|si| w.eligible_nodes(gi, si))
            .collect()
    } else {
        Vec::new()
    };
    Blocker {
        gang: gi,
        quota,
        nodes,
        pools: w.queue_pools(q),
        capacity,
        any_launch: reason == WaitReason::LaunchBudget,
    }
}

fn pending_gangs(w: &mut World<'_>, book: &mut QuotaBook, cx: &mut Cycle, trace: &mut Trace) {
    let now = w.now;
    let mut per_queue: Vec<Vec<usize>> = vec![Vec::new(); w.queues.len()];
    for gi in 0..w.gangs.len() {
        let g = w.gangs[gi].gang;
        if !g.phase.pending() || cx.outcome.contains_key(&gi) {
            continue;
        }
        let Some(q) = w.gangs[gi].queue else {
            cx.wait(
                gi,
                WaitReason::UnknownQueue,
                format!(
                    "queue {} does not exist: create the GPUQueue, or set the Job's muster.dev/queue label to one that exists (kubectl get gpuqueues)",
                    g.queue
                ),
            );
            continue;
        };
        if w.queues[q].stopped {
            cx.wait(
                gi,
                WaitReason::QueueStopped,
                format!(
                    "queue {} is stopped by its spec.stopPolicy: it admits nothing new until spec.stopPolicy is None",
                    g.queue
                ),
            );
            continue;
        }
        if crate::time_facts::in_backoff(g, now)
            && let Some(t) = g.not_before
        {
            cx.wait(
                gi,
                WaitReason::Backoff,
                format!(
                    "evicted {} time(s); queues again in {} (the backoff doubles with each eviction; the Gang's Events say why it was evicted)",
                    g.evictions,
                    t.since(now)
                ),
            );
            continue;
        }
        per_queue[q].push(gi);
    }
    let mut cursors: Vec<Cursor> = per_queue
        .into_iter()
        .enumerate()
        .map(|(q, mut gangs)| {
            gangs.sort_by(|&a, &b| within_queue_cmp(w, a, b));
            Cursor {
                gangs,
                pos: 0,
                strict_blocked: None,
                blockers: Vec::new(),
                strategy: w.queues[q].strategy,
            }
        })
        .collect();
    let mut replay = Replay::new(trace, w, book);
    while let Some(q) = pick(w, book, &cursors) {
        let gi = cursors[q].gangs[cursors[q].pos];
        cursors[q].pos += 1;
        let mut turn = replay.turn(trace, w, book, gi);
        let tried = match turn.tried() {
            Some(t) => t,
            None => try_gang(w, book, gi, false),
        };
        replay.tried(&mut turn, w, book, gi, &tried);
        replay.reuse(trace, &mut turn, &tried);
        let mut committed = false;
        let mut names_clean = true;
        let mut unused = turn.made.take();
        match &tried {
            Ok(a) => {
                let blocked_by = cursors[q]
                    .blockers
                    .iter()
                    .find(|b| b.delayed_by(w, a))
                    .map(|b| b.gang);
                if let Some(h) = blocked_by {
                    cx.wait(
                        gi,
                        WaitReason::BehindHead,
                        format!(
                            "fits, but would delay {} which waits ahead of it in queue {} (BestEffortFIFO)",
                            w.gangs[h].gang.id, w.queues[q].name
                        ),
                    );
                } else {
                    let added = turn.take_added();
                    let (clean, amounts) = match unused.take() {
                        Some(m) => {
                            let (_, amounts) = commit_again(w, book, cx, gi, a, m, added);
                            (turn.names_clean(), amounts)
                        }
                        None => commit_counted(w, book, cx, gi, a),
                    };
                    names_clean = clean;
                    turn.added = amounts;
                    committed = true;
                }
            }
            Err((fail, counts)) => {
                let mut reason = fail.reason();
                let mut message = fail_message(w, gi, fail, counts);
                if reason != WaitReason::Unsatisfiable
                    && let Some(victims) = preemption::choose(w, book, cx, gi)
                {
                    let names: Vec<String> = victims
                        .iter()
                        .map(|(v, _)| w.gangs[*v].gang.id.to_string())
                        .collect();
                    for (v, r) in &victims {
                        cx.victims.insert(*v);
                        cx.plan.preemptions.push(crate::plan::Preemption {
                            victim: w.gangs[*v].gang.id.clone(),
                            for_gang: w.gangs[gi].gang.id.clone(),
                            reason: *r,
                            message: format!(
                                "{} (priority {}) is evicted so {} (priority {}) fits: {}",
                                w.gangs[*v].gang.id,
                                w.gangs[*v].gang.priority,
                                w.gangs[gi].gang.id,
                                w.gangs[gi].gang.priority,
                                message
                            ),
                        });
                    }
                    reason = WaitReason::Preempting;
                    message = format!("{message}; preempting {}", names.join(", "));
                }
                cx.wait(gi, reason, message);
                if reason != WaitReason::Unsatisfiable {
                    let quota = match &fail {
                        crate::admission::Fail::Quota { all, .. } => all.clone(),
                        _ => Vec::new(),
                    };
                    match cursors[q].strategy {
                        QueueingStrategy::StrictFifo => cursors[q].strict_blocked = Some(gi),
                        QueueingStrategy::BestEffortFifo => {
                            let b = blocker_for(w, book, gi, reason, quota);
                            cursors[q].blockers.push(b);
                        }
                    }
                }
            }
        }
        replay.done(
            trace,
            w,
            cx,
            gi,
            q,
            turn,
            tried,
            committed,
            names_clean,
            unused,
        );
    }
    for c in &cursors {
        if let Some(h) = c.strict_blocked {
            for &gi in &c.gangs[c.pos..] {
                let g = w.gangs[gi].gang;
                cx.wait(
                    gi,
                    WaitReason::BehindHead,
                    format!(
                        "behind {} which blocks queue {} (StrictFIFO)",
                        w.gangs[h].gang.id, g.queue
                    ),
                );
            }
        }
    }
}

fn releases(w: &World<'_>, cx: &mut Cycle) {
    // (from gang label, recipient) -> nodes
    let mut groups: BTreeMap<(String, Option<usize>, ReleaseReason), Vec<String>> = BTreeMap::new();
    for (ni, n) in w.nodes.iter().enumerate() {
        let (label, reason) = match &n.released_from {
            Some(r @ ReleasedFrom::Timeout(_)) => {
                (released_label(w, r).0, ReleaseReason::ProvisioningTimeout)
            }
            Some(r @ ReleasedFrom::Orphan(_)) => {
                (released_label(w, r).0, ReleaseReason::NoLongerNeeded)
            }
            None => match n.exclusive {
                // A pending gang's leftover reservation it did not use.
                Some(gi)
                    if w.gangs[gi].gang.phase.pending()
                        && !cx.used_nodes.get(&gi).is_some_and(|u| u.contains(&ni)) =>
                {
                    (w.gangs[gi].gang.id.0.clone(), ReleaseReason::NoLongerNeeded)
                }
                _ => continue,
            },
        };
        let to = cx.handed.get(&ni).copied();
        groups
            .entry((label, to, reason))
            .or_default()
            .push(n.node.name.clone());
    }
    // Every timed-out gang gets a release, even without nodes reserved for
    // it, so the driver returns it to the queue.
    for (gi, g) in w.gangs.iter().enumerate() {
        if g.prov == ProvState::TimedOut
            && !groups.keys().any(|(label, _, r)| {
                *label == g.gang.id.0 && *r == ReleaseReason::ProvisioningTimeout
            })
        {
            let _ = gi;
            groups
                .entry((
                    g.gang.id.0.clone(),
                    None,
                    ReleaseReason::ProvisioningTimeout,
                ))
                .or_default();
        }
    }
    for ((label, to, reason), nodes) in groups {
        let handed_to = to.map(|gi| w.gangs[gi].gang.id.clone());
        let message = match (&handed_to, reason) {
            (Some(h), _) => format!("handed to {h}, which fits on them"),
            (None, ReleaseReason::ProvisioningTimeout) => {
                "the gang's capacity was not complete by its deadline; in-flight nodes are cancelled, Ready ones freed".into()
            }
            (None, _) => "the gang holding these nodes no longer needs them".into(),
        };
        cx.plan.releases.push(Release {
            gang: crate::model::GangId(label),
            nodes,
            reason,
            handed_to,
            message,
        });
    }
}

fn waiting(w: &World<'_>, cx: &mut Cycle) {
    let mut by_queue: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (gi, o) in cx.outcome.iter() {
        if let Outcome::Waiting(..) = o {
            by_queue
                .entry(w.gangs[gi].gang.queue.clone())
                .or_default()
                .push(gi);
        }
    }
    for (queue, mut gangs) in by_queue {
        gangs.sort_by(|&a, &b| within_queue_cmp(w, a, b));
        for (pos, gi) in gangs.into_iter().enumerate() {
            if let Some(Outcome::Waiting(reason, message)) = cx.outcome.get(&gi) {
                cx.plan.waiting.push(Waiting {
                    gang: w.gangs[gi].gang.id.clone(),
                    queue: queue.clone(),
                    position: u32::try_from(pos + 1).unwrap_or(u32::MAX),
                    reason: *reason,
                    message: message.clone(),
                });
            }
        }
    }
    let _ = Preemption::clone;
}
