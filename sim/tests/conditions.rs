//! Realistic conditions: slower GPUs stretch a job, one cloud per cluster,
//! and metrics that account for every allocated GPU-hour.

mod common;

use common::{SMALL, run, scenario, temp_file};

/// One 1-GPU job of 1,000 s that may only run on T4 machines.
const TRACE: &str = "submit_s,duration_s,gpus,workers,team,gpu_model\n0,1000,1,1,a,T4\n";

fn run_time(yaml: &str) -> i64 {
    let trace = temp_file("speed.csv", TRACE);
    let (p, runs, _) = run(scenario(yaml), Some(trace), 3);
    let muster = runs
        .iter()
        .find(|r| r.name == "muster")
        .expect("muster ran");
    let (_, submit, start, _, _) = muster.job_waits[0];
    assert_eq!(p.jobs.len(), 1);
    let start = start.expect("the job started");
    assert!(start >= submit);
    // The run ends at the end of the simulation (the only job).
    muster.end_s - start
}

#[test]
fn a_slower_gpu_stretches_the_run_by_the_speed_ratio() {
    let same = run_time("{}");
    let half = run_time(
        "jobs: {traceGpuModel: P100, gpuSpeeds: {P100: 1.0, T4: 0.5}, checkpointEvery: 0s}\n",
    );
    assert!((999..=1001).contains(&same), "at trace speed: {same}");
    assert!((1999..=2001).contains(&half), "at half speed: {half}");
}

#[test]
fn every_policy_buys_from_one_cloud_and_idle_is_gpu_weighted() {
    for (cloud, want) in [("aws", "aws"), ("gcp", "gcp")] {
        let (p, runs, s) = run(
            scenario(&format!("{SMALL}cloud: {{provider: {cloud}}}\n")),
            None,
            5,
        );
        assert!(
            p.cloud
                .offerings()
                .iter()
                .all(|o| o.provider.as_str() == want),
            "{cloud}: offerings of another cloud"
        );
        for r in &runs {
            let ps = &s.policies[&r.name];
            let parts = ps.gpu_hours_busy + ps.idle_gpu_hours + ps.gpu_hours_booting;
            assert!(
                ps.gpu_hours_allocated + 1e-3
                    >= parts
                        - ps.gpu_hours_lost_to_interruptions
                        - ps.gpu_hours_lost_to_other_evictions
                        - ps.partial_gang_gpu_hours,
                "{cloud}/{}: allocated {} < busy + idle + booting {parts}",
                r.name,
                ps.gpu_hours_allocated
            );
            assert!(ps.idle_gpu_hours >= 0.0 && ps.idle_gpu_hours <= ps.gpu_hours_allocated);
            let price = ps.cost_usd / ps.gpu_hours_allocated;
            assert!(
                (price - ps.usd_per_allocated_gpu_hour).abs() < 1e-3,
                "{}",
                r.name
            );
        }
    }
}
