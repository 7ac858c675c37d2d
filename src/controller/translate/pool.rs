//! NodeClasses, GPUPools and GPUQueues → planner pools and queues.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::{
    Disruption, Dur, Pool, PoolLimits, PoolRequirements, PreemptionPolicy, Provider, Queue,
    QueueingStrategy, Quota, ReclaimPolicy, Taint, TaintEffect,
};
use serde::de::DeserializeOwned;

use super::{Issue, IssueReason};
use crate::controller::objects::{GpuPoolSpec, GpuQueueSpec, Kind};

/// The `spec` of an object parsed into `T`, or an issue.
pub fn spec<T: DeserializeOwned>(kind: Kind, obj: &DynamicObject) -> Result<T, Issue> {
    let raw = obj
        .data
        .get("spec")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    serde_json::from_value(raw)
        .map_err(|e| Issue::new(kind, obj, IssueReason::InvalidSpec, format!("spec: {e}")))
}

fn field<T: DeserializeOwned + Default>(
    kind: Kind,
    obj: &DynamicObject,
    name: &str,
    value: &serde_json::Value,
) -> Result<T, Issue> {
    if value.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(value.clone()).map_err(|e| {
        Issue::new(
            kind,
            obj,
            IssueReason::InvalidSpec,
            format!("spec.{name}: {e}"),
        )
    })
}

fn dur(
    kind: Kind,
    obj: &DynamicObject,
    name: &str,
    v: &Option<String>,
) -> Result<Option<Dur>, Issue> {
    v.as_deref()
        .map(|s| {
            Dur::parse(s).map_err(|e| {
                Issue::new(
                    kind,
                    obj,
                    IssueReason::InvalidSpec,
                    format!("spec.{name}: {e}"),
                )
            })
        })
        .transpose()
}

/// The cloud of each NodeClass, by name (from which provider block is set).
pub fn node_classes(
    objs: &[Arc<DynamicObject>],
    issues: &mut Vec<Issue>,
) -> BTreeMap<String, Provider> {
    let mut out = BTreeMap::new();
    for obj in objs {
        let spec = obj.data.get("spec");
        let clouds: Vec<Provider> = [
            ("aws", Provider::Aws),
            ("gcp", Provider::Gcp),
            ("sim", Provider::Sim),
        ]
        .into_iter()
        .filter(|(k, _)| spec.and_then(|s| s.get(k)).is_some_and(|v| !v.is_null()))
        .map(|(_, p)| p)
        .collect();
        match clouds.as_slice() {
            [one] => {
                out.insert(obj.name_any(), *one);
            }
            _ => issues.push(Issue::new(
                Kind::NodeClass,
                obj,
                IssueReason::InvalidSpec,
                "spec must set exactly one of aws, gcp".to_string(),
            )),
        }
    }
    out
}

/// GPUPools → planner pools. A pool whose NodeClass is unknown is an issue.
pub fn pools(
    objs: &[Arc<DynamicObject>],
    node_classes: &BTreeMap<String, Provider>,
    issues: &mut Vec<Issue>,
) -> Vec<Pool> {
    let mut out = Vec::new();
    for obj in objs {
        if obj.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match pool(obj, node_classes) {
            Ok(p) => out.push(p),
            Err(i) => issues.push(i),
        }
    }
    out
}

fn pool(obj: &DynamicObject, node_classes: &BTreeMap<String, Provider>) -> Result<Pool, Issue> {
    let k = Kind::GpuPool;
    let s: GpuPoolSpec = spec(k, obj)?;
    let provider = *node_classes.get(&s.node_class_ref.name).ok_or_else(|| {
        Issue::new(
            k,
            obj,
            IssueReason::InvalidReference,
            format!(
                "spec.nodeClassRef: NodeClass {:?} does not exist or is invalid",
                s.node_class_ref.name
            ),
        )
    })?;
    let requirements: PoolRequirements = field(k, obj, "requirements", &s.requirements)?;
    let limits: PoolLimits = field(k, obj, "limits", &s.limits)?;
    let disruption: Disruption = field(k, obj, "disruption", &s.disruption)?;
    let taints = match &s.taints {
        None => muster_planner::model::pool::default_taints(),
        Some(list) => list
            .iter()
            .map(|t| {
                let effect = match t.effect.as_str() {
                    "NoSchedule" => TaintEffect::NoSchedule,
                    "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
                    "NoExecute" => TaintEffect::NoExecute,
                    other => {
                        return Err(Issue::new(
                            k,
                            obj,
                            IssueReason::InvalidSpec,
                            format!("spec.taints: unknown effect {other:?}"),
                        ));
                    }
                };
                Ok(Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect,
                })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Pool {
        name: obj.name_any(),
        node_class: s.node_class_ref.name.clone(),
        provider,
        weight: s.weight,
        requirements,
        limits,
        disruption,
        labels: s.labels,
        taints,
        provisioning_timeout: dur(k, obj, "provisioningTimeout", &s.provisioning_timeout)?,
    })
}

/// GPUQueues → planner queues.
pub fn queues(objs: &[Arc<DynamicObject>], issues: &mut Vec<Issue>) -> Vec<Queue> {
    let mut out = Vec::new();
    for obj in objs {
        match queue(obj) {
            Ok(q) => out.push(q),
            Err(i) => issues.push(i),
        }
    }
    out
}

fn enum_field<T: DeserializeOwned + Default>(
    obj: &DynamicObject,
    name: &str,
    v: &Option<String>,
) -> Result<T, Issue> {
    match v {
        None => Ok(T::default()),
        Some(s) => field(
            Kind::GpuQueue,
            obj,
            name,
            &serde_json::Value::String(s.clone()),
        ),
    }
}

fn queue(obj: &DynamicObject) -> Result<Queue, Issue> {
    let k = Kind::GpuQueue;
    let s: GpuQueueSpec = spec(k, obj)?;
    let quotas: Vec<Quota> = field(k, obj, "quotas", &s.quotas)?;
    let weight = s.weight.unwrap_or(1.0);
    if !(weight.is_finite() && weight > 0.0) {
        return Err(Issue::new(
            k,
            obj,
            IssueReason::InvalidSpec,
            "spec.weight must be > 0".to_string(),
        ));
    }
    Ok(Queue {
        name: obj.name_any(),
        cohort: s.cohort.clone(),
        weight,
        quotas,
        preemption: enum_field::<PreemptionPolicy>(obj, "preemption", &s.preemption)?,
        reclaim: enum_field::<ReclaimPolicy>(obj, "reclaim", &s.reclaim)?,
        pools: s.pools.clone(),
        strategy: enum_field::<QueueingStrategy>(obj, "strategy", &s.strategy)?,
        pods_ready_timeout: dur(k, obj, "podsReadyTimeout", &s.pods_ready_timeout)?,
        stopped: matches!(s.stop_policy.as_deref(), Some("Hold" | "HoldAndDrain")),
    })
}
