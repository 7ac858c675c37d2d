//! The baselines behave as their upstream systems document: the expander
//! chain picks spot first, the price expander the cheapest group, a
//! ProvisioningRequest is atomic only where the cloud resizes atomically,
//! and Kueue's waitForPodsReady gives back a gang that cannot start.

mod common;

use common::{run, scenario, temp_file};

/// One gang of two 8-GPU pods; each cloud has room for one machine of the
/// only allowed type in zone a, none elsewhere for six hours.
fn pathology(cloud: &str, instance: &str, model: &str, extra: &str) -> String {
    let z = |s: &str| match cloud {
        "gcp" => format!("us-central1-{s}"),
        _ => format!("us-east-1{s}"),
    };
    format!(
        r#"
jobs: {{gpuModels: [{model}]}}
pools:
- name: gpu
  provider: {cloud}
  requirements: {{instanceTypes: [{instance}], capacityTypes: [on-demand]}}
cloud:
  provider: {cloud}
  spotInterruptionRatePerHour: 0
  rules:
  - match: "{instance}/{a}"
    capacityLimit: 1
  - match: "{instance}/{b}"
    unavailable: [{{from: 0s, to: 6h}}]
  - match: "{instance}/{c}"
    unavailable: [{{from: 0s, to: 6h}}]
{extra}"#,
        a = z("a"),
        b = z("b"),
        c = z("c"),
    )
}

const GANG: &str = "submit_s,duration_s,gpus,workers,team\n60,3600,16,2,ml\n";

#[test]
fn provisioning_requests_are_atomic_on_gcp_and_not_on_aws() {
    let trace = temp_file("gang-pr.csv", GANG);
    let (_, _, aws) = run(
        scenario(&pathology("aws", "p4d.24xlarge", "A100", "")),
        Some(trace.clone()),
        1,
    );
    let (_, _, gcp) = run(
        scenario(&pathology("gcp", "a2-highgpu-8g", "A100", "")),
        Some(trace),
        1,
    );
    let pr_aws = &aws.policies["kueue-provreq"];
    let pr_gcp = &gcp.policies["kueue-provreq"];
    // AWS: no atomic increase, so the machine that launched stays and half
    // the gang waits on it for hours.
    assert!(
        pr_aws.partial_gang_gpu_hours > 8.0 * 4.0,
        "{}",
        pr_aws.partial_gang_gpu_hours
    );
    // GCP: all or nothing; the request is retried until both machines fit.
    // Best-effort-atomic admits at the request, not when the nodes are
    // Ready, so the first pod waits only for the other node's boot (less
    // than 8 GPUs × 10 minutes), never for capacity.
    assert!(
        pr_gcp.partial_gang_gpu_hours < 8.0 * 10.0 / 60.0,
        "{}",
        pr_gcp.partial_gang_gpu_hours
    );
    assert!(
        pr_gcp.wait_p50_s >= 6.0 * 3600.0 - 600.0,
        "waits for capacity: {}",
        pr_gcp.wait_p50_s
    );
    assert!(pr_gcp.counters["provisioning_requests_not_found"] > 0);
    assert_eq!(gcp.policies["muster"].partial_gang_gpu_hours, 0.0);
}

#[test]
fn wait_for_pods_ready_gives_back_a_gang_that_cannot_start() {
    let trace = temp_file("gang-wfpr.csv", GANG);
    let on = "baselines:\n  kueueKarpenter: {waitForPodsReady: true, podsReadyTimeout: 10m}\n";
    let (_, _, off) = run(
        scenario(&pathology("aws", "p4d.24xlarge", "A100", "")),
        Some(trace.clone()),
        1,
    );
    let (_, _, with) = run(
        scenario(&pathology("aws", "p4d.24xlarge", "A100", on)),
        Some(trace),
        1,
    );
    let kk_off = &off.policies["kueue-karpenter"];
    let kk_on = &with.policies["kueue-karpenter"];
    assert_eq!(kk_off.counters["pods_ready_evictions"], 0);
    assert!(kk_on.counters["pods_ready_evictions"] > 0);
    assert!(
        kk_on.partial_gang_gpu_hours < kk_off.partial_gang_gpu_hours,
        "{} vs {}",
        kk_on.partial_gang_gpu_hours,
        kk_off.partial_gang_gpu_hours
    );
}

/// The node groups policy `name` launched machines in.
fn launched_groups(runs: &[muster_sim::runner::PolicyRun], name: &str) -> Vec<String> {
    runs.iter()
        .find(|r| r.name == name)
        .expect("ran")
        .counters
        .iter()
        .filter(|(k, v)| k.starts_with("launched_") && *v > 0)
        .map(|(k, _)| k.trim_start_matches("launched_").to_string())
        .collect()
}

#[test]
fn expanders_pick_spot_first_or_the_cheapest_group() {
    let trace = temp_file(
        "one.csv",
        "submit_s,duration_s,gpus,workers,team\n0,600,1,1,a\n",
    );
    let (_, runs, _) = run(scenario("jobs: {gpuModels: [A10G]}\n"), Some(trace), 2);
    let launched = |name: &str| launched_groups(&runs, name);
    let ca = launched("default-ca");
    assert!(
        !ca.is_empty() && ca.iter().all(|g| g.ends_with("-spot")),
        "{ca:?}"
    );
    // The cheapest A10G machine is the g5.xlarge, spot.
    assert_eq!(
        launched("default-ca-price"),
        vec!["g5.xlarge-spot".to_string()]
    );
}

#[test]
fn tuned_layouts_keep_small_jobs_off_big_machines() {
    // a 2-GPU job on a 4-GPU machine, then a long 1-GPU job while it runs
    let trace = temp_file(
        "hole.csv",
        "submit_s,duration_s,gpus,workers,team\n0,3600,2,1,a\n900,14400,1,1,a\n",
    );
    let (_, runs, _) = run(
        scenario("jobs: {gpuModels: [A10G]}\ncloud: {spotInterruptionRatePerHour: 0}\n"),
        Some(trace),
        2,
    );
    let launched = |name: &str| launched_groups(&runs, name);
    let one_gpu = |groups: &[String]| groups.iter().any(|g| g.starts_with("g5.xlarge-"));
    // as defaults, the 1-GPU job takes the hole in the 4-GPU machine ...
    for name in ["default-ca", "default-ca-price"] {
        let l = launched(name);
        assert!(!one_gpu(&l), "{name}: {l:?}");
    }
    // ... tuned, it selects the 1-GPU size and gets a machine of its own
    for name in ["default-ca-tuned", "kueue-provreq-tuned"] {
        let l = launched(name);
        assert!(one_gpu(&l), "{name}: {l:?}");
    }
}

#[test]
fn tuned_layouts_select_the_smallest_size_the_job_accepts() {
    // AWS sells A100s only 8 to a machine: a 1-GPU A100 job selects the
    // 8-GPU size, not a 1-GPU size no A100 comes in, and runs
    let trace = temp_file(
        "a100.csv",
        "submit_s,duration_s,gpus,workers,team\n0,600,1,1,a\n",
    );
    let (_, runs, s) = run(
        scenario("jobs: {gpuModels: [A100]}\ncloud: {spotInterruptionRatePerHour: 0}\n"),
        Some(trace),
        2,
    );
    for name in [
        "default-ca-tuned",
        "kueue-karpenter-tuned",
        "kueue-provreq-tuned",
    ] {
        assert_eq!(s.policies[name].jobs_completed, 1, "{name}");
        let l = launched_groups(&runs, name);
        assert!(l.iter().all(|g| g.starts_with("p4d")), "{name}: {l:?}");
    }
}

#[test]
fn frequent_loops_serve_a_burst_in_one_scan_and_tuned_checks_skip_single_pods() {
    // five 2-pod gangs and three single pods at the same second
    let mut csv = String::from("submit_s,duration_s,gpus,workers,team\n");
    for _ in 0..5 {
        csv.push_str("0,3600,2,2,a\n");
    }
    for _ in 0..3 {
        csv.push_str("0,3600,1,1,a\n");
    }
    let trace = temp_file("burst.csv", &csv);
    let base = "jobs: {gpuModels: [A10G]}\ncloud: {spotInterruptionRatePerHour: 0}\n";
    let (_, _, s) = run(scenario(base), Some(trace.clone()), 1);
    // a release before frequent loops became the default
    let older = format!("{base}baselines: {{defaultCa: {{frequentLoops: false}}}}\n");
    let (_, _, old) = run(scenario(&older), Some(trace), 1);
    let default = &s.policies["kueue-provreq"];
    let one_per_scan = &old.policies["kueue-provreq"];
    let tuned = &s.policies["kueue-provreq-tuned"];
    // one request per 10 s scan: the last of eight requests waits seven
    // scans longer than the first; with frequent loops (the default) all go
    // in the first scan
    assert!(
        one_per_scan.wait_p99_s >= default.wait_p99_s + 30.0,
        "one per scan {} frequent loops {}",
        one_per_scan.wait_p99_s,
        default.wait_p99_s
    );
    assert!(
        one_per_scan.wait_p99_s >= tuned.wait_p99_s + 30.0,
        "one per scan {} tuned {}",
        one_per_scan.wait_p99_s,
        tuned.wait_p99_s
    );
    // only the gangs get ProvisioningRequests when the check is scoped
    assert_eq!(default.counters["provisioning_requests_provisioned"], 8);
    assert_eq!(tuned.counters["provisioning_requests_provisioned"], 5);
}

#[test]
fn karpenter_packs_new_pods_onto_a_machine_in_flight_whose_pod_started_elsewhere() {
    // every machine boots in exactly 200 s. X (60 s) gets the first
    // machine; P arrives while it boots and gets a second, but starts on
    // X's machine when X ends (t ≈ 262 s), before its own is Ready (≈ 352 s);
    // Q arrives at 300 s and is packed onto P's machine, still in flight,
    // which counts only the pods bound to it: no third launch
    let trace = temp_file(
        "inflight.csv",
        "submit_s,duration_s,gpus,workers,team\n0,60,1,1,a\n150,3600,1,1,a\n300,3600,1,1,a\n",
    );
    let (_, _, s) = run(
        scenario(
            r#"
jobs: {gpuModels: [A10G]}
pools:
- name: gpu
  provider: aws
  requirements: {instanceTypes: [g5.xlarge], capacityTypes: [on-demand]}
cloud:
  provider: aws
  spotInterruptionRatePerHour: 0
  rules:
  - match: "g5.xlarge"
    boot: {min: 200s, max: 200s}
"#,
        ),
        Some(trace),
        1,
    );
    for name in ["kueue-karpenter", "kueue-karpenter-tuned"] {
        let p = &s.policies[name];
        assert_eq!(p.jobs_completed, 3, "{name}");
        assert_eq!(p.launches, 2, "{name}: Q got a machine of its own");
    }
}
