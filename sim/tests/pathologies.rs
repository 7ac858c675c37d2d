//! Each baseline reproduces its documented pathology on a crafted workload,
//! and muster does not.
//!
//! The cloud: only `p4d.24xlarge` on-demand may be bought; zone `a` has room
//! for one machine, zones `b` and `c` have none for the first six hours. The
//! workload: one gang of two 8-GPU pods (16 A100s).

mod common;

use common::{run, scenario, temp_file};

const SCENARIO: &str = r#"
jobs: {gpuModels: [A100]}
pools:
- name: p4d
  provider: aws
  requirements: {instanceTypes: [p4d.24xlarge], capacityTypes: [on-demand]}
cloud:
  spotInterruptionRatePerHour: 0
  rules:
  - match: "p4d.24xlarge/us-east-1a"
    capacityLimit: 1
  - match: "p4d.24xlarge/us-east-1b"
    unavailable: [{from: 0s, to: 6h}]
  - match: "p4d.24xlarge/us-east-1c"
    unavailable: [{from: 0s, to: 6h}]
"#;

const TRACE: &str = "submit_s,duration_s,gpus,workers,team\n60,3600,16,2,ml\n";

#[test]
fn baselines_hold_gpus_for_partial_gangs_and_muster_does_not() {
    let trace = temp_file("gang.csv", TRACE);
    let (_, runs, s) = run(scenario(SCENARIO), Some(trace), 1);
    let ca = &s.policies["default-ca"];
    let kk = &s.policies["kueue-karpenter"];
    let mu = &s.policies["muster"];
    // default-ca: one pod placed on the one machine zone a had, the other
    // pending for hours: 8 GPUs held while the gang cannot run.
    assert!(
        ca.partial_gang_gpu_hours > 8.0 * 4.0,
        "default-ca partial {}",
        ca.partial_gang_gpu_hours
    );
    // kueue-karpenter: one NodeClaim launched, the other failed on
    // capacity in every zone: part of the gang runs alone.
    assert!(
        kk.partial_gang_gpu_hours > 8.0 * 4.0,
        "kueue-karpenter partial {}",
        kk.partial_gang_gpu_hours
    );
    let kk_run = runs
        .iter()
        .find(|r| r.name == "kueue-karpenter")
        .expect("run");
    assert!(kk_run.rec.capacity_errors > 0);
    // muster: nothing held by an incomplete gang, and the job still runs.
    assert_eq!(mu.partial_gang_gpu_hours, 0.0, "muster partial");
    assert_eq!(mu.jobs_completed, 1);
    assert!(
        mu.cost_usd < ca.cost_usd && mu.cost_usd < kk.cost_usd,
        "muster {} ca {} kk {}",
        mu.cost_usd,
        ca.cost_usd,
        kk.cost_usd
    );
    let mu_run = runs.iter().find(|r| r.name == "muster").expect("run");
    assert!(
        mu_run.messages.is_empty(),
        "plan could not be applied: {:?}",
        mu_run.messages
    );
}
