//! End to end on GCP: the controller, with the real GCP provider and a GCP
//! NodeClass, against the API test server and the local Compute fake. A Job
//! labelled for a queue becomes a gang of two a2-highgpu-8g instances, each
//! inserted once with its deterministic name, labelled for the cluster,
//! pool, PoolNode and gang; the emulated kubelet registers a Node per
//! instance and the Job runs pinned to them.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::Api;
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

/// NodeClass `gke` naming the fake's Standard cluster, a pool of
/// spot `g2-standard-8` (1×L4) machines that empties a second after
/// its work ends, and a queue.
async fn gke_world(client: &kube::Client) {
    support::install_crds(client).await;
    create(
        client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": "gke"}, "spec": {"gcp": {
            "project": "my-project",
            "region": "us-central1",
            "zones": ["us-central1-a", "us-central1-b"],
            "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
            "emptyNodePoolTTL": "1s"
        }}}),
    )
    .await;
    create(
        client,
        "GPUPool",
        "gpupools",
        None,
        json!({
            "metadata": {"name": "l4"},
            "spec": {"nodeClassRef": {"name": "gke"},
                     "requirements": {"instanceTypes": ["g2-standard-8"], "capacityTypes": ["spot"]},
                     "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1s",
                                    "scaleToZeroAfter": "1s"}}
        }),
    )
    .await;
    create(
        client,
        "GPUQueue",
        "gpuqueues",
        None,
        json!({"metadata": {"name": "team-a"}, "spec": {"pools": ["l4"], "namespaceSelector": {}}}),
    )
    .await;
}

/// The emulated kubelets of the nodes GKE registers in the fake's cluster.
fn gke_nodes(fake: &Arc<ComputeFake>) -> Arc<dyn Machines> {
    let fake = fake.clone();
    Arc::new(support::gke::GkeNodes::new(move || {
        fake.control("GET", "gke/nodes?cluster=prod")
    }))
}

fn start_gke_controller(server: &ApiServer, fake: &ComputeFake) -> tokio::task::JoinHandle<()> {
    support::cloud_e2e::start_with(
        server,
        CloudOptions {
            gcp: fake.options(),
            ..CloudOptions::default()
        },
        |c| {
            // empty node pools are deleted in orphan collection's round
            c.orphan_gc_period = std::time::Duration::from_secs(1);
        },
    )
}

/// muster's node pools of the fake's cluster, and the managed instances of
/// their groups (name → made).
fn gke_pools(fake: &ComputeFake) -> Vec<(String, Vec<String>)> {
    let pools = fake.get("/v1/projects/my-project/locations/us-central1/clusters/prod/nodePools");
    pools["nodePools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with("muster-")))
        .map(|p| {
            let zones: Vec<String> = p["locations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|z| z.as_str().map(String::from))
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), zones)
        })
        .collect()
}

/// A gang of two 1-GPU pods on GKE: a stockout of spot `g2-standard-8` in
/// `us-central1-a` moves it to `us-central1-b`, where one spot node pool is
/// created and two named instances are added to its
/// group; GKE registers both with `cloud.google.com/gke-accelerator`, the
/// gang runs on them, and once it is gone the instances are deleted by
/// name and the empty pool is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_runs_on_gke_nodes_that_gke_makes_end_to_end() {
    let fake = Arc::new(ComputeFake::start());
    fake.control(
        "POST",
        "stockout?zone=us-central1-a&machineType=g2-standard-8&spot=true",
    );
    let server = ApiServer::start();
    let client = server.client();
    gke_world(&client).await;
    let _emu = Emulator::start_with(client.clone(), vec![gke_nodes(&fake)]);
    let ctl = start_gke_controller(&server, &fake);
    support::cloud_e2e::submit(
        &client,
        &support::cloud_e2e::gang_job("l4", "1", "2", "8Gi", json!({})),
    )
    .await;
    let pods = support::cloud_e2e::both_running(&client, "l4", 120).await;
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(nodes.len(), 2, "one pod per node: {nodes:?}");
    // the stocked-out zone got a pool and gave its instance back; the gang
    // runs in the next zone's pool
    let listed: serde_json::Value =
        serde_json::from_str(&fake.control("GET", "gke/nodes?cluster=prod")).expect("JSON");
    let gke_nodes = listed["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(gke_nodes.len(), 2, "{listed}");
    for n in &gke_nodes {
        let l = &n["metadata"]["labels"];
        assert_eq!(l["cloud.google.com/gke-accelerator"], "nvidia-l4", "{n}");
        assert_eq!(l["topology.kubernetes.io/zone"], "us-central1-b", "{n}");
        assert_eq!(l["cloud.google.com/gke-spot"], "true", "{n}");
        assert_eq!(l["muster.dev/pool"], "l4", "{n}");
        assert!(nodes.contains(n["metadata"]["name"].as_str().unwrap_or_default()));
    }
    // each pool created once, though the gang's two launches ask at once
    assert_eq!(
        fake.calls()["POST my-project/us-central1/prod"].as_u64(),
        Some(2),
        "{}",
        fake.calls()
    );
    let b_pools: Vec<_> = gke_pools(&fake)
        .into_iter()
        .filter(|(_, z)| z == &["us-central1-b".to_string()])
        .collect();
    assert_eq!(b_pools.len(), 1, "one pool for the shape: {b_pools:?}");
    assert_eq!(
        fake.calls()["POST projects/zones/instanceGroupManagers/createInstances"].as_u64(),
        Some(4),
        "one createInstances per machine: the gang's two in us-central1-a, both refused by the stockout, then two in us-central1-b: {}",
        fake.calls()
    );
    assert!(
        fake.calls()["POST projects/zones/instances"].is_null(),
        "no plain VM: {}",
        fake.calls()
    );
    // the gang ends: its machines go by name, then their empty pools
    Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), "team-a")
        .delete("l4", &kube::api::DeleteParams::background())
        .await
        .expect("delete the Job");
    support::eventually(90, "muster's node pools deleted", || {
        let fake = fake.clone();
        async move {
            let f = fake.clone();
            let pools = tokio::task::spawn_blocking(move || gke_pools(&f))
                .await
                .ok()?;
            pools.is_empty().then_some(())
        }
    })
    .await;
    assert!(
        fake.calls()["POST projects/zones/instanceGroupManagers/deleteInstances"]
            .as_u64()
            .is_some_and(|n| n >= 4),
        "{}",
        fake.calls()
    );
    server.assert_rbac_allows_controller();
    ctl.abort();
}

/// The controller restarts after it asked the group for the gang's two
/// instances and before GCE made them: the new leader launches the same
/// PoolNodes again, the group already has both names, and exactly two
/// machines are made and run the gang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_before_gke_makes_the_nodes_creates_no_third_instance() {
    let fake = Arc::new(ComputeFake::start());
    // GCE still working: the groups leave the instances CREATING
    fake.control("POST", "hold?on=true");
    let server = ApiServer::start();
    let client = server.client();
    gke_world(&client).await;
    let _emu = Emulator::start_with(client.clone(), vec![gke_nodes(&fake)]);
    let first = start_gke_controller(&server, &fake);
    support::cloud_e2e::submit(
        &client,
        &support::cloud_e2e::gang_job("l4", "1", "2", "8Gi", json!({})),
    )
    .await;
    let created = |fake: &ComputeFake| {
        fake.calls()["POST projects/zones/instanceGroupManagers/createInstances"]
            .as_u64()
            .unwrap_or(0)
    };
    support::eventually(60, "both instances asked of the group", || {
        let fake = fake.clone();
        async move {
            let f = fake.clone();
            let n = tokio::task::spawn_blocking(move || created(&f))
                .await
                .ok()?;
            (n >= 2).then_some(())
        }
    })
    .await;
    first.abort();
    let _ = first.await;
    // PoolNodes the first leader had recorded no instance for when it stopped
    let unrecorded = Api::<kube::api::DynamicObject>::all_with(
        client.clone(),
        &support::ar("PoolNode", "poolnodes"),
    )
    .list(&Default::default())
    .await
    .expect("poolnodes")
    .items
    .iter()
    .filter(|p| p.data["status"]["providerID"].as_str().is_none())
    .count() as u64;
    let asked = created(&fake);
    let second = start_gke_controller(&server, &fake);
    fake.control("POST", "hold?on=false");
    let pods = support::cloud_e2e::both_running(&client, "l4", 120).await;
    let listed: serde_json::Value =
        serde_json::from_str(&fake.control("GET", "gke/nodes?cluster=prod")).expect("JSON");
    assert_eq!(
        listed["nodes"].as_array().map(Vec::len),
        Some(2),
        "exactly two machines made: {listed}"
    );
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert_eq!(gke_pools(&fake).len(), 1, "one pool");
    // the new leader asked again for the PoolNodes the first had not
    // recorded an instance for: the group answered with the names it had
    assert!(
        created(&fake) >= asked + unrecorded,
        "{unrecorded} PoolNodes launched again: {}",
        fake.calls()
    );
    second.abort();
}

/// A spot GKE node of a running gang is preempted: its group recreates the
/// instance under the same name, GCE records the system event, muster
/// reads it, requeues the gang whole, deletes the instance from its group
/// by name, and the gang runs again on new nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_gke_node_requeues_its_gang_and_leaves_its_group() {
    let fake = Arc::new(ComputeFake::start());
    let server = ApiServer::start();
    let client = server.client();
    gke_world(&client).await;
    let _emu = Emulator::start_with(client.clone(), vec![gke_nodes(&fake)]);
    let ctl = support::cloud_e2e::start_with(
        &server,
        CloudOptions {
            gcp: fake.options(),
            ..CloudOptions::default()
        },
        |c| {
            c.orphan_gc_period = std::time::Duration::from_secs(1);
            c.interruption_poll = std::time::Duration::from_secs(1);
        },
    );
    support::cloud_e2e::submit(
        &client,
        &support::cloud_e2e::gang_job("l4", "1", "2", "8Gi", json!({})),
    )
    .await;
    let pods = support::cloud_e2e::both_running(&client, "l4", 120).await;
    let victim = pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("a node");
    fake.control("POST", &format!("preempt?name={victim}"));
    // the gang is requeued whole and runs again, not on the preempted node
    support::eventually(120, "the gang running again off the preempted node", || {
        let client = client.clone();
        let victim = victim.clone();
        async move {
            let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, "team-a")
                .list(&kube::api::ListParams::default().labels("job-name=l4"))
                .await
                .ok()?
                .items;
            let running: Vec<_> = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .collect();
            (running.len() == 2
                && running
                    .iter()
                    .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(&victim)))
            .then_some(())
        }
    })
    .await;
    // the preempted instance left its group by name
    let listed: serde_json::Value =
        serde_json::from_str(&fake.control("GET", "gke/nodes?cluster=prod")).expect("JSON");
    let names: Vec<&str> = listed["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert!(
        !names.contains(&victim.as_str()),
        "{victim} still in {names:?}"
    );
    server.assert_rbac_allows_controller();
    ctl.abort();
}
