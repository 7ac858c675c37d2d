//! The Node object a simulated machine is, and the instance read back from
//! it. Pure functions: what to write and what was written, no API calls.
//!
//! A simulated machine carries what a kubelet would register with (the
//! offering's capacity and allocatable, `nvidia.com/gpu` included; the
//! launch's labels and taints; the well-known instance-type, zone, region,
//! hostname, OS and architecture labels) and, as Karpenter's kwok provider
//! marks its Nodes (`kubernetes-sigs/karpenter` `kwok/cloudprovider`), the
//! `kwok.x-k8s.io/node: fake` annotation and label, so that a kwok controller
//! installed in the cluster keeps its heartbeats and runs its pods.
//! Everything needed to carry on after a restart lives on the Node: the
//! idempotency key, the cluster and NodeClass, and when the boot ends.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint as KubeTaint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use muster_planner::{CapacityType, Offering, OfferingKey, Provider, TaintEffect, Time, labels};
use muster_provider_api::{Instance, InstanceState, LaunchRequest, tags};

use crate::controller::base::objects::POOLNODE_LABEL;
use crate::controller::base::objects::node_ready;
use crate::controller::base::time;

/// Provider ids of simulated machines: `sim://ZONE/NODE`.
pub(crate) const PROVIDER_PREFIX: &str = "sim://";
/// Annotation holding the launch's idempotency key.
pub(crate) const KEY_ANNOTATION: &str = "muster.dev/idempotency-key";
/// Annotation holding when the simulated boot ends (RFC 3339).
pub(crate) const READY_AT_ANNOTATION: &str = "muster.dev/sim-ready-at";
/// Label naming the NodeClass a simulated machine was launched from.
pub(crate) const NODE_CLASS_LABEL: &str = "muster.dev/sim-nodeclass";
/// kwok's marker of the Nodes its controller manages (label and annotation).
pub(crate) const KWOK_NODE: &str = "kwok.x-k8s.io/node";

/// The Node name of a launch: its idempotency key as a DNS label, so a
/// second launch with the same key finds the first one's Node.
pub(crate) fn node_name(key: &str) -> String {
    let mut name: String = key
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63)
        .collect();
    while name.ends_with('-') {
        name.pop();
    }
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.insert_str(0, "sim");
    }
    name
}

/// The provider id of a simulated machine.
pub(crate) fn provider_id(zone: &str, node: &str) -> String {
    format!("{PROVIDER_PREFIX}{zone}/{node}")
}

/// The Node name in a provider id, if it is a simulated machine's.
pub(crate) fn node_of(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix(PROVIDER_PREFIX)?;
    let (_, node) = rest.rsplit_once('/')?;
    (!node.is_empty()).then_some(node)
}

/// The Node a launch creates, booting until `ready_at`.
pub(crate) fn new_node(
    request: &LaunchRequest,
    offering: &Offering,
    node_class: &str,
    now: Time,
    ready_at: Time,
) -> Node {
    let name = node_name(&request.idempotency_key);
    let mut node_labels = request.labels.clone();
    // what the offering says its nodes get from the cloud and kubelet
    for (k, v) in &offering.labels {
        node_labels.insert(k.clone(), v.clone());
    }
    let arch = offering
        .labels
        .get(labels::ARCH)
        .cloned()
        .unwrap_or_else(|| labels::AMD64.to_string());
    let well_known = [
        (labels::INSTANCE_TYPE, offering.instance_type.clone()),
        (labels::ZONE, offering.zone.clone()),
        (labels::REGION, offering.region.clone()),
        (
            labels::CAPACITY_TYPE,
            offering.capacity_type.as_str().to_string(),
        ),
        ("kubernetes.io/hostname", name.clone()),
        (labels::OS, labels::LINUX.to_string()),
        (labels::ARCH, arch),
        (tags::CLUSTER, request.cluster.clone()),
        (tags::POOL, request.pool.clone()),
        (NODE_CLASS_LABEL, node_class.to_string()),
        (KWOK_NODE, "fake".to_string()),
    ];
    for (k, v) in well_known {
        node_labels.insert(k.to_string(), v);
    }
    if let Some(model) = &offering.gpu_model {
        node_labels.insert(labels::GPU_MODEL.to_string(), model.as_str().to_string());
    }
    node_labels.insert(POOLNODE_LABEL.to_string(), request.name.clone());
    let annotations = BTreeMap::from([
        (KEY_ANNOTATION.to_string(), request.idempotency_key.clone()),
        (READY_AT_ANNOTATION.to_string(), time::format(ready_at)),
        (KWOK_NODE.to_string(), "fake".to_string()),
    ]);
    let taints: Vec<KubeTaint> = request
        .taints
        .iter()
        .map(|t| KubeTaint {
            key: t.key.clone(),
            value: (!t.value.is_empty()).then(|| t.value.clone()),
            effect: match t.effect {
                TaintEffect::NoSchedule => "NoSchedule",
                TaintEffect::PreferNoSchedule => "PreferNoSchedule",
                TaintEffect::NoExecute => "NoExecute",
            }
            .to_string(),
            time_added: None,
        })
        .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(node_labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id(&offering.zone, &name)),
            taints: (!taints.is_empty()).then_some(taints),
            ..NodeSpec::default()
        }),
        status: Some(booting_status(offering, now)),
    }
}

/// Capacity and allocatable of an offering as Node quantities (`pods` added,
/// as a kubelet reports it).
fn quantities(offering: &Offering) -> BTreeMap<String, Quantity> {
    let mut m: BTreeMap<String, Quantity> = offering
        .resources
        .to_quantities()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v.to_string())))
        .collect();
    m.insert("pods".to_string(), Quantity("110".to_string()));
    m
}

fn ready_condition(ready: bool, now: Time) -> NodeCondition {
    let t = time::to_kube(now);
    NodeCondition {
        type_: "Ready".to_string(),
        status: if ready { "True" } else { "False" }.to_string(),
        reason: Some(
            if ready {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            }
            .to_string(),
        ),
        message: Some(
            if ready {
                "simulated machine booted"
            } else {
                "simulated machine booting"
            }
            .to_string(),
        ),
        last_heartbeat_time: Some(t.clone()),
        last_transition_time: Some(t),
    }
}

/// The status of a booting Node: the offering's capacity, not Ready yet.
pub fn booting_status(offering: &Offering, now: Time) -> NodeStatus {
    NodeStatus {
        capacity: Some(quantities(offering)),
        allocatable: Some(quantities(offering)),
        conditions: Some(vec![ready_condition(false, now)]),
        ..NodeStatus::default()
    }
}

/// The status patch that ends a boot (a merge patch of `status`).
pub fn ready_patch(now: Time) -> serde_json::Value {
    serde_json::json!({ "status": { "conditions": [ready_condition(true, now)] } })
}

/// When the Node's simulated boot ends, if it says.
pub(crate) fn ready_at(node: &Node) -> Option<Time> {
    let s = node.annotations().get(READY_AT_ANNOTATION)?;
    time::parse(s)
}

/// True when the Node is a simulated machine still booting whose boot has
/// ended by `now`.
pub fn boot_done(node: &Node, now: Time) -> bool {
    node.metadata.deletion_timestamp.is_none()
        && !node_ready(node)
        && ready_at(node).is_some_and(|t| t <= now)
}

/// True when the Node has no allocatable resources recorded (its status
/// was not written yet, or was dropped on create).
pub(crate) fn lacks_status(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .is_none_or(|a| a.is_empty())
}

/// The instance a simulated machine's Node is, as the cloud reports it.
pub(crate) fn instance(node: &Node) -> Instance {
    let labels = node.labels();
    let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
    let state = if node.metadata.deletion_timestamp.is_some() {
        InstanceState::ShuttingDown
    } else if node_ready(node) {
        InstanceState::Running
    } else {
        InstanceState::Pending
    };
    Instance {
        provider_id: node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default(),
        offering: OfferingKey {
            provider: Provider::Sim,
            zone: get(labels::ZONE),
            instance_type: get(labels::INSTANCE_TYPE),
            capacity_type: if get(labels::CAPACITY_TYPE) == CapacityType::Spot.as_str() {
                CapacityType::Spot
            } else if get(labels::CAPACITY_TYPE) == CapacityType::Reserved.as_str() {
                CapacityType::Reserved
            } else {
                CapacityType::OnDemand
            },
            reservation: Some(get(labels::RESERVATION_ID)).filter(|r| !r.is_empty()),
        },
        state,
        launched_at: node
            .metadata
            .creation_timestamp
            .as_ref()
            .map(time::from_kube)
            .unwrap_or(Time(0)),
        pool_node: labels.get(POOLNODE_LABEL).cloned(),
        tags: labels
            .iter()
            .filter(|(k, _)| k.starts_with("muster.dev/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        network: Vec::new(),
    }
}

/// The idempotency key a Node was launched with.
pub(crate) fn key_of(node: &Node) -> Option<&str> {
    node.annotations().get(KEY_ANNOTATION).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{GpuModel, Price, Resources, Taint};

    fn offering() -> Offering {
        Offering {
            provider: Provider::Sim,
            node_class: "sim".into(),
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "g5.12xlarge".into(),
            capacity_type: CapacityType::Spot,
            price: Price::from_usd(2.0),
            gpu_model: Some(GpuModel::new("A10G")),
            gpu_count: 4,
            gpu_memory_mib: 24 * 1024,
            resources: Resources::new(47_000, 180 << 30, 4),
            available: true,
            unavailable_until: None,
            interruption_rate_per_hour: 0.0,
            placement_groups: false,
            boot_secs: 5,
            reservation: None,
            flex_start: None,
            labels: BTreeMap::from([(labels::ARCH.into(), labels::AMD64.into())]),
        }
    }

    fn request() -> LaunchRequest {
        LaunchRequest {
            name: "gpu-abc-0".into(),
            idempotency_key: "muster-00ff-1-0".into(),
            offering: offering().key(),
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
    fn a_launch_becomes_a_node_that_reads_back_as_its_instance() {
        let n = new_node(&request(), &offering(), "sim", Time(1000), Time(1005));
        assert_eq!(n.name_any(), "muster-00ff-1-0");
        let pid = n.spec.as_ref().and_then(|s| s.provider_id.clone());
        assert_eq!(pid.as_deref(), Some("sim://us-east-1a/muster-00ff-1-0"));
        assert_eq!(
            node_of(pid.as_deref().unwrap_or_default()),
            Some("muster-00ff-1-0")
        );
        let l = n.labels();
        assert_eq!(l["team"], "a");
        assert_eq!(l[labels::INSTANCE_TYPE], "g5.12xlarge");
        assert_eq!(l[labels::CAPACITY_TYPE], "spot");
        assert_eq!(l[labels::GPU_MODEL], "A10G");
        assert_eq!(l[labels::ARCH], labels::AMD64);
        assert_eq!(l[labels::REGION], "us-east-1");
        assert_eq!(l[POOLNODE_LABEL], "gpu-abc-0");
        assert_eq!(key_of(&n), Some("muster-00ff-1-0"));
        let alloc = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        assert_eq!(alloc["nvidia.com/gpu"].0, "4");
        let taints = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].effect, "NoSchedule");
        // booting until 1005
        assert!(!node_ready(&n));
        assert!(!boot_done(&n, Time(1004)));
        assert!(boot_done(&n, Time(1005)));
        let i = instance(&n);
        assert_eq!(i.offering.zone, "us-east-1a");
        assert_eq!(i.offering.capacity_type, CapacityType::Spot);
        assert_eq!(i.state, InstanceState::Pending);
        assert_eq!(i.pool_node.as_deref(), Some("gpu-abc-0"));
        assert_eq!(i.tags[tags::CLUSTER], "c1");
    }

    /// A node gets the labels its offering lists, as the kubelet of a
    /// Graviton machine labels its node `arm64`.
    #[test]
    fn a_node_carries_its_offerings_labels() {
        let mut o = offering();
        o.instance_type = "g5g.16xlarge".into();
        o.labels = BTreeMap::from([
            (labels::ARCH.into(), labels::ARM64.into()),
            ("example.com/listed".into(), "yes".into()),
        ]);
        let n = new_node(&request(), &o, "sim", Time(0), Time(5));
        let l = n.labels();
        assert_eq!(l[labels::ARCH], labels::ARM64);
        assert_eq!(l["example.com/listed"], "yes");
        // an offering listing no architecture: the simulated kubelet's amd64
        o.labels.clear();
        let n = new_node(&request(), &o, "sim", Time(0), Time(5));
        assert_eq!(n.labels()[labels::ARCH], labels::AMD64);
    }

    #[test]
    fn node_names_are_dns_labels() {
        assert_eq!(node_name("Muster_AB.1"), "muster-ab-1");
        assert_eq!(node_name("-x-"), "sim-x");
        assert_eq!(node_name(&"a".repeat(80)).len(), 63);
        assert_eq!(node_of("aws:///us-east-1a/i-1"), None);
        assert_eq!(node_of("sim://zone/"), None);
    }
}
