//! `Gang`: the unit of admission — all pods of one workload, admitted all at once or not at
//! all. Namespaced, created by muster and owned by the submitted workload (a `batch/v1` Job).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, DNS_LABEL_PATTERN, Duration, GPU_MODEL_PATTERN, NodeSelectorTerm, Quantity,
    Toleration, Usd,
};

/// All pods of one workload, admitted together.
// clippy mistakes the repeated `type_ = ...` inside separate `printcolumn(...)` groups for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "Gang",
    plural = "gangs",
    shortname = "gng",
    category = "muster",
    namespaced,
    status = "GangStatus",
    derive = "PartialEq",
    doc = "Gang is the unit of admission: all pods of one workload, which muster admits all at once or not at all, onto existing or freshly provisioned nodes. muster creates it for a workload labelled muster.dev/queue and the workload owns it.",
    printcolumn(
        name = "Queue",
        type_ = "string",
        json_path = ".spec.queue",
        description = "GPUQueue the gang waits in"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Where the gang is in its life cycle"
    ),
    printcolumn(
        name = "Pods",
        type_ = "string",
        json_path = ".status.pods",
        description = "Running pods / pods of the gang"
    ),
    printcolumn(
        name = "Position",
        type_ = "integer",
        json_path = ".status.position",
        description = "Position in the queue while queued (1 is next)"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.reason",
        description = "Why the gang waits or was evicted"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct GangSpec {
    /// Name of the `GPUQueue` the gang waits in (from the workload's `muster.dev/queue` label).
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub queue: String,
    /// Priority within the queue (from the pods' priority class): higher goes first and may
    /// preempt lower when the queue allows it.
    #[serde(default)]
    pub priority: i32,
    /// Groups of identical pods; the gang is admitted when every pod set has at least
    /// `minCount` (or `count`) pods placed.
    #[schemars(length(min = 1, max = 8))]
    #[x_kube(validation = Rule::new("self.all(p, self.filter(q, q.name == p.name).size() == 1)").message("spec.podSets[].name must be unique within the gang").reason(Reason::FieldValueDuplicate))]
    pub pod_sets: Vec<PodSet>,
    /// How close the gang's pods must be placed.
    #[serde(default)]
    pub topology: Topology,
    /// Whether the gang accepts being evicted as a whole and requeued to consolidate nodes.
    #[serde(default)]
    pub disruptible: bool,
    /// How long the gang is expected to run, used to weigh spot risk and plan capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_duration: Option<Duration>,
    /// How close in the network the gang's pods must (or should) be: within one domain of a
    /// network-topology node label (from the workload's `muster.dev/podset-required-topology`
    /// or `muster.dev/podset-preferred-topology` annotation). When omitted, the
    /// `spec.networkTopology` of the first pool in the queue's pool order that sets one applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopology>,
    /// Whether the gang may be placed on reserved capacity that ends before the gang is expected
    /// to finish (from the workload's `muster.dev/may-outlive-capacity: "true"`); such a gang is
    /// evicted whole and requeued when the capacity ends. Otherwise only capacity that outlives
    /// the gang's expected run is planned for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_outlive_capacity: bool,
}

/// The network-topology node labels a gang or pool may name, broadest layer first per cloud:
/// EC2's network nodes as EKS labels them (`DescribeInstanceTopology`) and GCE's block,
/// sub-block and host as GKE labels them. A key's position within its cloud's three (1 to 3) is
/// the layer it names.
pub const NETWORK_LAYER_KEYS: [&str; 6] = [
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
];

/// The message of the CRD rule on a network topology's `level`.
pub const NETWORK_LEVEL_MESSAGE: &str = "spec.networkTopology.level must be one of topology.k8s.aws/network-node-layer-1, -2, -3, cloud.google.com/gce-topology-block, cloud.google.com/gce-topology-subblock, cloud.google.com/gce-topology-host";

/// The CEL rule holding a network topology's `level` to [`NETWORK_LAYER_KEYS`].
pub fn network_level_rule() -> String {
    let keys: Vec<String> = NETWORK_LAYER_KEYS
        .iter()
        .map(|k| format!("'{k}'"))
        .collect();
    format!("self in [{}]", keys.join(", "))
}

/// Whether a network topology must hold or is only preferred.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum NetworkTopologyMode {
    /// The gang waits (or capacity is bought) until all its pods fit within one domain.
    Required,
    /// The pods are kept within one domain when they fit there, and spread otherwise.
    Preferred,
}

/// Pods placed within one domain of a network-topology node label.
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopology {
    /// `Required` or `Preferred`.
    pub mode: NetworkTopologyMode,
    /// The node label whose value names the domain, one of the EKS keys
    /// `topology.k8s.aws/network-node-layer-1` to `-3` or the GKE keys
    /// `cloud.google.com/gce-topology-block`, `-subblock`, `-host`; layer 1 and block are the
    /// broadest.
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new(network_level_rule()).message(NETWORK_LEVEL_MESSAGE))]
    pub level: String,
}

/// A group of identical pods of a gang.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.minCount) || self.minCount <= self.count").message("spec.podSets[].minCount must be less than or equal to count"))]
pub struct PodSet {
    /// Name of the pod set, unique within the gang (e.g. `workers`).
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
    /// Number of pods.
    #[schemars(range(min = 1, max = 10000))]
    pub count: i32,
    /// Fewest pods the workload can start with (elastic jobs); `count` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub min_count: Option<i32>,
    /// Resources each pod requests, e.g. `nvidia.com/gpu: 8`, `cpu: 90`, `memory: 900Gi`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub requests: BTreeMap<String, Quantity>,
    /// Node labels each pod requires (from the pod template).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of each pod (from the pod template).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tolerations: Vec<Toleration>,
    /// Required node affinity of each pod (from the pod template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<PodSetAffinity>,
    /// GPU model each pod needs, e.g. `H100`; any model when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = GPU_MODEL_PATTERN), length(max = 32))]
    pub gpu_model: Option<String>,
}

/// The part of a pod's affinity muster plans with: required node affinity.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAffinity {
    /// Node-selector terms, ORed: a node fits when it matches any term
    /// (`requiredDuringSchedulingIgnoredDuringExecution`).
    #[schemars(length(min = 1, max = 16))]
    pub required_node_selector_terms: Vec<NodeSelectorTerm>,
}

/// How close a gang's pods must be placed.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum Topology {
    /// All pods on one node (NVLink).
    SameNode,
    /// All pods in one zone.
    SameZone,
    /// All pods in one cluster placement group (AWS) or compact placement policy (GCP).
    SamePlacementGroup,
    /// No constraint; muster still packs when it can.
    #[default]
    Any,
}

/// Life-cycle phase of a gang.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum GangPhase {
    /// Waiting for quota or capacity.
    #[default]
    Queued,
    /// Quota reserved; nodes for every pod are being launched.
    Provisioning,
    /// Every pod has a node; the workload is unsuspended.
    Admitted,
    /// Every pod is running.
    Running,
    /// The workload completed; capacity is released.
    Finished,
    /// Evicted as a whole (preemption, interruption or pods-ready timeout); requeued after
    /// `requeueAfter`.
    Evicted,
    /// No allowed pool can ever hold the gang (see `reason`).
    Unsatisfiable,
}

/// A pod of the gang and the node it goes to.
#[derive(JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAssignment {
    /// Pod set of the pod.
    #[schemars(length(min = 1, max = 63))]
    pub pod_set: String,
    /// Index of the pod in its set.
    #[schemars(range(min = 0))]
    pub index: i32,
    /// Node (or PoolNode, while in flight) it goes to.
    #[schemars(length(min = 1, max = 253))]
    pub node: String,
}

/// Where a gang is and why.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GangStatus {
    /// Life-cycle phase: `Queued`, `Provisioning`, `Admitted`, `Running`, `Finished`,
    /// `Evicted` or `Unsatisfiable`.
    #[serde(default)]
    pub phase: GangPhase,
    /// Position in the queue while `Queued` (1 is next).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
    /// Why the gang waits, was evicted or cannot be satisfied: a bounded CamelCase reason,
    /// e.g. `QuotaExhausted`, `Provisioning`, `PodsReadyTimeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The same in words, e.g. "waiting for quota: needs 32 nvidia.com/gpu, 8 free in
    /// team-a".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub message: Option<String>,
    /// Running pods over pods of the gang, e.g. `3/4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+/[0-9]+$"))]
    pub pods: Option<String>,
    /// Names of the nodes reserved for the gang's pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_nodes: Vec<String>,
    /// Where each pod goes (a Node, or a PoolNode while its machine is launched), while
    /// the gang is `Provisioning`, `Admitted` or `Running`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<PodAssignment>,
    /// Launch sets planned for the gang so far; names and idempotency keys of new nodes
    /// derive from it.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub launch_attempts: i32,
    /// When the capacity being launched for the gang must be complete; after it the
    /// launch is given up and planned again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_deadline: Option<Time>,
    /// When the gang entered the queue (last time, after a requeue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<Time>,
    /// When every pod had a node and the workload was unsuspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_at: Option<Time>,
    /// When every pod was running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the workload finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// What the gang's nodes have cost so far while reserved for it, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_so_far: Option<Usd>,
    /// How many times the gang was evicted.
    #[serde(default)]
    pub evictions: i32,
    /// Earliest time an evicted gang is queued again (backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after: Option<Time>,
    /// Current state: `QuotaReserved`, `Provisioned`, `Admitted`, `PodsReady`, `Evicted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// `.metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
