//! `muster plan`: print the plan for a snapshot file, or time the planner on
//! a synthetic snapshot.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use muster_planner::plan::{Plan, RemovalKind};
use muster_planner::synthetic::{self, Params};
use muster_planner::{PlanInput, Policy};

use muster::plan_input::parse as parse_input;

use super::CliError;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables for people.
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Arguments of `muster plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// A `PlanInput` YAML (or JSON) file: `now`, `policy`, and the snapshot
    /// (`queues`, `pools`, `offerings`, `nodes`, `gangs`). `-` reads stdin.
    #[arg(
        short = 'f',
        long = "file",
        required_unless_present = "synthetic",
        conflicts_with = "synthetic"
    )]
    pub file: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Build a reproducible synthetic snapshot instead:
    /// `pods=10000,gangs=1000,nodes=2000,offerings=300[,seed=N]`.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Plan this many times and report timings (`plan_ms p50=… p99=…`).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
}

/// Runs `muster plan`.
pub fn run(args: PlanArgs) -> Result<(), CliError> {
    if args.repeat == 0 {
        return Err(CliError::input("--repeat must be at least 1"));
    }
    let (input, synthetic_pods) = match (&args.file, &args.synthetic) {
        (_, Some(spec)) => {
            let p = Params::parse(spec).map_err(|e| CliError::input(e.to_string()))?;
            let snapshot = synthetic::generate(&p);
            (
                PlanInput {
                    now: synthetic::NOW,
                    policy: Policy::default(),
                    snapshot,
                },
                Some(p.pods),
            )
        }
        (Some(path), None) => {
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
                    .map_err(|e| CliError::input(format!("stdin: {e}")))?
            } else {
                std::fs::read_to_string(path)
                    .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?
            };
            let input = parse_input(&text)
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
            (input, None)
        }
        (None, None) => return Err(CliError::input("give -f FILE or --synthetic SPEC")),
    };
    let mut times = Vec::with_capacity(args.repeat as usize);
    let mut plan = Plan::default();
    for _ in 0..args.repeat {
        let start = Instant::now();
        plan = muster_planner::plan(&input.snapshot, &input.policy, input.now);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let out = match (synthetic_pods, args.output) {
        (Some(_), Format::Table) => summary(&plan),
        (_, Format::Table) => table(&plan),
        (_, Format::Json) => {
            serde_json::to_string_pretty(&plan).map_err(|e| CliError::failed(e.to_string()))? + "\n"
        }
        (_, Format::Yaml) => {
            serde_norway::to_string(&plan).map_err(|e| CliError::failed(e.to_string()))?
        }
    };
    print!("{out}");
    if synthetic_pods.is_some() || args.repeat > 1 {
        times.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let i = ((times.len() as f64 - 1.0) * p).round() as usize;
            times[i.min(times.len() - 1)]
        };
        let pods: u64 = input.snapshot.gangs.iter().map(|g| g.pod_count()).sum();
        println!(
            "plan_ms p50={:.1} p99={:.1} pods={}",
            pct(0.5),
            pct(0.99),
            synthetic_pods.map_or(pods, u64::from)
        );
    }
    Ok(())
}

fn summary(p: &Plan) -> String {
    let new_nodes: usize = p.launches.iter().map(|l| l.nodes.len()).sum();
    format!(
        "admissions={} launches={} new_nodes={} releases={} preemptions={} removals={} waiting={}\n",
        p.admissions.len(),
        p.launches.len(),
        new_nodes,
        p.releases.len(),
        p.preemptions.len(),
        p.removals.len(),
        p.waiting.len()
    )
}

fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i + 1 < r.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: Vec<&str>| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 < n {
                let _ = write!(out, "{c:<width$}  ", width = w[i]);
            } else {
                out.push_str(c);
            }
        }
        out.push('\n');
    };
    line(&mut out, headers.to_vec());
    for r in rows {
        line(&mut out, r.iter().map(String::as_str).collect());
    }
    out
}

/// The plan as tables.
pub fn table(p: &Plan) -> String {
    let mut out = String::new();
    let mut section = |title: &str, headers: &[&str], rows: Vec<Vec<String>>| {
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(out, "{title}");
        out.push_str(&render(headers, &rows));
        out.push('\n');
    };
    section(
        "ADMIT",
        &["GANG", "PODS", "NODES"],
        p.admissions
            .iter()
            .map(|a| {
                let mut nodes: Vec<&str> = a.assignments.iter().map(|x| x.node.as_str()).collect();
                nodes.dedup();
                vec![
                    a.gang.to_string(),
                    a.assignments.len().to_string(),
                    nodes.join(","),
                ]
            })
            .collect(),
    );
    section(
        "LAUNCH",
        &["GANG", "NEW", "RESERVE", "$/H", "WHY"],
        p.launches
            .iter()
            .map(|l| {
                vec![
                    l.gang.to_string(),
                    l.nodes.len().to_string(),
                    l.reserve.len().to_string(),
                    l.price_per_hour.to_string(),
                    l.message.clone(),
                ]
            })
            .collect(),
    );
    section(
        "NEW NODES",
        &["NAME", "POOL", "OFFERING", "$/H", "KEY"],
        p.launches
            .iter()
            .flat_map(|l| &l.nodes)
            .map(|n| {
                vec![
                    n.name.clone(),
                    n.pool.clone(),
                    n.offering.to_string(),
                    n.price.to_string(),
                    n.idempotency_key.clone(),
                ]
            })
            .collect(),
    );
    section(
        "RELEASE",
        &["GANG", "REASON", "TO", "NODES", "WHY"],
        p.releases
            .iter()
            .map(|r| {
                vec![
                    r.gang.to_string(),
                    format!("{:?}", r.reason),
                    r.handed_to.as_ref().map_or("-".into(), |g| g.to_string()),
                    r.nodes.join(","),
                    r.message.clone(),
                ]
            })
            .collect(),
    );
    section(
        "PREEMPT",
        &["VICTIM", "FOR", "REASON", "WHY"],
        p.preemptions
            .iter()
            .map(|x| {
                vec![
                    x.victim.to_string(),
                    x.for_gang.to_string(),
                    format!("{:?}", x.reason),
                    x.message.clone(),
                ]
            })
            .collect(),
    );
    section(
        "REMOVE",
        &["NODE", "POOL", "KIND", "SAVES/H", "WHY"],
        p.removals
            .iter()
            .map(|r| {
                let kind = match &r.kind {
                    RemovalKind::Empty => "Empty".to_string(),
                    RemovalKind::Underutilized => "Underutilized".to_string(),
                    RemovalKind::Replace { with } => format!("Replace({})", with.offering),
                    RemovalKind::ScaleToZero => "ScaleToZero".to_string(),
                    RemovalKind::CapacityEnding { .. } => "CapacityEnding".to_string(),
                };
                vec![
                    r.node.clone(),
                    r.pool.clone(),
                    kind,
                    r.saves_per_hour.to_string(),
                    r.message.clone(),
                ]
            })
            .collect(),
    );
    section(
        "WAIT",
        &["GANG", "QUEUE", "POS", "REASON", "WHY"],
        p.waiting
            .iter()
            .map(|w| {
                vec![
                    w.gang.to_string(),
                    w.queue.clone(),
                    w.position.to_string(),
                    w.reason.to_string(),
                    w.message.clone(),
                ]
            })
            .collect(),
    );
    if out.is_empty() {
        out.push_str("nothing to do\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field_path() {
        let e =
            parse_input("now: 5\nqueues:\n- name: a\n  weigth: 2\n").expect_err("unknown field");
        assert!(e.starts_with("queues[0]"), "{e}");
        assert!(e.contains("weigth"), "{e}");
        let e = parse_input("gangs:\n- id: a/b\n  queue: q\n  arrival: 0\n  podSets:\n  - name: w\n    count: 1\n    requests: {cpu: 2x}\n").expect_err("bad quantity");
        assert!(e.contains("gangs[0].podSets[0].requests"), "{e}");
        assert!(e.contains("2x"), "{e}");
        assert!(parse_input("now: 1\n").is_ok());
    }
}
