//! Pools: families of nodes muster may buy, with requirements, limits and a
//! disruption policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::offering::{CapacityType, GpuModel, Offering, Provider};
use super::price::Price;
use super::scheduling::Taint;
use crate::time::Dur;

/// What offerings a pool may buy. Empty lists allow anything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolRequirements {
    /// Allowed instance types.
    #[serde(default)]
    pub instance_types: Vec<String>,
    /// Allowed instance families (`p4d`, `a2-highgpu`).
    #[serde(default)]
    pub instance_families: Vec<String>,
    /// Allowed GPU models.
    #[serde(default)]
    pub gpu_models: Vec<GpuModel>,
    /// Least GPUs per node.
    #[serde(default)]
    pub min_gpus: Option<u32>,
    /// Most GPUs per node.
    #[serde(default)]
    pub max_gpus: Option<u32>,
    /// Least memory per GPU, MiB.
    #[serde(default)]
    pub min_gpu_memory_mib: Option<u64>,
    /// Allowed zones.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Capacity types in order of preference; empty means on-demand only.
    #[serde(default)]
    pub capacity_types: Vec<CapacityType>,
}

/// Whether requirement `family` admits `instance_type`: its family
/// (`p4d`, `a2-ultragpu`), or on GCP its machine series, the part before
/// the first `-` (`a3`, `g2`: every `a3-*`, `g2-*` type; GCP's own name for
/// them).
pub fn family_matches(family: &str, instance_type: &str) -> bool {
    family == super::offering::family_of(instance_type)
        || (!instance_type.contains('.')
            && instance_type
                .split_once('-')
                .is_some_and(|(series, _)| series == family))
}

impl PoolRequirements {
    /// True when an offering satisfies these requirements (availability and
    /// price aside). Empty lists allow anything; no capacity types means
    /// on-demand only.
    pub fn admits(&self, o: &Offering) -> bool {
        if !self.instance_types.is_empty() && !self.instance_types.contains(&o.instance_type) {
            return false;
        }
        if !self.instance_families.is_empty()
            && !self
                .instance_families
                .iter()
                .any(|f| family_matches(f, &o.instance_type))
        {
            return false;
        }
        if !self.gpu_models.is_empty()
            && !o
                .gpu_model
                .as_ref()
                .is_some_and(|m| self.gpu_models.iter().any(|want| m.satisfies(want)))
        {
            return false;
        }
        if self.min_gpus.is_some_and(|n| o.gpu_count < n)
            || self.max_gpus.is_some_and(|n| o.gpu_count > n)
        {
            return false;
        }
        if self
            .min_gpu_memory_mib
            .is_some_and(|m| o.gpu_memory_mib < m)
        {
            return false;
        }
        if !self.zones.is_empty() && !self.zones.contains(&o.zone) {
            return false;
        }
        if self.capacity_types.is_empty() {
            o.capacity_type == CapacityType::OnDemand
        } else {
            self.capacity_types.contains(&o.capacity_type)
        }
    }
}

/// Ceilings on what a pool holds at once (launched and in flight).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolLimits {
    /// Most GPUs.
    #[serde(default)]
    pub max_gpus: Option<u64>,
    /// Most nodes.
    #[serde(default)]
    pub max_nodes: Option<u64>,
    /// Most dollars per hour.
    #[serde(default)]
    pub max_price_per_hour: Option<Price>,
}

/// When nodes are consolidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    /// Only empty nodes are removed.
    WhenEmpty,
    /// Empty nodes are removed; underutilized nodes drained when their
    /// movable pods fit elsewhere, or replaced by a cheaper node.
    #[default]
    WhenUnderutilized,
}

/// A pool's disruption policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Disruption {
    /// What may be consolidated.
    #[serde(default)]
    pub consolidation: ConsolidationPolicy,
    /// How long a node must be empty or underutilized first.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: Dur,
    /// With no queued or running work, all nodes go after this long.
    #[serde(default = "default_scale_to_zero_after")]
    pub scale_to_zero_after: Dur,
    /// Most nodes of the pool disrupted at once, as a count.
    #[serde(default)]
    pub max_disrupted_nodes: Option<u64>,
    /// Most nodes disrupted at once, as a percentage of the pool's nodes.
    #[serde(default = "default_budget_percent")]
    pub max_disrupted_percent: u32,
    /// Empty nodes kept past `consolidateAfter` for the gangs that arrive
    /// next (see the planner's `warm` module); `None` keeps none.
    #[serde(default = "default_keep_warm")]
    pub keep_warm: Option<KeepWarm>,
}

/// Warm capacity: empty nodes a pool keeps, sized from recent arrivals and
/// capped in dollars, so the next small gangs start without waiting for a
/// boot. In the spirit of cluster-autoscaler's `CapacityBuffer`, but sized
/// from the pool's own arrivals rather than a fixed replica count.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeepWarm {
    /// Arrivals within this trailing window are the demand.
    pub window: Dur,
    /// The demand of a size class is the most machines of it that arrivals
    /// asked for within any span of this length in the window: the burst
    /// the kept nodes absorb.
    #[serde(default = "default_warm_burst")]
    pub burst: Dur,
    /// Most the kept nodes may cost together per hour; `None`: as many as
    /// the window's arrivals used.
    #[serde(default)]
    pub max_price_per_hour: Option<Price>,
    /// Arrivals bigger than the smallest machine the pool buys with their
    /// GPU models ask for warm nodes too (by default they ask for none; see
    /// [`crate::warm`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_sizes: bool,
}

/// How long a node stays empty or underutilized before it is consolidated,
/// unless the pool says otherwise: not at all, as Karpenter's own default.
/// Keeping empty nodes for the next arrivals is warm capacity's decision
/// (`keepWarm`, [`crate::warm`]), sized from those arrivals, and a gang's
/// nodes are its own while it is admitted, so this delay only keeps nodes
/// nothing asks for: on the gang-heavy row of `muster simulate --matrix`,
/// empty A100 machines after each gang, most of that row's gap under the
/// former two minutes (`docs/benchmarks.md`, "Tuned baselines"). The
/// GPUPool CRD's default is the same.
fn default_consolidate_after() -> Dur {
    Dur::secs(0)
}
/// The longest `keepWarm.window` of `pools`: how far back a driver keeps
/// arrivals; `None` when no pool keeps nodes warm.
pub fn arrivals_window(pools: &[Pool]) -> Option<Dur> {
    pools
        .iter()
        .filter_map(|p| p.disruption.keep_warm.as_ref().map(|k| k.window))
        .max()
}

/// Warm capacity unless the pool says otherwise: the arrivals of the last
/// hour, uncapped. On the Philly replay (`docs/benchmarks.md`) this is what
/// lets size-matched placement keep the median wait at zero.
pub fn default_keep_warm() -> Option<KeepWarm> {
    Some(KeepWarm {
        window: Dur::hours(1),
        burst: default_warm_burst(),
        max_price_per_hour: None,
        all_sizes: false,
    })
}
/// About five boot times: on the Philly replay, 5 minutes keeps too few
/// nodes for the bursts of small jobs (the median job waits a boot), and,
/// with warm nodes only of the smallest machines (see [`crate::warm`]),
/// 12 minutes just too few on the spot-heavy row, 15 just enough; 20
/// leaves a little room. `docs/benchmarks.md`, "Size-matched placement and
/// warm capacity", has the commands that measure each.
fn default_warm_burst() -> Dur {
    Dur::mins(20)
}
fn default_scale_to_zero_after() -> Dur {
    Dur::mins(10)
}
fn default_budget_percent() -> u32 {
    10
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidation: ConsolidationPolicy::default(),
            consolidate_after: default_consolidate_after(),
            scale_to_zero_after: default_scale_to_zero_after(),
            max_disrupted_nodes: None,
            max_disrupted_percent: default_budget_percent(),
            keep_warm: default_keep_warm(),
        }
    }
}

/// A pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pool {
    /// Name.
    pub name: String,
    /// Its NodeClass.
    #[serde(default)]
    pub node_class: String,
    /// The cloud of its NodeClass.
    pub provider: Provider,
    /// Higher weight is tried first when prices tie.
    #[serde(default)]
    pub weight: i32,
    /// What it may buy.
    #[serde(default)]
    pub requirements: PoolRequirements,
    /// Ceilings.
    #[serde(default)]
    pub limits: PoolLimits,
    /// Disruption policy.
    #[serde(default)]
    pub disruption: Disruption,
    /// Labels its nodes carry.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints its nodes carry.
    #[serde(default = "default_taints")]
    pub taints: Vec<Taint>,
    /// How long a gang may wait for its launched capacity before it is released.
    #[serde(default)]
    pub provisioning_timeout: Option<Dur>,
}

/// The default taint of GPU nodes: `nvidia.com/gpu=true:NoSchedule`.
pub fn default_taints() -> Vec<Taint> {
    vec![Taint {
        key: "nvidia.com/gpu".to_string(),
        value: "true".to_string(),
        effect: super::scheduling::TaintEffect::NoSchedule,
    }]
}

#[cfg(test)]
mod family_tests {
    use super::family_matches;

    #[test]
    fn a_family_or_a_gcp_machine_series_admits_its_types() {
        let cases = [
            ("p4d", "p4d.24xlarge", true),
            ("p4", "p4d.24xlarge", false),
            ("g6", "g6e.xlarge", false),
            ("a2-ultragpu", "a2-ultragpu-8g", true),
            ("a2", "a2-ultragpu-8g", true),
            ("a2", "a2-highgpu-1g", true),
            ("a2-highgpu", "a2-ultragpu-8g", false),
            ("g2", "g2-standard-4", true),
            ("g2-standard", "g2-standard-4", true),
            ("a3", "a2-highgpu-8g", false),
            ("n1", "n1-standard-8+4xnvidia-tesla-t4", true),
            ("g", "g2-standard-4", false),
        ];
        for (family, ty, want) in cases {
            assert_eq!(family_matches(family, ty), want, "{family} admits {ty}");
        }
    }
}
