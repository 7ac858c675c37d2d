//! GPU readiness: a muster node that turns Ready but never reports
//! `nvidia.com/gpu` (the device plugin does not run on it) is flagged on its
//! PoolNode (`Initialized=False`, reason `GPUsNotAllocatable`) and by one
//! Warning Event naming the node's taints, after `gpuRegistrationTimeout`;
//! a node whose GPUs appear is `Initialized=True` and never flagged.
//!
//! The real `kube::Client` over HTTP against the API test server, the
//! controller in-process, a fake cloud, and the kubelet emulator.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject};
use muster_planner::{Dur, Policy};
use serde_json::{Value, json};
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::in_process::Running;
use support::objects::{job, nodeclass, pool, queue};
use support::waits::{events_of, poolnodes, wait_for_poolnode_phase};
use support::{ApiServer, eventually};

const NS: &str = "team-a";
const REASON: &str = "GPUsNotAllocatable";

/// Flags a GPU-less Ready node after 1 s, and gives nothing up for an hour.
fn start(client: &kube::Client, cloud: &Arc<FakeCloud>) -> Running {
    let mut config = support::in_process::config("c1");
    config.tick = Duration::from_millis(300);
    config.policy = Policy {
        gpu_registration_timeout: Dur::secs(1),
        initialization_timeout: Dur::hours(1),
        provisioning_timeout: Dur::hours(1),
        ..Policy::default()
    };
    support::in_process::spawn(client, cloud, Arc::new(support::stub_planner::plan), config)
}

/// CRDs, a NodeClass, a pool of 8-GPU nodes tainted `nvidia.com/gpu` and
/// `dedicated=training`, a queue, and one suspended 8-GPU Job.
async fn world(server: &ApiServer) -> kube::Client {
    let client = server.client();
    support::install_crds(&client).await;
    nodeclass("gcp-default").create(&client).await;
    pool("a100")
        .taints(json!([
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
        ]))
        .create(&client)
        .await;
    queue("team-a").create(&client).await;
    job("train")
        .queue("team-a")
        .gpus(8)
        .toleration(json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}))
        .create(&client)
        .await;
    client
}

fn initialized(pn: &DynamicObject) -> Option<Value> {
    pn.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Initialized")
        .cloned()
}

/// Warning Events of `reason` about PoolNodes.
async fn warnings(client: &kube::Client, reason: &str) -> Vec<Event> {
    events_of(client, reason)
        .await
        .into_iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("PoolNode")
        })
        .collect()
}

#[tokio::test]
async fn ready_node_without_gpus_is_flagged_with_what_to_check() {
    let server = ApiServer::start();
    let client = world(&server).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start_without_device_plugin(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server.client_as("controller"), &cloud);
    let (pn, cond) = eventually(30, "a PoolNode flagged GPUsNotAllocatable", || {
        let client = client.clone();
        async move {
            poolnodes(&client).await.into_iter().find_map(|p| {
                let c = initialized(&p)?;
                (c["status"] == "False").then_some((p, c))
            })
        }
    })
    .await;
    assert_eq!(cond["reason"], REASON, "{cond}");
    // the node stays Registered: Ready, but not capacity without GPUs
    assert_eq!(pn.data["status"]["phase"], "Registered", "{pn:?}");
    let node = pn.data["status"]["nodeName"].as_str().expect("nodeName");
    let message = cond["message"].as_str().expect("message");
    for part in [
        node,
        "nvidia.com/gpu=true:NoSchedule",
        "dedicated=training:NoSchedule",
        "device plugin or GPU operator",
        "driver",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    let events = eventually(10, "the GPUsNotAllocatable Warning", || {
        let client = client.clone();
        async move {
            let w = warnings(&client, REASON).await;
            (!w.is_empty()).then_some(w)
        }
    })
    .await;
    assert_eq!(events[0].note.as_deref(), Some(message));
    // announced once: more cycles neither repeat the Event nor rewrite the condition
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = warnings(&client, REASON).await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(again[0].series.is_none(), "repeated: {:?}", again[0].series);
    let pns = poolnodes(&client).await;
    let same = pns
        .iter()
        .find(|p| p.data["metadata"]["name"] == pn.data["metadata"]["name"])
        .expect("still there");
    assert_eq!(initialized(same), Some(cond));
    // the gang is not admitted on a node without GPUs
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("train")
        .await
        .expect("job");
    assert_eq!(job.spec.and_then(|s| s.suspend), Some(true));
}

#[tokio::test]
async fn node_whose_gpus_appear_is_initialized_and_not_flagged() {
    let server = ApiServer::start();
    let client = world(&server).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server.client_as("controller"), &cloud);
    let pn = wait_for_poolnode_phase(&client, "Ready", 30).await;
    let cond = initialized(&pn).expect("Initialized condition");
    assert_eq!(cond["status"], "True", "{cond}");
    assert_eq!(cond["reason"], "GPUsAllocatable", "{cond}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(warnings(&client, REASON).await.is_empty());
}
