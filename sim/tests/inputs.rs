//! Bad inputs stop the run with a precise message; the documented example
//! scenarios parse and prepare.

mod common;

use std::path::PathBuf;

use common::{scenario, temp_file};
use muster_sim::{PolicyKind, RunConfig, Scenario, prepare};

fn cfg(sc: Scenario, trace: Option<PathBuf>, offerings: Option<PathBuf>) -> RunConfig {
    RunConfig {
        scenario: sc,
        trace,
        offerings,
        seed: Some(1),
        policies: PolicyKind::ALL.to_vec(),
    }
}

#[test]
fn trace_errors_name_file_line_and_column() {
    let cases = [
        (
            "submit_s,duration_s,gpus,workers,team\n1,60,1,1,a\n2,60,x,1,a\n",
            "line 3: column gpus",
        ),
        (
            "submit_s,duration_s,gpus,workers\n",
            "line 1: missing column \"team\"",
        ),
        (
            "submit_s,duration_s,gpus,workers,team\n1,60,1,1,a,b\n",
            "line 2: column *",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = temp_file(&format!("bad{i}.csv"), text);
        let e = prepare(&cfg(Scenario::default(), Some(path.clone()), None))
            .expect_err(want)
            .to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains(want), "{e} lacks {want}");
    }
}

#[test]
fn unsatisfiable_jobs_are_reported_not_dropped() {
    let path = temp_file(
        "h200.csv",
        "submit_s,duration_s,gpus,workers,team,gpu_model\n1,60,1,1,a,H200\n",
    );
    let e = prepare(&cfg(Scenario::default(), Some(path), None))
        .expect_err("no H200")
        .to_string();
    assert!(e.contains("trace line 2"), "{e}");
    assert!(e.contains("H200"), "{e}");
}

#[test]
fn offerings_errors_name_the_line() {
    let path = temp_file(
        "off.csv",
        "provider,region,instance_type,gpu_model,gpu_count,gpu_memory_gib,vcpu,memory_gib,on_demand_usd_h,spot_usd_h\naws,us-east-1,g5.xlarge,A10G,1,24,4,16,cheap,\n",
    );
    let e = prepare(&cfg(Scenario::default(), None, Some(path)))
        .expect_err("bad price")
        .to_string();
    assert!(e.contains("line 2: column on_demand_usd_h"), "{e}");
}

#[test]
fn example_scenarios_parse_and_prepare() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("examples dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
            // Scenarios naming data files outside the repository are checked
            // for parsing only.
            if sc.workload.trace.is_none() && sc.cloud.offerings.is_none() {
                prepare(&cfg(sc, None, None)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
            n += 1;
        }
    }
    assert!(n >= 3, "expected at least 3 example scenarios, found {n}");
    // And the empty scenario is the default one.
    assert_eq!(scenario("{}"), Scenario::default());
}
