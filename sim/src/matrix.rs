//! `muster simulate --matrix`: one workload under five cloud conditions —
//! one cloud: AWS; one cloud: GCP; scarcity of the big GPU shapes; spot-heavy
//! with interruptions; reserved capacity and a network topology — and, as a
//! sixth row, a gang-heavy month of an LLM cluster in AWS in place of the
//! workload, for every policy, in one report with a row per scenario. The figures of `docs/benchmarks.md` and of the README table are
//! rendered from [`MatrixReport`] ([`crate::report::matrix`]), never typed.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use muster_planner::ReservationKind;
use muster_planner::{Dur, Provider};
use muster_provider_sim::{NetworkLayout, OfferingRule, Reservation, Window};
use serde::{Deserialize, Serialize};

use crate::report::summary::{PolicySummary, Summary};
use crate::runner::{PolicyKind, PolicyRun, Prepared, RunConfig, RunError, prepare, run_policy};
use crate::scenario::{Scenario, WorkloadSpec};

/// The matrix's conditions, in report order.
pub const CONDITIONS: [Condition; 6] = [
    Condition::Aws,
    Condition::Gcp,
    Condition::Scarcity,
    Condition::SpotHeavy,
    Condition::Reservations,
    Condition::GangHeavy,
];

/// One row of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// The scenario as given, in AWS.
    Aws,
    /// The scenario as given, in GCP.
    Gcp,
    /// AWS with the 8-GPU A100/H100 shapes short of capacity.
    Scarcity,
    /// AWS with spot interrupted five times as often.
    SpotHeavy,
    /// AWS with an On-Demand Capacity Reservation for the month, two
    /// Capacity Blocks, and machines in racks and blocks.
    Reservations,
    /// AWS, the workload replaced by a month of an LLM cluster whose
    /// multi-node gangs carry most GPU-hours ([`crate::workload::llm_month`]).
    GangHeavy,
}

/// The reservations of the reservations row: two g6.48xlarge (8 × L4) in
/// an ODCR for the 31 days of the month, two p5.48xlarge (8 × H100) in a Capacity
/// Block of days 8–10, one p4d.24xlarge (8 × A100) in a Capacity Block of
/// days 20–23. Each paid at its type's on-demand price for its window.
pub fn row_reservations() -> Vec<Reservation> {
    let r = |id: &str, kind, ty: &str, zone: &str, count, from: Option<u64>, to: Option<u64>| {
        Reservation {
            id: id.into(),
            kind,
            instance_type: ty.into(),
            zone: zone.into(),
            count,
            starts_at: from.map(|d| Dur::hours(24 * d)),
            ends_at: to.map(|d| Dur::hours(24 * d)),
            upfront_usd: None,
        }
    };
    vec![
        r(
            "cr-odcr-g6",
            ReservationKind::OnDemand,
            "g6.48xlarge",
            "us-east-1a",
            2,
            None,
            Some(31),
        ),
        r(
            "cr-block-p5",
            ReservationKind::CapacityBlock,
            "p5.48xlarge",
            "us-east-1b",
            2,
            Some(8),
            Some(10),
        ),
        r(
            "cr-block-p4d",
            ReservationKind::CapacityBlock,
            "p4d.24xlarge",
            "us-east-1a",
            1,
            Some(20),
            Some(23),
        ),
    ]
}

/// The network of the reservations row: 4 blocks of 4 racks per zone, a
/// placement group's machines 4 to a rack.
pub const ROW_TOPOLOGY: NetworkLayout = NetworkLayout {
    nodes_per_rack: 4,
    racks_per_block: 4,
    blocks_per_zone: 4,
};

impl Condition {
    /// Row label.
    pub fn label(self) -> &'static str {
        match self {
            Condition::Aws => "one cloud: AWS",
            Condition::Gcp => "one cloud: GCP",
            Condition::Scarcity => "scarcity (AWS)",
            Condition::SpotHeavy => "spot-heavy (AWS)",
            Condition::Reservations => "reservations + topology (AWS)",
            Condition::GangHeavy => "gang-heavy LLM month (AWS)",
        }
    }

    /// Directory name of the row's outputs.
    pub fn slug(self) -> &'static str {
        match self {
            Condition::Aws => "aws",
            Condition::Gcp => "gcp",
            Condition::Scarcity => "scarcity",
            Condition::SpotHeavy => "spot-heavy",
            Condition::Reservations => "reservations",
            Condition::GangHeavy => "gang-heavy",
        }
    }

    /// What the row changes, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Condition::Aws => "the scenario in AWS us-east-1",
            Condition::Gcp => "the scenario in GCP us-central1",
            Condition::Scarcity => {
                "AWS; the 12xlarge, 24xlarge, 48xlarge and metal sizes (the 4- and 8-GPU g4dn, \
                 g5, g6, g6e machines) out of capacity half the time in each zone (outages of \
                 2 h on average) and none at all in the daytime peaks (09:00–18:00) of the \
                 first week; A100/H100 machines (p4d, p4de, p5) out 80 % of the time"
            }
            Condition::SpotHeavy => {
                "AWS; every spot machine interrupted at 0.01 per hour (about 30 times the \
                 default, which is the Spot Instance Advisor's worst band), jobs checkpoint \
                 every 30 min"
            }
            Condition::Reservations => {
                "AWS; an On-Demand Capacity Reservation of 2 g6.48xlarge (8 × L4) for the \
                 31 days of the month, Capacity Blocks of 2 p5.48xlarge (days 8–10) and 1 p4d.24xlarge \
                 (days 20–23), each paid whole at on-demand prices; machines in 4 blocks of 4 \
                 racks per zone; a gang over racks runs 10 % longer, over blocks 25 % \
                 (assumed); pools buy reserved, spot and on-demand"
            }
            Condition::GangHeavy => {
                "AWS; in place of the trace, 30 days of ~100 A100 jobs a day drawn after the \
                 Kalos cluster of the Acme trace (Hu et al., NSDI 2024: GPUs per job median 1, \
                 mean 26.8; run time median 124 s, mean 1,260 s); 21 % of the jobs are gangs \
                 of 2–32 pods of 8 GPUs (16–256 GPUs) and carry over 99 % of the GPU-hours"
            }
        }
    }

    /// True for a row that replaces the workload (and ignores `--trace`).
    pub fn replaces_workload(self) -> bool {
        self == Condition::GangHeavy
    }

    /// The scenario of this row, derived from `base`. The gang-heavy row
    /// draws the month `base.matrix.gangHeavy` sets (default: 30 days).
    pub fn apply(self, base: &Scenario) -> Scenario {
        let mut s = base.clone();
        match self {
            Condition::Aws => s.cloud.provider = Some(Provider::Aws),
            Condition::Gcp => s.cloud.provider = Some(Provider::Gcp),
            Condition::Scarcity => {
                s.cloud.provider = Some(Provider::Aws);
                // Daytime peaks of the first week (09:00–18:00).
                let peaks: Vec<Window> = (0..7)
                    .map(|d| Window {
                        from: Dur::hours(24 * d + 9),
                        to: Dur::hours(24 * d + 18),
                    })
                    .collect();
                for big in ["*.12xlarge", "*.24xlarge", "*.48xlarge", "*.metal"] {
                    s.cloud.rules.push(OfferingRule {
                        pattern: big.into(),
                        capacity_error_probability: Some(0.5),
                        outage_mean: Some(Dur::hours(2)),
                        unavailable: peaks.clone(),
                        ..Default::default()
                    });
                }
                for big in ["p4d.*", "p4de.*", "p5.*"] {
                    s.cloud.rules.push(OfferingRule {
                        pattern: big.into(),
                        capacity_error_probability: Some(0.8),
                        outage_mean: Some(Dur::hours(2)),
                        unavailable: peaks.clone(),
                        ..Default::default()
                    });
                }
            }
            Condition::SpotHeavy => {
                s.cloud.provider = Some(Provider::Aws);
                s.cloud.spot_interruption_rate_per_hour = 0.01;
                s.jobs.checkpoint_every = Dur::mins(30);
            }
            Condition::Reservations => {
                s.cloud.provider = Some(Provider::Aws);
                s.cloud.reservations.extend(row_reservations());
                s.cloud.topology = Some(ROW_TOPOLOGY);
            }
            Condition::GangHeavy => {
                s.cloud.provider = Some(Provider::Aws);
                s.workload = WorkloadSpec {
                    trace: None,
                    generator: None,
                    llm_month: Some(base.matrix.gang_heavy.clone().unwrap_or_default()),
                };
            }
        }
        s
    }
}

/// One policy's figures in one row (the columns of the published tables).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Total cost, dollars.
    pub cost_usd: f64,
    /// Cost ÷ lower bound.
    pub cost_vs_lower_bound: f64,
    /// Dollars per allocated GPU-hour.
    pub usd_per_allocated_gpu_hour: f64,
    /// GPU-hours allocated.
    pub gpu_hours_allocated: f64,
    /// GPU-hours allocated minus busy.
    pub gpu_hours_allocated_minus_busy: f64,
    /// GPU-weighted idle GPU-hours.
    pub idle_gpu_hours: f64,
    /// Of which on machines of 4 or more GPUs.
    #[serde(default)]
    pub idle_gpu_hours_on_4_plus_gpu_nodes: f64,
    /// Work lost to interruptions, GPU-hours.
    pub gpu_hours_lost_to_interruptions: f64,
    /// GPU-hours held by incomplete gangs.
    pub partial_gang_gpu_hours: f64,
    /// GPU-hours held for gangs that are not running, counted the same way
    /// for every policy: GPUs bound by pods of gangs that are not all
    /// running (the baselines' partial gangs), plus Ready, empty nodes held
    /// for a gang that has not started (muster's reservations).
    #[serde(default)]
    pub held_not_running_gpu_hours: f64,
    /// What muster's warm machines cost while kept (part of `cost_usd`;
    /// 0 for the baselines).
    #[serde(default)]
    pub warm_cost_usd: f64,
    /// Wait p50, seconds.
    pub wait_p50_s: f64,
    /// Wait p95, seconds.
    pub wait_p95_s: f64,
    /// Share of jobs that started within 60 s.
    #[serde(default)]
    pub started_within_60s: f64,
    /// Jobs completed.
    pub jobs_completed: u64,
    /// Spot interruptions.
    pub interruptions: u64,
    /// Launches refused for capacity.
    pub capacity_errors: u64,
    /// What the reservations cost whole (part of `cost_usd`).
    #[serde(default)]
    pub reserved_cost_usd: f64,
    /// GPU-hours of machines in reservations.
    #[serde(default)]
    pub reserved_gpu_hours_used: f64,
    /// Runs of gangs on more than one node.
    #[serde(default)]
    pub multi_node_starts: u64,
    /// Of those, spread over racks of one block.
    #[serde(default)]
    pub starts_across_racks: u64,
    /// Of those, spread over blocks.
    #[serde(default)]
    pub starts_across_blocks: u64,
    /// GPU-hours the network slowdown added.
    #[serde(default)]
    pub slowdown_gpu_hours: f64,
    /// Machines the cloud took back at a reservation's end.
    #[serde(default)]
    pub capacity_reclaims: u64,
    /// Work lost to those, GPU-hours.
    #[serde(default)]
    pub gpu_hours_lost_to_reclaims: f64,
}

impl Cell {
    fn of(p: &PolicySummary) -> Cell {
        Cell {
            cost_usd: p.cost_usd,
            cost_vs_lower_bound: p.cost_vs_lower_bound,
            usd_per_allocated_gpu_hour: p.usd_per_allocated_gpu_hour,
            gpu_hours_allocated: p.gpu_hours_allocated,
            gpu_hours_allocated_minus_busy: p.gpu_hours_allocated_minus_busy,
            idle_gpu_hours: p.idle_gpu_hours,
            idle_gpu_hours_on_4_plus_gpu_nodes: (p
                .idle_gpu_hours_by_node_gpus
                .iter()
                .filter(|(g, _)| g.parse::<u32>().is_ok_and(|g| g >= 4))
                .map(|(_, h)| h)
                .sum::<f64>()
                * 1e6)
                .round()
                / 1e6,
            gpu_hours_lost_to_interruptions: p.gpu_hours_lost_to_interruptions,
            partial_gang_gpu_hours: p.partial_gang_gpu_hours,
            held_not_running_gpu_hours: ((p.partial_gang_gpu_hours + p.reserved_idle_gpu_hours)
                * 1e6)
                .round()
                / 1e6,
            warm_cost_usd: p.warm_cost_usd,
            wait_p50_s: p.wait_p50_s,
            wait_p95_s: p.wait_p95_s,
            started_within_60s: p.started_within_60s,
            jobs_completed: p.jobs_completed,
            interruptions: p.interruptions,
            capacity_errors: p.capacity_errors,
            reserved_cost_usd: p.reserved_cost_usd,
            reserved_gpu_hours_used: p.reserved_gpu_hours_used,
            multi_node_starts: p.multi_node_starts,
            starts_across_racks: p.starts_across_racks,
            starts_across_blocks: p.starts_across_blocks,
            slowdown_gpu_hours: p.slowdown_gpu_hours,
            capacity_reclaims: p.capacity_reclaims,
            gpu_hours_lost_to_reclaims: p.gpu_hours_lost_to_reclaims,
        }
    }
}

/// One row: a condition and every policy's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Row label.
    pub scenario: String,
    /// What the row changes.
    pub conditions: String,
    /// Lower bound, dollars.
    pub lower_bound_usd: f64,
    /// Policies in report order: (name, figures).
    pub policies: Vec<(String, Cell)>,
}

/// The whole matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixReport {
    /// Where the jobs came from.
    pub workload: String,
    /// Jobs in the workload.
    pub jobs_total: u64,
    /// Where the offerings came from.
    pub offerings: String,
    /// Seed.
    pub seed: u64,
    /// Wall-clock seconds of the whole matrix (not reproducible; 0 with
    /// `--zero-timings`).
    pub wall_s: f64,
    /// Threads the runs shared.
    pub workers: usize,
    /// Rows.
    pub rows: Vec<Row>,
}

impl MatrixReport {
    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// What a matrix run produced: the report, and per row the prepared inputs,
/// runs and full summary (for the per-row `summary.json` and `report.html`).
pub struct MatrixRun {
    /// The report.
    pub report: MatrixReport,
    /// Per row.
    pub rows: Vec<(Condition, Prepared, Vec<PolicyRun>, Summary)>,
}

/// Runs every (condition, policy) pair on `workers` threads.
pub fn run_matrix(
    cfg: &RunConfig,
    kinds: &[PolicyKind],
    workers: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<MatrixRun, RunError> {
    let mut prepared = Vec::new();
    for c in CONDITIONS {
        let row_cfg = RunConfig {
            scenario: c.apply(&cfg.scenario),
            trace: if c.replaces_workload() {
                None
            } else {
                cfg.trace.clone()
            },
            ..cfg.clone()
        };
        prepared.push((c, prepare(&row_cfg)?));
    }
    // The planner's runs are the longest: start them first, so the threads
    // finish together.
    let mut jobs: Vec<(usize, PolicyKind)> = (0..prepared.len())
        .flat_map(|r| kinds.iter().map(move |k| (r, *k)))
        .collect();
    jobs.sort_by_key(|(r, k)| (*k != PolicyKind::Muster, *r));
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, usize, PolicyRun)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((r, k)) = jobs.get(i).copied() else {
                        break;
                    };
                    let run = run_policy(&prepared[r].1, k, &mut |_| {});
                    progress(&format!("{} / {}: done", prepared[r].0.label(), k.name()));
                    let pos = kinds.iter().position(|x| *x == k).unwrap_or(0);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((r, pos, run));
                }
            });
        }
    });
    let mut all = done.into_inner().unwrap_or_else(|e| e.into_inner());
    all.sort_by_key(|(r, pos, _)| (*r, *pos));
    let mut rows_out = Vec::new();
    let mut report_rows = Vec::new();
    let mut iter = all.into_iter().peekable();
    for (r, (c, p)) in prepared.into_iter().enumerate() {
        let mut runs = Vec::new();
        while let Some((_, _, run)) = iter.next_if(|(rr, _, _)| *rr == r) {
            runs.push(run);
        }
        let summary = Summary::build(&p, &runs);
        report_rows.push(Row {
            scenario: c.label().into(),
            conditions: c.describe().into(),
            lower_bound_usd: summary.lower_bound_usd,
            policies: runs
                .iter()
                .filter_map(|run| {
                    summary
                        .policies
                        .get(&run.name)
                        .map(|s| (run.name.clone(), Cell::of(s)))
                })
                .collect(),
        });
        rows_out.push((c, p, runs, summary));
    }
    let first = &rows_out[0].1;
    Ok(MatrixRun {
        report: MatrixReport {
            workload: file_names(&first.workload_source),
            jobs_total: first.jobs.len() as u64,
            offerings: file_names(&first.offerings_source),
            seed: first.seed,
            wall_s: 0.0,
            workers: workers.max(1),
            rows: report_rows,
        },
        rows: rows_out,
    })
}

/// `s` with every path reduced to its file name, so a published report
/// names its inputs without the directories of the machine it ran on.
fn file_names(s: &str) -> String {
    s.split(' ')
        .map(|w| match w.rsplit_once('/') {
            Some((_, name)) if !name.is_empty() => name,
            _ => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_sources_name_files_not_directories() {
        assert_eq!(file_names("trace /a/b/philly.csv"), "trace philly.csv");
        assert_eq!(
            file_names("built-in catalog (AWS)"),
            "built-in catalog (AWS)"
        );
    }

    #[test]
    fn conditions_change_what_they_say() {
        let base = Scenario::default();
        assert_eq!(
            Condition::Gcp.apply(&base).cloud.provider,
            Some(Provider::Gcp)
        );
        let scarce = Condition::Scarcity.apply(&base);
        assert!(
            scarce
                .cloud
                .rules
                .iter()
                .any(|r| r.pattern == "p5.*"
                    && r.capacity_error_probability.is_some_and(|p| p > 0.5))
        );
        let reserved = Condition::Reservations.apply(&base);
        assert_eq!(reserved.cloud.reservations.len(), 3);
        assert!(reserved.cloud.topology.is_some());
        assert!(reserved.cloud.behaviour().validate().is_ok());
        let gangs = Condition::GangHeavy.apply(&base);
        assert!(gangs.workload.llm_month.is_some() && gangs.workload.trace.is_none());
        assert_eq!(gangs.cloud.provider, Some(Provider::Aws));
        assert!(Condition::GangHeavy.replaces_workload() && !Condition::Aws.replaces_workload());
        let heavy = Condition::SpotHeavy.apply(&base);
        assert!(
            heavy.cloud.spot_interruption_rate_per_hour
                > base.cloud.spot_interruption_rate_per_hour
        );
    }
}
