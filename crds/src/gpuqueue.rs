//! `GPUQueue`: where a team's gangs wait — quota, cohort borrowing, fair-share weight,
//! preemption and the pools it may use (like Kueue's `ClusterQueue`).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, Duration, GPU_MODEL_PATTERN,
    LabelSelector, Quantity, RESOURCE_NAME_PATTERN, Usd,
};

/// Where a team's gangs wait for quota and capacity.
// clippy mistakes the repeated `type_ = ...` inside separate `printcolumn(...)` groups for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "GPUQueue",
    root = "GpuQueue",
    plural = "gpuqueues",
    shortname = "gq",
    shortname = "gqueue",
    category = "muster",
    status = "GpuQueueStatus",
    derive = "PartialEq",
    doc = "GPUQueue is where a team's gangs wait: who may submit, the quota per resource (optionally per GPU model), borrowing and lending within a cohort, the fair-share weight, preemption, and the GPUPools it may use.",
    printcolumn(
        name = "Cohort",
        type_ = "string",
        json_path = ".spec.cohort",
        description = "Cohort the queue borrows from and lends to"
    ),
    printcolumn(
        name = "Pending",
        type_ = "integer",
        json_path = ".status.pendingGangs",
        description = "Gangs waiting for quota or capacity"
    ),
    printcolumn(
        name = "Admitted",
        type_ = "integer",
        json_path = ".status.admittedGangs",
        description = "Gangs admitted (provisioning or running)"
    ),
    printcolumn(
        name = "GPUs used",
        type_ = "string",
        json_path = ".status.gpusUsed",
        description = "GPUs held by admitted gangs, all models"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new("self.metadata.name.size() <= 63").message("metadata.name: a GPUQueue name is the value of the muster.dev/queue label and must be at most 63 characters")
)]
#[x_kube(validation = Rule::new("has(self.cohort) || !has(self.resources) || self.resources.all(r, !has(r.borrowingLimit))").message("spec.resources[].borrowingLimit requires spec.cohort: a queue without a cohort cannot borrow"))]
#[x_kube(validation = Rule::new("has(self.cohort) || !has(self.resources) || self.resources.all(r, !has(r.lendingLimit))").message("spec.resources[].lendingLimit requires spec.cohort: a queue without a cohort cannot lend"))]
#[serde(rename_all = "camelCase")]
pub struct GpuQueueSpec {
    /// Namespaces whose workloads may use this queue (by their `muster.dev/queue` label).
    /// `{}` matches every namespace; omitted matches none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Cohort of queues that lend unused quota to each other; no borrowing when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub cohort: Option<String>,
    /// Quota per resource (and per GPU model): what the queue owns, may borrow and may lend.
    /// A gang needing a resource that is not listed here does not fit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self.all(r, self.filter(s, s.name == r.name && (has(s.gpuModel) ? s.gpuModel : '') == (has(r.gpuModel) ? r.gpuModel : '')).size() == 1)").message("spec.resources: each (name, gpuModel) pair may appear only once").reason(Reason::FieldValueDuplicate))]
    pub resources: Vec<ResourceQuota>,
    /// Fair-share weight: a queue with weight 2 is entitled to twice the share of a queue
    /// with weight 1 when both have work waiting. A decimal or quantity greater than 0.
    #[serde(default = "default_weight")]
    #[x_kube(validation = Rule::new("quantity(string(self)).isGreaterThan(quantity('0'))").message("spec.weight must be greater than 0"))]
    pub weight: Quantity,
    /// Whether and whom admission may preempt to make room.
    #[serde(default)]
    pub preemption: Preemption,
    /// Names of the `GPUPool`s this queue's gangs may use, most preferred first; any pool
    /// when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN)))]
    #[x_kube(validation = Rule::new("self.all(p, self.filter(q, q == p).size() == 1)").message("spec.pools must not name a pool twice").reason(Reason::FieldValueDuplicate))]
    pub pools: Vec<String>,
    /// Order of admission within the queue.
    #[serde(default)]
    pub queueing_strategy: QueueingStrategy,
    /// How long an admitted gang's pods may take to all be running; past it the gang is
    /// evicted as a whole and requeued with backoff.
    #[serde(default = "default_pods_ready_timeout")]
    pub pods_ready_timeout: Duration,
    /// Stops admission: `Hold` admits nothing new; `HoldAndDrain` also evicts admitted gangs.
    #[serde(default)]
    pub stop_policy: StopPolicy,
    /// What happens to running gangs whose GPUs stay idle (read from the DCGM exporter's
    /// `DCGM_FI_DEV_GPU_UTIL` through the controller's `--prometheus-url`); nothing when
    /// omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_policy: Option<IdlePolicy>,
    /// How long the queue's gangs may wait for GKE flex-start capacity (Dynamic Workload
    /// Scheduler) to be granted. A pool that lists `flex-start` among its capacity types
    /// buys it for a gang only when its typical grant comes within this wait and it is the
    /// cheapest; the launch is then given up only after this wait on top of the pool's
    /// provisioning timeout. Omitted: never flex-start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex_start_max_wait: Option<Duration>,
}

/// When a running gang counts as an idle GPU holder, and what is done about it.
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("duration(self.window) >= duration('1m')").message("spec.idlePolicy.window must be at least 1m: a shorter window takes a pause between steps (data loading, a checkpoint) for idleness"))]
#[x_kube(validation = Rule::new("duration(self.window) <= duration('168h')").message("spec.idlePolicy.window must be at most 168h"))]
pub struct IdlePolicy {
    /// A gang is idle while the busiest of its GPUs stays below this utilisation, in
    /// percent (1–100), e.g. `5`.
    #[schemars(range(min = 1, max = 100))]
    pub threshold_percent: i32,
    /// How long a gang must stay below the threshold before `action` is taken, e.g. `30m`
    /// (at least `1m`).
    pub window: Duration,
    /// `Report` sets the gang's `GPUsIdle` condition and publishes an Event; `Requeue` also
    /// evicts the gang as a whole and queues it again after the eviction backoff; `Stop`
    /// evicts it as a whole and leaves its Job suspended, not queued again.
    #[serde(default)]
    pub action: IdleAction,
}

/// What is done with an idle GPU holder.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum IdleAction {
    /// Condition and Event only.
    #[default]
    Report,
    /// Evict as a whole and queue again after the backoff.
    Requeue,
    /// Evict as a whole; the Job stays suspended.
    Stop,
}

fn default_weight() -> Quantity {
    Quantity::from("1")
}

fn default_pods_ready_timeout() -> Duration {
    Duration::from("15m")
}

/// Quota of one resource (optionally for one GPU model).
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.lendingLimit) || quantity(string(self.lendingLimit)).compareTo(quantity(string(self.nominal))) <= 0").message("spec.resources[].lendingLimit must be less than or equal to nominal"))]
#[x_kube(validation = Rule::new("!has(self.gpuModel) || self.name.endsWith('/gpu')").message("spec.resources[].gpuModel is only valid for GPU resources such as nvidia.com/gpu"))]
pub struct ResourceQuota {
    /// Resource name: `nvidia.com/gpu`, `cpu`, `memory`, or any extended resource.
    #[schemars(length(min = 1, max = 253), regex(pattern = RESOURCE_NAME_PATTERN))]
    pub name: String,
    /// GPU model this quota is for, e.g. `A100`; all models share it when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = GPU_MODEL_PATTERN), length(max = 32))]
    pub gpu_model: Option<String>,
    /// Amount the queue owns.
    pub nominal: Quantity,
    /// Most the queue may borrow from its cohort on top of `nominal`; unlimited within the
    /// cohort's unused quota when omitted. Requires `spec.cohort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// Most of `nominal` other queues of the cohort may borrow; all of it when omitted.
    /// Requires `spec.cohort`; must not exceed `nominal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}

/// Preemption policy of a queue.
#[derive(JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// Whether a gang may preempt gangs of the same queue with lower priority.
    #[serde(default)]
    pub within_queue: WithinQueuePreemption,
    /// Whether a gang that fits its nominal quota may reclaim it from other queues of the
    /// cohort that borrowed it, and which of their gangs may be evicted.
    #[serde(default)]
    pub reclaim_within_cohort: ReclaimPolicy,
}

/// Preemption within one queue.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum WithinQueuePreemption {
    /// Never preempt.
    #[default]
    Never,
    /// Preempt gangs with lower priority.
    LowerPriority,
}

/// Reclaiming lent quota from the cohort.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum ReclaimPolicy {
    /// Never reclaim; wait for borrowers to finish.
    #[default]
    Never,
    /// Evict borrowing gangs with lower priority.
    LowerPriority,
    /// Evict any borrowing gang.
    Any,
}

/// Order of admission within a queue.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum QueueingStrategy {
    /// The head gang blocks all later ones until it is admitted.
    StrictFIFO,
    /// A later gang may be admitted past a blocked head gang when doing so cannot delay it.
    #[default]
    BestEffortFIFO,
}

/// Whether a queue admits work.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum StopPolicy {
    /// The queue admits work.
    #[default]
    None,
    /// The queue admits no new gangs; admitted gangs keep running.
    Hold,
    /// The queue admits no new gangs and evicts admitted ones.
    HoldAndDrain,
}

/// What a queue holds and how much of its quota it uses.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuQueueStatus {
    /// Gangs waiting for quota or capacity.
    #[serde(default)]
    pub pending_gangs: i32,
    /// Gangs admitted: quota reserved, nodes provisioning or pods starting.
    #[serde(default)]
    pub admitted_gangs: i32,
    /// Gangs whose pods are all running.
    #[serde(default)]
    pub running_gangs: i32,
    /// GPUs held by admitted gangs, all models together.
    #[serde(default, rename = "gpusUsed", skip_serializing_if = "Option::is_none")]
    pub gpus_used: Option<Quantity>,
    /// Usage of each quota entry of `spec.resources`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<ResourceUsage>,
    /// What the nodes the queue's gangs hold cost now, in US dollars per
    /// hour (a node shared by gangs is split by the GPUs each requests on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<Usd>,
    /// GPU-hours held by the queue's admitted and running gangs over the
    /// last 24 hours, the sum of `gpuHoursByHour` (e.g. `41.5`).
    #[serde(
        default,
        rename = "gpuHoursLast24h",
        skip_serializing_if = "Option::is_none"
    )]
    pub gpu_hours_last_24h: Option<String>,
    /// GPU-hours held in each clock hour of the last 24, oldest first: what
    /// `gpuHoursLast24h` sums. A controller that starts leading reads them back, so the
    /// figure survives restarts and leader changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 25))]
    pub gpu_hours_by_hour: Vec<GpuHoursBucket>,
    /// Current state: `Active` is `True` when the queue admits work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// `.metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A non-negative decimal such as `7.25`.
const DECIMAL_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?$";

/// GPU-hours a queue's gangs held in one clock hour.
#[derive(JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuHoursBucket {
    /// Start of the hour (UTC, on the hour).
    pub hour: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    /// GPU-hours held in it, e.g. `7.25`.
    #[schemars(regex(pattern = DECIMAL_PATTERN), length(max = 32))]
    pub gpu_hours: String,
}

/// Usage of one quota entry.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// Resource name, as in `spec.resources[].name`.
    pub name: String,
    /// GPU model, as in `spec.resources[].gpuModel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    /// Amount held by admitted gangs of this queue (own quota and borrowed).
    pub used: Quantity,
    /// Quota owned (`spec.resources[].nominal`), for comparison.
    pub nominal: Quantity,
    /// Part of `used` borrowed from the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Quantity>,
}
