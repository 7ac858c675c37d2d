//! An upgrade of muster over objects stored under an earlier release's CRDs
//! (`tests/data/crds-07d40c9`: the five CRDs as muster generated them on
//! 2026-11-23, before the required-affinity, kubelet-label, EFA,
//! security-group-selector and pool-name rules of today's). What
//! docs/install.md has the operator do: apply the new CRDs over the old
//! (`muster crds | kubectl apply --server-side -f -`), then roll the
//! controller. The in-flight work of the old controller goes on: its
//! machine is kept (no launch, no termination), its running gang stays
//! running, new work is admitted, an object the new rules refuse is
//! reported (not rewritten, not lost), and every write the new controller
//! makes is one the API server accepts under the new schemas.

mod support;

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{TEAM_A as NS, default_objects, job, pool};
use support::scenario::start;
use support::waits::{assert_no_invalid_writes, poolnodes, wait_for_running_pods};
use support::{ApiServer, ar, eventually};

/// The CRDs an earlier muster stored its objects under.
async fn install_previous_crds(client: &kube::Client) {
    support::workload_crds::install_from(
        client,
        "tests/data/crds-07d40c9",
        &["gang", "gpupool", "gpuqueue", "nodeclass", "poolnode"],
    )
    .await;
}

/// The `Valid` condition of GPUPool `name`, once written.
async fn pool_valid(client: &kube::Client, name: &str) -> serde_json::Value {
    eventually(20, "the pool's Valid condition", || {
        let client = client.clone();
        let name = name.to_string();
        async move {
            let p = Api::<DynamicObject>::all_with(client, &ar("GPUPool", "gpupools"))
                .get(&name)
                .await
                .ok()?;
            p.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid")
                .cloned()
        }
    })
    .await
}

#[tokio::test]
async fn objects_stored_under_the_previous_crds_are_served_after_the_upgrade() {
    let server = ApiServer::start_with(&[]);
    let client = server.client();
    install_previous_crds(&client).await;
    default_objects(&client).await;
    // refused by today's CRD (a kubelet may not set this label), accepted then
    let legacy = pool("legacy")
        .build()
        .as_object()
        .cloned()
        .map(|mut o| {
            o["spec"]["labels"] = json!({"node-role.kubernetes.io/gpu": "true"});
            serde_json::Value::Object(o)
        })
        .expect("pool");
    support::create(&client, "GPUPool", "gpupools", None, legacy).await;

    // the previous controller's work, stored through the previous schemas
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let before = start(&server, &cloud, muster::controller::real_planner());
    job("before").queue("team-a").create(&client).await;
    let running = wait_for_running_pods(&client, NS, "job-name=before", 1, 30).await;
    let node = running[0].spec.as_ref().and_then(|s| s.node_name.clone());
    let launched = cloud.launch_calls().len();
    assert_eq!(launched, 1);
    drop(before);

    support::apply_current_crds(&client).await;
    let _after = start(&server, &cloud, muster::controller::real_planner());
    // a new job, while the old one runs on; the pool keeps one 8-GPU machine
    job("after").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=after", 1, 40).await;
    let still = wait_for_running_pods(&client, NS, "job-name=before", 1, 5).await;
    assert_eq!(
        still[0].spec.as_ref().and_then(|s| s.node_name.clone()),
        node,
        "the old gang runs where it ran"
    );
    assert_eq!(
        support::waits::gang_phase(&client, NS, "before")
            .await
            .as_deref(),
        Some("Running")
    );
    // the old machine is the new controller's: not terminated, not bought again
    let pns = poolnodes(&client).await;
    assert!(
        pns.iter()
            .any(|p| p.data["status"]["nodeName"].as_str() == node.as_deref()),
        "{pns:?}"
    );
    assert!(
        cloud
            .instances()
            .iter()
            .all(|i| i.instance.state != muster_provider_api::InstanceState::Terminated),
        "nothing terminated"
    );
    // the pool today's rules refuse is reported, its status written under ratcheting
    let valid = pool_valid(&client, "legacy").await;
    assert_eq!(valid["status"], "False");
    assert_eq!(valid["reason"], "InvalidSpec");
    assert!(
        valid["message"]
            .as_str()
            .is_some_and(|m| m.contains("node-role.kubernetes.io/gpu")),
        "{valid}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_no_invalid_writes();
}
