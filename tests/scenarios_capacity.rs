//! Reserved capacity and network topology, end to end: a gang running on a
//! Capacity Block whose end comes near is drained off it, requeued whole at
//! once (no backoff, not counted as an eviction) and runs again elsewhere;
//! a workload's network-topology and capacity annotations reach its Gang,
//! and a label that is no network layer is reported on the Gang; a Node
//! without network labels gets them from its cloud's description.
//!
//! Each runs the real `kube::Client` over HTTP against the API test server,
//! the controller in-process on a fake cloud, and the kubelet / scheduler
//! emulator.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use kube::ResourceExt;
use muster::controller::PlanFn;
use muster_planner::{CapacityReservation, CapacityType, Dur, ReservationKind, Time};
use serde_json::json;
use support::emulator::Emulator;
use support::eventually;
use support::fake_cloud::{FakeCloud, catalog};
use support::objects::{TEAM_A as NS, job, start_world};
use support::scenario::start;
use support::waits::{
    assert_no_invalid_writes, events_of, gang, patch_pool, poolnodes, wait_for_gang_phase,
    wait_for_job_suspended, wait_for_poolnode_gone, wait_for_poolnode_phase,
};

/// The Capacity Block the fake cloud sells `fake-8gpu` machines from.
const BLOCK: &str = "cr-block-1";

/// The fake catalog with `fake-8gpu` also sold at price zero from
/// [`BLOCK`] (two machines left), which ends `ends_at`.
fn catalog_with_block(ends_at: Time) -> Vec<muster_planner::Offering> {
    let mut offerings = catalog();
    let mut reserved = offerings[0].clone();
    reserved.capacity_type = CapacityType::Reserved;
    reserved.price = Some(muster_planner::Price(0));
    reserved.reservation = Some(CapacityReservation {
        id: BLOCK.into(),
        kind: ReservationKind::CapacityBlock,
        available: 2,
        starts_at: None,
        ends_at: Some(ends_at),
    });
    offerings.push(reserved);
    offerings
}

/// The real planner with its drain-ahead window (`reservationDrainAhead`)
/// read from `ahead`, in seconds, so the test brings a capacity's end near
/// without waiting for it; offerings whose reservation ends within the
/// window are left out of what it may buy (a gang that may outlive its
/// capacity would otherwise be put straight back on the block being
/// drained).
fn ending_planner(ahead: Arc<AtomicI64>) -> PlanFn {
    let planner = muster::controller::real_planner();
    Arc::new(move |s, policy, now| {
        let ahead = Dur::secs(u64::try_from(ahead.load(Ordering::SeqCst)).unwrap_or(0));
        let mut policy = policy.clone();
        policy.reservation_drain_ahead = ahead;
        let mut buyable = s.clone();
        buyable.offerings.retain(|o| {
            o.reservation
                .as_ref()
                .and_then(|r| r.ends_at)
                .is_none_or(|t| t > now + ahead)
        });
        planner(&buyable, &policy, now)
    })
}

/// A gang that may outlive its capacity runs on a Capacity Block's machine
/// (the PoolNode records the reservation and when it ends); when the end
/// comes within the drain-ahead window the planner removes the node as
/// `CapacityEnding`: the PoolNode goes
/// Draining with that reason, the gang is evicted whole and requeued at once
/// (its `requeueAfter` the eviction's time, `evictions` still 0), and it
/// runs again on on-demand capacity while the old node is terminated.
#[tokio::test]
async fn capacity_ending_requeues_the_gang_whole_without_backoff() {
    let (server, client) = start_world(&[]).await;
    patch_pool(
        &client,
        "a100",
        json!({"requirements": {"instanceTypes": ["fake-8gpu"], "capacityTypes": ["reserved", "on-demand"]}}),
    )
    .await;
    let ends_at = muster::controller::base::time::now() + Dur::hours(3);
    let cloud = FakeCloud::with_catalog(Some(client.clone()), catalog_with_block(ends_at));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ahead = Arc::new(AtomicI64::new(0));
    let ctl = start(&server, &cloud, ending_planner(ahead.clone()));
    job("one")
        .queue("team-a")
        .gpus(8)
        .annotation("muster.dev/may-outlive-capacity", "true")
        .create(&client)
        .await;
    wait_for_gang_phase(&client, NS, "one", &["Running"], 30).await;
    let pn = poolnodes(&client)
        .await
        .into_iter()
        .next()
        .expect("a PoolNode");
    let offering = &pn.data["spec"]["offering"];
    assert_eq!(offering["capacityType"], "reserved", "{offering}");
    assert_eq!(offering["reservation"], BLOCK, "{offering}");
    assert!(offering["capacityEndsAt"].is_string(), "{offering}");
    let g = gang(&client, NS, "one").await.expect("the Gang");
    assert_eq!(g.data["spec"]["mayOutliveCapacity"], true);

    // the end comes within the drain-ahead window
    ahead.store(4 * 3600, Ordering::SeqCst);
    let draining = wait_for_poolnode_phase(&client, "Draining", 20).await;
    let marked = muster::controller::base::time::now();
    assert_eq!(draining.name_any(), pn.name_any());
    assert_eq!(draining.data["status"]["reason"], "CapacityEnding");
    wait_for_job_suspended(&client, NS, "one", 20).await;
    let evicted = eventually(20, "the gang requeued", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "one").await?;
            g.data["status"]["requeueAfter"].is_string().then_some(g)
        }
    })
    .await;
    let status = &evicted.data["status"];
    assert_eq!(status["reason"], "CapacityEnding", "{status}");
    let requeue_after = status["requeueAfter"]
        .as_str()
        .and_then(muster::controller::base::time::parse)
        .expect("requeueAfter, a time");
    assert!(
        requeue_after.0 <= marked.0 + 2,
        "requeued at once, not after a backoff: {status}"
    );
    assert_eq!(
        status["evictions"].as_i64().unwrap_or(0),
        0,
        "not counted: {status}"
    );
    // the node goes; the gang runs again, whole, on on-demand capacity
    wait_for_poolnode_gone(&client, &pn.name_any(), 30).await;
    wait_for_gang_phase(&client, NS, "one", &["Running"], 30).await;
    let now_on = poolnodes(&client).await;
    assert_eq!(now_on.len(), 1, "{now_on:?}");
    assert_eq!(
        now_on[0].data["spec"]["offering"]["capacityType"],
        "on-demand"
    );
    let g = gang(&client, NS, "one").await.expect("the Gang");
    assert_eq!(g.data["status"]["evictions"].as_i64().unwrap_or(0), 0);
    let removals: Vec<String> = events_of(&client, "CapacityEnding")
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("PoolNode"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(removals.len(), 1, "{removals:?}");
    assert!(
        cloud.calls().iter().any(|c| c.op == "terminate"
            && Some(c.what.as_str()) == pn.data["status"]["providerID"].as_str()),
        "the reserved instance terminated"
    );
    let text = ctl.metrics.encode();
    assert!(
        text.contains(r#"muster_evictions_total{reason="CapacityEnding"} 1"#),
        "evicted once: {text}"
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// The workload's network annotations reach its Gang: a network layer's
/// label is the Gang's `spec.networkTopology`; a label that is no network
/// layer leaves it out, the Gang is made all the same, and a Warning Event
/// on the Gang names the label.
#[tokio::test]
async fn network_annotations_reach_the_gang_and_an_unknown_label_is_reported() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, support::scenario::stub());
    job("near")
        .queue("team-a")
        .gpus(8)
        .annotation(
            "muster.dev/podset-preferred-topology",
            "cloud.google.com/gce-topology-subblock",
        )
        .create(&client)
        .await;
    job("typo")
        .queue("team-a")
        .gpus(8)
        .annotation(
            "muster.dev/podset-required-topology",
            "cloud.google.com/rack",
        )
        .create(&client)
        .await;
    let near = eventually(20, "Gang near", || {
        let client = client.clone();
        async move { gang(&client, NS, "near").await }
    })
    .await;
    assert_eq!(
        near.data["spec"]["networkTopology"],
        json!({"mode": "Preferred", "level": "cloud.google.com/gce-topology-subblock"})
    );
    let typo = eventually(20, "Gang typo", || {
        let client = client.clone();
        async move { gang(&client, NS, "typo").await }
    })
    .await;
    assert!(
        typo.data["spec"].get("networkTopology").is_none(),
        "{typo:?}"
    );
    let warned = eventually(20, "the InvalidNetworkTopology Event", || {
        let client = client.clone();
        async move {
            let notes: Vec<String> = events_of(&client, "InvalidNetworkTopology")
                .await
                .into_iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Gang")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("typo")
                })
                .filter_map(|e| e.note)
                .collect();
            (!notes.is_empty()).then_some(notes)
        }
    })
    .await;
    assert!(warned[0].contains("cloud.google.com/rack"), "{warned:?}");
    // both still run: the bad label keeps no gang from its capacity
    wait_for_gang_phase(&client, NS, "near", &["Running"], 30).await;
    wait_for_gang_phase(&client, NS, "typo", &["Running"], 30).await;
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// A registered Node without network-topology labels is labelled with the
/// GKE keys from its instance's place in the network, as the cloud
/// describes it (the fake cloud is GCP).
#[tokio::test]
async fn registered_nodes_get_their_network_labels_from_the_cloud() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    cloud.set_network(&["block-7", "sub-3", "host-42"]);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, support::scenario::stub());
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 30).await;
    let node = pn.data["status"]["nodeName"]
        .as_str()
        .expect("nodeName")
        .to_string();
    let labels = eventually(20, "the Node labelled with its network", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            let n = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client)
                .get(&node)
                .await
                .ok()?;
            let labels = n.metadata.labels.unwrap_or_default();
            labels
                .contains_key("cloud.google.com/gce-topology-host")
                .then_some(labels)
        }
    })
    .await;
    for (k, v) in [
        ("cloud.google.com/gce-topology-block", "block-7"),
        ("cloud.google.com/gce-topology-subblock", "sub-3"),
        ("cloud.google.com/gce-topology-host", "host-42"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "{labels:?}");
    }
    assert!(
        !labels.keys().any(|k| k.starts_with("topology.k8s.aws/")),
        "{labels:?}"
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}
