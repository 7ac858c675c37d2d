//! `summary.json`: the figures of every policy, for machines. Keys required
//! by the docs are always present; more are added alongside. Wall-clock
//! timings (`planner_ms_*`, `wall_s`) are the only figures that are not
//! reproducible; [`Summary::zero_timings`] clears them for comparisons.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::{jain, quantile, share_at_most};
use crate::runner::{PolicyRun, Prepared};

/// Per-queue (team) figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct QueueSummary {
    /// Jobs submitted.
    pub jobs: u64,
    /// Wait percentiles, seconds.
    pub wait_p50_s: f64,
    /// 95th percentile.
    pub wait_p95_s: f64,
    /// 99th percentile.
    pub wait_p99_s: f64,
    /// Cost attributed by the GPU share its pods held.
    pub cost_usd: f64,
    /// Fair-share figure (see `fairness_jain`).
    pub share: f64,
}

/// One policy's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PolicySummary {
    /// Total cost.
    pub cost_usd: f64,
    /// Cost ÷ lower bound.
    pub cost_vs_lower_bound: f64,
    /// GPUs × node lifetime.
    pub gpu_hours_allocated: f64,
    /// GPUs × run time of completed runs.
    pub gpu_hours_busy: f64,
    /// GPU-hours of runs cut short by evictions.
    pub gpu_hours_wasted: f64,
    /// Node-hours Ready with no pod.
    pub idle_node_hours: f64,
    /// What the empty nodes muster kept warm cost, dollars (part of
    /// `cost_usd`, charged to the queues whose arrivals sized them); 0 for
    /// the baselines, which keep none.
    pub warm_cost_usd: f64,
    /// GPU-hours of Ready, empty nodes reserved for a gang that had not started.
    pub reserved_idle_gpu_hours: f64,
    /// What the cloud's capacity reservations cost for their whole windows,
    /// used or not (part of `cost_usd`; the same for every policy).
    pub reserved_cost_usd: f64,
    /// GPU-hours of machines in capacity reservations.
    pub reserved_gpu_hours_used: f64,
    /// Runs of gangs on more than one node.
    pub multi_node_starts: u64,
    /// Of those, runs spread over racks of one block.
    pub starts_across_racks: u64,
    /// Of those, runs spread over blocks.
    pub starts_across_blocks: u64,
    /// GPU-hours the network slowdown of spread gangs added.
    pub slowdown_gpu_hours: f64,
    /// Machines the cloud took back at the end of their reservation.
    pub capacity_reclaims: u64,
    /// Work lost when the cloud took reserved machines back, GPU-hours.
    pub gpu_hours_lost_to_reclaims: f64,
    /// Queue wait p50, seconds (jobs never started count until the end).
    pub wait_p50_s: f64,
    /// p95.
    pub wait_p95_s: f64,
    /// p99.
    pub wait_p99_s: f64,
    /// Share of jobs (0 to 1) that started within 60 s of being submitted:
    /// how far the median is from crossing a minute.
    pub started_within_60s: f64,
    /// GPU-hours of pods bound while their gang was incomplete.
    pub partial_gang_gpu_hours: f64,
    /// Jobs completed.
    pub jobs_completed: u64,
    /// Gangs evicted by a policy decision.
    pub preemptions: u64,
    /// Spot interruptions.
    pub interruptions: u64,
    /// Evictions of any cause.
    pub evictions: u64,
    /// Jain's index of per-team shares.
    pub fairness_jain: f64,
    /// Planner call p50, wall-clock ms (0 for baselines).
    pub planner_ms_p50: f64,
    /// Planner call p99, wall-clock ms.
    pub planner_ms_p99: f64,
    /// Planner calls.
    pub planner_calls: u64,
    /// Spot cost.
    pub cost_spot_usd: f64,
    /// On-demand cost.
    pub cost_on_demand_usd: f64,
    /// Machines launched.
    pub launches: u64,
    /// Launches refused for capacity.
    pub capacity_errors: u64,
    /// Most nodes alive at once.
    pub peak_nodes: u64,
    /// Virtual end of the run, seconds.
    pub end_s: i64,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
    /// Cost ÷ GPU-hours allocated: what one GPU-hour bought cost.
    pub usd_per_allocated_gpu_hour: f64,
    /// GPU-hours allocated minus GPU-hours busy.
    pub gpu_hours_allocated_minus_busy: f64,
    /// GPU-hours of work lost to spot interruptions (since the last checkpoint).
    pub gpu_hours_lost_to_interruptions: f64,
    /// GPU-hours of work lost to other evictions (preemption, node removal).
    pub gpu_hours_lost_to_other_evictions: f64,
    /// GPU-hours of nodes before Ready (booting).
    pub gpu_hours_booting: f64,
    /// GPU-hours of Ready nodes not requested by any pod, weighted by GPUs
    /// (a 16-GPU node running one 1-GPU pod is 15 idle GPUs).
    pub idle_gpu_hours: f64,
    /// `idle_gpu_hours` by the GPU count of the node they sit on.
    pub idle_gpu_hours_by_node_gpus: BTreeMap<String, f64>,
    /// Per queue (team).
    pub queues: BTreeMap<String, QueueSummary>,
    /// Policy-specific counters.
    pub counters: BTreeMap<String, u64>,
}

/// The whole summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Lower bound of cost, dollars.
    pub lower_bound_usd: f64,
    /// Jobs in the workload.
    pub jobs_total: u64,
    /// Seed.
    pub seed: u64,
    /// Workload source.
    pub workload: String,
    /// Offerings source.
    pub offerings: String,
    /// Policies by name.
    pub policies: BTreeMap<String, PolicySummary>,
}

/// Rounds to 6 decimals so the JSON is stable and readable.
fn r6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        0.0
    }
}

impl Summary {
    /// Builds the summary.
    pub fn build(p: &Prepared, runs: &[PolicyRun]) -> Summary {
        let mut policies = BTreeMap::new();
        for run in runs {
            policies.insert(run.name.clone(), policy_summary(p, run));
        }
        Summary {
            lower_bound_usd: r6(p.lower_bound_usd),
            jobs_total: p.jobs.len() as u64,
            seed: p.seed,
            workload: p.workload_source.clone(),
            offerings: p.offerings_source.clone(),
            policies,
        }
    }

    /// Clears wall-clock figures (for byte-identical comparisons).
    pub fn zero_timings(&mut self) {
        for s in self.policies.values_mut() {
            s.planner_ms_p50 = 0.0;
            s.planner_ms_p99 = 0.0;
            s.wall_s = 0.0;
        }
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

fn policy_summary(p: &Prepared, run: &PolicyRun) -> PolicySummary {
    let rec = &run.rec;
    let end = run.end_s;
    let n_teams = p.teams.len();
    // Waits: started jobs wait until their first start; others until the end.
    let mut all = Vec::with_capacity(run.job_waits.len());
    let mut by_team: Vec<Vec<f64>> = vec![Vec::new(); n_teams];
    let mut served = vec![0.0; n_teams];
    let mut in_system = vec![0.0; n_teams];
    for (team, submit, start, gpu_secs, gpus) in &run.job_waits {
        let wait = (start.unwrap_or(end) - submit).max(0) as f64;
        all.push(wait);
        by_team[*team].push(wait);
        served[*team] += gpu_secs;
        in_system[*team] += gpu_secs + gpus * wait;
    }
    let sort = |v: &mut Vec<f64>| v.sort_by(|a, b| a.total_cmp(b));
    sort(&mut all);
    let shares: Vec<f64> = (0..n_teams)
        .map(|t| {
            if in_system[t] > 0.0 {
                served[t] / in_system[t]
            } else {
                1.0
            }
        })
        .collect();
    let mut queues = BTreeMap::new();
    for (t, name) in p.teams.iter().enumerate() {
        let mut w = std::mem::take(&mut by_team[t]);
        sort(&mut w);
        queues.insert(
            name.clone(),
            QueueSummary {
                jobs: w.len() as u64,
                wait_p50_s: quantile(&w, 0.5),
                wait_p95_s: quantile(&w, 0.95),
                wait_p99_s: quantile(&w, 0.99),
                cost_usd: r6(rec.cost_by_team.get(t).copied().unwrap_or(0.0)),
                share: r6(shares[t]),
            },
        );
    }
    let mut ms = run.planner_ms.clone();
    sort(&mut ms);
    let cost = rec.cost_micros as f64 / 1e6 + p.reserved_cost_usd;
    PolicySummary {
        reserved_cost_usd: r6(p.reserved_cost_usd),
        reserved_gpu_hours_used: r6(rec.reserved_gpu_secs / 3600.0),
        multi_node_starts: rec.multi_node_starts,
        starts_across_racks: rec.starts_across_racks,
        starts_across_blocks: rec.starts_across_blocks,
        slowdown_gpu_hours: r6(rec.slowdown_gpu_secs / 3600.0),
        capacity_reclaims: rec.capacity_reclaims,
        gpu_hours_lost_to_reclaims: r6(rec.lost_reclaim_gpu_secs / 3600.0),
        cost_usd: r6(cost),
        cost_vs_lower_bound: r6(if p.lower_bound_usd > 0.0 {
            cost / p.lower_bound_usd
        } else {
            0.0
        }),
        gpu_hours_allocated: r6(rec.gpu_alloc_secs / 3600.0),
        gpu_hours_busy: r6(rec.busy_gpu_secs / 3600.0),
        gpu_hours_wasted: r6(rec.wasted_gpu_secs / 3600.0),
        idle_node_hours: r6(rec.idle_node_secs / 3600.0),
        warm_cost_usd: r6(rec.warm_cost_usd),
        reserved_idle_gpu_hours: r6(rec.reserved_idle_gpu_secs / 3600.0),
        wait_p50_s: quantile(&all, 0.5),
        wait_p95_s: quantile(&all, 0.95),
        wait_p99_s: quantile(&all, 0.99),
        started_within_60s: r6(share_at_most(&all, 60.0)),
        partial_gang_gpu_hours: r6(rec.partial_gpu_secs / 3600.0),
        jobs_completed: rec.completed,
        preemptions: rec.preemptions,
        interruptions: rec.interruptions,
        evictions: rec.evictions,
        fairness_jain: r6(jain(&shares)),
        planner_ms_p50: r6(quantile(&ms, 0.5)),
        planner_ms_p99: r6(quantile(&ms, 0.99)),
        planner_calls: ms.len() as u64,
        cost_spot_usd: r6(rec.cost_spot_micros as f64 / 1e6),
        cost_on_demand_usd: r6(rec.cost_on_demand_micros as f64 / 1e6),
        launches: rec.launches,
        capacity_errors: rec.capacity_errors,
        peak_nodes: rec.peak_nodes as u64,
        end_s: end,
        wall_s: r6(run.wall_s),
        usd_per_allocated_gpu_hour: r6(if rec.gpu_alloc_secs > 0.0 {
            cost / (rec.gpu_alloc_secs / 3600.0)
        } else {
            0.0
        }),
        gpu_hours_allocated_minus_busy: r6((rec.gpu_alloc_secs - rec.busy_gpu_secs) / 3600.0),
        gpu_hours_lost_to_interruptions: r6(rec.lost_interruption_gpu_secs / 3600.0),
        gpu_hours_lost_to_other_evictions: r6((rec.wasted_gpu_secs
            - rec.lost_interruption_gpu_secs
            - rec.lost_reclaim_gpu_secs)
            .max(0.0)
            / 3600.0),
        gpu_hours_booting: r6(rec.booting_gpu_secs / 3600.0),
        idle_gpu_hours: r6(
            (rec.gpu_alloc_secs - rec.booting_gpu_secs - rec.bound_gpu_secs).max(0.0) / 3600.0,
        ),
        idle_gpu_hours_by_node_gpus: rec
            .idle_gpu_secs_by_node_gpus
            .iter()
            .map(|(g, secs)| (g.to_string(), r6(secs / 3600.0)))
            .collect(),
        queues,
        counters: run.counters.iter().cloned().collect(),
    }
}
