//! `muster explain`, `muster queues`, `muster pools`: the controller's view
//! of one gang, of every queue and of every pool, for people.
//!
//! The cluster is read once ([`crate::controller::observe::once`]), translated by the same
//! [`translate`](crate::controller::translate) code the controller runs, and planned by
//! the same planner. Nothing here decides: what would unblock a gang is read
//! from the planner's reason and the snapshot's quota and pool limits, and the
//! start estimate is the planner asked again with running gangs gone at the
//! times they declared (`expectedDuration`). The functions after the I/O are
//! pure.

use std::collections::BTreeMap;

use kube::ResourceExt;
use muster_planner::plan::WaitReason;
use muster_planner::{GangId, Offering, Plan, Policy, Price, Snapshot, Time};
use serde::Serialize;

use crate::controller::base::objects::Kind;
use crate::controller::base::time;
use crate::controller::cloud::providers::{ProviderFactory, list_offerings};
use crate::controller::observe::Observed;
use crate::controller::translate::{self};

/// The snapshot the controller would build now, and why a pool has no
/// offerings where none could be listed: offerings are listed from each
/// pool's NodeClass through `providers`, as a planning cycle lists them.
pub async fn snapshot(
    observed: &Observed,
    providers: &dyn ProviderFactory,
    now: Time,
) -> (translate::Translation, Vec<String>) {
    let catalog = translate::catalog(observed);
    let mut offerings: BTreeMap<String, Vec<Offering>> = BTreeMap::new();
    let mut notes = Vec::new();
    for pool in &catalog.pools {
        let Some(nc) = observed
            .of(Kind::NodeClass)
            .iter()
            .find(|n| n.name_any() == pool.node_class)
        else {
            continue;
        };
        let spec = nc.data.get("spec").cloned().unwrap_or_default();
        let provider = match providers.provider(&pool.node_class, &spec).await {
            Ok(p) => p,
            Err(e) => {
                notes.push(format!(
                    "pool {}: no offerings listed, NodeClass {}: {e}",
                    pool.name, pool.node_class
                ));
                continue;
            }
        };
        match list_offerings(provider.as_ref(), pool).await {
            Ok(list) => {
                offerings.insert(pool.name.clone(), list);
            }
            Err(e) => notes.push(format!(
                "pool {}: offerings could not be listed: {e}",
                pool.name
            )),
        }
    }
    (
        translate::snapshot_with(observed, &catalog, &offerings, now),
        notes,
    )
}

/// One machine the planner would launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchLine {
    /// Its pool.
    pub pool: String,
    /// `instance-type/zone/capacity-type`.
    pub offering: String,
    /// US dollars per hour.
    pub price_per_hour: f64,
}

/// What the planner makes of one gang now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub gang: String,
    /// Its GPUQueue.
    pub queue: String,
    /// Its phase.
    pub state: String,
    /// What the planner would do with it now: `admit`, `launch`, `wait`,
    /// `hold` (it already holds capacity).
    pub decision: String,
    /// 1-based position in its queue, while it waits.
    pub position: Option<u32>,
    /// The planner's bounded reason, while it waits.
    pub reason: Option<String>,
    /// The planner's sentence.
    pub message: Option<String>,
    /// What would unblock it.
    pub unblock: Vec<String>,
    /// The machines it would launch with.
    pub launches: Vec<LaunchLine>,
    /// When it would start, where running gangs declare expected durations
    /// (RFC 3339).
    pub start_estimate: Option<String>,
    /// The running gang whose end lets it start.
    pub starts_after: Option<String>,
    /// Why the object is left out of planning, when it is.
    pub issues: Vec<String>,
    /// What this reading of the cluster could not see (pools whose
    /// offerings could not be listed here).
    pub notes: Vec<String>,
}

/// Explains `gang` (`namespace/name`); `None` when the snapshot has no such
/// gang and no translation issue names it.
pub fn explain(
    tr: &translate::Translation,
    policy: &Policy,
    now: Time,
    gang: &str,
) -> Option<Explanation> {
    let snapshot = &tr.snapshot;
    let issues: Vec<String> = tr
        .issues
        .iter()
        .filter(|i| {
            i.kind == Kind::Gang
                && format!("{}/{}", i.namespace.as_deref().unwrap_or_default(), i.name) == gang
        })
        .map(|i| format!("{}: {}", i.reason.as_str(), i.message))
        .collect();
    let Some(g) = snapshot.gangs.iter().find(|g| g.id.as_str() == gang) else {
        return (!issues.is_empty()).then(|| Explanation {
            gang: gang.to_string(),
            queue: String::new(),
            state: "NotPlanned".into(),
            decision: "none".into(),
            position: None,
            reason: None,
            message: None,
            unblock: vec![],
            launches: vec![],
            start_estimate: None,
            starts_after: None,
            issues,
            notes: vec![],
        });
    };
    let plan = muster_planner::plan(snapshot, policy, now);
    let waiting = plan.waiting.iter().find(|w| w.gang == g.id);
    let launches: Vec<LaunchLine> = plan
        .launches
        .iter()
        .filter(|l| l.gang == g.id)
        .flat_map(|l| l.nodes.iter())
        .map(|n| LaunchLine {
            pool: n.pool.clone(),
            offering: n.offering.to_string(),
            price_per_hour: n.price.usd(),
        })
        .collect();
    let admitted = plan.admissions.iter().any(|a| a.gang == g.id);
    let decision = if g.phase.holds_capacity() {
        "hold"
    } else if admitted {
        "admit"
    } else if !launches.is_empty() {
        "launch"
    } else {
        "wait"
    };
    let unblock = waiting
        .map(|w| unblock(snapshot, &g.queue, w.reason))
        .unwrap_or_default();
    let estimate = if decision == "wait" {
        start_estimate(snapshot, policy, now, &g.id)
    } else {
        None
    };
    Some(Explanation {
        gang: gang.to_string(),
        queue: g.queue.clone(),
        state: serde_json::to_value(g.phase)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        decision: decision.into(),
        position: waiting.map(|w| w.position),
        reason: waiting.map(|w| w.reason.as_str().to_string()),
        message: waiting.map(|w| w.message.clone()),
        unblock,
        launches,
        start_estimate: estimate.as_ref().map(|(t, _)| time::format(*t)),
        starts_after: estimate.map(|(_, g)| g.to_string()),
        issues,
        notes: vec![],
    })
}

/// What would unblock a gang of `queue` that waits for `reason`, from the
/// snapshot's quota, pool limits and offering marks.
pub fn unblock(snapshot: &Snapshot, queue: &str, reason: WaitReason) -> Vec<String> {
    let mut out = Vec::new();
    match reason {
        WaitReason::QuotaExhausted => {
            for u in muster_planner::usage::queues(snapshot)
                .iter()
                .filter(|u| u.queue == queue)
            {
                for e in &u.entries {
                    out.push(format!(
                        "queue {queue} uses {} {} against a nominal quota of {} (borrowed {}): \
                         raise the quota or borrowing limit, or wait for its gangs to finish",
                        e.used, e.resource, e.nominal, e.borrowed
                    ));
                }
            }
        }
        WaitReason::PoolLimit => {
            let q = snapshot.queues.iter().find(|q| q.name == queue);
            for p in snapshot
                .pools
                .iter()
                .filter(|p| q.is_none_or(|q| q.pools.is_empty() || q.pools.contains(&p.name)))
            {
                let nodes = snapshot
                    .nodes
                    .iter()
                    .filter(|n| n.pool.as_deref() == Some(p.name.as_str()))
                    .count();
                if let Some(max) = p.limits.max_nodes {
                    out.push(format!(
                        "pool {} has {nodes} of maxNodes {max}: raise spec.limits.maxNodes or wait for nodes to go",
                        p.name
                    ));
                }
                if let Some(max) = p.limits.max_gpus {
                    out.push(format!(
                        "pool {} has maxGPUs {max}: raise spec.limits.maxGPUs",
                        p.name
                    ));
                }
                if let Some(max) = p.limits.max_price_per_hour {
                    out.push(format!(
                        "pool {} has a ceiling of {max}/h: raise spec.limits.maxPricePerHour",
                        p.name
                    ));
                }
            }
        }
        WaitReason::NoOffering => {
            for o in &snapshot.offerings {
                if let Some(until) = o.unavailable_until {
                    out.push(format!(
                        "offering {} had a capacity error; avoided until {}",
                        o.key(),
                        time::format(until)
                    ));
                }
            }
            out.push("allow more zones, GPU models or capacity types in the pools".into());
        }
        other => out.push(
            crate::controller::base::reasons::catalog()
                .into_iter()
                .find(|d| d.reason == other.as_str())
                .map_or_else(String::new, |d| d.todo.to_string()),
        ),
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The earliest time the planner would admit `gang` onto existing capacity
/// once running gangs with declared durations end, and the gang whose end
/// does it: the planner asked again with those gangs gone, one end after
/// another.
pub fn start_estimate(
    snapshot: &Snapshot,
    policy: &Policy,
    now: Time,
    gang: &GangId,
) -> Option<(Time, GangId)> {
    let mut ends: Vec<(Time, GangId)> = snapshot
        .gangs
        .iter()
        .filter(|g| g.phase.holds_capacity())
        .filter_map(|g| {
            let start = g.started_at.or(g.admitted_at)?;
            let d = g.expected_duration?;
            Some((Time(start.0 + i64::try_from(d.0).ok()?), g.id.clone()))
        })
        .collect();
    ends.sort();
    let mut world = snapshot.clone();
    for (end, ended) in ends {
        world.gangs.retain(|g| g.id != ended);
        for n in &mut world.nodes {
            if n.reserved_for.as_ref() == Some(&ended) {
                n.reserved_for = None;
            }
        }
        let at = Time(end.0.max(now.0));
        let plan: Plan = muster_planner::plan(&world, policy, at);
        if plan.admissions.iter().any(|a| &a.gang == gang) {
            return Some((at, ended));
        }
    }
    None
}

/// One line per queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueLine {
    /// Name.
    pub queue: String,
    /// Gangs waiting.
    pub pending: u32,
    /// Gangs admitted or running.
    pub admitted: u32,
    /// GPUs held.
    pub gpus_used: String,
    /// GPU quota (sum of nominal GPU entries).
    pub gpu_quota: String,
    /// US dollars per hour of the nodes its gangs hold.
    pub price_per_hour: f64,
}

/// One line per queue of the snapshot.
pub fn queues(snapshot: &Snapshot) -> Vec<QueueLine> {
    muster_planner::usage::queues(snapshot)
        .into_iter()
        .map(|u| {
            let quota: Vec<String> = u
                .entries
                .iter()
                .filter(|e| {
                    matches!(
                        e.resource,
                        muster_planner::QuotaResource::Gpu
                            | muster_planner::QuotaResource::GpuModel(_)
                    )
                })
                .map(|e| e.nominal.to_string())
                .collect();
            let price: Price = snapshot
                .nodes
                .iter()
                .filter(|n| {
                    n.reserved_for.as_ref().is_some_and(|g| {
                        snapshot
                            .gangs
                            .iter()
                            .any(|x| &x.id == g && x.queue == u.queue)
                    })
                })
                .filter_map(|n| n.price)
                .sum();
            QueueLine {
                queue: u.queue,
                pending: u.pending,
                admitted: u.admitted + u.running,
                gpus_used: u.gpus_used.to_string(),
                gpu_quota: quota.join("+"),
                price_per_hour: price.usd(),
            }
        })
        .collect()
}

/// One line per pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolLine {
    /// Name.
    pub pool: String,
    /// Nodes launched or in flight.
    pub nodes: usize,
    /// GPUs on them.
    pub gpus: u64,
    /// GPUs on nodes held by a gang.
    pub gpus_allocated: u64,
    /// US dollars per hour of its nodes.
    pub price_per_hour: f64,
    /// Empty nodes the plan keeps warm (`spec.disruption.keepWarm`).
    pub warm_nodes: usize,
    /// US dollars per hour of those.
    pub warm_price_per_hour: f64,
    /// Machines that can still be launched into the capacity reservations
    /// among the pool's offerings (each reservation counted once).
    pub reserved: u64,
    /// When the first of those reservations ends, if one has an end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_ends_at: Option<String>,
}

/// The capacity reservations among the offerings `pool` may buy: machines
/// left in them (each reservation counted once, by id) and the earliest
/// end among them.
fn reserved(snapshot: &Snapshot, pool: &muster_planner::Pool) -> (u64, Option<Time>) {
    let mut by_id: BTreeMap<&str, &muster_planner::CapacityReservation> = BTreeMap::new();
    for o in &snapshot.offerings {
        // As the planner matches offerings to pools: same cloud, a NodeClass
        // either side leaves empty matches any.
        let class_matches = o.node_class.is_empty()
            || pool.node_class.is_empty()
            || o.node_class == pool.node_class;
        if o.provider != pool.provider || !class_matches || !pool.requirements.admits(o) {
            continue;
        }
        if let Some(r) = &o.reservation {
            by_id.entry(r.id.as_str()).or_insert(r);
        }
    }
    let left = by_id.values().map(|r| u64::from(r.available)).sum();
    let ends = by_id.values().filter_map(|r| r.ends_at).min();
    (left, ends)
}

/// One line per pool of the snapshot; `plan` is the planner's plan of it
/// (which nodes it keeps warm).
pub fn pools(snapshot: &Snapshot, plan: &Plan) -> Vec<PoolLine> {
    snapshot
        .pools
        .iter()
        .map(|p| {
            let (reserved, reserved_ends_at) = reserved(snapshot, p);
            let nodes: Vec<_> = snapshot
                .nodes
                .iter()
                .filter(|n| n.pool.as_deref() == Some(p.name.as_str()))
                .collect();
            let gpus = |n: &&muster_planner::Node| n.allocatable.gpu_millis / 1000;
            PoolLine {
                pool: p.name.clone(),
                nodes: nodes.len(),
                gpus: nodes.iter().map(gpus).sum(),
                gpus_allocated: nodes
                    .iter()
                    .filter(|n| n.reserved_for.is_some())
                    .map(gpus)
                    .sum(),
                price_per_hour: nodes.iter().filter_map(|n| n.price).sum::<Price>().usd(),
                warm_nodes: plan.warm.iter().filter(|w| w.pool == p.name).count(),
                warm_price_per_hour: plan
                    .warm
                    .iter()
                    .filter(|w| w.pool == p.name)
                    .map(|w| w.price)
                    .sum::<Price>()
                    .usd(),
                reserved,
                reserved_ends_at: reserved_ends_at.map(time::format),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{CapacityType, ReservationKind};

    fn offering(instance_type: &str, reservation: Option<(&str, u32, Option<i64>)>) -> Offering {
        let o = muster_planner::fixtures::offering(instance_type, "us-east-1a").node_class("nc");
        match reservation {
            Some((id, available, ends)) => o
                .reserved(
                    id,
                    ReservationKind::CapacityBlock,
                    available,
                    None,
                    ends.map(Time),
                )
                .build(),
            None => o.build(),
        }
    }

    /// A pool's RESERVED is the machines left in the reservations among
    /// the offerings it may buy, each reservation once, and ENDS the
    /// earliest end among them; a pool that may not buy reserved capacity
    /// shows none.
    #[test]
    fn pools_show_their_reserved_capacity_and_when_it_ends() {
        let pool = |name: &str, types: Vec<CapacityType>| {
            let mut p = muster_planner::fixtures::pool(name).build();
            p.node_class = "nc".into();
            p.requirements.capacity_types = types;
            p
        };
        let snapshot = Snapshot {
            pools: vec![
                pool(
                    "reserved",
                    vec![CapacityType::Reserved, CapacityType::OnDemand],
                ),
                pool("plain", vec![CapacityType::OnDemand]),
            ],
            offerings: vec![
                offering("p5.48xlarge", None),
                offering("p5.48xlarge", Some(("cr-1", 3, Some(7200)))),
                // the same reservation listed for a second shape: counted once
                offering("p5e.48xlarge", Some(("cr-1", 3, Some(7200)))),
                offering("p5.48xlarge", Some(("cr-2", 2, Some(3600)))),
                offering("p5.48xlarge", Some(("cr-3", 1, None))),
            ],
            ..Snapshot::default()
        };
        let lines = pools(&snapshot, &Plan::default());
        assert_eq!(lines[0].pool, "reserved");
        assert_eq!(lines[0].reserved, 6);
        assert_eq!(
            lines[0].reserved_ends_at.as_deref(),
            Some(time::format(Time(3600)).as_str())
        );
        assert_eq!(lines[1].reserved, 0);
        assert_eq!(lines[1].reserved_ends_at, None);
    }
}
