//! A month of an LLM-development cluster's jobs, drawn so that its GPU
//! counts and run times follow the published figures of the Kalos cluster
//! (LLM pretraining-heavy) in Hu et al., "Characterization of Large Language
//! Model Development in the Datacenter", NSDI 2024, whose trace is the Acme
//! trace (repository `InternLM/AcmeTrace`, CC-BY-4.0).
//!
//! The figures taken ([`KALOS`]) are the Kalos row of the repository's
//! `data/cluster_summary.csv`: 19,907 GPU jobs; GPUs per job mean 26.77,
//! median 1, max 1,024; run time mean 1,259.7 s, median 124 s, max
//! 625,740 s; GPU time of completed, cancelled and failed jobs 1.668, 3.239
//! and 0.426 × 10⁹ GPU-seconds (the split the paper's `bar_job_state`
//! figure plots). Their sum over the job count gives 267,905 GPU-seconds per
//! job, about 8 times mean GPUs × mean run time: the big jobs are the long
//! ones.
//!
//! The draw is a two-part mixture:
//! - single-node jobs (79 %): 1 GPU (75 % of them), 2, 4 (5 % each) or 8
//!   (15 %), run time log-normal with median 100 s and σ 1.6;
//! - multi-node gangs (21 %): 2 to 32 pods of 8 GPUs (16 to 256 GPUs; 20,
//!   15, 15, 20 and 30 % of gangs), run time log-normal with median
//!   120 s × (GPUs ÷ 16)^0.9 and σ 1.95, so bigger gangs run longer.
//!
//! Every run time is clamped to 10 s … 625,740 s (Kalos's longest). The
//! weights are fitted so that the mean and median GPUs and run time land on
//! Kalos's (the tests check them within stated tolerances).
//!
//! Gangs stop at 256 GPUs ([`LlmMonthConfig::max_gpus`]): 32 machines of 8
//! GPUs, bought on demand in one go by a cloud cluster of this size; Kalos's
//! largest (1,024 GPUs, 128 machines) is a reservation's size, not an
//! autoscaler's. To keep Kalos's mean GPUs with that cap the gangs are more
//! frequent and weighted towards the cap, which stands in for Kalos's 512-
//! and 1,024-GPU jobs; pooled over seeds the GPU time per job comes out at
//! about 70 % of Kalos's. Multi-node gangs carry more than 99 % of
//! the GPU-hours.
//!
//! Every job asks for A100s (Kalos is an A100 cluster; its run times are
//! A100 run times). Arrivals are Poisson at a constant rate (the summary
//! gives no daily rhythm); the default 100 jobs a day keep about 220 A100s
//! busy on average (28 eight-GPU machines; a month's own figure swings with
//! its few longest gangs, 140 to 330 over seeds), a cloud cluster of a
//! mid-sized LLM team, and its 3,000 jobs keep the matrix row fast.

use muster_planner::{Dur, GpuModel, Time};
use muster_provider_sim::Rng;
use serde::{Deserialize, Serialize};

use super::generator::team_names;
use super::{Job, pod_gpu_millis};

/// Published summary figures of one cluster's GPU jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterSummary {
    /// GPU jobs in the trace.
    pub gpu_jobs: u64,
    /// Mean GPUs per job.
    pub mean_gpus: f64,
    /// Median GPUs per job.
    pub median_gpus: f64,
    /// Most GPUs of one job.
    pub max_gpus: u32,
    /// Mean run time, seconds.
    pub mean_run_s: f64,
    /// Median run time, seconds.
    pub median_run_s: f64,
    /// Longest run time, seconds.
    pub max_run_s: f64,
    /// GPU time of completed, cancelled and failed jobs, GPU-seconds.
    pub gpu_time_s: [f64; 3],
}

impl ClusterSummary {
    /// Mean GPU-seconds per job.
    pub fn gpu_seconds_per_job(&self) -> f64 {
        self.gpu_time_s.iter().sum::<f64>() / self.gpu_jobs as f64
    }
}

/// Kalos, from `data/cluster_summary.csv` of `InternLM/AcmeTrace`
/// (columns `gpu_job_num`, `avg_gpu_num`, `med_gpu_num`, `max_gpu`,
/// `avg_run_time_gpu`, `med_run_time_gpu`, `max_run_time_gpu`,
/// `complete_gpu_time`, `cancel_gpu_time`, `fail_gpu_time`).
pub const KALOS: ClusterSummary = ClusterSummary {
    gpu_jobs: 19_907,
    mean_gpus: 26.77,
    median_gpus: 1.0,
    max_gpus: 1024,
    mean_run_s: 1_259.689,
    median_run_s: 124.0,
    max_run_s: 625_740.0,
    gpu_time_s: [1_667_685_146.0, 3_239_202_064.0, 426_292_851.0],
};

/// Knobs of the LLM month.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LlmMonthConfig {
    /// Days of arrivals.
    pub days: f64,
    /// Mean arrivals per day.
    pub jobs_per_day: f64,
    /// Most GPUs of one gang (multiples of 8 GPUs; larger draws are cut to it).
    pub max_gpus: u32,
    /// Teams (queues) the jobs come from, of unequal size.
    pub teams: u32,
}

impl Default for LlmMonthConfig {
    fn default() -> Self {
        LlmMonthConfig {
            days: 30.0,
            jobs_per_day: 100.0,
            max_gpus: 256,
            teams: 4,
        }
    }
}

/// Share of single-node jobs.
const SINGLE_SHARE: f64 = 0.79;
/// Single-node sizes (GPUs) and their weights.
const SINGLE_SIZES: [(u32, f64); 4] = [(1, 0.75), (2, 0.05), (4, 0.05), (8, 0.15)];
/// Median and σ of a single-node job's log-normal run time.
const SINGLE_RUN: (f64, f64) = (100.0, 1.6);
/// Gang sizes (GPUs, 8 per pod) and their weights.
const GANG_SIZES: [(u32, f64); 5] = [(16, 0.20), (32, 0.15), (64, 0.15), (128, 0.20), (256, 0.30)];
/// Median run time of a 16-GPU gang, its growth exponent with size, and σ.
const GANG_RUN: (f64, f64, f64) = (120.0, 0.9, 1.95);
/// Shortest run time drawn, seconds.
const MIN_RUN_S: f64 = 10.0;

/// Generates the month for `seed`, by submit time.
pub fn generate_llm_month(cfg: &LlmMonthConfig, seed: u64) -> Vec<Job> {
    let mut rng = Rng::for_stream(seed, "llm-month");
    let teams = team_names(cfg.teams);
    let weights: Vec<f64> = (0..teams.len())
        .map(|i| 1.0 / (i as f64 + 1.0).sqrt())
        .collect();
    let horizon = cfg.days.max(0.0) * 86_400.0;
    let mean_gap = if cfg.jobs_per_day > 0.0 {
        86_400.0 / cfg.jobs_per_day
    } else {
        f64::INFINITY
    };
    let cap = (cfg.max_gpus / 8).max(1) * 8;
    let mut jobs = Vec::new();
    let mut t = rng.exp(mean_gap);
    while t < horizon {
        let team = &teams[rng.weighted(&weights)];
        let (gpus, median, sigma) = if rng.chance(SINGLE_SHARE) {
            let sizes: Vec<f64> = SINGLE_SIZES.iter().map(|(_, w)| *w).collect();
            (
                SINGLE_SIZES[rng.weighted(&sizes)].0,
                SINGLE_RUN.0,
                SINGLE_RUN.1,
            )
        } else {
            let sizes: Vec<f64> = GANG_SIZES.iter().map(|(_, w)| *w).collect();
            let g = GANG_SIZES[rng.weighted(&sizes)].0.min(cap);
            let (m16, growth, sigma) = GANG_RUN;
            (g, m16 * (f64::from(g) / 16.0).powf(growth), sigma)
        };
        let run = (median * (sigma * rng.normal()).exp()).clamp(MIN_RUN_S, KALOS.max_run_s);
        jobs.push(job(t as i64, run as u64, gpus, team));
        t += rng.exp(mean_gap);
    }
    for (i, j) in jobs.iter_mut().enumerate() {
        j.id = i;
    }
    jobs
}

/// One job of `gpus` GPUs: one pod up to 8, else pods of 8.
fn job(at: i64, run_s: u64, gpus: u32, team: &str) -> Job {
    let workers = gpus.div_ceil(8).max(1);
    let gpus = f64::from(gpus);
    Job {
        id: 0,
        submit: Time(at),
        duration: Dur::secs(run_s.max(1)),
        gpus,
        workers,
        pod_gpu_millis: pod_gpu_millis(gpus, workers).unwrap_or(1000),
        team: team.to_string(),
        gpu_model: Some(GpuModel::new("A100")),
        priority: 0,
        checkpoint: None,
        line: 0,
    }
}

/// What a generated month looks like, in the terms of [`ClusterSummary`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonthFigures {
    /// Jobs.
    pub jobs: usize,
    /// Mean GPUs per job.
    pub mean_gpus: f64,
    /// Median GPUs per job.
    pub median_gpus: f64,
    /// Mean run time, seconds.
    pub mean_run_s: f64,
    /// Median run time, seconds.
    pub median_run_s: f64,
    /// Mean GPU-seconds per job.
    pub gpu_seconds_per_job: f64,
    /// Share of GPU-seconds in jobs of more than one pod.
    pub multi_node_gpu_share: f64,
    /// GPUs busy on average over `days` if every job ran on arrival.
    pub mean_busy_gpus: f64,
}

/// The figures of `jobs`, a month of `days` days.
pub fn month_figures(jobs: &[Job], days: f64) -> MonthFigures {
    let n = jobs.len().max(1) as f64;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            l if l % 2 == 1 => v[l / 2],
            l => (v[l / 2 - 1] + v[l / 2]) / 2.0,
        }
    };
    let gpu_s: f64 = jobs.iter().map(Job::gpu_seconds).sum();
    let multi: f64 = jobs
        .iter()
        .filter(|j| j.workers > 1)
        .map(Job::gpu_seconds)
        .sum();
    MonthFigures {
        jobs: jobs.len(),
        mean_gpus: jobs.iter().map(|j| j.gpus).sum::<f64>() / n,
        median_gpus: median(jobs.iter().map(|j| j.gpus).collect()),
        mean_run_s: jobs
            .iter()
            .map(|j| j.duration.as_secs() as f64)
            .sum::<f64>()
            / n,
        median_run_s: median(jobs.iter().map(|j| j.duration.as_secs() as f64).collect()),
        gpu_seconds_per_job: gpu_s / n,
        multi_node_gpu_share: if gpu_s > 0.0 { multi / gpu_s } else { 0.0 },
        mean_busy_gpus: gpu_s / (days.max(f64::MIN_POSITIVE) * 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures of several seeds' months pooled, so the tolerances test the
    /// fit, not one draw's luck.
    fn pooled(cfg: &LlmMonthConfig, seeds: std::ops::Range<u64>) -> (Vec<Job>, f64) {
        let jobs: Vec<Job> = seeds
            .clone()
            .flat_map(|s| generate_llm_month(cfg, s))
            .collect();
        (jobs, cfg.days * (seeds.end - seeds.start) as f64)
    }

    fn within(what: &str, got: f64, want: f64, tolerance: f64) {
        let off = (got - want).abs() / want;
        assert!(
            off <= tolerance,
            "{what}: {got:.1} vs Kalos {want:.1} ({:.0} % off, tolerance {:.0} %)",
            off * 100.0,
            tolerance * 100.0
        );
    }

    #[test]
    fn follows_kalos_within_tolerances() {
        let cfg = LlmMonthConfig::default();
        let (jobs, days) = pooled(&cfg, 1..11);
        let f = month_figures(&jobs, days);
        // Medians of a discrete size and of a heavy-tailed time: exact for
        // GPUs, 15 % for run time.
        assert_eq!(f.median_gpus, KALOS.median_gpus);
        within("median run time", f.median_run_s, KALOS.median_run_s, 0.15);
        // Means are dominated by the rare big, long gangs: 10 % for GPUs,
        // 20 % for run time.
        within("mean GPUs", f.mean_gpus, KALOS.mean_gpus, 0.10);
        within("mean run time", f.mean_run_s, KALOS.mean_run_s, 0.20);
        // The cap keeps GPU time per job below Kalos's; it stays within a
        // factor of two.
        let per_job = KALOS.gpu_seconds_per_job();
        assert!(
            f.gpu_seconds_per_job > per_job / 2.0 && f.gpu_seconds_per_job <= per_job,
            "GPU-seconds per job {:.0} vs Kalos {per_job:.0}",
            f.gpu_seconds_per_job
        );
        assert!(
            f.multi_node_gpu_share > 0.9,
            "multi-node gangs carry most GPU-hours: {:.3}",
            f.multi_node_gpu_share
        );
    }

    #[test]
    fn a_month_is_seeded_capped_and_whole_machines() {
        let cfg = LlmMonthConfig::default();
        let a = generate_llm_month(&cfg, 7);
        assert_eq!(a, generate_llm_month(&cfg, 7));
        assert_ne!(a, generate_llm_month(&cfg, 8));
        let n = a.len() as f64;
        let want = cfg.days * cfg.jobs_per_day;
        assert!((n - want).abs() < 4.0 * want.sqrt(), "{n} jobs vs {want}");
        assert!(a.windows(2).all(|w| w[0].submit <= w[1].submit));
        assert!(a.iter().all(|j| j.submit.0 < (cfg.days * 86_400.0) as i64));
        for j in &a {
            assert!(j.gpus <= f64::from(cfg.max_gpus), "{j:?}");
            assert!(j.duration.as_secs() as f64 <= KALOS.max_run_s);
            if j.workers > 1 {
                assert_eq!(j.pod_gpu_millis, 8000, "gangs are pods of 8 GPUs");
                assert!((j.gpus as u32).is_power_of_two());
            } else {
                assert!([1.0, 2.0, 4.0, 8.0].contains(&j.gpus));
            }
        }
        let f = month_figures(&a, cfg.days);
        assert!(
            (100.0..400.0).contains(&f.mean_busy_gpus),
            "a cloud cluster of one to a few hundred GPUs: {:.0}",
            f.mean_busy_gpus
        );
        let small = LlmMonthConfig {
            max_gpus: 64,
            ..cfg
        };
        assert!(generate_llm_month(&small, 7).iter().all(|j| j.gpus <= 64.0));
    }
}
