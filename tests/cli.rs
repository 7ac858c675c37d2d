//! The `muster` binary as users call it: output and exit codes.

use std::process::Command;

fn muster(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("muster runs")
}

#[test]
fn crds_prints_the_committed_yaml() {
    let out = muster(&["crds"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/yaml");
    let mut kinds = 0;
    for file in ["nodeclass", "gpupool", "gpuqueue", "gang", "poolnode"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}.yaml")).expect("committed CRD");
        let body = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            printed.contains(body.trim()),
            "`muster crds` differs from crds/yaml/{file}.yaml"
        );
        kinds += 1;
    }
    assert_eq!(
        printed.matches("kind: CustomResourceDefinition").count(),
        kinds
    );
}

#[test]
fn crds_rejects_an_unknown_kind() {
    let out = muster(&["crds", "--kind", "Widget"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--kind \"Widget\": unknown kind"), "{err}");
    let out = muster(&["crds", "--kind", "gpupools"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("name: gpupools.muster.dev"));
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("muster-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn simulate_default_writes_summary_and_report() {
    let dir = temp_dir("sim");
    let out = dir.join("out");
    let out_s = out.to_str().expect("utf-8 path");
    let run = muster(&["simulate", "--out", out_s, "-q", "--zero-timings"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = String::from_utf8_lossy(&run.stdout);
    for policy in ["muster", "default-ca", "kueue-karpenter"] {
        assert!(
            table.contains(policy),
            "summary table lacks {policy}:\n{table}"
        );
    }
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    assert!(summary["lower_bound_usd"].as_f64().is_some_and(|v| v > 0.0));
    let jobs = summary["jobs_total"].as_u64().expect("jobs_total");
    let m = &summary["policies"]["muster"];
    assert_eq!(
        m["jobs_completed"].as_u64(),
        Some(jobs),
        "every job completes"
    );
    assert_eq!(m["partial_gang_gpu_hours"].as_f64(), Some(0.0));
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(html.contains("<svg"), "report has inline charts");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn simulate_reports_a_bad_trace_row_with_its_line() {
    let dir = temp_dir("trace");
    let trace = dir.join("trace.csv");
    std::fs::write(
        &trace,
        "submit_s,duration_s,gpus,workers,team\n0,60,1,1,a\n10,sixty,1,1,a\n",
    )
    .expect("write trace");
    let run = muster(&[
        "simulate",
        "--trace",
        trace.to_str().expect("utf-8 path"),
        "--out",
        dir.join("out").to_str().expect("utf-8 path"),
        "-q",
    ]);
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("line 3"), "error names the line: {err}");
    assert!(
        !dir.join("out/summary.json").exists(),
        "no output from a bad trace"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plan_rejects_unknown_fields_with_their_path() {
    let dir = temp_dir("plan");
    let file = dir.join("snapshot.yaml");
    std::fs::write(&file, "now: 0\nqueues:\n  - name: a\n    wieght: 2\n").expect("write");
    let run = muster(&["plan", "-f", file.to_str().expect("utf-8 path")]);
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("queues[0]") && err.contains("wieght"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
