//! The simulated cloud (`--cloud sim`) against the API test server: a
//! launch is a Node with the offering's GPUs, labels, taints and provider
//! id, not Ready until its boot time has passed; a launch repeated with the
//! same idempotency key — by the same provider or by a new one after a
//! restart — finds that Node and creates no second one; terminate deletes
//! it; and a `sim` NodeClass is refused unless the cloud is enabled.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use muster::controller::ProviderFactory;
use muster::controller::cloud::clouds::{CloudName, CloudOptions, Clouds};
use muster::controller::cloud::sim::SimNodes;
use muster_planner::{CapacityType, PoolRequirements, Taint, TaintEffect, Time};
use muster_provider_api::{CloudProvider, InstanceState, LaunchRequest, ProviderError};
use serde_json::json;
use support::ApiServer;

fn spec(boot: i32) -> serde_json::Value {
    json!({ "sim": { "region": "us-east-1", "bootSeconds": boot } })
}

/// The cheapest 8-GPU on-demand offering listed.
fn eight_gpus(offerings: &[muster_planner::Offering]) -> muster_planner::OfferingKey {
    offerings
        .iter()
        .filter(|o| o.gpu_count == 8 && o.capacity_type == CapacityType::OnDemand)
        .min_by(|a, b| a.price.partial_cmp(&b.price).expect("prices compare"))
        .map(|o| o.key())
        .expect("an 8-GPU offering")
}

fn request(offerings: &[muster_planner::Offering], key: &str) -> LaunchRequest {
    LaunchRequest {
        name: format!("gpu-{key}"),
        idempotency_key: key.to_string(),
        offering: eight_gpus(offerings),
        pool: "gpu".into(),
        cluster: "c1".into(),
        gang: Some("team-a/train".into()),
        labels: BTreeMap::from([
            ("muster.dev/pool".to_string(), "gpu".to_string()),
            ("team".to_string(), "a".to_string()),
        ]),
        taints: vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }],
        tags: BTreeMap::new(),
        placement_group: None,
        grant: None,
    }
}

async fn sim_nodes(client: &kube::Client) -> Vec<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .list(&ListParams::default().labels("muster.dev/sim-nodeclass=sim"))
        .await
        .expect("list")
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_are_nodes_idempotent_across_restarts() {
    let server = ApiServer::start();
    let client = server.client();
    let controller = server.client_as("controller");
    let p = SimNodes::new(controller.clone(), "sim", &spec(2)).expect("sim cloud");
    let offerings = p
        .offerings(&PoolRequirements::default())
        .await
        .expect("offerings");
    assert!(
        offerings
            .iter()
            .all(|o| o.provider == muster_planner::Provider::Sim && o.region == "us-east-1"),
        "sim offerings of us-east-1 only"
    );
    let req = request(&offerings, "muster-00aa-1-0");
    let gpus = offerings
        .iter()
        .find(|o| o.key() == req.offering)
        .map(|o| o.gpu_count)
        .expect("offering");

    let first = p.launch(&req).await.expect("launch");
    assert!(first.provider_id.starts_with("sim://us-east-1"));
    assert_eq!(first.state, InstanceState::Pending);
    let again = p.launch(&req).await.expect("launch again");
    assert_eq!(again.provider_id, first.provider_id);

    // a new provider (the controller restarted) launching the same key
    drop(p);
    let p = SimNodes::new(controller.clone(), "sim", &spec(2)).expect("sim cloud");
    let after_restart = p.launch(&req).await.expect("launch after restart");
    assert_eq!(after_restart.provider_id, first.provider_id);
    let nodes = sim_nodes(&client).await;
    assert_eq!(nodes.len(), 1, "one Node for one key");

    let n = &nodes[0];
    let spec = n.spec.clone().expect("spec");
    assert_eq!(
        spec.provider_id.as_deref(),
        Some(first.provider_id.as_str())
    );
    assert_eq!(spec.taints.unwrap_or_default().len(), 1);
    let labels = n.metadata.labels.clone().expect("labels");
    assert_eq!(labels["team"], "a");
    assert_eq!(labels["muster.dev/poolnode"], "gpu-muster-00aa-1-0");
    assert_eq!(
        labels["node.kubernetes.io/instance-type"],
        req.offering.instance_type
    );
    assert_eq!(labels["topology.kubernetes.io/zone"], req.offering.zone);
    assert_eq!(labels["muster.dev/capacity-type"], "on-demand");
    let status = n.status.clone().expect("status");
    let alloc = status.allocatable.expect("allocatable");
    assert_eq!(alloc["nvidia.com/gpu"].0, gpus.to_string());
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    assert!(!ready(n), "booting");

    // the boot ends (the background task started by the launch, or a call)
    support::eventually(10, "the simulated boot ends", || {
        let client = client.clone();
        async move {
            let nodes = sim_nodes(&client).await;
            nodes.first().filter(|n| ready(n)).map(|_| ())
        }
    })
    .await;
    let d = p.describe(&first.provider_id).await.expect("describe");
    assert_eq!(d.state, InstanceState::Running);
    assert_eq!(d.offering, req.offering);
    assert_eq!(p.list("c1").await.expect("list").len(), 1);
    assert!(p.list("c2").await.expect("list").is_empty());
    assert_eq!(p.end_boots(Time(i64::MAX / 2)).await.expect("ready"), 0);

    p.terminate(&first.provider_id).await.expect("terminate");
    p.terminate(&first.provider_id)
        .await
        .expect("terminate again");
    assert!(sim_nodes(&client).await.is_empty());
    assert!(matches!(
        p.describe(&first.provider_id).await,
        Err(ProviderError::NotFound { .. })
    ));
    assert!(p.list("c1").await.expect("list").is_empty());
    // deploy/rbac.yaml with deploy/rbac-sim.yaml allows every call it made
    server.assert_rbac_allows_controller_by(&support::rbac::rules_with_sim_cloud());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_launch_is_not_taken_over() {
    let server = ApiServer::start();
    let client = server.client();
    let p = SimNodes::new(client.clone(), "sim", &spec(600)).expect("sim cloud");
    let listed = p.offerings(&PoolRequirements::default()).await.expect("o");
    let req = request(&listed, "muster-00bb-1-0");
    p.launch(&req).await.expect("launch");
    // the same Node name from a key that differs only in case
    let mut other = req.clone();
    other.idempotency_key = "MUSTER-00BB-1-0".into();
    assert!(matches!(
        p.launch(&other).await,
        Err(ProviderError::Permanent { .. })
    ));
    // not booted yet: a boot of 600 s is not over now
    assert_eq!(
        p.end_boots(muster::controller::base::time::now())
            .await
            .expect("boots"),
        0
    );
    assert_eq!(sim_nodes(&client).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_cloud_is_off_unless_enabled() {
    let server = ApiServer::start();
    let client = server.client();
    let off = Clouds::new(CloudOptions::default()).with_client(client.clone());
    let e = off.provider("sim", &spec(1)).await.err().expect("refused");
    assert_eq!(e.reason(), "ProviderDisabled");
    assert!(e.to_string().contains("--cloud sim"), "{e}");
    let options = CloudOptions::default().enable(&[CloudName::Sim]);
    let on = Clouds::new(options).with_client(client.clone());
    let p = on.provider("sim", &spec(1)).await.expect("enabled");
    assert_eq!(p.provider(), muster_planner::Provider::Sim);
    // enabled, but a region the catalog does not sell in
    let bad = on
        .provider("sim-eu", &json!({ "sim": { "region": "eu-west-1" } }))
        .await
        .err()
        .expect("no shapes");
    assert_eq!(bad.reason(), "InvalidNodeClass");
    // a real cloud left out of --cloud is disabled too
    let aws = on
        .provider("aws", &json!({ "aws": { "region": "us-east-1" } }))
        .await
        .err()
        .expect("aws not enabled");
    assert_eq!(aws.reason(), "ProviderDisabled");
}
