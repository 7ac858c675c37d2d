//! Leadership (7): two controllers in-process under leader election on one
//! API test server; only the holder of the Lease plans and calls its cloud,
//! and when the leader is killed the other takes over. (`leader_election.rs`
//! does the same with two `muster controller` processes and signals.)

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use muster::controller::LeaseConfig;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::in_process::Running;
use support::objects::{TEAM_A as NS, job, start_world};
use support::scenario::{start_configured, stub};
use support::waits::{assert_no_invalid_writes, wait_for_running_pods};
use support::{ApiServer, eventually};

/// The controller `identity` with the stub planner, acting only while it
/// holds the Lease (4 s, renewed within 2 s).
fn start_leader(server: &ApiServer, cloud: &Arc<FakeCloud>, identity: &str) -> Running {
    start_configured(server, cloud, stub(), |c| {
        c.identity = identity.to_string();
        c.lease = Some(LeaseConfig {
            duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
            ..LeaseConfig::new("muster-controller", "muster-system")
        });
        c.api_timeout = Duration::from_millis(1500);
    })
}

/// The holder of the Lease `muster-system/muster-controller`, if any.
async fn lease_holder(client: &kube::Client) -> Option<String> {
    let l = Api::<Lease>::namespaced(client.clone(), "muster-system")
        .get_opt("muster-controller")
        .await
        .ok()??;
    l.spec?.holder_identity
}

#[tokio::test]
async fn s7_only_the_leader_acts() {
    let (server, client) = start_world(&[]).await;
    let cloud_a = FakeCloud::new(None);
    let cloud_b = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud_a.clone(), cloud_b.clone()]);
    let a = start_leader(&server, &cloud_a, "a");
    eventually(10, "a leads", || {
        let client = client.clone();
        async move { (lease_holder(&client).await.as_deref() == Some("a")).then_some(()) }
    })
    .await;
    let b = start_leader(&server, &cloud_b, "b");
    job("first").queue("team-a").gpus(8).create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=first", 1, 20).await;
    assert_eq!(cloud_a.launch_calls().len(), 1);
    assert!(
        cloud_b.calls().is_empty(),
        "the follower never calls the cloud"
    );
    assert!(
        b.metrics
            .encode()
            .contains("muster_planning_cycles_total 0"),
        "the follower never plans"
    );
    assert_eq!(lease_holder(&client).await.as_deref(), Some("a"));
    drop(a); // killed: the lease expires, b takes over
    eventually(10, "b leads", || {
        let client = client.clone();
        async move { (lease_holder(&client).await.as_deref() == Some("b")).then_some(()) }
    })
    .await;
    job("second").queue("team-a").gpus(8).create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=second", 1, 20).await;
    assert_eq!(cloud_b.launch_calls().len(), 1, "the new leader launches");
    assert_eq!(cloud_a.launch_calls().len(), 1);
    // leader election included, every request is allowed by deploy/rbac.yaml
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}
