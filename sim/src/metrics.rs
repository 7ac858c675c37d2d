//! Accounting shared by every policy: cost (by team and capacity type),
//! GPU-seconds allocated and busy, idle node time, GPU time held by
//! incomplete gangs, waits, counts, and the time series behind the charts.
//! The definitions are in `docs/simulate.md`; the important ones:
//!
//! - **cost**: every node from the cloud accepting its launch until it is
//!   gone, per second, at its offering's price;
//! - **GPU-hours allocated**: GPUs × lifetime of every node (what is paid for);
//! - **GPU-hours busy**: GPUs × useful run time: the work of completed runs
//!   plus the work an evicted run saved at its last checkpoint, so busy
//!   equals the sum of completed jobs' GPU-seconds exactly; work lost to an
//!   eviction (since the last checkpoint) is counted separately as `wasted`;
//! - **idle node-hours**: time nodes spend Ready with no pod;
//! - **partial-gang GPU-hours**: GPUs of pods that are bound while other pods
//!   of their job are not, until the job starts or is evicted;
//! - **queue wait**: submit to the first start of the job.

use muster_planner::{CapacityType, Time};

/// One point of the time series.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// When.
    pub t: Time,
    /// GPUs of live nodes (booting included).
    pub gpus_allocated: f64,
    /// GPUs requested by running jobs.
    pub gpus_busy: f64,
    /// Jobs submitted but not running, per team (index into the team list).
    pub pending_by_team: Vec<u32>,
}

/// Running totals of one policy's run.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// Cost in micro-dollars.
    pub cost_micros: u128,
    /// Spot cost, micro-dollars.
    pub cost_spot_micros: u128,
    /// On-demand cost, micro-dollars.
    pub cost_on_demand_micros: u128,
    /// Cost attributed to teams by the GPU share their pods held, and, for
    /// muster, of the warm nodes kept for their arrivals, dollars.
    pub cost_by_team: Vec<f64>,
    /// What the empty nodes a plan kept warm cost (muster), dollars.
    pub warm_cost_usd: f64,
    /// GPU-seconds of live nodes.
    pub gpu_alloc_secs: f64,
    /// GPU-seconds of completed runs.
    pub busy_gpu_secs: f64,
    /// GPU-seconds of runs cut short.
    pub wasted_gpu_secs: f64,
    /// GPU-seconds of work lost to spot interruptions (since the last
    /// checkpoint); part of `wasted_gpu_secs`.
    pub lost_interruption_gpu_secs: f64,
    /// GPU-seconds requested by pods bound to nodes.
    pub bound_gpu_secs: f64,
    /// GPU-seconds of nodes before they were Ready (booting).
    pub booting_gpu_secs: f64,
    /// Idle GPU-seconds of Ready nodes by the node's GPU count.
    pub idle_gpu_secs_by_node_gpus: std::collections::BTreeMap<u32, f64>,
    /// Node-seconds Ready and empty.
    pub idle_node_secs: f64,
    /// GPU-seconds of Ready, empty nodes held for a job, from the moment
    /// each is held ([`crate::world::World::reserve`]).
    pub reserved_idle_gpu_secs: f64,
    /// GPU-seconds of pods bound while their gang was incomplete.
    pub partial_gpu_secs: f64,
    /// GPU-seconds of machines in capacity reservations (alive, whether
    /// used or not).
    pub reserved_gpu_secs: f64,
    /// Runs of gangs whose pods were on more than one node.
    pub multi_node_starts: u64,
    /// Of those, runs spread over racks of one block.
    pub starts_across_racks: u64,
    /// Of those, runs spread over blocks.
    pub starts_across_blocks: u64,
    /// GPU-seconds the network slowdown added to runs of spread gangs.
    pub slowdown_gpu_secs: f64,
    /// Machines the cloud took back at the end of their reservation.
    pub capacity_reclaims: u64,
    /// GPU-seconds of work lost when the cloud took a reservation's
    /// machines back (since the last checkpoint); part of
    /// `wasted_gpu_secs`.
    pub lost_reclaim_gpu_secs: f64,
    /// (team, wait seconds) at each job's first start.
    pub waits: Vec<(usize, f64)>,
    /// Completed jobs.
    pub completed: u64,
    /// Evictions decided by the policy (preemption, consolidation).
    pub preemptions: u64,
    /// Spot interruptions.
    pub interruptions: u64,
    /// Jobs evicted for any reason.
    pub evictions: u64,
    /// Machines launched (accepted by the cloud).
    pub launches: u64,
    /// Launches refused for capacity.
    pub capacity_errors: u64,
    /// Peak live nodes.
    pub peak_nodes: usize,
    /// Time series.
    pub series: Vec<Sample>,
    /// GPUs (thousandths) of live nodes now.
    pub cur_alloc_gpu_millis: u64,
    /// GPUs (thousandths) of running jobs now.
    pub cur_busy_gpu_millis: u64,
    /// Pending jobs per team now.
    pub cur_pending: Vec<u32>,
}

impl Recorder {
    /// A recorder for `teams` teams.
    pub fn new(teams: usize) -> Recorder {
        Recorder {
            cost_by_team: vec![0.0; teams],
            cur_pending: vec![0; teams],
            ..Default::default()
        }
    }

    /// Adds a node's bill.
    pub fn bill(&mut self, micros: u128, capacity: CapacityType) {
        self.cost_micros += micros;
        match capacity {
            CapacityType::Spot => self.cost_spot_micros += micros,
            // A reserved machine's bill is zero (its reservation is paid
            // for as a whole); it counts with on-demand.
            CapacityType::OnDemand | CapacityType::Reserved | CapacityType::FlexStart => {
                self.cost_on_demand_micros += micros
            }
        }
    }

    /// Takes a sample now.
    pub fn sample(&mut self, t: Time) {
        self.series.push(Sample {
            t,
            gpus_allocated: self.cur_alloc_gpu_millis as f64 / 1000.0,
            gpus_busy: self.cur_busy_gpu_millis as f64 / 1000.0,
            pending_by_team: self.cur_pending.clone(),
        });
    }
}

/// The `q`-quantile (0–1) of sorted values, nearest-rank; 0 when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The share (0–1) of sorted values at most `limit`; 0 when empty.
pub fn share_at_most(sorted: &[f64], limit: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.partition_point(|&x| x <= limit) as f64 / sorted.len() as f64
}

/// Jain's fairness index of `xs`: (Σx)² / (n·Σx²); 1 when all equal, 1/n
/// when one takes all. 1 for an empty or all-zero input.
pub fn jain(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if n == 0.0 || sq == 0.0 {
        1.0
    } else {
        sum * sum / (n * sq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_jain() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(quantile(&v, 0.5), 5.0);
        assert_eq!(quantile(&v, 0.95), 10.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(share_at_most(&v, 5.0), 0.5);
        assert_eq!(share_at_most(&v, 0.5), 0.0);
        assert_eq!(share_at_most(&v, 10.0), 1.0);
        assert_eq!(share_at_most(&[], 60.0), 0.0);
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }
}
