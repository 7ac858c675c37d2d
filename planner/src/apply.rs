//! A reference driver: applies a [`Plan`] to a [`Snapshot`] the way the
//! contract in [`crate::plan`] says, for a cloud where every call succeeds at
//! once. Tests and the fairness harness use it; the simulator and the
//! controller implement the same contract against their own worlds.

use std::collections::BTreeSet;

use crate::labels;
use crate::model::{GangId, GangPhase, Node, NodePhase, Offering};
use crate::plan::{Plan, RemovalKind};
use crate::snapshot::Snapshot;
use crate::time::Time;

fn evict(s: &mut Snapshot, id: &GangId, now: Time) {
    if let Some(g) = s.gangs.iter_mut().find(|g| &g.id == id) {
        g.phase = GangPhase::Evicted;
        g.not_before = Some(now);
        g.assignments.clear();
        g.admitted_at = None;
        g.started_at = None;
        g.provisioning_deadline = None;
    }
    for n in &mut s.nodes {
        if n.reserved_for.as_ref() == Some(id) {
            n.reserved_for = None;
        }
    }
}

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
    }
}

/// Applies `plan` to `s` at `now`: preemptions, releases, launches,
/// admissions, removals, in that order; then recomputes `emptySince`.
pub fn apply(s: &mut Snapshot, plan: &Plan, now: Time) {
    for p in &plan.preemptions {
        evict(s, &p.victim, now);
    }
    let decided: BTreeSet<&GangId> = plan
        .admissions
        .iter()
        .map(|a| &a.gang)
        .chain(plan.launches.iter().map(|l| &l.gang))
        .collect();
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
        if !decided.contains(&r.gang)
            && let Some(g) = s.gangs.iter_mut().find(|g| g.id == r.gang)
            && g.phase == GangPhase::Provisioning
        {
            g.phase = GangPhase::Queued;
            g.assignments.clear();
            g.provisioning_deadline = None;
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
        if let Some(g) = s.gangs.iter_mut().find(|g| g.id == l.gang) {
            g.phase = GangPhase::Provisioning;
            g.assignments = l.assignments.clone();
            g.provisioning_deadline = l.deadline;
            g.launch_attempts = g.launch_attempts.saturating_add(1);
        }
    }
    for a in &plan.admissions {
        if let Some(g) = s.gangs.iter_mut().find(|g| g.id == a.gang) {
            g.phase = GangPhase::Admitted;
            g.assignments = a.assignments.clone();
            g.admitted_at = Some(now);
            g.provisioning_deadline = None;
        }
    }
    for r in &plan.removals {
        if let RemovalKind::Replace { with } = &r.kind {
            let n = new_node(s, with, None, now);
            s.nodes.push(n);
        }
        let hosted: Vec<GangId> = s
            .gangs
            .iter()
            .filter(|g| g.assignments.iter().any(|a| a.node == r.node))
            .map(|g| g.id.clone())
            .collect();
        for g in hosted {
            evict(s, &g, now);
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
