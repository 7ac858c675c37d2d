//! The workload: jobs as the simulator replays them, from a trace file
//! ([`trace`]), the built-in seeded generator ([`generator`]) or a month of
//! an LLM cluster drawn after published figures ([`llm_month`]).
//!
//! A job asks for `gpus` GPUs over `workers` pods (a gang). Each pod gets
//! `gpus / workers` GPUs, rounded up to whole GPUs when `gpus ≥ 1`; a job of
//! fewer than one GPU is one pod with a fractional GPU request. CPU and
//! memory requests scale with the pod's GPUs (see [`PodShape`]).

pub mod generator;
pub mod llm_month;
pub mod trace;

use muster_planner::{Dur, GpuModel, Time};

/// One job of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Index in the workload (also its identity).
    pub id: usize,
    /// Arrival.
    pub submit: Time,
    /// Run time once all its pods run.
    pub duration: Dur,
    /// Total GPUs as given by the source (may be fractional).
    pub gpus: f64,
    /// Pods (gang members).
    pub workers: u32,
    /// GPUs per pod, in thousandths.
    pub pod_gpu_millis: u64,
    /// Team (queue); `default` when the source gives none.
    pub team: String,
    /// GPU model the job requires, if any (overrides the scenario's default).
    pub gpu_model: Option<GpuModel>,
    /// Priority within its queue.
    pub priority: i32,
    /// Checkpoint interval of this job, when the source gives one
    /// (otherwise the scenario's `jobs.checkpointEvery`); `0s`: none.
    pub checkpoint: Option<Dur>,
    /// Source line (trace) or 0 (generator).
    pub line: usize,
}

impl Job {
    /// GPUs of all its pods, in thousandths.
    pub fn total_gpu_millis(&self) -> u64 {
        self.pod_gpu_millis * u64::from(self.workers)
    }

    /// GPU-seconds of one complete run (what it is billed for at best).
    pub fn gpu_seconds(&self) -> f64 {
        self.total_gpu_millis() as f64 / 1000.0 * self.duration.as_secs() as f64
    }
}

/// GPUs per pod for a job of `gpus` over `workers` pods: whole GPUs (ceil)
/// when `gpus ≥ 1`, else the fraction on one pod. `None` when invalid.
pub fn pod_gpu_millis(gpus: f64, workers: u32) -> Option<u64> {
    if !gpus.is_finite() || gpus <= 0.0 || workers == 0 {
        return None;
    }
    if gpus < 1.0 {
        if workers != 1 {
            return None;
        }
        return Some(((gpus * 1000.0).ceil() as u64).max(1));
    }
    let per = (gpus / f64::from(workers)).ceil();
    Some((per as u64).max(1) * 1000)
}

/// CPU and memory each pod requests per GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodShape {
    /// Millicores per GPU.
    pub cpu_millis_per_gpu: u64,
    /// Bytes per GPU.
    pub memory_bytes_per_gpu: u64,
}

impl Default for PodShape {
    fn default() -> Self {
        PodShape {
            cpu_millis_per_gpu: 2000,
            memory_bytes_per_gpu: 8 << 30,
        }
    }
}

impl PodShape {
    /// Requests of one pod with `gpu_millis` GPUs.
    pub fn requests(&self, gpu_millis: u64) -> muster_planner::Resources {
        let cpu = (self.cpu_millis_per_gpu * gpu_millis / 1000).max(250);
        let mem = ((u128::from(self.memory_bytes_per_gpu) * u128::from(gpu_millis) / 1000) as u64)
            .max(1 << 30);
        muster_planner::Resources {
            cpu_millis: cpu,
            memory_bytes: mem,
            gpu_millis,
            extended: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_per_pod() {
        assert_eq!(pod_gpu_millis(1.0, 1), Some(1000));
        assert_eq!(pod_gpu_millis(0.5, 1), Some(500));
        assert_eq!(pod_gpu_millis(0.5, 2), None);
        assert_eq!(pod_gpu_millis(12.0, 2), Some(6000));
        assert_eq!(pod_gpu_millis(24.0, 3), Some(8000));
        assert_eq!(pod_gpu_millis(10.0, 3), Some(4000));
        assert_eq!(pod_gpu_millis(1.5, 1), Some(2000));
        assert_eq!(pod_gpu_millis(0.0, 1), None);
        assert_eq!(pod_gpu_millis(f64::NAN, 1), None);
        let r = PodShape::default().requests(500);
        assert_eq!(r.cpu_millis, 1000);
        assert_eq!(r.gpu_millis, 500);
    }
}
