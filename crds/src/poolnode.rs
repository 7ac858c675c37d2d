//! `PoolNode`: one machine muster launched or is launching. Written before the cloud call
//! (what was bought, where, and the idempotency key are immutable; the reservation is
//! not), its finalizer guarantees the instance is terminated.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    CapacityType, Condition, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, GPU_MODEL_PATTERN, Provider,
    Usd,
};

/// One machine muster launched or is launching, and what it was bought for.
// clippy mistakes the repeated `type_ = ...` inside separate `printcolumn(...)` groups for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "PoolNode",
    plural = "poolnodes",
    shortname = "pn",
    category = "muster",
    status = "PoolNodeStatus",
    derive = "PartialEq",
    doc = "PoolNode is one machine muster launched or is launching: the offering bought, the pool, the gang it is reserved for and an idempotency key. muster writes it before calling the cloud; its finalizer guarantees the instance is terminated.",
    printcolumn(
        name = "Pool",
        type_ = "string",
        json_path = ".spec.pool",
        description = "GPUPool the node belongs to"
    ),
    printcolumn(
        name = "Instance Type",
        type_ = "string",
        json_path = ".spec.offering.instanceType",
        description = "Instance (machine) type"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".spec.offering.zone",
        description = "Zone of the node"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = ".spec.offering.capacityType",
        description = "spot or on-demand"
    ),
    printcolumn(
        name = "Price/h",
        type_ = "string",
        json_path = ".spec.offering.pricePerHour",
        description = "Price in US dollars per hour when bought"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Where the machine is in its life cycle"
    ),
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".status.nodeName",
        description = "Kubernetes Node the machine registered as"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.placementGroup) == has(oldSelf.placementGroup)").message("spec.placementGroup can be neither added nor removed: the machine was launched into it or not"))]
#[x_kube(validation = Rule::new("has(self.grant) == has(oldSelf.grant)").message("spec.grant can be neither added nor removed: the machine was bought in the request or alone"))]
#[x_kube(validation = Rule::new("!has(self.grant) || self.offering.capacityType == 'flex-start'").message("spec.grant: only flex-start machines are bought in a grant request"))]
pub struct PoolNodeSpec {
    /// Name of the `GPUPool` the machine belongs to. Immutable.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.pool is immutable: a PoolNode stays in the pool that bought it"))]
    pub pool: String,
    /// Name of the `NodeClass` the machine is launched with. Immutable.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.nodeClass is immutable: the machine was launched with it"))]
    pub node_class: String,
    /// The offering bought. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.offering is immutable: it is what was bought"))]
    pub offering: Offering,
    /// The gang the machine is reserved for; a spare node when omitted. The one field that
    /// changes: a release clears it, a hand-over names the next gang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangRef>,
    /// Key that makes the launch idempotent (AWS client token, GCP instance name suffix): a
    /// repeated launch with the same key never creates a second machine. Immutable.
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
    )]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.idempotencyKey is immutable: it names the launch"))]
    pub idempotency_key: String,
    /// The placement group the machine is launched into (one per gang launch attempt, for
    /// gangs that must share a low-latency network; EC2 cluster placement group). Written
    /// with the PoolNode, before the machine is bought, so a restart launches into the same
    /// group; the group is deleted once no PoolNode names it. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.placementGroup is immutable: the machine was launched into it"))]
    pub placement_group: Option<String>,
    /// The grant request the machine is bought in with the other machines of its launch
    /// (flex-start: a GKE resize request of the node pool's instance group), and every
    /// member of it. Written with the PoolNode, before any cloud call, so whichever member
    /// is launched first after a restart asks for the same request; the cloud creates all
    /// members at once or none. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.grant is immutable: the machines were requested together"))]
    pub grant: Option<Grant>,
}

/// A grant request: its name and its members.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// Name of the request (one per gang launch attempt).
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
    /// Every machine of the request, this one included.
    #[schemars(length(min = 1, max = 64))]
    pub members: Vec<GrantMember>,
}

/// A machine of a grant request.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantMember {
    /// Name of its PoolNode.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    /// Idempotency key of its PoolNode.
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
    )]
    pub idempotency_key: String,
}

/// The gang a machine is reserved for.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GangRef {
    /// Namespace of the gang.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub namespace: String,
    /// Name of the gang (and of its Job).
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    /// UID of the gang's Job: a Job deleted and created again under the same name has
    /// another, so the reservation of the first is never taken for the second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub uid: Option<String>,
}

/// One purchasable kind of machine: instance type × zone × capacity type, at a price.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offering {
    /// Cloud the machine is bought from.
    pub provider: Provider,
    /// Region of the machine, e.g. `us-east-1`.
    #[schemars(length(min = 1, max = 32))]
    pub region: String,
    /// Zone of the machine, e.g. `us-east-1a`.
    #[schemars(length(min = 1, max = 64))]
    pub zone: String,
    /// Instance (machine) type, e.g. `p4d.24xlarge`.
    #[schemars(length(min = 1, max = 64))]
    pub instance_type: String,
    /// Whether the machine is spot or on-demand.
    pub capacity_type: CapacityType,
    /// Price in US dollars per hour at the time of purchase.
    pub price_per_hour: Usd,
    /// GPU model of the machine, e.g. `A100`.
    #[schemars(regex(pattern = GPU_MODEL_PATTERN), length(max = 32))]
    pub gpu_model: String,
    /// Number of GPUs of the machine.
    #[schemars(range(min = 0, max = 64))]
    pub gpu_count: i32,
    /// The capacity reservation the machine is launched into (`reserved`
    /// capacity): an EC2 Capacity Reservation id (`cr-…`) or a GCE reservation name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub reservation: Option<String>,
    /// When the reserved capacity ends (a Capacity Block's end): the node is
    /// drained ahead of it, its gangs requeued whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 64))]
    pub capacity_ends_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// Life-cycle phase of a `PoolNode`.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum PoolNodePhase {
    /// Recorded; the cloud has not been asked yet.
    #[default]
    Pending,
    /// The cloud accepted the launch; the instance is booting.
    Launched,
    /// The Kubernetes Node registered.
    Registered,
    /// The Node is Ready and its GPUs are allocatable.
    Ready,
    /// Pods are being moved off the node before removal.
    Draining,
    /// The instance is being terminated.
    Terminating,
}

/// Where a machine is in its life cycle.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolNodeStatus {
    /// Life-cycle phase: `Pending`, `Launched`, `Registered`, `Ready`, `Draining` or
    /// `Terminating`.
    #[serde(default)]
    pub phase: PoolNodePhase,
    /// Cloud instance ID in Kubernetes form, e.g. `aws:///us-east-1a/i-0123456789abcdef0`.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Name of the Kubernetes Node the machine registered as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The gang currently holding the node; starts as `spec.gang` and changes when capacity
    /// is handed to another gang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangRef>,
    /// When the cloud accepted the launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at: Option<Time>,
    /// When the Node registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<Time>,
    /// When the Node became Ready with its GPUs allocatable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<Time>,
    /// Machine-readable reason of the last phase change, e.g. `InsufficientCapacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details of the last phase change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Current state: `Launched`, `Registered`, `Initialized` (GPUs allocatable), `Drifted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// `.metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
