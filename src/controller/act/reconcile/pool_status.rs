//! `GPUPool` and `GPUQueue` status, from the snapshot and this cycle's
//! figures: nodes, GPUs (total and allocated) and dollars per hour per pool,
//! with a `Ready` condition (offerings known); gangs pending, admitted and
//! running per queue and its quota usage, borrowing included
//! (`muster_planner::usage`), with an `Active` condition. Writes only what
//! changed.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::{NodePhase, Snapshot, Time};
use serde_json::{Value, json};

use super::super::{patch_status, with_condition};
use crate::controller::ctx::Ctx;
use crate::controller::objects::{Condition, Kind};
use crate::controller::report_metrics::Figures;
use crate::controller::translate::Observed;

/// The status fields (without conditions) of every pool of the snapshot.
pub fn pools(snapshot: &Snapshot, f: &Figures) -> BTreeMap<String, Value> {
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
        out.insert(
            pool.name.clone(),
            json!({
                "nodes": nodes.len(),
                "gpus": gpus,
                "gpusAllocated": allocated,
                "pricePerHour": format!("{cost:.6}"),
            }),
        );
    }
    out
}

/// The status fields (without conditions) of every queue of the snapshot.
pub fn queues(snapshot: &Snapshot) -> BTreeMap<String, Value> {
    muster_planner::usage::queues(snapshot)
        .into_iter()
        .map(|u| {
            let usage: Vec<Value> = u
                .entries
                .iter()
                .map(|e| {
                    let (name, model) = match &e.resource {
                        muster_planner::QuotaResource::GpuModel(m) => {
                            ("nvidia.com/gpu".to_string(), Some(m.as_str().to_string()))
                        }
                        r => (r.to_string(), None),
                    };
                    json!({
                        "name": name,
                        "gpuModel": model,
                        "used": e.used.to_string(),
                        "nominal": e.nominal.to_string(),
                        "borrowed": (e.borrowed != muster_planner::Quantity::ZERO).then(|| e.borrowed.to_string()),
                    })
                })
                .collect();
            (
                u.queue,
                json!({
                    "pendingGangs": u.pending,
                    "admittedGangs": u.admitted,
                    "runningGangs": u.running,
                    "gpusUsed": u.gpus_used.to_string(),
                    "usage": usage,
                }),
            )
        })
        .collect()
}

/// True when every field of `want` is already in the object's status.
fn unchanged(obj: &DynamicObject, want: &Value) -> bool {
    let have = obj.data.get("status").cloned().unwrap_or(Value::Null);
    want.as_object().is_some_and(|m| {
        m.iter().all(|(k, v)| {
            let h = have.get(k).cloned().unwrap_or(Value::Null);
            h == *v || (v.is_null() && h.is_null())
        })
    })
}

async fn write(ctx: &Ctx, kind: Kind, obj: &DynamicObject, mut fields: Value, cond: Condition) {
    let conds = with_condition(obj, cond);
    if unchanged(obj, &fields) && conds.is_none() {
        return;
    }
    if let Some(m) = fields.as_object_mut() {
        if let Some(c) = conds {
            m.insert(
                "conditions".into(),
                serde_json::to_value(c).unwrap_or_default(),
            );
        }
        m.insert("observedGeneration".into(), json!(obj.metadata.generation));
    }
    if let Err(e) = patch_status(&ctx.client, kind, None, &obj.name_any(), fields).await {
        tracing::warn!(name = %obj.name_any(), error = %e, "could not write status");
    }
}

fn condition(
    obj: &DynamicObject,
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    now: Time,
) -> Condition {
    crate::controller::act::condition(type_, ok, reason, message, now, obj.metadata.generation)
}

/// Writes the status of every pool and queue the snapshot holds.
pub async fn update(ctx: &Ctx, snapshot: &Snapshot, observed: &Observed, f: &Figures, now: Time) {
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
                "Ready",
                true,
                "OfferingsKnown",
                format!("{offerings} offerings"),
                now,
            )
        } else {
            condition(
                obj,
                "Ready",
                false,
                "NoOfferings",
                "no offering of the NodeClass is known yet (see the NodeClass status)".into(),
                now,
            )
        };
        write(ctx, Kind::GpuPool, obj, fields.clone(), cond).await;
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
                "Active",
                false,
                "Stopped",
                "the queue is stopped".into(),
                now,
            )
        } else {
            condition(obj, "Active", true, "Admitting", String::new(), now)
        };
        write(ctx, Kind::GpuQueue, obj, fields.clone(), cond).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_status_reports_usage_and_borrowing() {
        let input: muster_planner::PlanInput = serde_yaml::from_str(include_str!(
            "../../../../docs/examples/snapshots/cohort-reclaim.yaml"
        ))
        .expect("example");
        let q = queues(&input.snapshot);
        assert_eq!(q["team-b"]["runningGangs"], 2);
        assert_eq!(q["team-b"]["gpusUsed"], "16");
        assert_eq!(q["team-b"]["usage"][0]["name"], "nvidia.com/gpu");
        assert_eq!(q["team-b"]["usage"][0]["used"], "16");
        assert_eq!(q["team-b"]["usage"][0]["borrowed"], "8");
        assert_eq!(q["team-a"]["pendingGangs"], 1);
        assert_eq!(q["team-a"]["usage"][0]["borrowed"], Value::Null);
    }

    #[test]
    fn pool_status_counts_nodes_gpus_and_cost() {
        let input: muster_planner::PlanInput = serde_yaml::from_str(include_str!(
            "../../../../docs/examples/snapshots/cohort-reclaim.yaml"
        ))
        .expect("example");
        let s = &input.snapshot;
        let plan = muster_planner::Plan::default();
        let f = crate::controller::report_metrics::figures(s, &plan, input.now, 0.0);
        let p = pools(s, &f);
        assert_eq!(p["gpu"]["nodes"], 2);
        assert_eq!(p["gpu"]["gpus"], 16);
        assert_eq!(p["gpu"]["gpusAllocated"], 16);
        assert_eq!(p["gpu"]["pricePerHour"], "64.000000");
    }
}
