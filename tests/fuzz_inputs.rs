//! The stable fuzzing of every input muster parses, run by `cargo test`:
//! for each target, arbitrary bytes and structure-aware mutations of valid
//! examples go through the entry points of `fuzz/entries.rs` (the same the
//! `cargo fuzz` targets in `fuzz/` call). A panic fails the test and
//! proptest shrinks it to a minimal input; each one found is kept below as
//! a regression case.
//!
//! Inputs per target and kind: `MUSTER_FUZZ_CASES` (default 1000), so a
//! run checks 2 × that many per target (bytes and mutations) plus the
//! mutated YAML/JSON forms where a target reads both. Longer runs:
//! `MUSTER_FUZZ_CASES=100000 cargo test --features controller --test fuzz_inputs --release`.

#[allow(dead_code)]
mod fuzz {
    pub mod entries;
    pub mod mutate;
}

use std::path::{Path, PathBuf};

use fuzz::entries;
use fuzz::mutate::{mutated_bytes, mutated_csv, mutated_tree};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

fn cases() -> u32 {
    std::env::var("MUSTER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The YAML files of a directory (sorted), for seeds.
fn yaml_files(dir: &str) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files.iter().map(|p| read_path(p)).collect()
}

fn read_path(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs `entry` on arbitrary bytes, byte-mutated seeds and (for YAML/JSON
/// seeds) tree-mutated seeds written back as YAML and as JSON. Returns how
/// many inputs ran.
fn fuzz(name: &str, seeds: &[String], tree: bool, entry: fn(&[u8])) -> u64 {
    assert!(!seeds.is_empty(), "{name}: no seeds");
    for s in seeds {
        // the seeds themselves must pass without a panic too
        entry(s.as_bytes());
    }
    let mut total = seeds.len() as u64;
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..512), |b| {
            entry(&b);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{name} (arbitrary bytes): {e}"));
    total += u64::from(cases());
    let seed_bytes =
        prop::sample::select(seeds.to_vec()).prop_flat_map(|s| mutated_bytes(s.into_bytes()));
    runner()
        .run(&seed_bytes, |b| {
            entry(&b);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{name} (mutated bytes): {e}"));
    total += u64::from(cases());
    if tree {
        let values: Vec<Value> = seeds
            .iter()
            .filter_map(|s| serde_norway::from_str::<Value>(s).ok())
            .collect();
        assert!(!values.is_empty(), "{name}: no seed reads as a tree");
        let trees = prop::sample::select(values).prop_flat_map(mutated_tree);
        runner()
            .run(&trees, |v| {
                if let Ok(y) = serde_norway::to_string(&v) {
                    entry(y.as_bytes());
                }
                entry(&serde_json::to_vec(&v).expect("JSON"));
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{name} (mutated tree): {e}"));
        total += 2 * u64::from(cases());
    }
    println!("fuzz {name}: {total} inputs, 0 panics");
    total
}

fn fuzz_csv(name: &str, seeds: &[String], entry: fn(&[u8])) -> u64 {
    let mut total = fuzz(name, seeds, false, entry);
    let rows = prop::sample::select(seeds.to_vec()).prop_flat_map(mutated_csv);
    runner()
        .run(&rows, |t| {
            entry(t.as_bytes());
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{name} (mutated rows): {e}"));
    total += u64::from(cases());
    println!("fuzz {name}: {total} inputs with row mutations, 0 panics");
    total
}

#[test]
fn snapshot_yaml() {
    fuzz(
        "snapshot_yaml",
        &yaml_files("docs/examples/snapshots"),
        true,
        entries::snapshot_yaml,
    );
}

#[test]
fn scenario_yaml() {
    fuzz(
        "scenario_yaml",
        &yaml_files("docs/examples/scenarios"),
        true,
        entries::scenario_yaml,
    );
}

const TRACE_HEADER: &str = "submit_s,duration_s,gpus,workers,team";

#[test]
fn trace_csv() {
    let seeds = [
        format!("{TRACE_HEADER}\n0,600,1,1,a\n60,3600,16,2,ml\n"),
        format!(
            "{TRACE_HEADER},gpu_model,priority,checkpoint_s\n10,60,1,1,a,,,\n5,30,16,2,b,A100,3,600\n7,30,0.5,1,,,,0\n"
        ),
        format!("gpus,team,{}\n8,x,1,2,1\n", "submit_s,duration_s,workers"),
    ];
    fuzz_csv("trace_csv", &seeds, entries::trace_csv);
}

const OFFERINGS_HEADER: &str = "provider,region,instance_type,gpu_model,gpu_count,gpu_memory_gib,vcpu,memory_gib,on_demand_usd_h,spot_usd_h,source";

#[test]
fn offerings_csv() {
    let seeds = [
        format!(
            "{OFFERINGS_HEADER}\naws,us-east-1,g5.xlarge,A10G,1,22.35,4,16.0,1.006,0.4028,a, b, c\naws,us-east-1,g4dn.12xlarge,T4,4,16,48,192,3.912,,x\naws,eu-west-1,g5.xlarge,A10G,1,22.35,4,16,1.1,,x\n"
        ),
        format!(
            "\u{feff}{OFFERINGS_HEADER}\r\ngcp,us-central1,a2-highgpu-8g,A100,8,40,96,680,29.39,8.8,\"list, 2025\"\r\n"
        ),
    ];
    fuzz_csv("offerings_csv", &seeds, entries::offerings_csv);
}

#[test]
fn eventbridge_messages() {
    let seeds = [
        r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-23T10:00:05Z","region":"us-east-1","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#.to_string(),
        r#"{"detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-1"}}"#.to_string(),
        r#"{"version":"0","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-11-23T10:00:05+01:00","detail":{"instance-id":"i-2","state":"shutting-down"}}"#.to_string(),
        r#"{"version":"0","detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-23T10:00:05Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","affectedEntities":[{"entityValue":"i-3"},{"entityValue":"i-4"}]}}"#.to_string(),
    ];
    fuzz("eventbridge", &seeds, true, entries::eventbridge);
}

#[test]
fn gcp_operation_bodies() {
    let seeds = [
        r#"{"kind":"compute#operation","id":"1","name":"operation-1","zone":"https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a","operationType":"insert","status":"DONE","error":{"errors":[{"code":"ZONE_RESOURCE_POOL_EXHAUSTED","message":"The zone does not have enough resources"}]}}"#.to_string(),
        r#"{"kind":"compute#operation","name":"operation-2","status":"DONE","error":{"errors":[{"code":"QUOTA_EXCEEDED","message":"Quota 'NVIDIA_A100_GPUS' exceeded."}]}}"#.to_string(),
        r#"{"kind":"compute#operation","name":"operation-3","status":"DONE","progress":100}"#.to_string(),
        r#"{"error":{"code":403,"message":"Rate Limit Exceeded","errors":[{"message":"Rate Limit Exceeded","domain":"usageLimits","reason":"rateLimitExceeded"}]}}"#.to_string(),
    ];
    fuzz("gcp_operation", &seeds, true, entries::gcp_operation);
}

#[cfg(feature = "controller")]
#[test]
fn admission_reviews() {
    let review = |op: &str, labels: &str, spec: &str| {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{{"group":"batch","version":"v1","kind":"Job"}},"resource":{{"group":"batch","version":"v1","resource":"jobs"}},"requestKind":{{"group":"batch","version":"v1","kind":"Job"}},"requestResource":{{"group":"batch","version":"v1","resource":"jobs"}},"name":"train","namespace":"team-a","operation":"{op}","userInfo":{{"username":"alice","groups":["system:authenticated"]}},"object":{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"train","namespace":"team-a"{labels}}}{spec}}},"oldObject":null,"dryRun":false,"options":{{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}}}}"#
        )
    };
    let seeds = [
        review(
            "CREATE",
            r#","labels":{"muster.dev/queue":"team-a"}"#,
            r#","spec":{"parallelism":2,"completions":2,"suspend":false,"template":{"spec":{"containers":[{"name":"c","image":"x"}],"restartPolicy":"Never"}}}"#,
        ),
        review("CREATE", "", r#","spec":{"parallelism":1}"#),
        review("UPDATE", r#","labels":{"app":"x"}"#, ""),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_string(),
    ];
    for s in &seeds {
        serde_json::from_str::<Value>(s).expect("seed is JSON");
    }
    fuzz("admission_review", &seeds, true, entries::admission_review);
}

#[test]
fn custom_resources() {
    let mut seeds = yaml_files("crds/tests/good");
    seeds.extend(yaml_files("crds/tests/bad"));
    for f in [
        "nodeclass-aws.yaml",
        "nodeclass-gcp.yaml",
        "gpupool-a100-spot.yaml",
        "gpupool-l4.yaml",
        "gpuqueue-team-a.yaml",
        "gpuqueue-team-b.yaml",
    ] {
        seeds.push(read(&format!("docs/examples/{f}")));
    }
    // the controller reads resources as JSON: seed that form as well
    let json: Vec<String> = seeds
        .iter()
        .filter_map(|s| serde_norway::from_str::<Value>(s).ok())
        .map(|v| v.to_string())
        .collect();
    seeds.extend(json);
    fuzz("crds", &seeds, true, entries::crds);
}
