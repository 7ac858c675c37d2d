//! Freed room: a Provisioning gang still waiting for machines in flight
//! starts at once when Ready nodes have room for all of it, and its
//! machines in flight are released (the driver cancels them).
//!
//! A job that ends frees its node while later gangs wait for their own
//! machines to boot. kube-scheduler binds a pending pod to whichever node
//! has room first, so a Karpenter or Cluster Autoscaler cluster starts that
//! pod on the freed node and the machine launched for it comes up empty;
//! muster's gangs hold the machines launched for them, and without this
//! step they would wait out the boot next to a free node. Taking the freed
//! room costs nothing more: the machine in flight is cancelled (paid only
//! for its boot so far), and the free node would otherwise sit empty for
//! its pool's `consolidateAfter`.
//!
//! The room is searched as a pending gang's would be ([`crate::admission`]):
//! at the size the gang holds, on nodes no bigger than its size class under
//! size-matched placement, and never on an idle node a launch of its own
//! would have avoided (`Policy::own_machine_below_percent`), nor on empty
//! nodes kept warm (`keepWarm`): those wait for arrivals that would
//! otherwise boot a machine whole. Its own Ready nodes count as room. The
//! search runs only while a Ready node (not kept warm) has room for one of
//! the gang's pods that the gang did not see when it was launched: an
//! empty node (a gang ending frees room), or a node that turned Ready
//! since, with room beyond what the gang it was launched for takes (two
//! 2-GPU jobs where machines have 4 GPUs: the second starts beside the
//! first, as kube-scheduler would bind it). Without either, a waiting gang
//! finds no more than it found when it was launched.
//! Gangs go in queue order, so the oldest waiting gang gets a node that
//! frees first. `Policy::start_on_freed_room` turns it off.

use std::ops::Not as _;

use crate::admission::{Attempt, Decision, commit};
use crate::decided::{Cycle, Outcome, node_set};
use crate::handover::{eligible_on, held_nodes, last_same_shape_after, node_names, take_over};
use crate::hole;
use crate::index::{ProvState, World};
use crate::order::within_queue_cmp;
use crate::placement::{Scope, groups_for, place};
use crate::plan::{Release, ReleaseReason};
use crate::quota::QuotaBook;
use crate::time::Time;

/// Admits every Waiting gang that fits on Ready nodes now, releasing the
/// nodes it held and no longer uses.
pub(crate) fn plan(w: &mut World<'_>, book: &mut QuotaBook, cx: &mut Cycle) {
    if !w.policy.start_on_freed_room {
        return;
    }
    let mut waiting: Vec<usize> = (0..w.gangs.len())
        .filter(|gi| {
            let g = &w.gangs[*gi];
            g.prov == ProvState::Waiting
                && !g.gang.assignments.is_empty()
                && g.assigned.iter().all(Option::is_some)
                && !cx.outcome.contains_key(gi)
                && !cx.victims.contains(gi)
        })
        .collect();
    if waiting.is_empty() {
        return;
    }
    // Empty nodes kept warm wait for the next arrivals, which would boot a
    // machine whole without them; a gang already waiting has part of its
    // boot behind it, so it does not take them.
    let mut warm: Vec<usize> = (0..w.pools.len())
        .flat_map(|p| crate::warm::kept(w, p))
        .map(|k| k.node)
        .collect();
    warm.sort_unstable();
    // Room a waiting gang did not have when it was launched: a gang ending
    // leaves its node empty, and a machine launched for another gang comes
    // up Ready with more room than that gang takes (two 2-GPU jobs where
    // machines have 4 GPUs). Without either (outside the warm nodes), a
    // waiting gang finds no more room than it found when it was launched,
    // and nothing is searched.
    let mut empty_gpus: Option<u64> = None;
    let mut fresh: Vec<(Time, u64)> = Vec::new();
    for (ni, n) in w.nodes.iter().enumerate() {
        if !n.node.schedulable()
            || n.exclusive.is_some()
            || n.free.gpu_millis == 0
            || warm.binary_search(&ni).is_ok()
        {
            continue;
        }
        if n.gangs.is_empty() && n.node.pods.iter().all(|p| p.daemon) {
            empty_gpus = empty_gpus.max(Some(n.free.gpu_millis));
        } else {
            fresh.push((n.node.phase_since, n.free.gpu_millis));
        }
    }
    let room = RoomSince::new(fresh);
    if empty_gpus.is_none() && room.is_empty() {
        return;
    }
    let empty_gpus = empty_gpus.unwrap_or(0);
    // An upper bound on the GPUs a gang could find on Ready nodes nobody
    // else holds: a gang asking for more is not searched.
    let free_gpus: u64 = w
        .nodes
        .iter()
        .filter(|n| n.node.schedulable() && n.exclusive.is_none())
        .map(|n| n.free.gpu_millis)
        .sum();
    waiting.sort_by(|a, b| within_queue_cmp(w, *a, *b));
    // Every search of the loop leaves the warm nodes out, so a packing
    // failure one finds holds for the next (capacity only shrinks between
    // them); those found with them, before the loop, hold too.
    w.with_avoided(&warm, |w| {
        // Gangs alike (queue, pod sets, sizes, topology) whose search
        // failed: room only shrinks during the loop, so the next one fails
        // too.
        let mut failed: Vec<Alike> = Vec::new();
        for gi in waiting {
            let g = w.gangs[gi].gang;
            let per_pod = g
                .pod_sets
                .iter()
                .map(|ps| ps.requests.gpu_millis)
                .max()
                .unwrap_or(0);
            let room_gpus = empty_gpus.max(room.most_since(launched_at(w, gi)));
            if per_pod > room_gpus || held_gpus(w, gi) > free_gpus {
                continue;
            }
            // (a gang with Ready nodes of its own has room no other has)
            let alike = holds_ready(w, gi).not().then(|| Alike {
                queue: w.gangs[gi].queue,
                sigs: w.gang_sigs(gi),
                counts: w.gangs[gi].held.clone(),
                topology: g.topology,
            });
            if alike.as_ref().is_some_and(|a| failed.contains(a)) {
                continue;
            }
            if !try_move(w, book, cx, gi)
                && let Some(a) = alike
            {
                failed.push(a);
            }
        }
    });
}

/// Free GPUs on Ready nodes that are not empty, by when each turned Ready.
struct RoomSince {
    /// Ready time, latest first, with the most free GPUs (milli) on any
    /// node Ready at that time or later.
    latest_first: Vec<(Time, u64)>,
}

impl RoomSince {
    fn new(mut nodes: Vec<(Time, u64)>) -> RoomSince {
        nodes.sort_unstable_by_key(|n| std::cmp::Reverse(n.0));
        let mut most = 0;
        for (_, free) in &mut nodes {
            most = most.max(*free);
            *free = most;
        }
        RoomSince {
            latest_first: nodes,
        }
    }

    fn is_empty(&self) -> bool {
        self.latest_first.is_empty()
    }

    /// The most free GPUs on one node that turned Ready after `t`.
    fn most_since(&self, t: Time) -> u64 {
        let n = self.latest_first.partition_point(|&(at, _)| at > t);
        n.checked_sub(1)
            .and_then(|i| self.latest_first.get(i))
            .map_or(0, |&(_, most)| most)
    }
}

/// When the gang's machines still in flight were launched (the earliest):
/// room on nodes Ready since then is room it did not see.
fn launched_at(w: &World<'_>, gi: usize) -> Time {
    w.gangs[gi]
        .assigned
        .iter()
        .flatten()
        .map(|&ni| &w.nodes[ni].node)
        .filter(|n| !n.schedulable())
        .map(|n| n.created_at)
        .min()
        .unwrap_or(w.now)
}

/// GPUs (milli) the gang holds.
fn held_gpus(w: &World<'_>, gi: usize) -> u64 {
    let g = &w.gangs[gi];
    g.assigned_sets
        .iter()
        .flatten()
        .map(|&si| g.gang.pod_sets[si].requests.gpu_millis)
        .sum()
}

/// Whether gang `gi` holds a Ready node.
fn holds_ready(w: &World<'_>, gi: usize) -> bool {
    w.gangs[gi]
        .assigned
        .iter()
        .flatten()
        .any(|&ni| w.nodes[ni].node.schedulable())
}

/// What makes two waiting gangs' searches the same search.
#[derive(PartialEq)]
struct Alike {
    queue: Option<usize>,
    sigs: Vec<u32>,
    counts: Vec<u32>,
    topology: crate::model::Topology,
}

/// Moves gang `gi` when Ready nodes have room for it; false when they have
/// none (the search failed).
fn try_move(w: &mut World<'_>, book: &mut QuotaBook, cx: &mut Cycle, gi: usize) -> bool {
    let Some(q) = w.gangs[gi].queue else {
        return true;
    };
    let gang = w.gangs[gi].gang;
    let held: Vec<(usize, usize)> = w.gangs[gi]
        .assigned_sets
        .iter()
        .zip(&w.gangs[gi].assigned)
        .filter_map(|(si, at)| Some(((*si)?, (*at)?)))
        .collect();
    // Its pods leave its Ready nodes for the search (they count as room),
    // and come back when nothing is found.
    let (ready, in_flight): (Vec<_>, Vec<_>) = held
        .iter()
        .partition(|&&(_, ni)| w.nodes[ni].node.schedulable());
    for &(si, ni) in &ready {
        w.give(ni, &gang.pod_sets[si].requests, 1);
    }
    let counts = w.gangs[gi].held.clone();
    let groups = groups_for(w, gi, &counts);
    let gpu: u64 = groups
        .iter()
        .map(|g| g.shape.gpu_millis.saturating_mul(u64::from(g.count)))
        .sum();
    // What the gang holds leaves the quota book too, for the search; the
    // commit adds what it takes.
    let old = book.held_of(w, q, gi);
    book.sub(q, &old);
    let generic = book.amounts(
        q,
        groups
            .iter()
            .map(|g| (&gang.pod_sets[g.set].requests, g.count, None)),
    );
    let excluded = if book.check(q, &generic).is_ok() {
        Some(book.excluded_models(q, gpu))
    } else {
        None
    };
    let found = excluded
        .and_then(|excluded| search(w, gi, &groups, &excluded))
        // nothing is gained unless it takes a node it does not hold
        .filter(|takes| {
            takes
                .iter()
                .any(|t| !ready.iter().any(|&(_, ni)| ni == t.node))
        });
    let Some(takes) = found else {
        for &(si, ni) in &ready {
            w.take(ni, &gang.pod_sets[si].requests, 1);
        }
        book.add(q, &old);
        return false;
    };
    // the gang's pods leave the nodes in flight it held
    for &(si, ni) in &in_flight {
        w.give(ni, &gang.pod_sets[si].requests, 1);
    }
    let attempt = Attempt {
        groups,
        decision: Decision::Admit(takes),
        generic,
    };
    commit(w, book, cx, gi, &attempt);
    let used = cx.used_nodes.get(&gi).cloned().unwrap_or_default();
    let mut left: Vec<usize> = held
        .iter()
        .map(|&(_, ni)| ni)
        .chain(w.gangs[gi].reserved.iter().copied())
        .filter(|ni| !used.contains(ni))
        .collect();
    left.sort_unstable();
    left.dedup();
    if left.is_empty() {
        return true;
    }
    if let Some((late, late_nodes)) = hand_on_to(w, cx, gi, &left) {
        let (g, gl) = (w.gangs[gi].gang, w.gangs[late].gang);
        cx.plan.releases.push(Release {
            gang: g.id.clone(),
            nodes: node_names(w, &left),
            reason: ReleaseReason::Replanned,
            handed_to: Some(gl.id.clone()),
            message: format!(
                "Ready nodes freed room for the whole gang, which starts there now; its nodes in flight go to {}, launched after them",
                gl.id
            ),
        });
        cx.plan.releases.push(Release {
            gang: gl.id.clone(),
            nodes: node_names(w, &late_nodes),
            reason: ReleaseReason::Replanned,
            handed_to: None,
            message: format!(
                "the gang takes over the nodes in flight of {}, launched earlier; these are cancelled",
                g.id
            ),
        });
        cx.plan.launches.push(take_over(
            w,
            gi,
            late,
            &left,
            "which started on Ready nodes that freed room",
        ));
        // the same shape: the later gang's pods take the room the moved
        // gang's pods had on those nodes
        for &(si, ni) in &held {
            w.take(ni, &gl.pod_sets[si].requests, 1);
        }
        for &ni in &left {
            w.nodes[ni].exclusive = Some(late);
        }
        cx.record_used(late, node_set(left));
        cx.outcome.insert(late, Outcome::Launched);
        return true;
    }
    cx.plan.releases.push(Release {
        gang: gang.id.clone(),
        nodes: node_names(w, &left),
        reason: ReleaseReason::Replanned,
        handed_to: None,
        message: "Ready nodes freed room for the whole gang, which starts there now; its nodes in flight are cancelled, as no gang waits for machines like them".into(),
    });
    true
}

/// The gang that takes over `left`, the nodes in flight moved gang `gi`
/// no longer needs, with the nodes it gives up: the last in queue order
/// of the gangs of the same shape still waiting for nodes all in flight
/// (launched after `gi`'s, as a rule), when every node of each is eligible
/// for the other's pods. Its own nodes, younger, are cancelled instead, so
/// the machine closest to Ready keeps booting for a gang that waits.
fn hand_on_to(
    w: &mut World<'_>,
    cx: &Cycle,
    gi: usize,
    left: &[usize],
) -> Option<(usize, Vec<usize>)> {
    let own = held_nodes(w, gi)?;
    // only a gang that gave up all it held hands it on whole
    if own != left
        || own
            .iter()
            .any(|&ni| w.nodes[ni].node.schedulable() || w.nodes[ni].given_up)
    {
        return None;
    }
    let waiting: Vec<usize> = (0..w.gangs.len())
        .filter(|&o| {
            w.gangs[o].prov == ProvState::Waiting
                && !cx.outcome.contains_key(&o)
                && !cx.victims.contains(&o)
        })
        .collect();
    last_same_shape_after(w, gi, &waiting, |w, late, late_nodes| {
        !late_nodes.iter().any(|&ni| w.nodes[ni].node.schedulable()) && eligible_on(w, late, left)
    })
}

/// Room for the whole gang on Ready nodes, as a pending gang would look for
/// it: under size-matched placement no bigger node than its size class
/// but the reserved machines admission leaves open to it
/// (`hole::size_matched`), and no idle node a launch of its own would
/// avoid. (Warm nodes are in `World::avoid`.)
fn search(
    w: &mut World<'_>,
    gi: usize,
    groups: &[crate::placement::Group],
    excluded: &[crate::model::GpuModel],
) -> Option<Vec<crate::takes::Take>> {
    let scope = Scope::anywhere(gi, excluded);
    w.flush_index();
    let topology = w.gangs[gi].gang.topology;
    let found = match hole::matched_class(w, gi, groups) {
        Some(c) => hole::size_matched(w, c, |w| place(w, groups, topology, &scope)),
        None => place(w, groups, topology, &scope),
    };
    found.filter(|takes| {
        w.policy.own_machine_below_percent == 0 || hole::idle_hosts(w, takes).is_empty()
    })
}
