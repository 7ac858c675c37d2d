//! Helpers shared by the simulator's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use muster_sim::report::summary::Summary;
use muster_sim::runner::run_all;
use muster_sim::{PolicyKind, PolicyRun, Prepared, RunConfig, Scenario, prepare};

/// A scenario from YAML text.
pub fn scenario(yaml: &str) -> Scenario {
    Scenario::parse(yaml, "test.yaml").expect("scenario parses")
}

/// Writes `text` to a fresh temp file and returns its path.
pub fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "muster-sim-test-{}-{}",
        std::process::id(),
        name.replace(['/', '.'], "-")
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write temp file");
    p
}

/// Prepares and runs every policy.
pub fn run(sc: Scenario, trace: Option<PathBuf>, seed: u64) -> (Prepared, Vec<PolicyRun>, Summary) {
    let cfg = RunConfig {
        scenario: sc,
        trace,
        offerings: None,
        seed: Some(seed),
        policies: PolicyKind::ALL.to_vec(),
    };
    let p = prepare(&cfg).expect("prepares");
    let runs = run_all(&p, &PolicyKind::ALL, false, &|_, _| {});
    let mut s = Summary::build(&p, &runs);
    s.zero_timings();
    (p, runs, s)
}

/// A one-day generator scenario (fast).
pub const SMALL: &str = "workload:\n  generator: {days: 1, jobsPerDay: 300, burstsPerDay: 2}\n";
