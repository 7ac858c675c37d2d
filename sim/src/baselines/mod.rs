//! Baselines: models of the usual stacks, run on the same world as muster.
//! Each takes its own decisions, as the modelled system documents them, and
//! says exactly what it assumes ([`crate::policies::Policy::assumptions`]).
//! Mechanics (cluster, cloud, binder, accounting) are shared with muster.

pub mod default_ca;
pub mod kueue;
pub mod kueue_karpenter;

use std::collections::BTreeMap;

use muster_planner::{Offering, Pool, ReservationKind, Resources, Time};

use crate::events::JobId;
use crate::world::{JobPhase, World};

/// What a baseline run as a careful operator tunes it (a name ending in
/// `-tuned`) adds to its assumptions: the layout split by GPU count.
pub fn tuned_layout(name: &str) -> &'static str {
    if name.ends_with("-tuned") {
        " Tuned layout: node groups (NodePools) split by GPU count, weighted so a pod selects \
         machines of the smallest GPU count that holds it; small jobs never fill a big machine."
    } else {
        ""
    }
}

/// Offerings (cloud index, pool name) some pool may buy, with a known price,
/// sorted by price then key.
pub fn buyable(world: &World, pools: &[Pool]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for (i, o) in world.cloud.offerings().iter().enumerate() {
        if o.price.is_none() {
            continue;
        }
        if let Some(p) = pools
            .iter()
            .find(|p| p.provider == o.provider && p.requirements.admits(o))
        {
            out.push((i, p.name.clone()));
        }
    }
    let offs: &[Offering] = world.cloud.offerings();
    out.sort_by(|a, b| {
        offs[a.0]
            .price
            .cmp(&offs[b.0].price)
            .then_with(|| offs[a.0].key().cmp(&offs[b.0].key()))
    });
    out
}

/// Unbound pods of a pending job.
pub fn unbound_pods(world: &World, job: JobId) -> Vec<u32> {
    let st = &world.states[job];
    if st.phase != JobPhase::Pending {
        return Vec::new();
    }
    st.bindings
        .iter()
        .enumerate()
        .filter(|(_, b)| b.is_none())
        .map(|(i, _)| i as u32)
        .collect()
}

/// kube-scheduler model: binds each listed pod first-fit to a Ready node,
/// in order; returns the pods left pending. Once a pod fails, pods with the
/// same requests and constraint are not tried again in the same pass (they
/// would fail the same way).
pub fn schedule_first_fit(world: &mut World, pods: Vec<(JobId, u32)>) -> Vec<(JobId, u32)> {
    let mut left = Vec::new();
    let mut failed: Vec<JobId> = Vec::new();
    for (job, pod) in pods {
        if world.states[job].phase != JobPhase::Pending
            || world.states[job].bindings.get(pod as usize) != Some(&None)
        {
            continue; // bound, running or done: no longer pending
        }
        let same = |f: &JobId| {
            *f == job
                || (world.requests[*f] == world.requests[job]
                    && world.constraints[*f] == world.constraints[job])
        };
        if failed.iter().any(same) {
            left.push((job, pod));
            continue;
        }
        match crate::binder::first_fit(
            &world.cluster,
            &world.constraints[job],
            &world.requests[job],
        ) {
            Some(node) if world.bind(job, pod, node).is_ok() => {}
            _ => {
                failed.push(job);
                left.push((job, pod));
            }
        }
    }
    left
}

/// How long before a Capacity Block's end Karpenter deletes the NodeClaims
/// launched into it: 40 minutes, 10 before EC2 starts reclaiming the
/// instances (karpenter-provider-aws `pkg/controllers/capacityreservation/expiration`,
/// Capacity Block support since v1.6; karpenter.sh docs "Utilizing
/// On-Demand Capacity Reservations and Capacity Blocks"). Nodes of a block
/// that ends within this are also no longer launched into.
pub const KARPENTER_BLOCK_EXPIRY: muster_planner::Dur = muster_planner::Dur::mins(40);

/// The end of the Capacity Block the offering at cloud index `idx` draws
/// on, if it draws on one.
pub fn capacity_block_end(world: &World, idx: usize) -> Option<Time> {
    let r = world.cloud.reservation(idx)?;
    (r.kind == ReservationKind::CapacityBlock)
        .then(|| r.end())
        .flatten()
}

/// True when Karpenter may launch the offering at cloud index `idx` now:
/// any offering not reserved; a reserved one while its reservation has
/// machines available (Karpenter tracks the count it read from
/// `DescribeCapacityReservations`), has started, and — for a Capacity
/// Block — is not expiring ([`KARPENTER_BLOCK_EXPIRY`]). It does not weigh
/// a job's run time against the block's end.
pub fn karpenter_may_launch(world: &World, idx: usize) -> bool {
    let Some(o) = world.cloud.offering(idx) else {
        return false;
    };
    let Some(r) = &o.reservation else {
        return true;
    };
    let now = world.now;
    r.available > 0
        && r.starts_at.is_none_or(|t| t <= now)
        && capacity_block_end(world, idx).is_none_or(|end| now < end - KARPENTER_BLOCK_EXPIRY)
}

/// Kueue Topology-Aware Scheduling on the nodes that exist, for workloads
/// of more than one pod (Kueue docs "Topology Aware Scheduling",
/// `kueue.x-k8s.io/podset-preferred-topology`: the tightest domain at or
/// above the requested level with room for the whole pod set, then
/// anywhere): a job whose pods are all unbound is bound whole into the
/// first rack, else the first block (by name), whose Ready nodes hold all
/// its pods first-fit. Jobs no domain holds are left to kube-scheduler.
/// Without a network topology, nothing is done.
pub fn place_in_one_domain(world: &mut World, pods: &[(JobId, u32)]) {
    if world.cloud.topology().is_none() {
        return;
    }
    let mut jobs: Vec<JobId> = pods
        .iter()
        .map(|(j, _)| *j)
        .filter(|j| {
            let st = &world.states[*j];
            world.jobs[*j].workers > 1 && st.phase == JobPhase::Pending && st.bound == 0
        })
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    for job in jobs {
        for level in [2usize, 1] {
            let mut domains: BTreeMap<&[String], Vec<usize>> = BTreeMap::new();
            for id in world.cluster.alive_ids() {
                let n = &world.cluster.nodes[id];
                if n.network.len() >= level && n.schedulable() {
                    domains.entry(&n.network[..level]).or_default().push(id);
                }
            }
            let found = domains.values().find_map(|ids| fit_all(world, job, ids));
            if let Some(nodes) = found {
                for (pod, node) in nodes.into_iter().enumerate() {
                    let _ = world.bind(job, pod as u32, node);
                }
                break;
            }
        }
    }
}

/// The node of each pod of `job` when all its pods fit first-fit on `ids`.
fn fit_all(world: &World, job: JobId, ids: &[usize]) -> Option<Vec<usize>> {
    let req = &world.requests[job];
    let c = &world.constraints[job];
    let mut used: BTreeMap<usize, Resources> = BTreeMap::new();
    let mut out = Vec::new();
    for _ in 0..world.jobs[job].workers {
        let node = ids.iter().copied().find(|id| {
            let n = &world.cluster.nodes[*id];
            if !c.accepts_node(n) {
                return false;
            }
            let mut sum = used.get(id).cloned().unwrap_or_else(|| n.used.clone());
            sum.add(req);
            sum.fits_in(&n.allocatable)
        })?;
        used.entry(node)
            .or_insert_with(|| world.cluster.nodes[node].used.clone())
            .add(req);
        out.push(node);
    }
    Some(out)
}
