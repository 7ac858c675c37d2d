//! A scripted, test-only planner with fully predictable output: first-fit on
//! free Ready capacity, else one new node per pod from the first fitting,
//! available offering of the queue's first pool; admits a Provisioning gang
//! once every node it was assigned is Ready. It obeys the planner's contract
//! (same input, same output; deterministic names and idempotency keys per
//! launch attempt), so controller tests can check the driver's mechanics
//! against exact expectations. The `*_real_planner` scenarios run the same
//! flows with `muster_planner::plan`; production code never uses this.

use std::collections::BTreeMap;

use muster_planner::model::scheduling::tolerates_all;
use muster_planner::naming;
use muster_planner::plan::{Admission, Launch, NewNode, WaitReason, Waiting};
use muster_planner::{Assignment, GangPhase, NodePhase, Plan, Policy, Price, Snapshot, Time};

/// The stub plan.
pub fn plan(s: &Snapshot, _policy: &Policy, now: Time) -> Plan {
    let mut out = Plan::default();
    // GPUs in use per node by gangs that hold capacity, and by other pods
    let mut used: BTreeMap<&str, u64> = BTreeMap::new();
    for n in &s.nodes {
        used.insert(
            n.name.as_str(),
            n.pods.iter().map(|p| p.requests.gpu_millis).sum(),
        );
    }
    let mut gangs: Vec<_> = s.gangs.iter().collect();
    gangs.sort_by(|a, b| (a.arrival, &a.id).cmp(&(b.arrival, &b.id)));
    for g in &gangs {
        if g.phase.holds_capacity() {
            for a in &g.assignments {
                let req = g
                    .pod_set(&a.pod_set)
                    .map(|p| p.requests.gpu_millis)
                    .unwrap_or(0);
                if let Some(u) = used.get_mut(a.node.as_str()) {
                    *u += req;
                }
            }
        }
    }
    let mut position = 0;
    for g in gangs {
        match g.phase {
            GangPhase::Provisioning => {
                let all_ready = !g.assignments.is_empty()
                    && g.assignments.iter().all(|a| {
                        s.nodes
                            .iter()
                            .any(|n| n.name == a.node && n.phase == NodePhase::Ready)
                    });
                let any_missing = g
                    .assignments
                    .iter()
                    .any(|a| !s.nodes.iter().any(|n| n.name == a.node));
                if all_ready {
                    out.admissions.push(Admission {
                        gang: g.id.clone(),
                        assignments: g.assignments.clone(),
                    });
                } else if any_missing {
                    // a node of the set is gone (insufficient capacity): plan the whole gang again
                    if let Some(l) = launch(s, g, now) {
                        out.launches.push(l);
                    }
                } else {
                    position += 1;
                    out.waiting.push(wait(
                        g,
                        position,
                        WaitReason::Provisioning,
                        "capacity is being launched",
                    ));
                }
            }
            GangPhase::Evicted if g.not_before.is_some_and(|t| t > now) => {
                position += 1;
                out.waiting.push(wait(
                    g,
                    position,
                    WaitReason::Backoff,
                    "evicted; backing off",
                ));
            }
            GangPhase::Queued | GangPhase::Evicted | GangPhase::Unsatisfiable => {
                let mut tentative = used.clone();
                let mut assignments = Vec::new();
                let mut placed_all = true;
                for ps in &g.pod_sets {
                    for i in 0..ps.count {
                        let found = s.nodes.iter().find(|n| {
                            let free = n.allocatable.gpu_millis.saturating_sub(
                                tentative.get(n.name.as_str()).copied().unwrap_or(0),
                            );
                            let mine = n.reserved_for.as_ref().is_none_or(|r| r == &g.id);
                            let tolerated =
                                n.managed() || tolerates_all(&ps.tolerations, &n.taints);
                            n.schedulable() && mine && tolerated && free >= ps.requests.gpu_millis
                        });
                        let Some(n) = found else {
                            placed_all = false;
                            break;
                        };
                        *tentative.entry(n.name.as_str()).or_default() += ps.requests.gpu_millis;
                        assignments.push(Assignment {
                            pod_set: ps.name.clone(),
                            index: i,
                            node: n.name.clone(),
                        });
                    }
                }
                if placed_all {
                    used = tentative;
                    out.admissions.push(Admission {
                        gang: g.id.clone(),
                        assignments,
                    });
                } else if let Some(l) = launch(s, g, now) {
                    out.launches.push(l);
                } else {
                    position += 1;
                    out.waiting.push(wait(
                        g,
                        position,
                        WaitReason::NoOffering,
                        "no offering fits",
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

fn wait(g: &muster_planner::Gang, position: u32, reason: WaitReason, message: &str) -> Waiting {
    Waiting {
        gang: g.id.clone(),
        queue: g.queue.clone(),
        position,
        reason,
        message: message.into(),
    }
}

fn launch(s: &Snapshot, g: &muster_planner::Gang, now: Time) -> Option<Launch> {
    let queue = s.queues.iter().find(|q| q.name == g.queue)?;
    let pool = queue
        .pools
        .first()
        .and_then(|p| s.pools.iter().find(|x| &x.name == p))?;
    let attempt = g.launch_attempts + 1;
    let mut nodes = Vec::new();
    let mut index = 0;
    let mut assignments = Vec::new();
    for ps in &g.pod_sets {
        let offering = s
            .offerings
            .iter()
            .filter(|o| o.available && o.unavailable_until.is_none_or(|t| t <= now))
            .filter(|o| {
                pool.requirements.instance_types.is_empty()
                    || pool.requirements.instance_types.contains(&o.instance_type)
            })
            .filter(|o| u64::from(o.gpu_count) * 1000 >= ps.requests.gpu_millis)
            .min_by_key(|o| (o.price.unwrap_or(Price(u64::MAX)), o.instance_type.clone()))?;
        for i in 0..ps.count {
            let node = naming::new_node_name(g.id.as_str(), &g.uid, attempt, index);
            let key = naming::idempotency_key(g.id.as_str(), &g.uid, attempt, index);
            index += 1;
            nodes.push(NewNode {
                name: node.clone(),
                idempotency_key: key,
                pool: pool.name.clone(),
                offering: offering.key(),
                price: offering.price.unwrap_or_default(),
                placement_group: None,
                grant: None,
            });
            assignments.push(Assignment {
                pod_set: ps.name.clone(),
                index: i,
                node,
            });
        }
    }
    let price_per_hour = nodes.iter().map(|n| n.price).sum();
    Some(Launch {
        gang: g.id.clone(),
        nodes,
        reserve: Vec::new(),
        assignments,
        price_per_hour,
        message: "stub planner: one node per pod".into(),
        deadline: None,
    })
}
