//! `GPUPool`: a family of GPU nodes muster may buy — which offerings, within which limits,
//! and how they are consolidated and scaled to zero (like Karpenter's `NodePool`).

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    CapacityType, Condition, Duration, GPU_MODEL_PATTERN, ObjectName, Quantity, Taint, TaintEffect,
    Usd,
};

/// A family of GPU nodes muster may buy for queued gangs.
// clippy mistakes the repeated `type_ = ...` inside separate `printcolumn(...)` groups for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "GPUPool",
    root = "GpuPool",
    plural = "gpupools",
    shortname = "gp",
    shortname = "gpool",
    category = "muster",
    status = "GpuPoolStatus",
    derive = "PartialEq",
    doc = "GPUPool is a family of GPU nodes muster may buy: which instance types, GPU models, zones and capacity types, within which limits, with which node labels and taints, and how idle nodes are consolidated and scaled to zero.",
    printcolumn(
        name = "Nodes",
        type_ = "integer",
        json_path = ".status.nodes",
        description = "Nodes of this pool, launching or running"
    ),
    printcolumn(
        name = "GPUs",
        type_ = "integer",
        json_path = ".status.gpus",
        description = "GPUs on those nodes"
    ),
    printcolumn(
        name = "Allocated",
        type_ = "integer",
        json_path = ".status.gpusAllocated",
        description = "GPUs requested by pods bound or reserved on those nodes"
    ),
    printcolumn(
        name = "$/h",
        type_ = "string",
        json_path = ".status.pricePerHour",
        description = "Current price of the pool's nodes in US dollars per hour"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the pool can provision"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new("self.metadata.name.size() <= 63").message("metadata.name: a GPUPool name is the value of the muster.dev/pool label of its PoolNodes and Nodes and must be at most 63 characters")
)]
#[serde(rename_all = "camelCase")]
pub struct GpuPoolSpec {
    /// The `NodeClass` nodes of this pool are launched with.
    pub node_class_ref: ObjectName,
    /// Which offerings (instance type × zone × capacity type) the pool may buy.
    #[serde(default)]
    pub requirements: PoolRequirements,
    /// Upper bounds on what the pool may hold at once; unbounded when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PoolLimits>,
    /// When and how muster removes or replaces nodes of this pool.
    #[serde(default)]
    pub disruption: Disruption,
    /// Labels put on every node of the pool (in addition to muster's `muster.dev/*` labels and
    /// `nvidia.com/gpu.present=true`), set by its kubelet at registration: keys in the
    /// `kubernetes.io` and `k8s.io` namespaces are refused unless a kubelet may set them on its
    /// own Node (`kubelet.kubernetes.io/*`, `node.kubernetes.io/*` and the well-known labels such
    /// as `topology.kubernetes.io/zone`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = Rule::new("self.all(k, !k.startsWith('muster.dev/'))").message("spec.labels: keys with the muster.dev/ prefix are reserved for the controller"))]
    #[x_kube(validation = Rule::new(crate::kubelet_labels::cel_rule()).message(crate::kubelet_labels::MESSAGE))]
    pub labels: BTreeMap<String, String>,
    /// Taints put on every node of the pool; muster adds the matching tolerations to the pods
    /// it admits. Defaults to `nvidia.com/gpu=true:NoSchedule` so that non-GPU pods stay off.
    #[serde(default = "default_taints")]
    #[schemars(length(max = 32))]
    pub taints: Vec<Taint>,
    /// Priority among pools a queue may use: higher weight is tried first, before price.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub weight: i32,
    /// How long a gang's nodes may take to all become Ready; past it they are released (or
    /// handed to another gang) and the gang is planned again.
    #[serde(default = "default_provisioning_timeout")]
    pub provisioning_timeout: Duration,
    /// How close in the network the pods of a gang are placed when its workload does not say
    /// (no `muster.dev/podset-required-topology` or `muster.dev/podset-preferred-topology`
    /// annotation, so no `spec.networkTopology` on its Gang). A gang takes the default of the
    /// first pool in its queue's pool order that sets one: the queue's `spec.pools` in the
    /// order listed, or, when the queue lists none, every pool by weight (highest first) then
    /// name. Pools earlier in that order without a default are skipped; the gang keeps the one
    /// default wherever it is placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<crate::gang::NetworkTopology>,
}

fn default_taints() -> Vec<Taint> {
    vec![Taint {
        key: "nvidia.com/gpu".to_owned(),
        value: Some("true".to_owned()),
        effect: TaintEffect::NoSchedule,
    }]
}

fn default_provisioning_timeout() -> Duration {
    Duration::from("15m")
}

/// Which offerings a pool may buy. Empty lists mean "any".
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRequirements {
    /// Allowed instance (machine) types, e.g. `p4d.24xlarge` or `a2-highgpu-8g`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(max = 64)))]
    pub instance_types: Vec<String>,
    /// Allowed instance families, e.g. `p5` or `g6e`; on GCP a machine series (`a3`, `g2`:
    /// every `a3-*`, `g2-*` machine type) or a family of one (`a2-ultragpu`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), inner(length(max = 32)))]
    pub instance_families: Vec<String>,
    /// Allowed GPU models, e.g. `A100`, `H100`, `L4`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20), inner(regex(pattern = GPU_MODEL_PATTERN)))]
    pub gpu_models: Vec<String>,
    /// Allowed number of GPUs per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<GpuCountRange>,
    /// Minimum memory of each GPU, e.g. `40Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_min: Option<Quantity>,
    /// Allowed zones, e.g. `us-east-1a`; every zone of the `NodeClass` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), inner(length(max = 64)))]
    pub zones: Vec<String>,
    /// Capacity types to buy, most preferred first: `[spot, on-demand]` tries spot and falls
    /// back to on-demand when spot is unavailable or too risky for the gang. `reserved` lets the
    /// pool launch into the capacity reservations its NodeClass's cloud reports (On-Demand
    /// Capacity Reservations, Capacity Blocks for ML, GCE reservations) while they have
    /// machines left. `flex-start` lets it buy GKE flex-start capacity for the gangs of queues
    /// that set `spec.flexStartMaxWait`.
    #[serde(default = "default_capacity_types")]
    #[schemars(length(min = 1, max = 4))]
    #[x_kube(validation = Rule::new("self.size() > 0").message("spec.requirements.capacityTypes must list at least one of reserved, spot, on-demand, flex-start").reason(Reason::FieldValueRequired))]
    #[x_kube(validation = Rule::new("self.all(c, c == 'reserved' || c == 'spot' || c == 'on-demand' || c == 'flex-start')").message("spec.requirements.capacityTypes: each entry must be reserved, spot, on-demand or flex-start"))]
    #[x_kube(validation = Rule::new("self.all(c, self.filter(d, d == c).size() == 1)").message("spec.requirements.capacityTypes must not repeat a capacity type").reason(Reason::FieldValueDuplicate))]
    pub capacity_types: Vec<CapacityType>,
}

impl Default for PoolRequirements {
    fn default() -> Self {
        Self {
            instance_types: Vec::new(),
            instance_families: Vec::new(),
            gpu_models: Vec::new(),
            gpus_per_node: None,
            gpu_memory_min: None,
            zones: Vec::new(),
            capacity_types: default_capacity_types(),
        }
    }
}

fn default_capacity_types() -> Vec<CapacityType> {
    vec![CapacityType::OnDemand]
}

/// An inclusive range of GPUs per node.
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new("!has(self.min) || !has(self.max) || self.min <= self.max").message("spec.requirements.gpusPerNode.min must be less than or equal to max"))]
pub struct GpuCountRange {
    /// Fewest GPUs a node may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub min: Option<i32>,
    /// Most GPUs a node may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub max: Option<i32>,
}

/// Upper bounds on a pool; a plan that would cross one is not made.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolLimits {
    /// Most GPUs the pool's nodes may have in total.
    #[serde(default, rename = "maxGPUs", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_gpus: Option<i32>,
    /// Most nodes the pool may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_nodes: Option<i32>,
    /// Most the pool's nodes may cost together, in US dollars per hour, e.g. `250.00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price_per_hour: Option<Usd>,
}

/// When and how muster removes or replaces nodes of a pool.
#[derive(JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// Which nodes may be consolidated: only empty ones, or also underutilized ones whose pods
    /// fit elsewhere or on a strictly cheaper replacement.
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// How long a node must have been a consolidation candidate before it is acted on.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: Duration,
    /// How long the pool must have had no queued or running work before all its nodes go.
    #[serde(default = "default_scale_to_zero_after")]
    pub scale_to_zero_after: Duration,
    /// Limits on how many nodes may be disrupted at once; the most restrictive active budget
    /// applies.
    #[serde(default = "default_budgets")]
    #[schemars(length(max = 50))]
    pub budgets: Vec<Budget>,
    /// Whether nodes running a gang may be disrupted at all. Even when `true`, only gangs that
    /// opted in with `spec.disruptible` are moved, and always as a whole.
    #[serde(default)]
    pub disrupt_running_gangs: bool,
    /// Warm capacity: empty nodes kept past `consolidateAfter`, as many per machine size as the
    /// pool's recent arrivals asked for within one burst, of GPU models those arrivals accept,
    /// so the next small gangs start at once. Unless `allSizes`, only arrivals whose pod fits the
    /// smallest machine the pool buys with their GPU models ask for any.
    #[serde(default)]
    pub keep_warm: KeepWarm,
}

/// Empty nodes a pool keeps for the gangs that arrive next, sized from its recent arrivals and
/// capped in dollars.
#[derive(JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeepWarm {
    /// Arrivals (Gangs created in the pool's queues, finished ones included) within this
    /// trailing window are the demand; `0s` keeps no node warm.
    #[serde(default = "default_warm_window")]
    pub window: Duration,
    /// Per machine size, the most machines arrivals asked for within any span of this length
    /// in the window is how many empty nodes of that size are kept.
    #[serde(default = "default_warm_burst")]
    pub burst: Duration,
    /// Most the kept nodes may cost together, in US dollars per hour, e.g. `20.00`; unset: as
    /// many as the demand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price_per_hour: Option<Usd>,
    /// Arrivals bigger than the smallest machine the pool buys with their GPU models (a 4-GPU job
    /// in a pool that also sells 1-GPU machines) ask for warm nodes too; by default they ask for
    /// none, as a warm node of the smallest size starts a job for the least money.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_sizes: bool,
}

impl Default for KeepWarm {
    fn default() -> Self {
        Self {
            window: default_warm_window(),
            burst: default_warm_burst(),
            max_price_per_hour: None,
            all_sizes: false,
        }
    }
}

/// The planner's default (`muster_planner::model::pool::default_keep_warm`).
fn default_warm_window() -> Duration {
    Duration::from("1h")
}

fn default_warm_burst() -> Duration {
    Duration::from("20m")
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidation_policy: ConsolidationPolicy::default(),
            consolidate_after: default_consolidate_after(),
            scale_to_zero_after: default_scale_to_zero_after(),
            budgets: default_budgets(),
            disrupt_running_gangs: false,
            keep_warm: KeepWarm::default(),
        }
    }
}

/// The planner's default (`muster_planner::model::pool`): about half a
/// GPU node's boot; warm capacity keeps what arrivals ask for.
fn default_consolidate_after() -> Duration {
    Duration::from("0s")
}

fn default_scale_to_zero_after() -> Duration {
    Duration::from("10m")
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget {
        nodes: "10%".to_owned(),
        schedule: None,
        duration: None,
    }]
}

/// Which nodes consolidation may act on.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum ConsolidationPolicy {
    /// Only nodes with no muster-managed pods.
    #[default]
    WhenEmpty,
    /// Also nodes whose movable pods fit on other nodes or a strictly cheaper replacement.
    WhenUnderutilized,
}

/// A limit on concurrent disruptions, optionally active only in a time window.
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new("has(self.schedule) == has(self.duration)").message("spec.disruption.budgets[]: schedule and duration must be set together"))]
pub struct Budget {
    /// Most nodes disrupted at once: a count (`3`) or a percentage of the pool's nodes
    /// (`10%`, rounded up). `0` blocks disruption while the budget is active.
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"), length(max = 8))]
    pub nodes: String,
    /// Cron schedule (UTC, five fields or `@daily`-style macros) at which the budget becomes
    /// active; always active when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each scheduled start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
}

/// What a pool holds now.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuPoolStatus {
    /// Nodes of the pool, launching or running.
    #[serde(default)]
    pub nodes: i32,
    /// GPUs on those nodes.
    #[serde(default)]
    pub gpus: i32,
    /// GPUs requested by pods bound or reserved on those nodes.
    #[serde(default)]
    pub gpus_allocated: i32,
    /// What the pool's nodes cost together now, in US dollars per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<Usd>,
    /// Current state: `Ready` is `True` when the NodeClass is ready and offerings are known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// `.metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
