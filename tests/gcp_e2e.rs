//! End to end on GCP: the controller, with the real GCP provider and a GCP
//! NodeClass, against the API test server and the local Compute fake. A Job
//! labelled for a queue becomes a gang of two a2-highgpu-8g instances, each
//! inserted once with its deterministic name, labelled for the cluster,
//! pool, PoolNode and gang; the emulated kubelet registers a Node per
//! instance and the Job runs pinned to them.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use muster::controller::cloud::clouds::CloudOptions;
use muster_provider_api::{CloudProvider, label_key, tags};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::json;
use support::cloud_e2e::{CLUSTER, machine, not_ready_message, run_gang, start, world};
use support::emulator::{Emulator, Machine, Machines};
use support::{ApiServer, create};

/// The emulated kubelet boots every instance the fake runs for the cluster.
struct FakeMachines(Arc<GcpProvider>);

#[async_trait::async_trait]
impl Machines for FakeMachines {
    async fn machines(&self) -> Vec<Machine> {
        self.0
            .list(CLUSTER)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|i| {
                let gpus = if i.offering.instance_type == "a2-highgpu-8g" {
                    8
                } else {
                    0
                };
                let pool = i.tags[&label_key(tags::POOL)].clone();
                machine(i, pool, gpus)
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_launched_on_gcp_end_to_end() {
    let fake = ComputeFake::start();
    let spec = json!({"gcp": {
        "project": "test-project",
        "region": "us-central1",
        "zones": ["us-central1-a"],
        "image": "projects/cos-cloud/global/images/family/cos-stable"
    }});
    let server = ApiServer::start();
    let client = server.client();
    world(&client, "gcp-default", spec.clone(), "a2-highgpu-8g").await;
    let machines = Arc::new(
        GcpProvider::new("gcp-default", &spec, &fake.options())
            .await
            .expect("provider"),
    );
    let _emu = Emulator::start_with(
        client.clone(),
        vec![Arc::new(FakeMachines(machines.clone()))],
    );
    let ctl = start(
        &server,
        CloudOptions {
            gcp: fake.options(),
            ..CloudOptions::default()
        },
    );
    let pns = run_gang(&client).await;
    let instances = machines.list(CLUSTER).await.expect("list");
    assert_eq!(instances.len(), 2, "{instances:?}");
    for i in &instances {
        assert_eq!(i.tags[&label_key(tags::POOL)], "gpu");
        assert_eq!(i.offering.instance_type, "a2-highgpu-8g");
    }
    assert_eq!(
        fake.calls()["POST projects/zones/instances"].as_u64(),
        Some(2),
        "one instances.insert per node: {}",
        fake.calls()
    );
    let pids: BTreeSet<String> = instances.iter().map(|i| i.provider_id.clone()).collect();
    for pn in &pns {
        let pid = pn.data["status"]["providerID"].as_str().unwrap_or_default();
        assert!(pids.contains(pid), "{pid} in {pids:?}");
    }
    // a NodeClass in a region without zones is not Ready, naming the region
    let mut bad = spec.clone();
    bad["gcp"]["zones"] = json!([]);
    bad["gcp"]["region"] = json!("mars-north1");
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": "gcp-broken"}, "spec": bad}),
    )
    .await;
    let message = not_ready_message(&client, "gcp-broken").await;
    assert!(
        message.contains("spec.gcp.region mars-north1 (no zones)"),
        "{message}"
    );
    server.assert_rbac_allows_controller();
    ctl.abort();
}

/// A NodeClass naming an Autopilot cluster gets the `Ready=False`
/// condition that says why and what to use, and nothing is launched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autopilot_cluster_gets_the_condition_not_a_launch() {
    let fake = ComputeFake::start();
    fake.control("POST", "gke/autopilot?on=true");
    let spec = json!({"gcp": {
        "project": "my-project",
        "region": "us-central1",
        "zones": ["us-central1-a"],
        "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"}
    }});
    let server = ApiServer::start();
    let client = server.client();
    world(&client, "gke-autopilot", spec, "g2-standard-8").await;
    let ctl = start(
        &server,
        CloudOptions {
            gcp: fake.options(),
            ..CloudOptions::default()
        },
    );
    // a gang that wants the pool's machines
    support::cloud_e2e::submit(
        &client,
        &support::cloud_e2e::gang_job("big", "1", "1", "4Gi", json!({})),
    )
    .await;
    let message = not_ready_message(&client, "gke-autopilot").await;
    assert!(
        message.contains("is an Autopilot cluster") && message.contains("GKE Standard cluster"),
        "{message}"
    );
    // a few planning cycles later, still no instance asked for
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        fake.calls()["POST projects/zones/instances"].as_u64(),
        None,
        "{}",
        fake.calls()
    );
    ctl.abort();
}
