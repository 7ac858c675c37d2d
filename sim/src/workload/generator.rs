//! The built-in seeded workload generator: several teams of unequal size,
//! mostly 1-GPU jobs, some fractional-GPU and 2–8 GPU single-node jobs, some
//! multi-node gangs of 16–64 GPUs (which ask for A100s), a day/night rhythm
//! and bursts (a team submitting a sweep of jobs within minutes). The
//! default runs three days of virtual time in a few seconds.

use muster_planner::{Dur, GpuModel, Time};
use muster_provider_sim::Rng;
use serde::{Deserialize, Serialize};

use super::{Job, pod_gpu_millis};

/// Generator knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct GeneratorConfig {
    /// Days of arrivals.
    pub days: f64,
    /// Number of teams (`team-a`, `team-b`, …); team sizes are unequal.
    pub teams: u32,
    /// Mean jobs per day outside bursts.
    pub jobs_per_day: f64,
    /// Mean bursts per day (all teams together).
    pub bursts_per_day: f64,
    /// Median run time of a 1-GPU job.
    pub median_duration: Dur,
    /// Share of multi-node gangs (16–64 GPUs).
    pub gang_share: f64,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            days: 3.0,
            teams: 6,
            jobs_per_day: 500.0,
            bursts_per_day: 3.0,
            median_duration: Dur::mins(40),
            gang_share: 0.06,
        }
    }
}

/// Team names of a generated workload.
pub fn team_names(n: u32) -> Vec<String> {
    (0..n.max(1))
        .map(|i| {
            let letter = char::from(b'a' + (i % 26) as u8);
            if i < 26 {
                format!("team-{letter}")
            } else {
                format!("team-{letter}{}", i / 26)
            }
        })
        .collect()
}

/// Generates the workload for `seed`.
pub fn generate(cfg: &GeneratorConfig, seed: u64) -> Vec<Job> {
    let mut rng = Rng::for_stream(seed, "workload");
    let teams = team_names(cfg.teams);
    // Zipf-like team sizes: the first team submits most.
    let weights: Vec<f64> = (0..teams.len())
        .map(|i| 1.0 / (i as f64 + 1.0).sqrt())
        .collect();
    let horizon = (cfg.days.max(0.0) * 86_400.0) as i64;
    let mut jobs = Vec::new();
    // Thinned Poisson arrivals with a day/night rhythm (peak at 14:00).
    let peak_rate = cfg.jobs_per_day.max(0.0) / 86_400.0 * 1.6;
    let mut t = 0.0f64;
    if peak_rate > 0.0 {
        loop {
            t += rng.exp(1.0 / peak_rate);
            if t >= horizon as f64 {
                break;
            }
            let hour = (t / 3600.0) % 24.0;
            let rhythm = 0.6 + 0.4 * ((hour - 14.0) / 24.0 * std::f64::consts::TAU).cos();
            if rng.next_f64() * 1.0 > rhythm {
                continue;
            }
            let team = rng.weighted(&weights);
            jobs.push(one_job(cfg, &mut rng, t as i64, &teams[team]));
        }
    }
    // Bursts: a sweep of 10–40 similar jobs from one team within 10 minutes.
    let bursts = (cfg.bursts_per_day.max(0.0) * cfg.days.max(0.0)).round() as u64;
    for _ in 0..bursts {
        let start = rng.range_u64(0, horizon.max(1) as u64 - 1) as i64;
        let team = &teams[rng.weighted(&weights)];
        let n = rng.range_u64(10, 40);
        let gpus = [1.0, 1.0, 2.0, 4.0][rng.range_u64(0, 3) as usize];
        let base = sample_duration(cfg, &mut rng);
        for _ in 0..n {
            let at = start + rng.range_u64(0, 600) as i64;
            let jitter = 0.7 + 0.6 * rng.next_f64();
            let duration = ((base.as_secs() as f64 * jitter) as u64).max(60);
            jobs.push(make(at.min(horizon), duration, gpus, 1, team, None));
        }
    }
    jobs.sort_by_key(|j| (j.submit, j.team.clone(), j.duration));
    for (i, j) in jobs.iter_mut().enumerate() {
        j.id = i;
    }
    jobs
}

fn sample_duration(cfg: &GeneratorConfig, rng: &mut Rng) -> Dur {
    let median = cfg.median_duration.as_secs().max(60) as f64;
    let secs = (median * (1.1 * rng.normal()).exp()).clamp(60.0, 24.0 * 3600.0);
    Dur::secs(secs as u64)
}

fn one_job(cfg: &GeneratorConfig, rng: &mut Rng, at: i64, team: &str) -> Job {
    let duration = sample_duration(cfg, rng);
    let single = 1.0 - cfg.gang_share.clamp(0.0, 1.0);
    // Sizes: 1 GPU most, a few fractional, 2–8 GPU single node, gangs.
    let weights = [
        0.70 * single,
        0.05 * single,
        0.09 * single,
        0.08 * single,
        0.08 * single,
        cfg.gang_share * 0.55,
        cfg.gang_share * 0.35,
        cfg.gang_share * 0.10,
    ];
    let (gpus, workers) = [
        (1.0, 1),
        (0.5, 1),
        (2.0, 1),
        (4.0, 1),
        (8.0, 1),
        (16.0, 2),
        (32.0, 4),
        (64.0, 8),
    ][rng.weighted(&weights)];
    let (duration, model) = if workers > 1 {
        (
            Dur::secs(duration.as_secs() * 2),
            Some(GpuModel::new("A100")),
        )
    } else {
        (duration, None)
    };
    make(at, duration.as_secs(), gpus, workers, team, model)
}

fn make(
    at: i64,
    duration: u64,
    gpus: f64,
    workers: u32,
    team: &str,
    model: Option<GpuModel>,
) -> Job {
    Job {
        id: 0,
        submit: Time(at),
        duration: Dur::secs(duration.max(1)),
        gpus,
        workers,
        pod_gpu_millis: pod_gpu_millis(gpus, workers).unwrap_or(1000),
        team: team.to_string(),
        gpu_model: model,
        priority: 0,
        checkpoint: None,
        line: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_a_plausible_mix() {
        let cfg = GeneratorConfig::default();
        let a = generate(&cfg, 1);
        let b = generate(&cfg, 1);
        assert_eq!(a, b);
        assert_ne!(a, generate(&cfg, 2));
        let n = a.len() as f64;
        assert!(n > 1000.0 && n < 3000.0, "{n}");
        let one = a.iter().filter(|j| j.gpus == 1.0).count() as f64;
        assert!(one / n > 0.5, "mostly 1-GPU jobs");
        assert!(a.iter().any(|j| j.workers >= 4));
        assert!(a.iter().any(|j| j.gpus < 1.0));
        assert!(a.windows(2).all(|w| w[0].submit <= w[1].submit));
        assert!(a.iter().all(|j| j.submit.0 <= 3 * 86_400));
        let teams: std::collections::BTreeSet<_> = a.iter().map(|j| j.team.clone()).collect();
        assert_eq!(teams.len(), 6);
    }
}
