//! `muster simulate`: replays a workload through muster and models of the
//! usual stacks on a simulated cloud, prints a summary table, and writes
//! `summary.json` and `report.html`. With no arguments it uses the built-in
//! workload generator and offerings catalog.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use muster_sim::matrix::run_matrix;
use muster_sim::report::matrix as matrix_md;
use muster_sim::report::{summary::Summary, table, write_outputs};
use muster_sim::runner::run_all;
use muster_sim::{PolicyKind, RunConfig, RunError, Scenario, prepare};

use super::CliError;

/// Arguments of `muster simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Trace CSV (`submit_s,duration_s,gpus,workers,team[,gpu_model,priority]`);
    /// default: the built-in seeded generator.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Offerings CSV (`provider,region,instance_type,gpu_model,…`); default:
    /// the built-in catalog.
    #[arg(long, value_name = "FILE")]
    pub offerings: Option<PathBuf>,
    /// Scenario YAML: cloud behaviour, queues, pools, allowed GPUs, knobs.
    #[arg(long, value_name = "FILE.yaml")]
    pub scenario: Option<PathBuf>,
    /// Seed of every random draw (default: the scenario's, else 1).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Output directory for summary.json and report.html.
    #[arg(long, value_name = "DIR", default_value = "muster-sim-out")]
    pub out: PathBuf,
    /// Policies to compare, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "muster,default-ca,kueue-karpenter,default-ca-price,kueue-provreq,default-ca-tuned,kueue-karpenter-tuned,kueue-provreq-tuned"
    )]
    pub policies: Vec<String>,
    /// Run the scenario matrix: one cloud AWS, one cloud GCP, scarcity,
    /// spot-heavy, reservations + topology, and a gang-heavy LLM month in
    /// place of the trace — every policy on each; writes matrix.json and
    /// matrix.md and one directory per row into --out.
    #[arg(long)]
    pub matrix: bool,
    /// With --matrix: rewrite the generated blocks of docs/benchmarks.md and
    /// README.md under this repository root, and its
    /// docs/benchmarks/matrix.json.
    #[arg(long, value_name = "ROOT", requires = "matrix")]
    pub update_docs: Option<PathBuf>,
    /// Write zero for wall-clock figures (planner_ms_*, wall_s), so that
    /// summary.json is byte-identical across runs with the same seed.
    #[arg(long)]
    pub zero_timings: bool,
    /// Run the policies one after the other instead of in parallel.
    #[arg(long)]
    pub sequential: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

fn input_error(e: RunError) -> CliError {
    CliError::input(e.to_string())
}

/// Runs `muster simulate`.
pub fn run(args: SimulateArgs) -> Result<(), CliError> {
    let started = Instant::now();
    let mut kinds = Vec::new();
    for name in &args.policies {
        let k = PolicyKind::parse(name).ok_or_else(|| {
            CliError::input(format!(
                "--policies: unknown policy {name:?} (expected some of muster, default-ca, kueue-karpenter, default-ca-price, kueue-provreq, default-ca-tuned, kueue-karpenter-tuned, kueue-provreq-tuned)"
            ))
        })?;
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    if kinds.is_empty() {
        return Err(CliError::input("--policies: name at least one policy"));
    }
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path).map_err(|e| CliError::input(e.to_string()))?,
        None => Scenario::default(),
    };
    let cfg = RunConfig {
        scenario,
        trace: args.trace.clone(),
        offerings: args.offerings.clone(),
        seed: args.seed,
        policies: kinds.clone(),
    };
    if args.matrix {
        return run_matrix_cmd(&args, &cfg, &kinds, started);
    }
    let prepared = prepare(&cfg).map_err(input_error)?;
    if !args.quiet {
        eprintln!(
            "simulating {} jobs with {} ({})",
            prepared.jobs.len(),
            kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", "),
            prepared.workload_source
        );
    }
    let last = Mutex::new(Instant::now());
    let quiet = args.quiet;
    let progress = move |name: &str, f: f64| {
        if quiet {
            return;
        }
        let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
        if l.elapsed().as_secs_f64() >= 2.0 || f >= 1.0 {
            *l = Instant::now();
            eprintln!("  {name}: {:.0}%", f * 100.0);
        }
    };
    let runs = run_all(&prepared, &kinds, !args.sequential, &progress);
    for r in &runs {
        if !r.messages.is_empty() && !args.quiet {
            eprintln!(
                "{}: {} decisions could not be carried out; first: {}",
                r.name,
                r.messages.len(),
                r.messages[0]
            );
        }
    }
    let mut summary = Summary::build(&prepared, &runs);
    if args.zero_timings {
        summary.zero_timings();
    }
    write_outputs(&args.out, &prepared, &runs, &summary)
        .map_err(|e| CliError::failed(format!("writing {}: {e}", args.out.display())))?;
    let order: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    print!("{}", table::render(&summary, &order));
    println!(
        "\nreport: {}  summary: {}  ({:.1}s)",
        args.out.join("report.html").display(),
        args.out.join("summary.json").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_matrix_cmd(
    args: &SimulateArgs,
    cfg: &RunConfig,
    kinds: &[PolicyKind],
    started: Instant,
) -> Result<(), CliError> {
    let quiet = args.quiet;
    let progress = move |what: &str| {
        if !quiet {
            eprintln!("  {what}");
        }
    };
    let workers = if args.sequential {
        1
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    };
    let mut run = run_matrix(cfg, kinds, workers, &progress).map_err(input_error)?;
    if !args.zero_timings {
        run.report.wall_s = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    }
    let write = |path: PathBuf, text: String| {
        std::fs::write(&path, text)
            .map_err(|e| CliError::failed(format!("writing {}: {e}", path.display())))
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| CliError::failed(format!("creating {}: {e}", args.out.display())))?;
    for (c, p, runs, summary) in &run.rows {
        let mut summary = summary.clone();
        if args.zero_timings {
            summary.zero_timings();
        }
        let dir = args.out.join(c.slug());
        write_outputs(&dir, p, runs, &summary)
            .map_err(|e| CliError::failed(format!("writing {}: {e}", dir.display())))?;
    }
    let json = run.report.to_json() + "\n";
    let md = matrix_md::render_benchmarks(&run.report);
    write(args.out.join("matrix.json"), json.clone())?;
    write(args.out.join("matrix.md"), md.clone())?;
    if let Some(root) = &args.update_docs {
        let dir = root.join("docs").join("benchmarks");
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::failed(format!("creating {}: {e}", dir.display())))?;
        write(dir.join("matrix.json"), json)?;
        for (file, block, text) in [
            ("docs/benchmarks.md", "benchmarks", md.clone()),
            ("README.md", "readme", matrix_md::render_readme(&run.report)),
        ] {
            let path = root.join(file);
            let old = std::fs::read_to_string(&path)
                .map_err(|e| CliError::failed(format!("reading {}: {e}", path.display())))?;
            let new = matrix_md::write_block(&old, block, &text)
                .map_err(|e| CliError::failed(format!("{}: {e}", path.display())))?;
            write(path, new)?;
        }
    }
    print!("{md}");
    println!(
        "\nmatrix: {}  ({:.1}s)",
        args.out.join("matrix.json").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
