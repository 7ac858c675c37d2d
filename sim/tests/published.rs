//! The published matrix: the generated blocks of `docs/benchmarks.md` and
//! `README.md` are exactly what the committed `docs/benchmarks/matrix.json`
//! renders to (drift check, without running the trace), a matrix run
//! gives one row per condition with every policy, and every scenario the
//! commands of `docs/benchmarks.md` write is one `muster simulate` takes.

use std::path::PathBuf;

use muster_sim::matrix::{CONDITIONS, Condition, MatrixReport, run_matrix};
use muster_sim::report::matrix::{read_block, render_benchmarks, render_readme};
use muster_sim::{PolicyKind, RunConfig, Scenario};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn committed_pages_match_the_committed_matrix() {
    let report: MatrixReport =
        serde_json::from_str(&read("docs/benchmarks/matrix.json")).expect("matrix.json parses");
    let bench = read("docs/benchmarks.md");
    let readme = read("README.md");
    assert_eq!(
        read_block(&bench, "benchmarks").expect("block in docs/benchmarks.md"),
        render_benchmarks(&report),
        "docs/benchmarks.md drifted from docs/benchmarks/matrix.json: rerun \
         `muster simulate --matrix --update-docs .` with the trace and offerings"
    );
    assert_eq!(
        read_block(&readme, "readme").expect("block in README.md"),
        render_readme(&report),
        "README.md drifted from docs/benchmarks/matrix.json"
    );
    assert_eq!(report.rows.len(), CONDITIONS.len());
}

#[test]
fn a_matrix_has_a_row_per_condition_and_every_policy() {
    let cfg = RunConfig {
        scenario: Scenario::parse(
            "workload:\n  generator: {days: 1, jobsPerDay: 120, burstsPerDay: 1}\n\
             matrix:\n  gangHeavy: {days: 1, jobsPerDay: 60, maxGpus: 32}\n",
            "t.yaml",
        )
        .expect("scenario"),
        trace: None,
        offerings: None,
        seed: Some(4),
        policies: PolicyKind::ALL.to_vec(),
    };
    let run = run_matrix(&cfg, &PolicyKind::ALL, 2, &|_| {}).expect("runs");
    assert_eq!(run.report.rows.len(), CONDITIONS.len());
    let gcp = &run.report.rows[1];
    let aws = &run.report.rows[0];
    assert_ne!(
        aws.lower_bound_usd, gcp.lower_bound_usd,
        "the GCP row buys from another catalog"
    );
    for row in &run.report.rows {
        let names: Vec<&str> = row.policies.iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, want, "{}", row.scenario);
    }
    for (row, (_, prepared, _, _)) in run.report.rows.iter().zip(&run.rows) {
        for (n, c) in &row.policies {
            assert_eq!(
                c.jobs_completed,
                prepared.jobs.len() as u64,
                "{}/{n}",
                row.scenario
            );
        }
    }
    let heavy = &run.report.rows[3];
    let base: u64 = aws.policies.iter().map(|(_, c)| c.interruptions).sum();
    let more: u64 = heavy.policies.iter().map(|(_, c)| c.interruptions).sum();
    assert!(more > base, "spot-heavy interrupts more: {more} vs {base}");
    let gangs = run.rows.last().expect("rows");
    assert_eq!(gangs.0, Condition::GangHeavy);
    assert!(gangs.1.workload_source.starts_with("LLM month"));
    assert!(gangs.1.jobs.iter().any(|j| j.workers > 1));
    let gang_row = run.report.rows.last().expect("rows");
    assert!(
        gang_row
            .policies
            .iter()
            .all(|(_, c)| c.multi_node_starts > 0),
        "every policy runs the month's multi-node gangs"
    );
    let md = render_benchmarks(&run.report);
    assert!(md.contains("| scarcity (AWS) |") && md.contains("muster ≤ 1.05 × lower bound"));
    assert!(md.contains("| gang-heavy LLM month (AWS) |"));
}

/// The scenario files the commands of `docs/benchmarks.md` write, by name:
/// heredocs (`cat > F.yaml <<'EOF'`) as written, and `printf 'FORMAT'
/// ARGS > F.yaml` lines with `$pool` (the block's `pool='…'`) and loop
/// variables (any number does) put in for the format's `%s`, in order.
fn benchmark_scenarios(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pool: Option<String> = None;
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("pool='") {
            pool = Some(rest.trim_end_matches('\'').to_string());
        } else if let Some(rest) = t.strip_prefix("cat > ") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            let text: Vec<&str> = lines.by_ref().take_while(|l| *l != "EOF").collect();
            out.push((name.to_string(), text.join("\n") + "\n"));
        } else if let Some(rest) = t.strip_prefix("printf '") {
            let (format, rest) = rest.split_once('\'').expect("printf format closes");
            let (args, name) = rest.split_once('>').expect("printf writes a file");
            let mut text = format.replace("\\n", "\n");
            for arg in args.split_whitespace() {
                let value = if arg == "\"$pool\"" {
                    pool.clone().expect("pool= set before printf uses it")
                } else {
                    "1".to_string()
                };
                text = text.replacen("%s", &value, 1);
            }
            assert!(!text.contains("%s"), "{line}: a %s without an argument");
            out.push((name.trim().to_string(), text));
        }
    }
    out
}

#[test]
fn every_scenario_the_benchmark_commands_write_is_valid() {
    let scenarios = benchmark_scenarios(&read("docs/benchmarks.md"));
    for (name, text) in &scenarios {
        if let Err(e) = Scenario::parse(text, name) {
            panic!("docs/benchmarks.md writes {name}, which does not parse: {e}\n{text}");
        }
    }
    let names: Vec<&str> = scenarios.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "holes.yaml",
        "warm-off.yaml",
        "warm-cap-$c.yaml",
        "no-warm.yaml",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} not found in {names:?}"
        );
    }
}
