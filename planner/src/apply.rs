//! A reference driver: applies a [`Plan`] to a [`Snapshot`] the way the
//! contract in [`crate::plan`] says, for a cloud where every call succeeds at
//! once. Tests and the fairness harness use it; the simulator and the
//! controller implement the same contract against their own worlds.

use std::collections::{BTreeMap, BTreeSet};

use crate::labels;
use crate::lifecycle::record::{self, GangRecord, Seen};
use crate::model::{GangId, Node, NodePhase, Offering};
use crate::plan::{Plan, RemovalKind};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;

fn new_node(s: &Snapshot, nn: &crate::plan::NewNode, gang: Option<&GangId>, now: Time) -> Node {
    let offering: Option<&Offering> = s.offerings.iter().find(|o| o.key() == nn.offering);
    let pool = s.pools.iter().find(|p| p.name == nn.pool);
    Node {
        name: nn.name.clone(),
        pool: Some(nn.pool.clone()),
        offering: Some(nn.offering.clone()),
        provider: Some(nn.offering.provider),
        zone: nn.offering.zone.clone(),
        placement_group: nn.placement_group.clone(),
        capacity_type: Some(nn.offering.capacity_type),
        price: Some(nn.price),
        gpu_model: offering.and_then(|o| o.gpu_model.clone()),
        gpu_memory_mib: offering.map_or(0, |o| o.gpu_memory_mib),
        allocatable: offering.map(|o| o.resources.clone()).unwrap_or_default(),
        labels: match (pool, offering) {
            (Some(p), Some(o)) => labels::new_node_labels(p, o),
            _ => Default::default(),
        },
        taints: pool.map(|p| p.taints.clone()).unwrap_or_default(),
        phase: NodePhase::Pending,
        unschedulable: false,
        reserved_for: gang.cloned(),
        pods: Vec::new(),
        created_at: now,
        phase_since: now,
        empty_since: None,
        do_not_disrupt: false,
        capacity_ends_at: offering
            .and_then(|o| o.reservation.as_ref())
            .and_then(|r| r.machines_end()),
        network: Vec::new(),
    }
}

/// Applies `plan` (planned with `policy`) to `s` at `now`. Every gang's record becomes what the
/// planner's one mapping from plan to gang phases says
/// ([`record::after_plan`]), with pods that run as soon as they are pinned
/// and the nodes this plan removes drained at once; then the nodes follow
/// the plan's preemptions, releases, launches and removals, in that order;
/// then `emptySince` is recomputed.
pub fn apply(s: &mut Snapshot, plan: &Plan, policy: &Policy, now: Time) {
    let draining: BTreeMap<String, record::Leaving> = plan
        .removals
        .iter()
        .map(|r| {
            let why = match r.kind {
                crate::plan::RemovalKind::CapacityEnding { .. } => record::Leaving::CapacityEnding,
                _ => record::Leaving::Drained,
            };
            (r.node.clone(), why)
        })
        .collect();
    let mut reserved: BTreeMap<&GangId, Vec<String>> = BTreeMap::new();
    for n in &s.nodes {
        if let Some(g) = &n.reserved_for {
            reserved.entry(g).or_default().push(n.name.clone());
        }
    }
    let cx = record::Context::new(plan, s, &draining, policy, now);
    let seen = Seen {
        finished: false,
        all_running: true,
    };
    let mut evicted: BTreeSet<GangId> = plan.preemptions.iter().map(|p| p.victim.clone()).collect();
    let records: Vec<(GangRecord, bool)> = s
        .gangs
        .iter()
        .map(|g| {
            let held = reserved.get(&g.id).map_or(&[][..], Vec::as_slice);
            let out = record::after_plan(&g.id, &GangRecord::of_gang(g, held), Some(g), seen, &cx);
            (out.record, out.evict)
        })
        .collect();
    for (g, (rec, evict)) in s.gangs.iter_mut().zip(records) {
        rec.write_to(g);
        if evict {
            evicted.insert(g.id.clone());
        }
    }
    // an evicted gang's nodes are no longer held for it
    for n in &mut s.nodes {
        if n.reserved_for.as_ref().is_some_and(|g| evicted.contains(g)) {
            n.reserved_for = None;
        }
    }
    for r in &plan.releases {
        for name in &r.nodes {
            let Some(i) = s.nodes.iter().position(|n| &n.name == name) else {
                continue;
            };
            match &r.handed_to {
                Some(h) => s.nodes[i].reserved_for = Some(h.clone()),
                None => {
                    s.nodes[i].reserved_for = None;
                    if s.nodes[i].phase.in_flight() {
                        s.nodes.remove(i);
                    }
                }
            }
        }
    }
    for l in &plan.launches {
        let nodes: Vec<Node> = l
            .nodes
            .iter()
            .map(|nn| new_node(s, nn, Some(&l.gang), now))
            .collect();
        s.nodes.extend(nodes);
        for name in &l.reserve {
            if let Some(n) = s.nodes.iter_mut().find(|n| &n.name == name) {
                n.reserved_for = Some(l.gang.clone());
            }
        }
    }
    for r in &plan.removals {
        if let RemovalKind::Replace { with } = &r.kind {
            let n = new_node(s, with, None, now);
            s.nodes.push(n);
        }
        s.nodes.retain(|n| n.name != r.node);
    }
    refresh_empty_since(s, now);
}

/// Sets `emptySince` on nodes that host nothing (keeping an earlier value)
/// and clears it on nodes that host a gang pod or a non-daemon pod.
pub fn refresh_empty_since(s: &mut Snapshot, now: Time) {
    let used: BTreeSet<&str> = s
        .gangs
        .iter()
        .filter(|g| g.phase.holds_capacity())
        .flat_map(|g| g.assignments.iter().map(|a| a.node.as_str()))
        .collect();
    let busy: Vec<bool> = s
        .nodes
        .iter()
        .map(|n| {
            used.contains(n.name.as_str())
                || n.pods.iter().any(|p| !p.daemon)
                || n.reserved_for.is_some()
        })
        .collect();
    for (n, b) in s.nodes.iter_mut().zip(busy) {
        if b {
            n.empty_since = None;
        } else if n.empty_since.is_none() && n.phase == NodePhase::Ready {
            n.empty_since = Some(now);
        }
    }
}
