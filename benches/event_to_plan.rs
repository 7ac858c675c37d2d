//! Event-to-plan latency while the cloud is slow: the controller in-process
//! against the API test server, on the tests' fake cloud whose launches
//! answer after 30 s. One Job of 50 eight-GPU pods makes 50 launches; while
//! all 50 are in the cloud, 50 one-GPU Jobs are submitted 500 ms apart
//! (they fit 13 Ready eight-GPU Nodes added once the launches are out, so
//! no probe adds a launch), and for each the time from the API server's answer to its
//! create to the first plan whose snapshot holds its gang is measured (the
//! controller creates the Gang from the Job and plans it in the same
//! cycle).
//!
//! ```sh
//! cargo bench --features controller --bench event_to_plan              # prints the figures
//! cargo bench --features controller --bench event_to_plan -- --update-docs
//! ```
//!
//! `--update-docs` writes the table into the marked block of
//! `docs/benchmarks.md`. The run fails when fewer than 50 launches were in
//! flight during the measurement or a probe was never planned.

#![allow(missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use muster::controller::PlanFn;
use serde_json::json;
use support::fake_cloud::FakeCloud;
use support::{ApiServer, create};

const NS: &str = "team-a";
const LAUNCHES: usize = 50;
const PROBES: usize = 50;
const CLOUD_DELAY: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() {
    let update_docs = std::env::args().any(|a| a == "--update-docs");
    let row = run().await;
    let table = format!(
        "| build | launches in flight | cloud answers after | probes | event-to-plan p50 | p99 | max |\n\
         |---|---:|---:|---:|---:|---:|---:|\n\
         | {} | {} | {} s | {} | {} ms | {} ms | {} ms |\n",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        row.in_flight,
        CLOUD_DELAY.as_secs(),
        row.latencies.len(),
        row.p(50),
        row.p(99),
        row.p(100)
    );
    print!("{table}");
    if update_docs {
        let doc = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/benchmarks.md");
        let text = std::fs::read_to_string(doc).expect("docs/benchmarks.md");
        let (begin, end) = ("<!-- BEGIN slow-cloud -->", "<!-- END slow-cloud -->");
        let (head, rest) = text.split_once(begin).expect("begin marker");
        let (_, tail) = rest.split_once(end).expect("end marker");
        std::fs::write(doc, format!("{head}{begin}\n{table}{end}{tail}")).expect("write docs");
    }
}

struct Row {
    in_flight: usize,
    latencies: Vec<u128>,
}

impl Row {
    /// The `q`th percentile in milliseconds (nearest rank).
    fn p(&self, q: usize) -> u128 {
        let mut v = self.latencies.clone();
        v.sort_unstable();
        let rank = (q * v.len()).div_ceil(100).clamp(1, v.len());
        v[rank - 1]
    }
}

async fn run() -> Row {
    let server = ApiServer::start();
    let client = server.client();
    support::install_crds(&client).await;
    world(&client).await;
    let cloud = FakeCloud::new(None);
    cloud.set_launch_delay(CLOUD_DELAY);
    // when each gang was first seen by the planner
    let seen: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let planner: PlanFn = {
        let seen = seen.clone();
        Arc::new(move |snapshot, policy, now| {
            let at = Instant::now();
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            for g in &snapshot.gangs {
                seen.entry(g.id.as_str().to_string()).or_insert(at);
            }
            drop(seen);
            muster_planner::plan(snapshot, policy, now)
        })
    };
    let mut config = support::in_process::config("bench");
    config.debounce = Duration::from_millis(20);
    config.tick = Duration::from_secs(600);
    config.cloud_concurrency = 64;
    let _ctl = support::in_process::spawn(&server.client_as("controller"), &cloud, planner, config);
    submit(&client, "fill", 50, 8).await;
    support::eventually(60, "50 launches in the cloud", || {
        let n = cloud.launches_in_flight();
        async move { (n >= LAUNCHES).then_some(()) }
    })
    .await;
    // capacity for the probes, once the 50 launches are in the cloud
    for i in 0..13 {
        ready_node(&client, &format!("gpu-{i:02}")).await;
    }
    let started = Instant::now();
    let mut submitted = BTreeMap::new();
    let mut in_flight = usize::MAX;
    for i in 0..PROBES {
        let name = format!("probe-{i:02}");
        submit(&client, &name, 1, 1).await;
        submitted.insert(format!("{NS}/{name}"), Instant::now());
        in_flight = in_flight.min(cloud.launches_in_flight());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    support::eventually(10, "every probe planned", || {
        let all = {
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            submitted.keys().all(|k| seen.contains_key(k))
        };
        async move { all.then_some(()) }
    })
    .await;
    in_flight = in_flight.min(cloud.launches_in_flight());
    assert!(
        started.elapsed() < CLOUD_DELAY,
        "the measurement outlasted the first launches"
    );
    assert!(in_flight >= LAUNCHES, "only {in_flight} launches in flight");
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    let latencies = submitted
        .iter()
        .map(|(gang, at)| seen[gang].saturating_duration_since(*at).as_millis())
        .collect();
    Row {
        in_flight,
        latencies,
    }
}

/// A NodeClass, a pool of 8 × A100 machines, and a queue for `NS`.
async fn world(client: &kube::Client) {
    create(client, "NodeClass", "nodeclasses", None, json!({
        "metadata": {"name": "gcp-default"},
        "spec": {"gcp": {"project": "test-project", "region": "us-central1", "image": "projects/x/global/images/family/y"}}
    }))
    .await;
    create(client, "GPUPool", "gpupools", None, json!({
        "metadata": {"name": "a100"},
        "spec": {"nodeClassRef": {"name": "gcp-default"}, "requirements": {"instanceTypes": ["fake-8gpu"], "capacityTypes": ["on-demand"]}}
    }))
    .await;
    create(client, "GPUQueue", "gpuqueues", None, json!({
        "metadata": {"name": "team-a"},
        "spec": {"pools": ["a100"], "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}}
    }))
    .await;
}

/// A Ready Node with 8 allocatable GPUs that muster did not launch.
async fn ready_node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "us-central1-a"}}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
            }})),
        )
        .await
        .expect("node status");
}

/// A suspended Job of `pods` pods of `gpus` GPUs each, queued in `team-a`.
async fn submit(client: &kube::Client, name: &str, pods: i32, gpus: u32) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": {
            "parallelism": pods, "completions": pods, "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "trainer",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}, "requests": {"cpu": "4", "memory": "16Gi"}}
            }], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
        }
    }))
    .expect("job");
    Api::<Job>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &job)
        .await
        .expect("submit job");
}
