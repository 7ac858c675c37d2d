//! Handover between Provisioning gangs of the same shape: when a gang's
//! nodes are all Ready while an earlier gang of the same shape still waits
//! for its own, still-booting nodes, the earlier gang takes the Ready nodes
//! and is admitted now, and the later gang takes over the earlier gang's
//! nodes in flight. Nothing is launched or cancelled, so nothing more is
//! paid; the wait of the two gangs together is the same, but capacity goes
//! to the gangs in their queue order, as a scheduler binding the oldest
//! pending pod to the first node that frees would — which keeps the longest
//! waits short when boot times vary.
//!
//! "Same shape": as many pod sets, each with the same requests, count and
//! static constraints (selectors, tolerations), the same topology, and every
//! node of each gang eligible for the other's pods. The later gang keeps its
//! own deadline.

use std::collections::BTreeSet;

use crate::decided::{Cycle, Outcome, node_set};
use crate::index::{ProvState, World};
use crate::model::Assignment;
use crate::order::within_queue_cmp;
use crate::plan::{Admission, Launch, Release, ReleaseReason};

/// Nodes a Provisioning gang holds through its assignments, sorted.
pub(crate) fn held_nodes(w: &World<'_>, gi: usize) -> Option<Vec<usize>> {
    let mut out: Vec<usize> = Vec::new();
    for &ni in &w.gangs[gi].assigned {
        let ni = ni?;
        if !out.contains(&ni) {
            out.push(ni);
        }
    }
    out.sort_unstable();
    Some(out)
}

pub(crate) fn same_shape(w: &mut World<'_>, a: usize, b: usize) -> bool {
    let (ga, gb) = (w.gangs[a].gang, w.gangs[b].gang);
    if ga.topology != gb.topology
        || ga.pod_sets.len() != gb.pod_sets.len()
        || ga
            .pod_sets
            .iter()
            .zip(&gb.pod_sets)
            .any(|(x, y)| x.count != y.count || x.requests != y.requests)
    {
        return false;
    }
    w.gang_sigs(a) == w.gang_sigs(b)
}

/// True when every pod set of `gi` may run on every node of `nodes`.
pub(crate) fn eligible_on(w: &mut World<'_>, gi: usize, nodes: &[usize]) -> bool {
    (0..w.gangs[gi].gang.pod_sets.len()).all(|si| {
        let e = w.eligible_nodes(gi, si);
        nodes.iter().all(|ni| e.get(*ni).copied().unwrap_or(false))
    })
}

/// The names of `nodes`, in their order.
pub(crate) fn node_names(w: &World<'_>, nodes: &[usize]) -> Vec<String> {
    nodes
        .iter()
        .map(|&ni| w.nodes[ni].node.name.clone())
        .collect()
}

/// The gang nodes go on to: of `candidates`, the last in queue order that
/// comes after `gi`, has its shape, holds nodes through all its
/// assignments and passes `accept` (given those nodes); with the nodes.
/// Handover and freed room both hand nodes to the gang that would wait
/// longest for its own.
pub(crate) fn last_same_shape_after(
    w: &mut World<'_>,
    gi: usize,
    candidates: &[usize],
    mut accept: impl FnMut(&mut World<'_>, usize, &[usize]) -> bool,
) -> Option<(usize, Vec<usize>)> {
    let mut later: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&o| o != gi && within_queue_cmp(w, gi, o).is_lt())
        .collect();
    later.sort_by(|a, b| within_queue_cmp(w, *b, *a));
    for late in later {
        if !same_shape(w, gi, late) {
            continue;
        }
        let Some(nodes) = held_nodes(w, late) else {
            continue;
        };
        if accept(w, late, &nodes) {
            return Some((late, nodes));
        }
    }
    None
}

/// `from`'s assignments, with pod set names of gang `to` (same positions).
fn renamed(w: &World<'_>, from: usize, to: usize) -> Vec<Assignment> {
    let (gf, gt) = (w.gangs[from].gang, w.gangs[to].gang);
    let mut out: Vec<Assignment> = gf
        .assignments
        .iter()
        .zip(&w.gangs[from].assigned_sets)
        .filter_map(|(a, &si)| {
            let si = si?;
            Some(Assignment {
                pod_set: gt.pod_sets.get(si)?.name.clone(),
                index: a.index,
                node: a.node.clone(),
            })
        })
        .collect();
    out.sort();
    out
}

/// The plan item by which gang `to` takes over `nodes`, the nodes in
/// flight gang `from` (of the same shape) held: a launch of no new node
/// that reserves them, with `from`'s assignments under `to`'s pod sets and
/// `to`'s own deadline; `why` ends its message.
pub(crate) fn take_over(
    w: &World<'_>,
    from: usize,
    to: usize,
    nodes: &[usize],
    why: &str,
) -> Launch {
    let (gf, gt) = (w.gangs[from].gang, w.gangs[to].gang);
    Launch {
        gang: gt.id.clone(),
        nodes: Vec::new(),
        reserve: nodes
            .iter()
            .map(|&ni| w.nodes[ni].node.name.clone())
            .collect(),
        assignments: renamed(w, from, to),
        price_per_hour: crate::model::Price::ZERO,
        message: format!("takes over the nodes in flight of {}, {why}", gf.id),
        deadline: gt.provisioning_deadline,
    }
}

/// Plans every handover of this cycle; the gangs involved get their
/// outcome (the earlier one Admitted, the later one Launched).
pub(crate) fn plan(w: &mut World<'_>, cx: &mut Cycle) {
    // a drained queue's gangs are evicted this cycle: none takes part
    let mut waiting: Vec<usize> = (0..w.gangs.len())
        .filter(|gi| w.gangs[*gi].prov == ProvState::Waiting && !cx.victims.contains(gi))
        .collect();
    let mut ready: Vec<usize> = (0..w.gangs.len())
        .filter(|gi| {
            w.gangs[*gi].prov == ProvState::AllReady
                && !w.gangs[*gi].gang.assignments.is_empty()
                && !cx.victims.contains(gi)
        })
        .collect();
    if waiting.is_empty() || ready.is_empty() {
        return;
    }
    waiting.sort_by(|a, b| within_queue_cmp(w, *a, *b));
    ready.sort_by(|a, b| within_queue_cmp(w, *a, *b));
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    for early in waiting {
        let Some(early_nodes) = held_nodes(w, early) else {
            continue;
        };
        // a machine given up (not Ready in time) is not handed on
        if early_nodes.iter().any(|&ni| w.nodes[ni].given_up) {
            continue;
        }
        let free: Vec<usize> = ready
            .iter()
            .copied()
            .filter(|gi| !taken.contains(gi))
            .collect();
        // the latest-ordered Ready gang of the same shape, after `early`
        let Some((late, late_nodes)) = last_same_shape_after(w, early, &free, |w, late, nodes| {
            eligible_on(w, early, nodes) && eligible_on(w, late, &early_nodes)
        }) else {
            continue;
        };
        taken.insert(late);
        let (ge, gl) = (w.gangs[early].gang, w.gangs[late].gang);
        cx.plan.releases.push(Release {
            gang: gl.id.clone(),
            nodes: node_names(w, &late_nodes),
            reason: ReleaseReason::Replanned,
            handed_to: Some(ge.id.clone()),
            message: format!(
                "Ready before {}'s own nodes; handed to it, earlier in queue order",
                ge.id
            ),
        });
        cx.plan.releases.push(Release {
            gang: ge.id.clone(),
            nodes: node_names(w, &early_nodes),
            reason: ReleaseReason::Replanned,
            handed_to: Some(gl.id.clone()),
            message: format!(
                "still booting; handed to {}, which took over this gang's Ready nodes",
                gl.id
            ),
        });
        cx.plan.admissions.push(Admission {
            gang: ge.id.clone(),
            assignments: renamed(w, late, early),
        });
        cx.plan.launches.push(take_over(
            w,
            early,
            late,
            &early_nodes,
            "which was admitted on this gang's Ready nodes",
        ));
        for &ni in &late_nodes {
            w.nodes[ni].exclusive = Some(early);
        }
        for &ni in &early_nodes {
            w.nodes[ni].exclusive = Some(late);
        }
        cx.record_used(early, node_set(late_nodes));
        cx.record_used(late, node_set(early_nodes));
        cx.outcome.insert(early, Outcome::Admitted);
        cx.outcome.insert(late, Outcome::Launched);
    }
}
