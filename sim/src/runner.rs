//! Puts a run together: reads the inputs (scenario, trace or generator,
//! offerings), builds one world per policy from the same workload, cloud
//! and seed, runs them, and collects what the reports need.

use std::path::{Path, PathBuf};

use muster_planner::{Dur, Offering, Pool, Provider, Queue, Resources};
use muster_provider_sim::{
    CloudBehaviour, RegionFilter, SimCloud, builtin_offerings, parse_offerings,
};

use crate::baselines::default_ca::{CaConfig, DefaultCa, Expander};
use crate::baselines::kueue_karpenter::KueueKarpenter;
use crate::binder::Constraint;
use crate::clock::Stopwatch;
use crate::engine;
use crate::metrics::Recorder;
use crate::policies::Policy;
use crate::policies::muster::{MusterConfig, MusterPolicy};
use crate::scenario::Scenario;
use crate::workload::generator::{GeneratorConfig, generate};
use crate::workload::llm_month::{LlmMonthConfig, generate_llm_month};
use crate::workload::trace::parse_trace;
use crate::workload::{Job, PodShape};
use crate::world::World;

/// The policies a run can compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PolicyKind {
    /// muster, driven by the planner.
    Muster,
    /// Default scheduler + Cluster Autoscaler.
    DefaultCa,
    /// Kueue + Karpenter.
    KueueKarpenter,
    /// Default scheduler + Cluster Autoscaler with the `price` expander.
    DefaultCaPrice,
    /// Kueue + ProvisioningRequest (atomic scale-up) + Cluster Autoscaler.
    KueueProvreq,
    /// Cluster Autoscaler as a careful operator tunes it ([`tuned_ca`]).
    DefaultCaTuned,
    /// Kueue + Karpenter as a careful operator tunes them: NodePools split
    /// by GPU count ([`split_by_gpu_count`]).
    KueueKarpenterTuned,
    /// Kueue + ProvisioningRequest + Cluster Autoscaler, tuned as
    /// [`PolicyKind::DefaultCaTuned`].
    KueueProvreqTuned,
}

impl PolicyKind {
    /// All, in report order.
    pub const ALL: [PolicyKind; 8] = [
        PolicyKind::Muster,
        PolicyKind::DefaultCa,
        PolicyKind::KueueKarpenter,
        PolicyKind::DefaultCaPrice,
        PolicyKind::KueueProvreq,
        PolicyKind::DefaultCaTuned,
        PolicyKind::KueueKarpenterTuned,
        PolicyKind::KueueProvreqTuned,
    ];

    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Muster => "muster",
            PolicyKind::DefaultCa => "default-ca",
            PolicyKind::KueueKarpenter => "kueue-karpenter",
            PolicyKind::DefaultCaPrice => "default-ca-price",
            PolicyKind::KueueProvreq => "kueue-provreq",
            PolicyKind::DefaultCaTuned => "default-ca-tuned",
            PolicyKind::KueueKarpenterTuned => "kueue-karpenter-tuned",
            PolicyKind::KueueProvreqTuned => "kueue-provreq-tuned",
        }
    }

    /// True for a baseline as a careful operator configures it.
    pub fn tuned(self) -> bool {
        matches!(
            self,
            PolicyKind::DefaultCaTuned
                | PolicyKind::KueueKarpenterTuned
                | PolicyKind::KueueProvreqTuned
        )
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|k| k.name() == s.trim())
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The scenario (default: empty).
    pub scenario: Scenario,
    /// A trace file (wins over the scenario's).
    pub trace: Option<PathBuf>,
    /// An offerings file (wins over the scenario's).
    pub offerings: Option<PathBuf>,
    /// Seed (wins over the scenario's); default 1.
    pub seed: Option<u64>,
    /// Policies, in order.
    pub policies: Vec<PolicyKind>,
}

/// A run that could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The trace is malformed.
    #[error("{path}: {source}")]
    Trace {
        /// The file.
        path: String,
        /// Why.
        source: crate::workload::trace::TraceError,
    },
    /// The offerings file is malformed.
    #[error("{path}: {source}")]
    Offerings {
        /// The file.
        path: String,
        /// Why.
        source: muster_provider_sim::OfferingsError,
    },
    /// The inputs do not make a run.
    #[error("{0}")]
    Invalid(String),
}

/// Inputs shared by every policy's run.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Jobs, by submit time.
    pub jobs: Vec<Job>,
    /// One pod's requests per job.
    pub requests: Vec<Resources>,
    /// What each job accepts.
    pub constraints: Vec<Constraint>,
    /// Cloud template (cloned per policy, so all meet the same cloud).
    pub cloud: SimCloud,
    /// Pools.
    pub pools: Vec<Pool>,
    /// Queues.
    pub queues: Vec<Queue>,
    /// Queue per team (team order as in the world: sorted names).
    pub team_queue: Vec<String>,
    /// Team names, sorted.
    pub teams: Vec<String>,
    /// Lower bound, dollars (with `reserved_cost_usd`).
    pub lower_bound_usd: f64,
    /// What the cloud's reservations cost for their whole windows, used or
    /// not, dollars: the same for every policy, and part of each one's
    /// cost. A reservation without an end is paid until the last arrival.
    pub reserved_cost_usd: f64,
    /// The seed.
    pub seed: u64,
    /// The scenario.
    pub scenario: Scenario,
    /// Where jobs came from, for people.
    pub workload_source: String,
    /// Where offerings came from, for people.
    pub offerings_source: String,
    /// Sampling period of the time series.
    pub sample_every: Dur,
}

fn read(path: &Path) -> Result<String, RunError> {
    std::fs::read_to_string(path).map_err(|source| RunError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Reads and checks every input.
pub fn prepare(cfg: &RunConfig) -> Result<Prepared, RunError> {
    let sc = &cfg.scenario;
    let seed = cfg.seed.or(sc.seed).unwrap_or(1);
    let trace = cfg.trace.clone().or_else(|| sc.workload.trace.clone());
    let (jobs, workload_source) = match &trace {
        Some(p) => {
            let jobs = parse_trace(&read(p)?).map_err(|source| RunError::Trace {
                path: p.display().to_string(),
                source,
            })?;
            (jobs, format!("trace {}", p.display()))
        }
        None if sc.workload.llm_month.is_some() => {
            let m = sc.workload.llm_month.clone().unwrap_or_default();
            let jobs = generate_llm_month(&m, seed);
            if jobs.is_empty() {
                return Err(RunError::Invalid(
                    "the LLM month has no jobs (days or jobsPerDay is 0)".into(),
                ));
            }
            (jobs, describe_llm_month(&m, seed))
        }
        None => {
            let g = sc.workload.generator.clone().unwrap_or_default();
            let jobs = generate(&g, seed);
            if jobs.is_empty() {
                return Err(RunError::Invalid(
                    "the generator produced no jobs (days or jobsPerDay is 0)".into(),
                ));
            }
            (jobs, describe_generator(&g, seed))
        }
    };
    let offerings_path = cfg.offerings.clone().or_else(|| sc.cloud.offerings.clone());
    let regions = if sc.cloud.regions.is_empty() {
        RegionFilter::OnePerProvider
    } else {
        RegionFilter::Only(sc.cloud.regions.clone())
    };
    let (offerings, offerings_source): (Vec<Offering>, String) = match &offerings_path {
        Some(p) => (
            parse_offerings(&read(p)?, &regions).map_err(|source| RunError::Offerings {
                path: p.display().to_string(),
                source,
            })?,
            format!("offerings {}", p.display()),
        ),
        None => (
            builtin_offerings(),
            "built-in catalog (AWS us-east-1 and GCP us-central1, prices of mid-2026; the cluster buys from one)".into(),
        ),
    };
    let offerings = one_cloud(offerings, sc.cloud.provider)?;
    let behaviour: CloudBehaviour = sc.cloud.behaviour();
    let cloud = SimCloud::new(offerings, &behaviour, seed)
        .map_err(|e| RunError::Invalid(format!("cloud: {e}")))?;
    let mut providers: Vec<Provider> = cloud.offerings().iter().map(|o| o.provider).collect();
    providers.sort();
    providers.dedup();
    let pools = sc.pools_for(&providers);
    let mut teams: Vec<String> = jobs.iter().map(|j| j.team.clone()).collect();
    teams.sort();
    teams.dedup();
    let (queues, team_queue) = sc.queues_for(&teams, &pools);
    let shape = PodShape {
        cpu_millis_per_gpu: (sc.jobs.cpu_per_gpu * 1000.0).round() as u64,
        memory_bytes_per_gpu: (sc.jobs.memory_per_gpu_gib * (1u64 << 30) as f64) as u64,
    };
    let requests: Vec<Resources> = jobs
        .iter()
        .map(|j| shape.requests(j.pod_gpu_millis))
        .collect();
    let default_constraint = Constraint {
        models: sc.jobs.gpu_models.clone(),
        min_gpu_memory_mib: (sc.jobs.min_gpu_memory_gib * 1024.0).round() as u64,
        node_gpus: None,
    };
    let constraints: Vec<Constraint> = jobs
        .iter()
        .map(|j| match &j.gpu_model {
            Some(m) => Constraint {
                models: vec![m.clone()],
                min_gpu_memory_mib: 0,
                node_gpus: None,
            },
            None => default_constraint.clone(),
        })
        .collect();
    let buyable: Vec<&Offering> = cloud
        .offerings()
        .iter()
        .filter(|o| {
            pools
                .iter()
                .any(|p| p.provider == o.provider && p.requirements.admits(o))
        })
        .collect();
    let last_arrival = jobs.iter().map(|j| j.submit).max().unwrap_or_default();
    let reserved_cost_usd: f64 = cloud
        .reservations()
        .iter()
        .map(|r| {
            let od = cloud
                .offerings()
                .iter()
                .find(|o| {
                    o.instance_type == r.instance_type
                        && o.zone == r.zone
                        && o.capacity_type == muster_planner::CapacityType::OnDemand
                })
                .and_then(|o| o.price)
                .map_or(0.0, |p| p.usd());
            r.cost_usd(od, last_arrival)
        })
        .sum();
    // What reservations hold is free to use once paid: their GPU-hours
    // (to the last arrival plus the longest job when they have no end) come
    // off the dearest work; they are paid whole.
    let longest = jobs.iter().map(|j| j.duration).max().unwrap_or_default();
    let free_gpu_hours: f64 = cloud
        .offerings()
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((o, cloud.reservation(i)?)))
        .map(|(o, r)| {
            let end = r.end().unwrap_or(last_arrival + longest);
            let hours = end.since(r.start()).as_secs() as f64 / 3600.0;
            f64::from(r.count) * f64::from(o.gpu_count) * hours
        })
        .sum();
    let priced: Vec<&Offering> = buyable
        .iter()
        .copied()
        .filter(|o| o.reservation.is_none())
        .collect();
    let (lower_bound_usd, misfits) = crate::lower_bound::lower_bound_with_free(
        &jobs,
        &requests,
        &constraints,
        &priced,
        free_gpu_hours,
    );
    let lower_bound_usd = lower_bound_usd + reserved_cost_usd;
    if let Some(i) = misfits.first() {
        let j = &jobs[*i];
        let c = &constraints[*i];
        let place = if j.line > 0 {
            format!("trace line {}", j.line)
        } else {
            format!("generated job {}", j.id)
        };
        return Err(RunError::Invalid(format!(
            "{place}: no offering any pool may buy holds one pod of this job ({} GPUs per pod{}{}, {}); {} such job(s) in all",
            j.pod_gpu_millis as f64 / 1000.0,
            if c.models.is_empty() {
                String::new()
            } else {
                format!(
                    ", model {}",
                    c.models
                        .iter()
                        .map(|m| m.as_str())
                        .collect::<Vec<_>>()
                        .join("|")
                )
            },
            if c.min_gpu_memory_mib > 0 {
                format!(", ≥ {} GiB per GPU", c.min_gpu_memory_mib / 1024)
            } else {
                String::new()
            },
            requests[*i],
            misfits.len()
        )));
    }
    let span = jobs.last().map(|j| j.submit.0).unwrap_or(0).max(3600) as u64;
    let sample_every = sc
        .driver
        .sample_every
        .unwrap_or(Dur::secs((span / 400).max(60)));
    Ok(Prepared {
        jobs,
        requests,
        constraints,
        cloud,
        pools,
        queues,
        team_queue,
        teams,
        lower_bound_usd,
        reserved_cost_usd,
        seed,
        scenario: sc.clone(),
        workload_source,
        offerings_source,
        sample_every,
    })
}

/// Keeps the offerings of the cluster's one cloud: the scenario's, else AWS
/// when the catalog has it, else the first cloud listed.
fn one_cloud(offerings: Vec<Offering>, want: Option<Provider>) -> Result<Vec<Offering>, RunError> {
    let cloud = match want {
        Some(p) => p,
        None if offerings.iter().any(|o| o.provider == Provider::Aws) => Provider::Aws,
        None => match offerings.first() {
            Some(o) => o.provider,
            None => return Err(RunError::Invalid("the offerings list no machine".into())),
        },
    };
    let kept: Vec<Offering> = offerings
        .into_iter()
        .filter(|o| o.provider == cloud)
        .collect();
    if kept.is_empty() {
        return Err(RunError::Invalid(format!(
            "cloud.provider: the offerings list no {} machine",
            cloud.as_str()
        )));
    }
    Ok(kept)
}

fn describe_generator(g: &GeneratorConfig, seed: u64) -> String {
    format!(
        "built-in generator (seed {seed}): {} days, {} teams, ~{} jobs/day, {} bursts/day",
        g.days, g.teams, g.jobs_per_day, g.bursts_per_day
    )
}

fn describe_llm_month(m: &LlmMonthConfig, seed: u64) -> String {
    format!(
        "LLM month after Kalos (Acme trace, NSDI 2024; seed {seed}): {} days, ~{} jobs/day, gangs up to {} GPUs, {} teams",
        m.days, m.jobs_per_day, m.max_gpus, m.teams
    )
}

/// What one policy's run produced.
#[derive(Debug, Clone)]
pub struct PolicyRun {
    /// Policy name.
    pub name: String,
    /// What it assumes.
    pub assumptions: String,
    /// Accounting.
    pub rec: Recorder,
    /// Planner call timings (ms).
    pub planner_ms: Vec<f64>,
    /// Extra counters.
    pub counters: Vec<(String, u64)>,
    /// Messages (plan-application errors).
    pub messages: Vec<String>,
    /// Virtual end of the run.
    pub end_s: i64,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
    /// Jobs completed more than once or started before arrival (must be 0).
    pub violations: u64,
    /// Sum of completed jobs' GPU-seconds (conservation check).
    pub completed_gpu_secs: f64,
    /// Per job: (team, submit, first start, gpu-seconds) for fairness.
    pub job_waits: Vec<(usize, i64, Option<i64>, f64, f64)>,
}

/// Cluster Autoscaler as a careful operator runs GPU batch work
/// (`docs/simulate.md` names the source of each setting): the `price`
/// expander, nodes removed after one unneeded minute, no pause in
/// scale-down after a scale-up, frequent loops, and ProvisioningRequests
/// (where Kueue creates them) only for workloads of more than one pod.
pub fn tuned_ca(default: &CaConfig) -> CaConfig {
    CaConfig {
        expander: Expander::Price,
        scale_down_unneeded_time: Dur::mins(1),
        scale_down_delay_after_add: Dur::secs(0),
        frequent_loops: true,
        provreq_gangs_only: true,
        ..default.clone()
    }
}

/// The constraints of a layout with node groups (NodePools) split by GPU
/// count: each job's pods also select machines of exactly the smallest GPU
/// count, among the machines some pool may buy that the job accepts, that
/// holds one pod, so small jobs never fill (and keep alive) a big machine.
/// A 1-GPU pod that asks for a model sold only 8 to a machine selects the
/// 8-GPU size. A pod larger than every such size keeps its constraint.
pub fn split_by_gpu_count(p: &Prepared) -> Vec<Constraint> {
    let buyable = buyable_offerings(p);
    p.jobs
        .iter()
        .zip(&p.constraints)
        .zip(&p.requests)
        .map(|((j, c), req)| {
            let gpus = j.pod_gpu_millis.div_ceil(1000).max(1);
            let size = buyable
                .iter()
                .filter(|o| c.accepts_offering(o, req))
                .map(|o| o.gpu_count)
                .filter(|s| *s >= gpus as u32)
                .min();
            Constraint {
                node_gpus: size,
                ..c.clone()
            }
        })
        .collect()
}

/// The priced offerings some pool may buy.
fn buyable_offerings(p: &Prepared) -> Vec<&Offering> {
    p.cloud
        .offerings()
        .iter()
        .filter(|o| {
            o.price.is_some()
                && p.pools
                    .iter()
                    .any(|pool| pool.provider == o.provider && pool.requirements.admits(o))
        })
        .collect()
}

/// Runs one policy on a fresh world.
pub fn run_policy(p: &Prepared, kind: PolicyKind, progress: &mut dyn FnMut(f64)) -> PolicyRun {
    let sw = Stopwatch::start();
    let constraints = if kind.tuned() {
        split_by_gpu_count(p)
    } else {
        p.constraints.clone()
    };
    let mut world = World::new(
        p.jobs.clone(),
        p.requests.clone(),
        constraints,
        p.cloud.clone(),
        p.sample_every,
    );
    let sc = &p.scenario;
    world.checkpoint_every = sc.jobs.checkpoint_every;
    world.cross_rack_slowdown = sc.cloud.cross_rack_slowdown;
    world.cross_block_slowdown = sc.cloud.cross_block_slowdown;
    if let Some(m) = &sc.jobs.trace_gpu_model {
        world.trace_speed = sc.jobs.gpu_speeds.get(m.as_str()).copied().unwrap_or(1.0);
        world.gpu_speeds = sc.jobs.gpu_speeds.clone();
    }
    let muster_errors;
    let (name, assumptions, planner_ms, counters) = {
        let mut policy: Box<dyn Policy> = match kind {
            PolicyKind::Muster => Box::new(MusterPolicy::new(
                MusterConfig {
                    policy: sc.policy.clone(),
                    queues: p.queues.clone(),
                    pools: p.pools.clone(),
                    team_queue: p.team_queue.clone(),
                    debounce: sc.driver.debounce,
                    tick: sc.driver.tick,
                    expected_durations: sc.driver.expected_durations,
                },
                &world,
            )),
            PolicyKind::DefaultCa => Box::new(DefaultCa::new(
                "default-ca",
                sc.baselines.default_ca.clone(),
                &p.pools,
                &world,
                p.seed,
                None,
            )),
            PolicyKind::DefaultCaPrice => Box::new(DefaultCa::new(
                "default-ca-price",
                CaConfig {
                    expander: Expander::Price,
                    ..sc.baselines.default_ca.clone()
                },
                &p.pools,
                &world,
                p.seed,
                None,
            )),
            PolicyKind::KueueProvreq => Box::new(DefaultCa::new(
                "kueue-provreq",
                sc.baselines.default_ca.clone(),
                &p.pools,
                &world,
                p.seed,
                Some((&p.queues, &p.team_queue)),
            )),
            PolicyKind::KueueKarpenter => Box::new(KueueKarpenter::new(
                sc.baselines.kueue_karpenter.clone(),
                &p.queues,
                &p.team_queue,
                &p.pools,
                &world,
            )),
            PolicyKind::DefaultCaTuned => Box::new(DefaultCa::new(
                "default-ca-tuned",
                tuned_ca(&sc.baselines.default_ca),
                &p.pools,
                &world,
                p.seed,
                None,
            )),
            PolicyKind::KueueProvreqTuned => Box::new(DefaultCa::new(
                "kueue-provreq-tuned",
                tuned_ca(&sc.baselines.default_ca),
                &p.pools,
                &world,
                p.seed,
                Some((&p.queues, &p.team_queue)),
            )),
            PolicyKind::KueueKarpenterTuned => Box::new(KueueKarpenter::named(
                "kueue-karpenter-tuned",
                sc.baselines.kueue_karpenter.clone(),
                &p.queues,
                &p.team_queue,
                &p.pools,
                &world,
            )),
        };
        engine::run(&mut world, policy.as_mut(), progress);
        muster_errors = policy.messages();
        (
            policy.name().to_string(),
            policy.assumptions(),
            policy.planner_ms().to_vec(),
            policy.counters(),
        )
    };
    let mut violations = 0;
    let mut completed_gpu_secs = 0.0;
    let mut job_waits = Vec::with_capacity(world.jobs.len());
    for (j, st) in world.jobs.iter().zip(&world.states) {
        if st.completions > 1 || st.first_start.is_some_and(|t| t < j.submit) {
            violations += 1;
        }
        if st.completions == 1 {
            completed_gpu_secs += j.gpu_seconds();
        }
        job_waits.push((
            world.team_of[j.id],
            j.submit.0,
            st.first_start.map(|t| t.0),
            j.gpu_seconds(),
            j.total_gpu_millis() as f64 / 1000.0,
        ));
    }
    PolicyRun {
        name,
        assumptions,
        rec: world.rec.clone(),
        planner_ms,
        counters,
        messages: muster_errors,
        end_s: world.now.0,
        wall_s: sw.ms() / 1000.0,
        violations,
        completed_gpu_secs,
        job_waits,
    }
}

/// Runs every policy of `kinds`, in parallel threads when `parallel`,
/// returning runs in the order of `kinds`. `progress(name, fraction)` is
/// called from the running threads.
pub fn run_all(
    p: &Prepared,
    kinds: &[PolicyKind],
    parallel: bool,
    progress: &(dyn Fn(&str, f64) + Sync),
) -> Vec<PolicyRun> {
    if !parallel || kinds.len() < 2 {
        return kinds
            .iter()
            .map(|k| run_policy(p, *k, &mut |f| progress(k.name(), f)))
            .collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = kinds
            .iter()
            .map(|k| {
                let k = *k;
                s.spawn(move || run_policy(p, k, &mut |f| progress(k.name(), f)))
            })
            .collect();
        handles
            .into_iter()
            .zip(kinds)
            .map(|(h, k)| {
                h.join()
                    .unwrap_or_else(|_| panic!("simulation of {} panicked", k.name()))
            })
            .collect()
    })
}
