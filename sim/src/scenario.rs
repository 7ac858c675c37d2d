//! Scenario files (`--scenario FILE.yaml`): the cloud's behaviour, queues
//! and teams, pools, which offerings jobs may use, the workload, and policy
//! knobs for muster and the baselines. Unknown fields are errors, and every
//! error names the field path (`pools[0].requirements.minGpus`).
//!
//! Planner types (`Queue`, `Pool`, `Policy`) are embedded as they are written
//! for `muster plan -f`, so a scenario reads like the cluster it models.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use muster_planner::{CapacityType, Dur, GpuModel, Pool, PoolRequirements, Provider, Queue};
use muster_provider_sim::{CloudBehaviour, NetworkLayout, OfferingRule, Reservation};
use serde::{Deserialize, Serialize};

use crate::baselines::default_ca::CaConfig;
use crate::baselines::kueue_karpenter::KkConfig;
use crate::workload::generator::GeneratorConfig;
use crate::workload::llm_month::LlmMonthConfig;

/// A scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// Seed, when the command line gives none.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The workload.
    #[serde(default)]
    pub workload: WorkloadSpec,
    /// Which offerings jobs may use, and pod shapes.
    #[serde(default)]
    pub jobs: JobsSpec,
    /// The simulated cloud.
    #[serde(default)]
    pub cloud: CloudSpec,
    /// Queues (GPUQueues / ClusterQueues).
    #[serde(default)]
    pub queues: Vec<Queue>,
    /// Team → queue; a team without an entry uses the queue of its own name,
    /// else a copy of `defaultQueue` named after the team.
    #[serde(default)]
    pub team_queues: BTreeMap<String, String>,
    /// Template of the queue of teams not listed.
    #[serde(default)]
    pub default_queue: Option<Queue>,
    /// Pools (GPUPools / NodePools / node groups). Default: one per cloud,
    /// spot and on-demand.
    #[serde(default)]
    pub pools: Vec<Pool>,
    /// muster's planner knobs.
    #[serde(default)]
    pub policy: muster_planner::Policy,
    /// How the simulator drives the planner.
    #[serde(default)]
    pub driver: DriverSpec,
    /// Baseline knobs.
    #[serde(default)]
    pub baselines: BaselinesSpec,
    /// What `--matrix` rows that bring their own workload use.
    #[serde(default)]
    pub matrix: MatrixSpec,
}

/// Knobs of the matrix rows that bring their own workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatrixSpec {
    /// The month of the gang-heavy row (default: [`LlmMonthConfig::default`]).
    #[serde(default)]
    pub gang_heavy: Option<LlmMonthConfig>,
}

/// Where jobs come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// A trace CSV, relative to the scenario file (`--trace` wins).
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Generator knobs (used when there is no trace).
    #[serde(default)]
    pub generator: Option<GeneratorConfig>,
    /// A month of an LLM cluster's jobs (used when there is no trace; wins
    /// over `generator`).
    #[serde(default)]
    pub llm_month: Option<LlmMonthConfig>,
}

/// What a job may run on, and how big its pods are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct JobsSpec {
    /// GPU models jobs without their own `gpu_model` accept; empty accepts any.
    pub gpu_models: Vec<GpuModel>,
    /// Least memory per GPU for jobs without their own `gpu_model`, GiB.
    pub min_gpu_memory_gib: f64,
    /// CPU cores each pod requests per GPU.
    pub cpu_per_gpu: f64,
    /// Memory each pod requests per GPU, GiB.
    pub memory_per_gpu_gib: f64,
    /// Jobs checkpoint this often: an eviction (interruption, preemption)
    /// loses only the work since the last checkpoint. `0s`: every eviction
    /// restarts the job from scratch.
    pub checkpoint_every: Dur,
    /// The GPU model the trace's run times were measured on; with
    /// `gpuSpeeds`, a job runs `speed(trace model) / speed(node model)`
    /// times its trace duration. None: every eligible GPU runs at the
    /// trace's speed.
    pub trace_gpu_model: Option<GpuModel>,
    /// Relative throughput per GPU model (models not listed: 1).
    pub gpu_speeds: BTreeMap<String, f64>,
}

impl Default for JobsSpec {
    fn default() -> Self {
        JobsSpec {
            gpu_models: Vec::new(),
            min_gpu_memory_gib: 16.0,
            cpu_per_gpu: 2.0,
            memory_per_gpu_gib: 8.0,
            checkpoint_every: Dur::mins(30),
            trace_gpu_model: None,
            gpu_speeds: BTreeMap::new(),
        }
    }
}

/// The simulated cloud.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct CloudSpec {
    /// An offerings CSV, relative to the scenario file (`--offerings` wins);
    /// none means the built-in catalog.
    pub offerings: Option<PathBuf>,
    /// The cloud of the simulated cluster (one cluster, one cloud); default:
    /// `aws` when the offerings have it, else the first listed.
    pub provider: Option<Provider>,
    /// Regions to keep from the CSV; empty keeps one per cloud
    /// (`us-east-1`, `us-central1` when present).
    pub regions: Vec<String>,
    /// Interruptions per machine-hour of spot offerings without a rule.
    pub spot_interruption_rate_per_hour: f64,
    /// Mean capacity outage length.
    pub outage_mean: Dur,
    /// Per-offering behaviour, later rules overriding earlier ones.
    pub rules: Vec<OfferingRule>,
    /// Capacity reservations and Capacity Blocks the cluster owns; paid
    /// for whole whether used or not (`reserved_cost_usd`). With any, the
    /// default pools also buy `reserved`.
    pub reservations: Vec<Reservation>,
    /// Blocks of racks the machines land in.
    pub topology: Option<NetworkLayout>,
    /// How much longer a gang runs whose pods span racks of one block
    /// (0.10: +10 %). An assumption, not a measurement.
    pub cross_rack_slowdown: f64,
    /// How much longer a gang runs whose pods span blocks. An assumption.
    pub cross_block_slowdown: f64,
}

impl Default for CloudSpec {
    fn default() -> Self {
        let b = CloudBehaviour::default();
        CloudSpec {
            offerings: None,
            provider: None,
            regions: Vec::new(),
            spot_interruption_rate_per_hour: b.spot_interruption_rate_per_hour,
            outage_mean: b.outage_mean,
            rules: Vec::new(),
            reservations: Vec::new(),
            topology: None,
            cross_rack_slowdown: DEFAULT_CROSS_RACK_SLOWDOWN,
            cross_block_slowdown: DEFAULT_CROSS_BLOCK_SLOWDOWN,
        }
    }
}

/// Default slowdown of a gang spread over racks of one block: +10 %. An
/// assumption of this simulator (no public measurement of it for these
/// machines was at hand), chosen so that spreading costs something.
pub const DEFAULT_CROSS_RACK_SLOWDOWN: f64 = 0.10;
/// Default slowdown of a gang spread over blocks: +25 %. An assumption too.
pub const DEFAULT_CROSS_BLOCK_SLOWDOWN: f64 = 0.25;

impl CloudSpec {
    /// The behaviour part.
    pub fn behaviour(&self) -> CloudBehaviour {
        CloudBehaviour {
            spot_interruption_rate_per_hour: self.spot_interruption_rate_per_hour,
            outage_mean: self.outage_mean,
            rules: self.rules.clone(),
            reservations: self.reservations.clone(),
            topology: self.topology,
        }
    }
}

/// How the simulator calls the planner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct DriverSpec {
    /// At most one plan per this much virtual time after events.
    pub debounce: Dur,
    /// A plan at least this often (time-based decisions).
    pub tick: Dur,
    /// Pass each job's true run time as `expectedDuration`.
    pub expected_durations: bool,
    /// Time-series sampling period; default: the run's span / 400.
    pub sample_every: Option<Dur>,
}

impl Default for DriverSpec {
    fn default() -> Self {
        DriverSpec {
            debounce: Dur::secs(1),
            tick: Dur::secs(60),
            expected_durations: false,
            sample_every: None,
        }
    }
}

/// Baseline knobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BaselinesSpec {
    /// Cluster Autoscaler.
    #[serde(default)]
    pub default_ca: CaConfig,
    /// Kueue + Karpenter.
    #[serde(default)]
    pub kueue_karpenter: KkConfig,
}

/// A scenario that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// YAML or a field is wrong.
    #[error("{path}: {field}: {message}")]
    Field {
        /// The file.
        path: String,
        /// Field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl Scenario {
    /// Parses scenario YAML; `path` names the source in errors.
    pub fn parse(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
        let de = serde_norway::Deserializer::from_str(text);
        let s: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let shown = field.clone();
            ScenarioError::Field {
                path: path.to_string(),
                field: if field == "." {
                    "(document)".into()
                } else {
                    field
                },
                // serde_norway may already start its message with the path.
                message: {
                    let inner = e.into_inner().to_string();
                    let prefix = format!("{shown}: ");
                    inner
                        .strip_prefix(&prefix)
                        .map_or(inner.clone(), str::to_string)
                },
            }
        })?;
        s.validate(path)?;
        Ok(s)
    }

    /// Reads a scenario file; relative paths inside are made relative to it.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: shown.clone(),
            source,
        })?;
        let mut s = Scenario::parse(&text, &shown)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(t) = &mut s.workload.trace
            && t.is_relative()
        {
            *t = dir.join(&*t);
        }
        if let Some(o) = &mut s.cloud.offerings
            && o.is_relative()
        {
            *o = dir.join(&*o);
        }
        Ok(s)
    }

    fn validate(&self, path: &str) -> Result<(), ScenarioError> {
        let field = |field: String, message: String| ScenarioError::Field {
            path: path.to_string(),
            field,
            message,
        };
        let mut pool_names = Vec::new();
        for (i, p) in self.pools.iter().enumerate() {
            if p.name.is_empty() || pool_names.contains(&p.name) {
                return Err(field(
                    format!("pools[{i}].name"),
                    "must be non-empty and unique".into(),
                ));
            }
            pool_names.push(p.name.clone());
        }
        let mut queue_names: Vec<&str> = Vec::new();
        for (i, q) in self.queues.iter().enumerate() {
            if q.name.is_empty() || queue_names.contains(&q.name.as_str()) {
                return Err(field(
                    format!("queues[{i}].name"),
                    "must be non-empty and unique".into(),
                ));
            }
            queue_names.push(&q.name);
            if !(q.weight.is_finite() && q.weight > 0.0) {
                return Err(field(format!("queues[{i}].weight"), "must be > 0".into()));
            }
            for (k, pool) in q.pools.iter().enumerate() {
                if !self.pools.is_empty() && !pool_names.contains(pool) {
                    return Err(field(
                        format!("queues[{i}].pools[{k}]"),
                        format!("unknown pool {pool:?}"),
                    ));
                }
            }
        }
        for (team, q) in &self.team_queues {
            if !queue_names.contains(&q.as_str()) {
                return Err(field(
                    format!("teamQueues.{team}"),
                    format!("unknown queue {q:?}"),
                ));
            }
        }
        let j = &self.jobs;
        for (name, v) in [
            ("jobs.minGpuMemoryGib", j.min_gpu_memory_gib),
            ("jobs.cpuPerGpu", j.cpu_per_gpu),
            ("jobs.memoryPerGpuGib", j.memory_per_gpu_gib),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(field(name.into(), format!("{v} must be a number ≥ 0")));
            }
        }
        for (m, v) in &j.gpu_speeds {
            if !v.is_finite() || *v <= 0.0 {
                return Err(field(
                    format!("jobs.gpuSpeeds.{m}"),
                    format!("{v} must be > 0"),
                ));
            }
        }
        let ca = &self.baselines.default_ca.scale_down_utilization_threshold;
        if !(0.0..=1.0).contains(ca) {
            return Err(field(
                "baselines.defaultCa.scaleDownUtilizationThreshold".into(),
                "must be in [0, 1]".into(),
            ));
        }
        if self.driver.tick.as_secs() == 0 {
            return Err(field("driver.tick".into(), "must be > 0".into()));
        }
        self.cloud.behaviour().validate().map_err(|e| {
            let at = match e {
                muster_provider_sim::behaviour::BehaviourError::Capacity(_) => "cloud",
                _ => "cloud.rules",
            };
            field(at.into(), e.to_string())
        })?;
        for (name, v) in [
            ("cloud.crossRackSlowdown", self.cloud.cross_rack_slowdown),
            ("cloud.crossBlockSlowdown", self.cloud.cross_block_slowdown),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(field(name.into(), format!("{v} must be a number ≥ 0")));
            }
        }
        Ok(())
    }

    /// The pools: as given, or one per cloud present in the offerings,
    /// buying spot and on-demand (and reserved, when the cloud has
    /// reservations).
    pub fn pools_for(&self, providers: &[Provider]) -> Vec<Pool> {
        if !self.pools.is_empty() {
            return self.pools.clone();
        }
        providers
            .iter()
            .map(|p| Pool {
                name: format!("{}-gpu", p.as_str()),
                node_class: format!("{}-default", p.as_str()),
                provider: *p,
                weight: 0,
                requirements: PoolRequirements {
                    capacity_types: if self.cloud.reservations.is_empty() {
                        vec![CapacityType::Spot, CapacityType::OnDemand]
                    } else {
                        vec![
                            CapacityType::Reserved,
                            CapacityType::Spot,
                            CapacityType::OnDemand,
                        ]
                    },
                    ..Default::default()
                },
                limits: Default::default(),
                disruption: Default::default(),
                labels: Default::default(),
                taints: muster_planner::model::pool::default_taints(),
                provisioning_timeout: None,
            })
            .collect()
    }

    /// The queue each team uses, creating queues for teams without one.
    /// Returns (all queues, queue name per team).
    pub fn queues_for(&self, teams: &[String], pools: &[Pool]) -> (Vec<Queue>, Vec<String>) {
        let mut queues = self.queues.clone();
        let mut team_queue = Vec::new();
        for t in teams {
            let name = match self.team_queues.get(t) {
                Some(q) => q.clone(),
                None => t.clone(),
            };
            if !queues.iter().any(|q| q.name == name) {
                let mut q = self.default_queue.clone().unwrap_or_else(|| Queue {
                    name: String::new(),
                    cohort: None,
                    weight: 1.0,
                    quotas: Vec::new(),
                    preemption: Default::default(),
                    reclaim: Default::default(),
                    pools: Vec::new(),
                    strategy: Default::default(),
                    pods_ready_timeout: None,
                    stopped: false,
                    drain: false,
                    idle_policy: None,
                    flex_start_max_wait: None,
                });
                q.name = name.clone();
                queues.push(q);
            }
            team_queue.push(name);
        }
        for q in &mut queues {
            if q.pools.is_empty() {
                q.pools = pools.iter().map(|p| p.name.clone()).collect();
            }
        }
        (queues, team_queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "pools:\n- name: a\n  provider: aws\n  requirements: {minGpus: many}\n",
                "pools[0].requirements.minGpus",
            ),
            (
                "cloud:\n  rules:\n  - match: '*'\n    capacityErrorProbability: 2\n",
                "cloud.rules",
            ),
            ("jobs: {gpuModel: [A100]}\n", "jobs"),
            ("colour: red\n", "colour"),
            ("queues:\n- {name: a, weight: 0}\n", "queues[0].weight"),
            ("teamQueues: {x: nope}\n", "teamQueues.x"),
            (
                "cloud:\n  reservations:\n  - {id: cr-1, kind: capacity-block, instanceType: p5.48xlarge, zone: us-east-1a, count: 1}\n",
                "cloud",
            ),
            (
                "cloud: {crossRackSlowdown: -1}\n",
                "cloud.crossRackSlowdown",
            ),
            (
                "cloud: {topology: {nodesPerRack: 0, racksPerBlock: 2}}\n",
                "cloud",
            ),
            ("driver: {debounce: 10 parsecs}\n", "driver.debounce"),
            (
                "baselines: {defaultCa: {expander: cheapest}}\n",
                "baselines.defaultCa.expander",
            ),
        ];
        for (yaml, want) in cases {
            let e = Scenario::parse(yaml, "s.yaml").expect_err(yaml).to_string();
            assert!(e.starts_with("s.yaml: "), "{e}");
            assert!(e.contains(want), "{yaml:?}: {e} lacks {want}");
        }
    }

    #[test]
    fn defaults_and_queues() {
        let s = Scenario::parse("{}", "x").expect("empty scenario");
        let pools = s.pools_for(&[Provider::Aws, Provider::Gcp]);
        assert_eq!(pools.len(), 2);
        let (queues, tq) = s.queues_for(&["a".into(), "b".into()], &pools);
        assert_eq!(queues.len(), 2);
        assert_eq!(tq, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(queues[0].pools.len(), 2);
    }
}
