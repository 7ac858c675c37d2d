//! Baselines: models of the usual stacks, run on the same world as muster.
//! Each takes its own decisions, as the modelled system documents them, and
//! says exactly what it assumes ([`crate::policies::Policy::assumptions`]).
//! Mechanics (cluster, cloud, binder, accounting) are shared with muster.

pub mod default_ca;
pub mod kueue;
pub mod kueue_karpenter;

use muster_planner::{Offering, Pool};

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
