//! Queues: where a team's gangs wait, with quota, cohort borrowing, fair-share
//! weight and preemption policy.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::offering::GpuModel;
use crate::quantity::Quantity;
use crate::time::Dur;

/// Order of gangs within a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum QueueingStrategy {
    /// The head blocks everything behind it.
    #[serde(rename = "StrictFIFO")]
    StrictFifo,
    /// A later gang may pass a blocked head only if it cannot delay it.
    #[default]
    #[serde(rename = "BestEffortFIFO")]
    BestEffortFifo,
}

/// Preemption within a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum PreemptionPolicy {
    /// Never preempt.
    #[default]
    Never,
    /// Preempt gangs of lower priority.
    LowerPriority,
}

/// Reclaiming capacity lent to other queues of the cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ReclaimPolicy {
    /// Never reclaim.
    #[default]
    Never,
    /// Reclaim from borrowing gangs of lower priority.
    LowerPriority,
    /// Reclaim from any borrowing gang.
    Any,
}

/// A resource a quota limits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaResource {
    /// All GPUs (`nvidia.com/gpu`).
    Gpu,
    /// GPUs of one model (`nvidia.com/gpu:A100`).
    GpuModel(GpuModel),
    /// CPU (`cpu`).
    Cpu,
    /// Memory (`memory`).
    Memory,
    /// Any other resource by name.
    Other(String),
}

impl QuotaResource {
    /// Parses `nvidia.com/gpu`, `nvidia.com/gpu:A100`, `cpu`, `memory`, or any name.
    pub fn parse(s: &str) -> QuotaResource {
        match s {
            "nvidia.com/gpu" => QuotaResource::Gpu,
            "cpu" => QuotaResource::Cpu,
            "memory" => QuotaResource::Memory,
            _ => match s.strip_prefix("nvidia.com/gpu:") {
                Some(model) if !model.is_empty() => QuotaResource::GpuModel(GpuModel::new(model)),
                _ => QuotaResource::Other(s.to_string()),
            },
        }
    }
}

impl fmt::Display for QuotaResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaResource::Gpu => f.write_str("nvidia.com/gpu"),
            QuotaResource::GpuModel(m) => write!(f, "nvidia.com/gpu:{m}"),
            QuotaResource::Cpu => f.write_str("cpu"),
            QuotaResource::Memory => f.write_str("memory"),
            QuotaResource::Other(s) => f.write_str(s),
        }
    }
}

impl Serialize for QuotaResource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for QuotaResource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(QuotaResource::parse(&s))
    }
}

/// Quota for one resource. Amounts are quantities in the resource's unit
/// (GPUs, cores, bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Quota {
    /// The resource.
    pub resource: QuotaResource,
    /// Guaranteed to this queue.
    pub nominal: Quantity,
    /// How much more than nominal it may borrow from its cohort; `None` is
    /// unlimited (within what the cohort has unused).
    #[serde(default)]
    pub borrowing_limit: Option<Quantity>,
    /// How much of its nominal it lends to the cohort; `None` lends all.
    #[serde(default)]
    pub lending_limit: Option<Quantity>,
}

/// A queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Queue {
    /// Name.
    pub name: String,
    /// Queues of a cohort lend each other unused quota.
    #[serde(default)]
    pub cohort: Option<String>,
    /// Fair-share weight (> 0).
    #[serde(default = "one")]
    pub weight: f64,
    /// Quotas; a resource without an entry is not limited.
    #[serde(default)]
    pub quotas: Vec<Quota>,
    /// Preemption inside the queue.
    #[serde(default)]
    pub preemption: PreemptionPolicy,
    /// Reclaiming lent quota from the cohort.
    #[serde(default)]
    pub reclaim: ReclaimPolicy,
    /// GPUPools its gangs may use, in order of preference.
    #[serde(default)]
    pub pools: Vec<String>,
    /// Order within the queue.
    #[serde(default)]
    pub strategy: QueueingStrategy,
    /// Pods of an admitted gang must all run within this, or it is evicted.
    #[serde(default)]
    pub pods_ready_timeout: Option<Dur>,
    /// Held: nothing new is admitted.
    #[serde(default)]
    pub stopped: bool,
    /// Drained (with `stopped`): its gangs that hold capacity are evicted
    /// whole and queued again, where the hold keeps them.
    #[serde(default)]
    pub drain: bool,
    /// What happens to its gangs whose GPUs stay idle; nothing when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_policy: Option<super::idle::IdlePolicy>,
    /// How long its gangs may wait for flex-start capacity (GKE's Dynamic
    /// Workload Scheduler) to be granted; `None` never buys flex-start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex_start_max_wait: Option<Dur>,
}

fn one() -> f64 {
    1.0
}

/// Hashed field by field, as `PartialEq` compares (the weight by value: `0.0`
/// and `-0.0` alike). The destructuring lists every field, so a field added
/// later does not compile until it is hashed too.
impl std::hash::Hash for Queue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let Queue {
            name,
            cohort,
            weight,
            quotas,
            preemption,
            reclaim,
            pools,
            strategy,
            pods_ready_timeout,
            stopped,
            drain,
            idle_policy,
            flex_start_max_wait,
        } = self;
        name.hash(state);
        cohort.hash(state);
        super::float_bits(*weight).hash(state);
        quotas.hash(state);
        preemption.hash(state);
        reclaim.hash(state);
        pools.hash(state);
        strategy.hash(state);
        pods_ready_timeout.hash(state);
        stopped.hash(state);
        drain.hash(state);
        idle_policy.hash(state);
        flex_start_max_wait.hash(state);
    }
}
