//! `GPUPool` and `GPUQueue` status, from the snapshot and this cycle's
//! figures: nodes, GPUs (total and allocated) and dollars per hour per pool,
//! with a `Ready` condition (offerings known); gangs pending, admitted and
//! running per queue and its quota usage, borrowing included
//! (`muster_planner::usage`), with an `Active` condition. Writes only what
//! changed.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_crds::common::{Quantity as CrdQuantity, Usd};
use muster_crds::gpuqueue::ResourceUsage;
use muster_crds::{GpuPoolStatus, GpuQueueStatus};
use muster_planner::{NodePhase, Snapshot, Time};

use crate::controller::base::api::{patch_status, status_patch, with_condition};
use crate::controller::base::conditions::ConditionType;
use crate::controller::base::objects::{Condition, Kind};
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::steps::status::report::Figures;

/// The status (without conditions) of every pool of the snapshot.
pub(crate) fn pools(snapshot: &Snapshot, f: &Figures) -> BTreeMap<String, GpuPoolStatus> {
    let mut out = BTreeMap::new();
    for pool in &snapshot.pools {
        let nodes: Vec<_> = snapshot
            .nodes
            .iter()
            .filter(|n| n.pool.as_deref() == Some(pool.name.as_str()))
            .filter(|n| n.phase != NodePhase::Terminating)
            .collect();
        let gpus: u64 = nodes.iter().map(|n| n.allocatable.gpus_ceil()).sum();
        let allocated = f.pool_allocated.get(&pool.name).copied().unwrap_or(0);
        let cost = f.pool_cost.get(&pool.name).copied().unwrap_or(0.0);
        let int = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
        out.insert(
            pool.name.clone(),
            GpuPoolStatus {
                nodes: int(nodes.len() as u64),
                gpus: int(gpus),
                gpus_allocated: i32::try_from(allocated).unwrap_or(i32::MAX),
                price_per_hour: Some(Usd(format!("{cost:.6}"))),
                ..Default::default()
            },
        );
    }
    out
}

/// The status (without conditions) of every queue of the snapshot.
pub(crate) fn queues(snapshot: &Snapshot) -> BTreeMap<String, GpuQueueStatus> {
    let int = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
    muster_planner::usage::queues(snapshot)
        .into_iter()
        .map(|u| {
            let usage: Vec<ResourceUsage> = u
                .entries
                .iter()
                .map(|e| {
                    let (name, model) = match &e.resource {
                        muster_planner::QuotaResource::GpuModel(m) => {
                            ("nvidia.com/gpu".to_string(), Some(m.as_str().to_string()))
                        }
                        r => (r.to_string(), None),
                    };
                    ResourceUsage {
                        name,
                        gpu_model: model,
                        used: CrdQuantity(e.used.to_string()),
                        nominal: CrdQuantity(e.nominal.to_string()),
                        borrowed: (e.borrowed != muster_planner::Quantity::ZERO)
                            .then(|| CrdQuantity(e.borrowed.to_string())),
                    }
                })
                .collect();
            (
                u.queue,
                GpuQueueStatus {
                    pending_gangs: int(u.pending as u64),
                    admitted_gangs: int(u.admitted as u64),
                    running_gangs: int(u.running as u64),
                    gpus_used: Some(CrdQuantity(u.gpus_used.to_string())),
                    usage,
                    ..Default::default()
                },
            )
        })
        .collect()
}

/// The object's status as the CRD's typed status (default when absent or
/// unreadable).
fn typed<T: serde::de::DeserializeOwned + Default>(obj: &DynamicObject) -> T {
    obj.data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

/// Writes `after` (its conditions and generation filled in here) as the
/// merge patch from the object's typed status; nothing when equal.
async fn write<T: serde::Serialize>(
    ctx: &Ctx,
    kind: Kind,
    obj: &DynamicObject,
    before: &T,
    after: &T,
) {
    let Some(patch) = status_patch(before, after) else {
        return;
    };
    if let Err(e) = patch_status(&ctx.client, kind, None, &obj.name_any(), patch).await {
        tracing::warn!(name = %obj.name_any(), error = %e, "could not write status");
    }
}

fn condition(
    obj: &DynamicObject,
    type_: ConditionType,
    ok: bool,
    reason: &str,
    message: String,
    now: Time,
) -> Condition {
    crate::controller::base::api::condition(
        type_,
        ok,
        reason,
        message,
        now,
        obj.metadata.generation,
    )
}

/// Writes the status of every pool and queue the snapshot holds.
pub(crate) async fn update(
    ctx: &Ctx,
    snapshot: &Snapshot,
    observed: &Observed,
    f: &Figures,
    now: Time,
) {
    let pools = pools(snapshot, f);
    for obj in observed.of(Kind::GpuPool) {
        let Some(fields) = pools.get(&obj.name_any()) else {
            continue; // left out of the snapshot: its Valid condition says why
        };
        let offerings = snapshot
            .offerings
            .iter()
            .filter(|o| {
                snapshot
                    .pools
                    .iter()
                    .any(|p| p.name == obj.name_any() && p.node_class == o.node_class)
            })
            .count();
        let cond = if offerings > 0 {
            condition(
                obj,
                ConditionType::Ready,
                true,
                "OfferingsKnown",
                format!("{offerings} offerings"),
                now,
            )
        } else {
            condition(
                obj,
                ConditionType::Ready,
                false,
                "NoOfferings",
                "no offering of the NodeClass is known yet, so the pool cannot launch; see the NodeClass's Ready condition, and check that the pool's requirements match instance types the cloud sells".into(),
                now,
            )
        };
        let before: GpuPoolStatus = typed(obj);
        let after = GpuPoolStatus {
            conditions: with_condition(obj, cond).unwrap_or_else(|| before.conditions.clone()),
            observed_generation: obj.metadata.generation,
            ..fields.clone()
        };
        write(ctx, Kind::GpuPool, obj, &before, &after).await;
    }
    let queues = queues(snapshot);
    for obj in observed.of(Kind::GpuQueue) {
        let Some(fields) = queues.get(&obj.name_any()) else {
            continue;
        };
        let stopped = snapshot
            .queues
            .iter()
            .any(|q| q.name == obj.name_any() && q.stopped);
        let cond = if stopped {
            condition(
                obj,
                ConditionType::Active,
                false,
                "Stopped",
                "spec.stopPolicy stops the queue: it admits no new gang; set it to None to admit again".into(),
                now,
            )
        } else {
            condition(
                obj,
                ConditionType::Active,
                true,
                "Admitting",
                "the queue admits gangs (spec.stopPolicy is None)".into(),
                now,
            )
        };
        let before: GpuQueueStatus = typed(obj);
        let name = obj.name_any();
        let mut conditions = with_condition(obj, cond).unwrap_or_else(|| before.conditions.clone());
        if let Some(c) = kinds_condition(
            obj,
            ctx.caches.missing_kinds(),
            ctx.caches.refused_kinds(),
            now,
        ) {
            conditions.retain(|x| x.type_ != c.type_);
            conditions.push(c);
        }
        let after = GpuQueueStatus {
            conditions,
            observed_generation: obj.metadata.generation,
            price_per_hour: f.queue_cost.get(&name).map(|c| Usd(format!("{c:.2}"))),
            // one decimal: the status changes at most every few minutes
            gpu_hours_last_24h: f.gpu_hours_24h.get(&name).map(|h| format!("{h:.1}")),
            gpu_hours_by_hour: f
                .gpu_hours_by_hour
                .get(&name)
                .map(|b| hour_buckets(b))
                .unwrap_or_default(),
            ..fields.clone()
        };
        write(ctx, Kind::GpuQueue, obj, &before, &after).await;
    }
}

/// `WorkloadKindsServed`: False, naming the enabled kinds whose CRD the API
/// server does not serve (reason `CRDNotInstalled`) and those it serves in
/// a version muster cannot run (`refused`, with why; reason
/// `UnsupportedVersion` when no CRD is missing) — their objects are not run
/// as gangs; True once a queue that said so sees them all served; absent
/// on a queue that never had a kind to report. `None` when nothing is to
/// be written.
fn kinds_condition(
    obj: &DynamicObject,
    missing: &[crate::controller::workloads::WorkloadKind],
    refused: &[(crate::controller::workloads::WorkloadKind, String)],
    now: Time,
) -> Option<Condition> {
    let had = crate::controller::base::api::conditions(obj)
        .iter()
        .any(|c| c.type_ == ConditionType::WorkloadKindsServed.as_str());
    let refusals = refused
        .iter()
        .map(|(k, why)| format!("workload kind {} is not run: {why}", k.as_str()))
        .collect::<Vec<_>>()
        .join("; ");
    let cond = if missing.is_empty() && refused.is_empty() {
        if !had {
            return None;
        }
        condition(
            obj,
            ConditionType::WorkloadKindsServed,
            true,
            "Served",
            String::new(),
            now,
        )
    } else if missing.is_empty() {
        condition(
            obj,
            ConditionType::WorkloadKindsServed,
            false,
            "UnsupportedVersion",
            refusals,
            now,
        )
    } else {
        let crds: Vec<String> = missing
            .iter()
            .filter_map(|k| {
                k.custom().map(|c| {
                    // with the CRDs its adapter reads besides (a TrainJob's runtimes)
                    let crds: Vec<String> = std::iter::once(c)
                        .chain(k.related().iter().map(|r| r.kind))
                        .map(|c| c.crd_name())
                        .collect();
                    format!("{} ({})", k.as_str(), crds.join(", "))
                })
            })
            .collect();
        let mut message = format!(
            "enabled workload kinds whose CRD is not installed are not run as gangs: {}; install the CRD and restart muster, or drop the kind from --workload-kinds",
            crds.join(", ")
        );
        if !refusals.is_empty() {
            message = format!("{message}; {refusals}");
        }
        condition(
            obj,
            ConditionType::WorkloadKindsServed,
            false,
            "CRDNotInstalled",
            message,
            now,
        )
    };
    let same = crate::controller::base::api::conditions(obj)
        .iter()
        .any(|c| {
            c.type_ == cond.type_
                && c.status == cond.status
                && c.reason == cond.reason
                && c.message == cond.message
        });
    (!same).then_some(cond)
}

/// The status form of a queue's hourly buckets: one decimal, rounded
/// down, so what a later leader reads back never exceeds what was counted
/// (and the status changes at most every few minutes).
pub(crate) fn hour_buckets(buckets: &[(i64, f64)]) -> Vec<muster_crds::gpuqueue::GpuHoursBucket> {
    buckets
        .iter()
        .map(|&(start, hours)| muster_crds::gpuqueue::GpuHoursBucket {
            hour: crate::controller::base::time::to_kube(muster_planner::Time(start)),
            gpu_hours: format!("{:.1}", (hours.max(0.0) * 10.0).floor() / 10.0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_status_reports_usage_and_borrowing() {
        let input: muster_planner::PlanInput = serde_norway::from_str(include_str!(
            "../../../../docs/examples/snapshots/cohort-reclaim.yaml"
        ))
        .expect("example");
        let q: BTreeMap<String, serde_json::Value> = queues(&input.snapshot)
            .into_iter()
            .map(|(k, v)| (k, serde_json::to_value(v).expect("json")))
            .collect();
        assert_eq!(q["team-b"]["runningGangs"], 2);
        assert_eq!(q["team-b"]["gpusUsed"], "16");
        assert_eq!(q["team-b"]["usage"][0]["name"], "nvidia.com/gpu");
        assert_eq!(q["team-b"]["usage"][0]["used"], "16");
        assert_eq!(q["team-b"]["usage"][0]["borrowed"], "8");
        assert_eq!(q["team-a"]["pendingGangs"], 1);
        assert_eq!(q["team-a"]["usage"][0]["borrowed"], serde_json::Value::Null);
    }

    #[test]
    fn pool_status_counts_nodes_gpus_and_cost() {
        let input: muster_planner::PlanInput = serde_norway::from_str(include_str!(
            "../../../../docs/examples/snapshots/cohort-reclaim.yaml"
        ))
        .expect("example");
        let s = &input.snapshot;
        let plan = muster_planner::Plan::default();
        let f = crate::controller::steps::status::report::figures(s, &plan, input.now, 0.0);
        let p: BTreeMap<String, serde_json::Value> = pools(s, &f)
            .into_iter()
            .map(|(k, v)| (k, serde_json::to_value(v).expect("json")))
            .collect();
        assert_eq!(p["gpu"]["nodes"], 2);
        assert_eq!(p["gpu"]["gpus"], 16);
        assert_eq!(p["gpu"]["gpusAllocated"], 16);
        assert_eq!(p["gpu"]["pricePerHour"], "64.000000");
    }
}
