//! NodeClasses, GPUPools and GPUQueues → planner pools and queues.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_crds::common as crd;
use muster_crds::gpupool::{ConsolidationPolicy as CrdConsolidation, GpuPoolSpec};
use muster_crds::gpuqueue::{
    GpuQueueSpec, QueueingStrategy as CrdStrategy, ReclaimPolicy as CrdReclaim, StopPolicy,
    WithinQueuePreemption,
};
use muster_crds::kubelet_labels::{MESSAGE, kubelet_may_set};
use muster_planner::{
    CapacityType, ConsolidationPolicy, Disruption, Dur, GpuModel, Pool, PoolLimits,
    PoolRequirements, PreemptionPolicy, Price, Provider, Quantity, Queue, QueueingStrategy, Quota,
    QuotaResource, ReclaimPolicy, Taint, TaintEffect,
};
use serde::de::DeserializeOwned;

use crate::controller::base::objects::Kind;
use crate::controller::cloud::clouds::CloudName;
use crate::controller::translate::{Issue, IssueReason};

/// The `spec` of an object parsed into `T`, or an issue.
pub(crate) fn spec<T: DeserializeOwned>(kind: Kind, obj: &DynamicObject) -> Result<T, Issue> {
    let raw = obj
        .data
        .get("spec")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    // the error names the field path (spec.limits.maxGPUs: …)
    serde_path_to_error::deserialize(raw)
        .map_err(|e| Issue::new(kind, obj, IssueReason::InvalidSpec, format!("spec.{e}")))
}

fn invalid(kind: Kind, obj: &DynamicObject, message: String) -> Issue {
    Issue::new(kind, obj, IssueReason::InvalidSpec, message)
}

/// A CRD duration as planner seconds (rounded up).
pub(crate) fn dur(
    kind: Kind,
    obj: &DynamicObject,
    name: &str,
    d: &crd::Duration,
) -> Result<Dur, Issue> {
    d.to_std()
        .map(|s| Dur(s.as_secs() + u64::from(s.subsec_nanos() > 0)))
        .map_err(|e| invalid(kind, obj, format!("spec.{name}: {e}")))
}

fn quantity(
    kind: Kind,
    obj: &DynamicObject,
    name: &str,
    q: &crd::Quantity,
) -> Result<Quantity, Issue> {
    Quantity::parse(q.as_str()).map_err(|e| invalid(kind, obj, format!("spec.{name}: {e}")))
}

fn usd(kind: Kind, obj: &DynamicObject, name: &str, u: &crd::Usd) -> Result<Price, Issue> {
    u.as_str()
        .parse::<f64>()
        .ok()
        .and_then(Price::from_usd)
        .ok_or_else(|| {
            invalid(
                kind,
                obj,
                format!("spec.{name}: invalid dollar amount {:?}", u.as_str()),
            )
        })
}

fn count(kind: Kind, obj: &DynamicObject, name: &str, n: i32) -> Result<u32, Issue> {
    u32::try_from(n).map_err(|_| invalid(kind, obj, format!("spec.{name}: must not be negative")))
}

/// A CRD capacity type as the planner's.
pub(crate) fn capacity_type(c: crd::CapacityType) -> CapacityType {
    match c {
        crd::CapacityType::Spot => CapacityType::Spot,
        crd::CapacityType::OnDemand => CapacityType::OnDemand,
        crd::CapacityType::Reserved => CapacityType::Reserved,
        crd::CapacityType::FlexStart => CapacityType::FlexStart,
    }
}

/// A CRD taint as the planner's.
pub(crate) fn taint(t: &crd::Taint) -> Taint {
    Taint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: match t.effect {
            crd::TaintEffect::NoSchedule => TaintEffect::NoSchedule,
            crd::TaintEffect::PreferNoSchedule => TaintEffect::PreferNoSchedule,
            crd::TaintEffect::NoExecute => TaintEffect::NoExecute,
        },
    }
}

/// The cloud of each NodeClass, by name (from which provider block is set).
pub(crate) fn node_classes(
    objs: &[Arc<DynamicObject>],
    issues: &mut Vec<Issue>,
) -> BTreeMap<String, Provider> {
    let mut out = BTreeMap::new();
    for obj in objs {
        let clouds: Vec<Provider> = obj
            .data
            .get("spec")
            .map(CloudName::all_of_spec)
            .unwrap_or_default()
            .into_iter()
            .map(CloudName::planner_provider)
            .collect();
        match clouds.as_slice() {
            [one] => {
                out.insert(obj.name_any(), *one);
            }
            _ => issues.push(Issue::new(
                Kind::NodeClass,
                obj,
                IssueReason::InvalidSpec,
                "spec must set exactly one of aws, gcp, sim, karpenter".to_string(),
            )),
        }
    }
    out
}

/// GPUPools → planner pools. A pool whose NodeClass is unknown is an issue.
pub(crate) fn pools(
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

/// The network topology each queue's gangs take when their Gang names none
/// (`spec.networkTopology` of a GPUPool): the default of the first pool in
/// the queue's pool order that sets one — its `spec.pools` as listed, or
/// every pool by weight (highest first) then name when it lists none, as
/// the planner tries them. Only `pools` (the valid ones) count; queues
/// without such a pool are absent.
pub(crate) fn network_defaults(
    objs: &[Arc<DynamicObject>],
    pools: &[Pool],
    queues: &[Queue],
) -> BTreeMap<String, muster_planner::NetworkTopology> {
    let mut set: BTreeMap<String, muster_planner::NetworkTopology> = BTreeMap::new();
    for obj in objs {
        let name = obj.name_any();
        if !pools.iter().any(|p| p.name == name) {
            continue;
        }
        let Ok(s) = spec::<GpuPoolSpec>(Kind::GpuPool, obj) else {
            continue;
        };
        if let Some(t) = s
            .network_topology
            .as_ref()
            .and_then(crate::controller::translate::gang::network)
        {
            set.insert(name, t);
        }
    }
    if set.is_empty() {
        return BTreeMap::new();
    }
    let mut by_weight: Vec<&Pool> = pools.iter().collect();
    by_weight.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    let mut out = BTreeMap::new();
    for q in queues {
        let first = if q.pools.is_empty() {
            by_weight.iter().find_map(|p| set.get(&p.name))
        } else {
            q.pools.iter().find_map(|p| set.get(p))
        };
        if let Some(t) = first {
            out.insert(q.name.clone(), *t);
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
    // stored before the CRD refused them: a node with such a label would
    // never start its kubelet, so the pool buys nothing until it is fixed
    if let Some(key) = s.labels.keys().find(|key| !kubelet_may_set(key)) {
        return Err(invalid(k, obj, format!("{MESSAGE}: {key}")));
    }
    let r = &s.requirements;
    let gpus = r.gpus_per_node.as_ref();
    let requirements = PoolRequirements {
        instance_types: r.instance_types.clone(),
        instance_families: r.instance_families.clone(),
        gpu_models: r.gpu_models.iter().map(|m| GpuModel::new(m)).collect(),
        min_gpus: gpus
            .and_then(|g| g.min)
            .map(|n| count(k, obj, "requirements.gpusPerNode.min", n))
            .transpose()?,
        max_gpus: gpus
            .and_then(|g| g.max)
            .map(|n| count(k, obj, "requirements.gpusPerNode.max", n))
            .transpose()?,
        min_gpu_memory_mib: r
            .gpu_memory_min
            .as_ref()
            .map(|q| quantity(k, obj, "requirements.gpuMemoryMin", q))
            .transpose()?
            .map(|q| u64::try_from(q.units_ceil()).unwrap_or(0) / (1024 * 1024)),
        zones: r.zones.clone(),
        capacity_types: r
            .capacity_types
            .iter()
            .copied()
            .map(capacity_type)
            .collect(),
    };
    let limits = match &s.limits {
        None => PoolLimits::default(),
        Some(l) => PoolLimits {
            max_gpus: l
                .max_gpus
                .map(|n| count(k, obj, "limits.maxGPUs", n).map(u64::from))
                .transpose()?,
            max_nodes: l
                .max_nodes
                .map(|n| count(k, obj, "limits.maxNodes", n).map(u64::from))
                .transpose()?,
            max_price_per_hour: l
                .max_price_per_hour
                .as_ref()
                .map(|u| usd(k, obj, "limits.maxPricePerHour", u))
                .transpose()?,
        },
    };
    let d = &s.disruption;
    // the standing budget (no schedule) limits disruption: "10%" or a node count
    let standing = d.budgets.iter().find(|b| b.schedule.is_none());
    let (max_nodes, max_percent) =
        match standing.map(|b| b.nodes.trim()) {
            Some(n) if n.ends_with('%') => (
                None,
                n.trim_end_matches('%').parse::<u32>().map_err(|e| {
                    invalid(k, obj, format!("spec.disruption.budgets[].nodes: {e}"))
                })?,
            ),
            Some(n) => (
                Some(n.parse::<u64>().map_err(|e| {
                    invalid(k, obj, format!("spec.disruption.budgets[].nodes: {e}"))
                })?),
                100,
            ),
            None => (None, 100),
        };
    let disruption = Disruption {
        consolidation: match d.consolidation_policy {
            CrdConsolidation::WhenEmpty => ConsolidationPolicy::WhenEmpty,
            CrdConsolidation::WhenUnderutilized => ConsolidationPolicy::WhenUnderutilized,
        },
        consolidate_after: dur(k, obj, "disruption.consolidateAfter", &d.consolidate_after)?,
        scale_to_zero_after: dur(
            k,
            obj,
            "disruption.scaleToZeroAfter",
            &d.scale_to_zero_after,
        )?,
        max_disrupted_nodes: max_nodes,
        max_disrupted_percent: max_percent,
        keep_warm: keep_warm(k, obj, &d.keep_warm)?,
    };
    Ok(Pool {
        name: obj.name_any(),
        node_class: s.node_class_ref.name.clone(),
        provider,
        weight: s.weight,
        requirements,
        limits,
        disruption,
        labels: s.labels.clone(),
        taints: s.taints.iter().map(taint).collect(),
        provisioning_timeout: Some(dur(k, obj, "provisioningTimeout", &s.provisioning_timeout)?),
    })
}

/// `spec.disruption.keepWarm` → the planner's; a `0s` window keeps none.
fn keep_warm(
    k: Kind,
    obj: &DynamicObject,
    w: &muster_crds::gpupool::KeepWarm,
) -> Result<Option<muster_planner::model::KeepWarm>, Issue> {
    let window = dur(k, obj, "disruption.keepWarm.window", &w.window)?;
    if window.as_secs() == 0 {
        return Ok(None);
    }
    Ok(Some(muster_planner::model::KeepWarm {
        window,
        burst: dur(k, obj, "disruption.keepWarm.burst", &w.burst)?,
        max_price_per_hour: w
            .max_price_per_hour
            .as_ref()
            .map(|u| usd(k, obj, "disruption.keepWarm.maxPricePerHour", u))
            .transpose()?,
        all_sizes: w.all_sizes,
    }))
}

/// GPUQueues → planner queues.
pub(crate) fn queues(objs: &[Arc<DynamicObject>], issues: &mut Vec<Issue>) -> Vec<Queue> {
    let mut out = Vec::new();
    for obj in objs {
        match queue(obj) {
            Ok(q) => out.push(q),
            Err(i) => issues.push(i),
        }
    }
    out
}

fn queue(obj: &DynamicObject) -> Result<Queue, Issue> {
    let k = Kind::GpuQueue;
    let s: GpuQueueSpec = spec(k, obj)?;
    let mut quotas = Vec::new();
    for r in &s.resources {
        let resource = match &r.gpu_model {
            Some(m) if r.name == muster_planner::resources::GPU => {
                QuotaResource::GpuModel(GpuModel::new(m))
            }
            Some(_) => {
                return Err(invalid(
                    k,
                    obj,
                    format!("spec.resources[{}].gpuModel: only for GPUs", r.name),
                ));
            }
            None => QuotaResource::parse(&r.name),
        };
        let field = |what: &str| format!("resources[{}].{what}", r.name);
        quotas.push(Quota {
            resource,
            nominal: quantity(k, obj, &field("nominal"), &r.nominal)?,
            borrowing_limit: r
                .borrowing_limit
                .as_ref()
                .map(|q| quantity(k, obj, &field("borrowingLimit"), q))
                .transpose()?,
            lending_limit: r
                .lending_limit
                .as_ref()
                .map(|q| quantity(k, obj, &field("lendingLimit"), q))
                .transpose()?,
        });
    }
    let weight = quantity(k, obj, "weight", &s.weight)?.millis() as f64 / 1000.0;
    if !(weight.is_finite() && weight > 0.0) {
        return Err(invalid(k, obj, "spec.weight must be > 0".to_string()));
    }
    Ok(Queue {
        name: obj.name_any(),
        cohort: s.cohort.clone(),
        weight,
        quotas,
        preemption: match s.preemption.within_queue {
            WithinQueuePreemption::Never => PreemptionPolicy::Never,
            WithinQueuePreemption::LowerPriority => PreemptionPolicy::LowerPriority,
        },
        reclaim: match s.preemption.reclaim_within_cohort {
            CrdReclaim::Never => ReclaimPolicy::Never,
            CrdReclaim::LowerPriority => ReclaimPolicy::LowerPriority,
            CrdReclaim::Any => ReclaimPolicy::Any,
        },
        pools: s.pools.clone(),
        strategy: match s.queueing_strategy {
            CrdStrategy::StrictFIFO => QueueingStrategy::StrictFifo,
            CrdStrategy::BestEffortFIFO => QueueingStrategy::BestEffortFifo,
        },
        pods_ready_timeout: Some(dur(k, obj, "podsReadyTimeout", &s.pods_ready_timeout)?),
        stopped: s.stop_policy != StopPolicy::None,
        drain: s.stop_policy == StopPolicy::HoldAndDrain,
        flex_start_max_wait: s
            .flex_start_max_wait
            .as_ref()
            .map(|d| dur(k, obj, "flexStartMaxWait", d))
            .transpose()?,
        idle_policy: match &s.idle_policy {
            None => None,
            Some(p) => Some(muster_planner::IdlePolicy {
                threshold_percent: u32::try_from(p.threshold_percent)
                    .ok()
                    .filter(|t| (1..=100).contains(t))
                    .ok_or_else(|| {
                        invalid(
                            k,
                            obj,
                            "spec.idlePolicy.thresholdPercent must be between 1 and 100".into(),
                        )
                    })?,
                window: dur(k, obj, "idlePolicy.window", &p.window)?,
                action: match p.action {
                    muster_crds::gpuqueue::IdleAction::Report => muster_planner::IdleAction::Report,
                    muster_crds::gpuqueue::IdleAction::Requeue => {
                        muster_planner::IdleAction::Requeue
                    }
                    muster_crds::gpuqueue::IdleAction::Stop => muster_planner::IdleAction::Stop,
                },
            }),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool_with(labels: serde_json::Value) -> Arc<DynamicObject> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "a100"},
                "spec": {"nodeClassRef": {"name": "nc"}, "labels": labels},
            }))
            .expect("object"),
        )
    }

    /// A pool stored before the CRD refused labels a kubelet may not set on
    /// itself is an InvalidSpec issue naming the key, and buys nothing; the
    /// labels a kubelet may set pass.
    #[test]
    fn a_label_the_kubelet_may_not_set_is_an_issue() {
        let classes = BTreeMap::from([("nc".to_string(), Provider::Aws)]);
        let mut issues = Vec::new();
        let objs = [pool_with(json!({"node-role.kubernetes.io/gpu": ""}))];
        assert!(pools(&objs, &classes, &mut issues).is_empty());
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].reason, IssueReason::InvalidSpec);
        assert!(
            issues[0]
                .message
                .starts_with("spec.labels: a kubelet may not set")
                && issues[0].message.ends_with("node-role.kubernetes.io/gpu"),
            "{}",
            issues[0].message
        );

        let mut issues = Vec::new();
        let objs = [pool_with(
            json!({"node.kubernetes.io/foo": "x", "example.com/team": "a"}),
        )];
        assert_eq!(pools(&objs, &classes, &mut issues).len(), 1);
        assert!(issues.is_empty(), "{issues:?}");
    }

    /// A queue's gangs take the network default of the first pool in its
    /// order that sets one: its listed pools in order, else every pool by
    /// weight then name; pools without one are passed over.
    #[test]
    fn network_defaults_come_from_the_first_pool_in_the_queues_order_that_sets_one() {
        use muster_planner::NetworkTopology;
        let classes = BTreeMap::from([("nc".to_string(), Provider::Aws)]);
        let pool_obj = |name: &str, weight: i32, network: serde_json::Value| {
            Arc::new(
                serde_json::from_value::<DynamicObject>(json!({
                    "apiVersion": "muster.dev/v1alpha1", "kind": "GPUPool",
                    "metadata": {"name": name},
                    "spec": {"nodeClassRef": {"name": "nc"}, "weight": weight, "networkTopology": network},
                }))
                .expect("object"),
            )
        };
        let objs = [
            pool_obj("a", 0, json!(null)),
            pool_obj(
                "b",
                0,
                json!({"mode": "Required", "level": "topology.k8s.aws/network-node-layer-2"}),
            ),
            pool_obj(
                "c",
                10,
                json!({"mode": "Preferred", "level": "topology.k8s.aws/network-node-layer-3"}),
            ),
        ];
        let mut issues = Vec::new();
        let ps = pools(&objs, &classes, &mut issues);
        assert!(issues.is_empty(), "{issues:?}");
        let queue = |name: &str, pools: &[&str]| -> Queue {
            serde_json::from_value(json!({"name": name, "pools": pools})).expect("queue")
        };
        let queues = [
            queue("listed", &["a", "b", "c"]),
            queue("any", &[]),
            queue("none", &["a"]),
        ];
        let d = network_defaults(&objs, &ps, &queues);
        let required2 = NetworkTopology {
            level: 2,
            required: true,
        };
        let preferred3 = NetworkTopology {
            level: 3,
            required: false,
        };
        assert_eq!(d.get("listed"), Some(&required2), "a sets none: b's");
        assert_eq!(d.get("any"), Some(&preferred3), "c weighs most");
        assert_eq!(d.get("none"), None);
    }
}
