//! Building the working state from a snapshot, in stages: the lists sorted
//! by name, the nodes and gangs with what each says of the other (looked up
//! once per node and per assignment), the provisioning state and holdings
//! of every gang, reservations, machines given up, pool usage, zones and
//! placement groups. The free-capacity indexes are built by the first
//! search (`free.rs`).

use std::collections::BTreeMap;

use super::sorting::{sorted_unique, sorted_unique_by_name};
use super::{
    FastMap, FastSet, GangInfo, NodeInfo, PoolUsage, ProvState, ReleasedFrom, World, node_gpus,
    offering_cmp, pod_set_of_each, pool_allows,
};
use crate::model::{CapacityType, Gang, GangPhase, Node, NodePhase, Offering, Pool};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;
use crate::time_facts::not_ready;

impl<'a> World<'a> {
    /// Builds the working state.
    pub fn build(s: &'a Snapshot, policy: &'a Policy, now: Time) -> World<'a> {
        let queues = sorted_unique(&s.queues, |a, b| a.name.cmp(&b.name));
        let pools = sorted_unique(&s.pools, |a, b| a.name.cmp(&b.name));
        let offerings = sorted_unique(&s.offerings, offering_cmp);
        let nodes_sorted = sorted_unique_by_name(&s.nodes, |n| &n.name);
        let gangs_sorted = sorted_unique_by_name(&s.gangs, |g| &g.id.0);

        let queue_ix: BTreeMap<&str, usize> = queues
            .iter()
            .enumerate()
            .map(|(i, q)| (q.name.as_str(), i))
            .collect();
        let pool_ix: BTreeMap<&str, usize> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let pool_offerings = pools
            .iter()
            .map(|p| {
                offerings
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| pool_allows(p, o))
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect();

        let (mut nodes, node_ix) = node_infos(&nodes_sorted, &pool_ix);
        let mut gangs = gang_infos(&gangs_sorted, &queue_ix, &node_ix);
        // The gang each node is reserved for, looked up once.
        let owners: Vec<Option<usize>> = {
            let gang_ix: FastMap<&str, usize> = gangs
                .iter()
                .enumerate()
                .map(|(i, g)| (g.gang.id.as_str(), i))
                .collect();
            // The machines of one launch are reserved for one gang, and
            // sort together.
            let mut owner = LastLookup::default();
            nodes
                .iter()
                .map(|n| {
                    let g = n.node.reserved_for.as_ref()?.as_str();
                    owner.get(g, |g| gang_ix.get(g).copied())
                })
                .collect()
        };
        for (ni, o) in owners.iter().enumerate() {
            if let Some(gi) = *o {
                gangs[gi].reserved.push(ni);
            }
        }
        gang_states(&mut gangs, &mut nodes, now);
        reservations(&mut nodes, &gangs, &owners);
        machines_given_up(&mut nodes, &gangs, &owners, &pools, &queues, policy, now);
        let pool_usage = pool_usage(&nodes, pools.len());
        let (zones, node_zone) = ids_of(nodes_sorted.iter().map(|n| Some(n.zone.as_str())));
        let (pgs, node_pg) = ids_of(nodes_sorted.iter().map(|n| n.placement_group.as_deref()));
        let node_zone = node_zone.into_iter().map(|z| z.unwrap_or(0)).collect();
        let inflight = (0..nodes.len())
            .filter(|&i| nodes[i].node.phase.in_flight())
            .collect();
        let stale_mark = vec![false; nodes.len()];
        let reserved_left = reserved_left(&offerings, &nodes_sorted);
        let capacity_ends = nodes_sorted.iter().any(|n| n.capacity_ends_at.is_some());
        let reserved_max_gpus = nodes
            .iter()
            .filter(|n| n.pool.is_some() && n.node.capacity_type == Some(CapacityType::Reserved))
            .map(|n| node_gpus(n.node))
            .max();
        let gang_sigs = vec![None; gangs.len()];

        World {
            now,
            policy,
            arrivals: &s.arrivals,
            queues,
            pools,
            offerings,
            nodes,
            gangs,
            pool_ix,
            node_ix,
            pool_offerings,
            pool_usage,
            free_index: Default::default(),
            zone_index: Vec::new(),
            stale: Vec::new(),
            stale_mark,
            indexed: false,
            new_names: FastSet::default(),
            new_nodes_planned: 0,
            inflight,
            reserved_left,
            capacity_ends,
            generation: 0,
            pack_failures: Default::default(),
            known_existing: None,
            avoid: Vec::new(),
            avoid_above_gpus: None,
            reserved_max_gpus,
            size_classes: Default::default(),
            zones,
            node_zone,
            pgs,
            node_pg,
            cover_cache: FastMap::default(),
            kinds_cache: FastMap::default(),
            domain_cache: FastMap::default(),
            elig_cache: FastMap::default(),
            new_elig_cache: Vec::new(),
            sig_ids: FastMap::default(),
            gang_sigs,
        }
    }
}

/// Per offering, the machines its capacity reservation still takes: what
/// the cloud reports, less the nodes of that reservation whose intent is
/// written but not yet launched (`Pending`: the cloud has not counted
/// them). `None` for offerings without a reservation.
fn reserved_left(offerings: &[&Offering], nodes: &[&Node]) -> Vec<Option<u32>> {
    offerings
        .iter()
        .map(|o| {
            let r = o.reservation.as_ref()?;
            let pending = nodes
                .iter()
                .filter(|n| {
                    n.phase == NodePhase::Pending
                        && n.offering.as_ref().is_some_and(|k| {
                            k.reservation.as_deref() == Some(r.id.as_str())
                                && k.instance_type == o.instance_type
                                && k.zone == o.zone
                        })
                })
                .count();
            Some(
                r.available
                    .saturating_sub(u32::try_from(pending).unwrap_or(u32::MAX)),
            )
        })
        .collect()
}

/// Every node with its pool and its capacity less its other pods, and an
/// index of them by name.
fn node_infos<'a>(
    sorted: &[&'a Node],
    pool_ix: &BTreeMap<&str, usize>,
) -> (Vec<NodeInfo<'a>>, FastMap<&'a str, usize>) {
    let nodes: Vec<NodeInfo<'a>> = sorted
        .iter()
        .map(|n| {
            let pool = n.pool.as_deref().and_then(|p| pool_ix.get(p).copied());
            let mut free = n.allocatable.clone();
            if !n.pods.is_empty() {
                free.saturating_sub(&n.other_requests());
            }
            NodeInfo {
                node: n,
                pool,
                free,
                exclusive: None,
                gangs: Vec::new(),
                released_from: None,
                given_up: false,
                removed: false,
            }
        })
        .collect();
    let node_ix = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.node.name.as_str(), i))
        .collect();
    (nodes, node_ix)
}

/// Every gang with its queue and the node and pod set of each assignment.
fn gang_infos<'a>(
    sorted: &[&'a Gang],
    queue_ix: &BTreeMap<&str, usize>,
    node_ix: &FastMap<&'a str, usize>,
) -> Vec<GangInfo<'a>> {
    sorted
        .iter()
        .map(|g| {
            // A gang's pods often share a node: its assignments in a row
            // name it once.
            let mut node = LastLookup::default();
            let assigned = g
                .assignments
                .iter()
                .map(|a| node.get(&a.node, |name| node_ix.get(name).copied()))
                .collect();
            GangInfo {
                gang: g,
                queue: queue_ix.get(g.queue.as_str()).copied(),
                held: Vec::new(),
                holds: false,
                prov: ProvState::None,
                reserved: Vec::new(),
                assigned,
                assigned_sets: pod_set_of_each(g),
            }
        })
        .collect()
}

/// The provisioning state of every gang and what each holds: the pods it
/// holds per pod set, taken from the free capacity of their nodes.
fn gang_states(gangs: &mut [GangInfo<'_>], nodes: &mut [NodeInfo<'_>], now: Time) {
    for (gi, info) in gangs.iter_mut().enumerate() {
        let g = info.gang;
        let mut prov = ProvState::None;
        if g.phase == GangPhase::Provisioning {
            let deadline_passed = crate::time_facts::deadline_passed(g, now);
            let missing = info
                .assigned
                .iter()
                .any(|i| i.is_none_or(|i| nodes[i].node.phase == NodePhase::Terminating))
                || info
                    .reserved
                    .iter()
                    .any(|&ni| nodes[ni].node.phase == NodePhase::Terminating);
            // Every node it is assigned or holds is Ready (a node named
            // twice is checked twice: no set needed for an "all").
            let all_ready = !(g.assignments.is_empty() && info.reserved.is_empty())
                && info
                    .assigned
                    .iter()
                    .all(|i| i.is_some_and(|i| nodes[i].node.schedulable()))
                && info.reserved.iter().all(|&ni| nodes[ni].node.schedulable());
            prov = if missing {
                ProvState::Replan
            } else if all_ready {
                ProvState::AllReady
            } else if deadline_passed {
                ProvState::TimedOut
            } else {
                ProvState::Waiting
            };
        }
        info.prov = prov;
        info.holds = match g.phase {
            GangPhase::Admitted | GangPhase::Running => true,
            GangPhase::Provisioning => matches!(prov, ProvState::Waiting | ProvState::AllReady),
            _ => false,
        };
        if info.holds {
            let mut held = vec![0u32; g.pod_sets.len()];
            for (&si, &at) in info.assigned_sets.iter().zip(&info.assigned) {
                let Some(si) = si else {
                    continue;
                };
                held[si] = held[si].saturating_add(1);
                if let Some(ni) = at {
                    nodes[ni].free.saturating_sub(&g.pod_sets[si].requests);
                    if !nodes[ni].gangs.contains(&gi) {
                        nodes[ni].gangs.push(gi);
                    }
                }
            }
            if g.assignments.is_empty() {
                held = g.pod_sets.iter().map(|p| p.count).collect();
            }
            info.held = held;
        }
    }
}

/// What each node's reservation means now: held exclusively for a
/// provisioning or pending gang, shared with a running one, or released
/// (its gang timed out, or is gone or holds nothing). `owners` is the
/// index of the gang each node is reserved for.
fn reservations(nodes: &mut [NodeInfo<'_>], gangs: &[GangInfo<'_>], owners: &[Option<usize>]) {
    for (n, owner) in nodes.iter_mut().zip(owners) {
        let Some(name) = &n.node.reserved_for else {
            continue;
        };
        match *owner {
            None => n.released_from = Some(ReleasedFrom::Orphan(name.0.clone())),
            Some(gi) => {
                let g = &gangs[gi];
                match (g.gang.phase, g.prov) {
                    (GangPhase::Provisioning, ProvState::TimedOut) => {
                        n.released_from = Some(ReleasedFrom::Timeout(gi));
                    }
                    (GangPhase::Provisioning, _) => n.exclusive = Some(gi),
                    (p, _) if p.pending() => n.exclusive = Some(gi),
                    (GangPhase::Admitted | GangPhase::Running, _) => {}
                    _ => n.released_from = Some(ReleasedFrom::Orphan(name.0.clone())),
                }
            }
        }
    }
}

/// Machines given up: not Ready although launched longer ago than their
/// pool's provisioning timeout, or held for a gang past its provisioning
/// deadline.
fn machines_given_up(
    nodes: &mut [NodeInfo<'_>],
    gangs: &[GangInfo<'_>],
    owners: &[Option<usize>],
    pools: &[&Pool],
    queues: &[&crate::model::Queue],
    policy: &Policy,
    now: Time,
) {
    for (n, owner) in nodes.iter_mut().zip(owners) {
        if !not_ready(n.node) {
            continue;
        }
        let Some(p) = n.pool else { continue };
        let mut timeout = pools[p]
            .provisioning_timeout
            .unwrap_or(policy.provisioning_timeout);
        // A flex-start machine may wait for its grant as long as the queue
        // of the gang it is for allows, on top.
        if n.node.capacity_type == Some(crate::model::CapacityType::FlexStart) {
            let wait = owner
                .and_then(|gi| gangs[gi].queue)
                .and_then(|q| queues[q].flex_start_max_wait);
            timeout = timeout + wait.unwrap_or(crate::time::Dur::secs(0));
        }
        let owner_late = owner.is_some_and(|gi| {
            let g = gangs[gi].gang;
            g.phase == GangPhase::Provisioning && crate::time_facts::deadline_passed(g, now)
        });
        n.given_up = owner_late || crate::time_facts::launch_overdue(n.node, timeout, now);
    }
}

/// Nodes, GPUs and price per hour of each pool's machines not terminating.
fn pool_usage(nodes: &[NodeInfo<'_>], pools: usize) -> Vec<PoolUsage> {
    let mut usage = vec![PoolUsage::default(); pools];
    for n in nodes {
        if let Some(p) = n.pool
            && n.node.phase != NodePhase::Terminating
        {
            let u = &mut usage[p];
            u.nodes += 1;
            u.gpus += node_gpus(n.node);
            u.price += n.node.price.map_or(0, |p| p.0);
        }
    }
    usage
}

/// The distinct names among `names`, sorted, and the position of each
/// name in them. Few distinct names (zones, placement groups) come in long
/// runs (the machines of one launch), so each run is looked up once.
fn ids_of<'a>(names: impl Iterator<Item = Option<&'a str>>) -> (Vec<&'a str>, Vec<Option<u32>>) {
    // Ids in the order first seen, then renumbered in name order.
    let mut seen: FastMap<&'a str, u32> = FastMap::default();
    let mut first: Vec<&'a str> = Vec::new();
    let mut run = LastLookup::default();
    let ids: Vec<Option<u32>> = names
        .map(|name| {
            Some(run.get(name?, |name| {
                *seen.entry(name).or_insert_with(|| {
                    first.push(name);
                    first.len() as u32 - 1
                })
            }))
        })
        .collect();
    let mut order: Vec<u32> = (0..first.len() as u32).collect();
    order.sort_unstable_by_key(|&i| first[i as usize]);
    let mut renumber = vec![0u32; first.len()];
    for (new, &old) in order.iter().enumerate() {
        renumber[old as usize] = new as u32;
    }
    let sorted = order.iter().map(|&i| first[i as usize]).collect();
    let ids = ids
        .into_iter()
        .map(|id| id.map(|i| renumber[i as usize]))
        .collect();
    (sorted, ids)
}

/// The last name looked up and what it gave: lists in name order hold runs
/// of one name (a gang's pods on one node, the machines of one launch),
/// each looked up once.
struct LastLookup<'n, V> {
    last: Option<(&'n str, V)>,
}

impl<V> Default for LastLookup<'_, V> {
    fn default() -> Self {
        LastLookup { last: None }
    }
}

impl<'n, V: Copy> LastLookup<'n, V> {
    /// What `look` gives for `name`, looked up only when the name before
    /// was another.
    fn get(&mut self, name: &'n str, look: impl FnOnce(&'n str) -> V) -> V {
        match self.last {
            Some((l, v)) if l == name => v,
            _ => {
                let v = look(name);
                self.last = Some((name, v));
                v
            }
        }
    }
}
