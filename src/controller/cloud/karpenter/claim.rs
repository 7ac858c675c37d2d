//! A delegated launch as a Karpenter NodeClaim, and a NodeClaim read back
//! as an instance: pure functions of the JSON the API server stores.
//!
//! The NodeClaim is a **standalone** one (no `karpenter.sh/nodepool` label,
//! no NodePool owner), the form kubernetes-sigs/karpenter's disruption
//! never picks: `ValidateNodeDisruptable` (`pkg/controllers/state/statenode.go`)
//! refuses a node without the NodePool label, `NewCandidate`
//! (`pkg/controllers/disruption/types.go`) one whose NodePool is unknown,
//! and the NodeClaim disruption controller
//! (`pkg/controllers/nodeclaim/disruption/controller.go`) writes no
//! `Consolidatable` or `Drifted` for it. Expiration needs no NodePool
//! (`pkg/controllers/nodeclaim/expiration/controller.go`) and the CRD
//! defaults `expireAfter` to 720h, so the claim says `Never`.
//!
//! Its requirements pin exactly the offering the planner chose (instance
//! type, zone, capacity type), which Karpenter's AWS provider launches
//! (`pkg/providers/instance/instance.go`, `Create`). It carries the pool's
//! labels and taints (registration copies both onto the Node:
//! `pkg/controllers/nodeclaim/lifecycle/registration.go`, `syncNode`), the
//! PoolNode's name as its own and the idempotency key as an annotation (a
//! launch repeated after a crash finds it), and muster's finalizer, which
//! keeps a claim Karpenter deletes when the launch fails (insufficient
//! capacity deletes the NodeClaim without a `Launched=False`:
//! `pkg/controllers/nodeclaim/lifecycle/launch.go`) until muster has read
//! the failure.

use std::collections::BTreeMap;

use muster_crds::nodeclass::KarpenterNodeClass;
use muster_planner::{CapacityType, OfferingKey, Provider, Time};
use muster_provider_api::{Instance, InstanceState, LaunchRequest, tags};
use serde_json::{Value, json};

/// muster's finalizer on its NodeClaims: removed once muster has read a
/// failed launch, or when it releases the machine.
pub(crate) const FINALIZER: &str = "muster.dev/nodeclaim";
/// The PoolNode's idempotency key.
pub(crate) const KEY_ANNOTATION: &str = "muster.dev/idempotency-key";
/// Set before muster deletes a NodeClaim: a deletion without it is
/// Karpenter's (an interruption, garbage collection, a failed registration).
pub(crate) const RELEASED_ANNOTATION: &str = "muster.dev/released";
/// The muster NodeClass a NodeClaim was launched for.
pub(crate) const NODE_CLASS_LABEL: &str = "muster.dev/nodeclass";
/// The instance id of a NodeClaim Karpenter has not launched yet:
/// `karpenter:///NAME`.
pub(crate) const UNLAUNCHED_PREFIX: &str = "karpenter:///";

/// Karpenter's well-known requirement keys (`pkg/apis/v1/labels.go`).
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
const ZONE: &str = "topology.kubernetes.io/zone";
const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// The AWS provider's label of the capacity reservation a `reserved`
/// NodeClaim launches into (karpenter-provider-aws, v1.3+).
const RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";

/// The NodeClaim of a launch: named after the PoolNode.
pub(crate) fn nodeclaim(
    request: &LaunchRequest,
    class: &KarpenterNodeClass,
    node_class: &str,
) -> Value {
    let mut labels: BTreeMap<String, String> = request.labels.clone();
    labels.insert(tags::CLUSTER.into(), request.cluster.clone());
    labels.insert(tags::POOL.into(), request.pool.clone());
    labels.insert(tags::POOL_NODE.into(), request.name.clone());
    labels.insert(NODE_CLASS_LABEL.into(), node_class.to_string());
    let mut annotations: BTreeMap<String, String> = request.tags.clone();
    annotations.insert(KEY_ANNOTATION.into(), request.idempotency_key.clone());
    if let Some(g) = &request.gang {
        annotations.insert(tags::GANG.into(), g.clone());
    }
    let o = &request.offering;
    let mut requirements = vec![
        json!({"key": INSTANCE_TYPE, "operator": "In", "values": [o.instance_type]}),
        json!({"key": ZONE, "operator": "In", "values": [o.zone]}),
        json!({"key": CAPACITY_TYPE, "operator": "In", "values": [o.capacity_type.as_str()]}),
    ];
    if let Some(r) = &o.reservation {
        requirements.push(json!({"key": RESERVATION_ID, "operator": "In", "values": [r]}));
    }
    let taints: Vec<Value> = request
        .taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
        .collect();
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": request.name,
            "labels": labels,
            "annotations": annotations,
            "finalizers": [FINALIZER],
        },
        "spec": {
            "nodeClassRef": {"group": class.group, "kind": class.kind, "name": class.name},
            "requirements": requirements,
            "taints": taints,
            "expireAfter": "Never",
        }
    })
}

/// Where a NodeClaim's launch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Launch {
    /// Karpenter has not launched it yet.
    Waiting,
    /// Launched: the machine's provider id.
    Launched(String),
    /// Deleted before it launched: Karpenter's launch failed.
    Failed,
}

/// Where the launch of `nc` stands.
pub(crate) fn launch(nc: &Value) -> Launch {
    if let Some(pid) = provider_id(nc) {
        return Launch::Launched(pid);
    }
    if deleting(nc) {
        return Launch::Failed;
    }
    Launch::Waiting
}

/// The provider id Karpenter recorded, once launched.
pub(crate) fn provider_id(nc: &Value) -> Option<String> {
    nc["status"]["providerID"]
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

/// True once the NodeClaim is being deleted.
pub(crate) fn deleting(nc: &Value) -> bool {
    nc["metadata"]["deletionTimestamp"].is_string()
}

/// True when muster deleted it (or is about to).
pub(crate) fn released(nc: &Value) -> bool {
    nc["metadata"]["annotations"][RELEASED_ANNOTATION].is_string()
}

/// The idempotency key it was created with.
pub(crate) fn key_of(nc: &Value) -> Option<&str> {
    nc["metadata"]["annotations"][KEY_ANNOTATION].as_str()
}

/// Its name.
pub(crate) fn name_of(nc: &Value) -> &str {
    nc["metadata"]["name"].as_str().unwrap_or_default()
}

/// The value of one `In` requirement with a single value.
fn required(nc: &Value, key: &str) -> Option<String> {
    nc["spec"]["requirements"]
        .as_array()?
        .iter()
        .find(|r| r["key"] == key && r["operator"] == "In")
        .and_then(|r| r["values"].as_array())
        .filter(|v| v.len() == 1)
        .and_then(|v| v[0].as_str())
        .map(str::to_string)
}

/// The offering the claim pins.
pub(crate) fn offering(nc: &Value) -> Option<OfferingKey> {
    let capacity_type = match required(nc, CAPACITY_TYPE)?.as_str() {
        "spot" => CapacityType::Spot,
        "on-demand" => CapacityType::OnDemand,
        "reserved" => CapacityType::Reserved,
        _ => return None,
    };
    Some(OfferingKey {
        provider: Provider::Aws,
        zone: required(nc, ZONE)?,
        instance_type: required(nc, INSTANCE_TYPE)?,
        capacity_type,
        reservation: required(nc, RESERVATION_ID),
    })
}

/// The id muster knows a NodeClaim by: its provider id once launched,
/// `karpenter:///NAME` before.
pub(crate) fn instance_id(nc: &Value) -> String {
    provider_id(nc).unwrap_or_else(|| format!("{UNLAUNCHED_PREFIX}{}", name_of(nc)))
}

/// A NodeClaim as an instance; `None` for one that pins no offering (not
/// written by muster).
pub(crate) fn instance(nc: &Value) -> Option<Instance> {
    let offering = offering(nc)?;
    let initialized = nc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Initialized" && c["status"] == "True");
    let state = if deleting(nc) {
        InstanceState::ShuttingDown
    } else if initialized {
        InstanceState::Running
    } else {
        InstanceState::Pending
    };
    let launched_at = nc["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(muster_provider_api::parse_rfc3339)
        .map_or(Time(0), Time);
    let labels: BTreeMap<String, String> = nc["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    Some(Instance {
        provider_id: instance_id(nc),
        offering,
        state,
        launched_at,
        pool_node: labels.get(tags::POOL_NODE).cloned(),
        tags: labels,
        network: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{Taint, TaintEffect};

    fn class() -> KarpenterNodeClass {
        KarpenterNodeClass {
            group: "karpenter.k8s.aws".into(),
            kind: "EC2NodeClass".into(),
            name: "gpu".into(),
            region: "us-east-1".into(),
        }
    }

    fn request() -> LaunchRequest {
        LaunchRequest {
            name: "gpu-7f3a".into(),
            idempotency_key: "k-7f3a".into(),
            offering: OfferingKey {
                provider: Provider::Aws,
                zone: "us-east-1b".into(),
                instance_type: "p4d.24xlarge".into(),
                capacity_type: CapacityType::Spot,
                reservation: None,
            },
            pool: "gpu".into(),
            cluster: "c1".into(),
            gang: Some("team-a/train".into()),
            labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
            taints: vec![Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            }],
            tags: BTreeMap::new(),
            placement_group: None,
            grant: None,
        }
    }

    #[test]
    fn a_launch_is_a_standalone_claim_pinning_the_offering() {
        let nc = nodeclaim(&request(), &class(), "delegated");
        assert_eq!(nc["metadata"]["name"], "gpu-7f3a");
        // no NodePool: Karpenter's disruption never takes it
        assert!(nc["metadata"]["labels"]["karpenter.sh/nodepool"].is_null());
        assert_eq!(nc["spec"]["expireAfter"], "Never");
        assert_eq!(nc["metadata"]["labels"][tags::POOL_NODE], "gpu-7f3a");
        assert_eq!(nc["metadata"]["labels"]["team"], "a");
        assert_eq!(nc["metadata"]["labels"][NODE_CLASS_LABEL], "delegated");
        assert_eq!(nc["metadata"]["annotations"][tags::GANG], "team-a/train");
        assert_eq!(nc["metadata"]["finalizers"], json!([FINALIZER]));
        assert_eq!(nc["spec"]["taints"][0]["key"], "nvidia.com/gpu");
        assert_eq!(nc["spec"]["nodeClassRef"]["kind"], "EC2NodeClass");
        assert_eq!(offering(&nc), Some(request().offering));
        assert_eq!(key_of(&nc), Some("k-7f3a"));
        assert_eq!(launch(&nc), Launch::Waiting);
        assert_eq!(instance_id(&nc), "karpenter:///gpu-7f3a");
    }

    #[test]
    fn launch_state_is_read_from_status_and_deletion() {
        let mut nc = nodeclaim(&request(), &class(), "delegated");
        nc["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
        assert_eq!(launch(&nc), Launch::Failed, "deleted before launch");
        assert!(!released(&nc));
        nc["status"] = json!({"providerID": "aws:///us-east-1b/i-0abc",
            "conditions": [{"type": "Initialized", "status": "True"}]});
        assert_eq!(
            launch(&nc),
            Launch::Launched("aws:///us-east-1b/i-0abc".into())
        );
        let i = instance(&nc).expect("instance");
        assert_eq!(i.state, InstanceState::ShuttingDown);
        assert_eq!(i.pool_node.as_deref(), Some("gpu-7f3a"));
        nc["metadata"]["deletionTimestamp"] = Value::Null;
        assert_eq!(instance(&nc).map(|i| i.state), Some(InstanceState::Running));
        nc["spec"]["requirements"] = json!([]);
        assert_eq!(
            instance(&nc),
            None,
            "a claim pinning no offering is not muster's"
        );
    }
}
