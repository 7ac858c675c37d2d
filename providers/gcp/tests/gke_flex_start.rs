//! Flex-start on GKE against the Compute fake (`tests/compute_fake.py`,
//! resize requests in `gke_fake/resize.py`): a NodeClass that opts in lists
//! flex-start offerings; the machines of one launch are granted by one
//! resize request of a flex-start node pool's group — pending while it is
//! queued, running once it is granted, a capacity error for every member
//! when it fails — and terminating a member of a queued request cancels it.

use std::collections::BTreeMap;

use muster_planner::{CapacityType, OfferingKey, PoolRequirements, Provider};
use muster_provider_api::{
    CloudProvider, ErrorCategory, Grant, GrantMember, InstanceState, LaunchRequest,
};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::{Value, json};

const CLUSTER_PATH: &str = "/v1/projects/my-project/locations/us-central1/clusters/prod";
const ZONE: &str = "us-central1-a";
const GRANT: &str = "muster-0123456789abcdef-1-grant";

fn spec() -> Value {
    json!({"gcp": {
        "project": "my-project",
        "region": "us-central1",
        "zones": [ZONE],
        "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
        "flexStart": {"maxRunDuration": "24h", "expectedWait": "30m", "discountPercent": 40},
    }})
}

async fn provider(fake: &ComputeFake) -> GcpProvider {
    GcpProvider::new("gke", &spec(), &fake.options())
        .await
        .expect("provider")
}

/// Member `i` of a two-machine flex-start launch of gang `a/j`.
fn member(i: usize) -> LaunchRequest {
    let members = (0..2)
        .map(|k| GrantMember {
            name: format!("j-{k}"),
            idempotency_key: format!("muster-0123456789abcdef-1-{k}"),
        })
        .collect::<Vec<_>>();
    LaunchRequest {
        name: members[i].name.clone(),
        idempotency_key: members[i].idempotency_key.clone(),
        offering: OfferingKey {
            provider: Provider::Gcp,
            zone: ZONE.into(),
            instance_type: "g2-standard-8".into(),
            capacity_type: CapacityType::FlexStart,
            reservation: None,
        },
        pool: "l4".into(),
        cluster: "prod".into(),
        gang: Some("a.j".into()),
        labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
        taints: Vec::new(),
        tags: BTreeMap::new(),
        placement_group: None,
        grant: Some(Grant {
            name: GRANT.into(),
            members,
        }),
    }
}

/// The resize requests path of muster's (only) flex-start pool's group.
fn requests_path(fake: &ComputeFake) -> String {
    let pools = fake.get(&format!("{CLUSTER_PATH}/nodePools"))["nodePools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let pool = pools
        .iter()
        .find(|p| p["config"]["flexStart"] == true)
        .expect("a flex-start pool");
    let url = pool["instanceGroupUrls"][0].as_str().expect("a group");
    format!(
        "/compute/v1/{}/resizeRequests",
        url.split("/compute/v1/").nth(1).expect("a Compute link")
    )
}

fn requests(fake: &ComputeFake) -> Vec<Value> {
    fake.get(&requests_path(fake))["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// How many `resizeRequests.insert` calls the fake served.
fn inserts(fake: &ComputeFake) -> u64 {
    fake.calls()
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("POST") && k.ends_with("resizeRequests"))
        .map(|(_, v)| v.as_u64().unwrap_or(0))
        .sum()
}

#[tokio::test]
async fn an_opted_in_node_class_offers_flex_start_priced_below_on_demand() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    let pool = PoolRequirements {
        capacity_types: vec![CapacityType::OnDemand, CapacityType::FlexStart],
        ..PoolRequirements::default()
    };
    let list = p.offerings(&pool).await.expect("offerings");
    let find = |c| {
        list.iter()
            .find(|o| o.instance_type == "g2-standard-8" && o.capacity_type == c)
            .expect("offered")
    };
    let flex = find(CapacityType::FlexStart);
    let promise = flex.flex_start.expect("a flex-start promise");
    assert_eq!(promise.max_run.as_secs(), 86_400);
    assert_eq!(promise.expected_wait.as_secs(), 1_800);
    let (od, fs) = (
        find(CapacityType::OnDemand).price.expect("priced").usd(),
        flex.price.expect("priced").usd(),
    );
    assert!((fs - od * 0.6).abs() < 1e-3, "{fs} vs {od}");
}

#[tokio::test]
async fn a_two_node_gang_is_granted_by_one_resize_request_pending_then_running() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    for i in 0..2 {
        let inst = p.launch(&member(i)).await.expect("queued");
        assert_eq!(
            inst.state,
            InstanceState::Pending,
            "member {i} while queued"
        );
    }
    let rs = requests(&fake);
    assert_eq!(rs.len(), 1, "one request for the gang: {rs:?}");
    assert_eq!(rs[0]["name"], GRANT);
    assert_eq!(rs[0]["state"], "ACCEPTED");
    assert_eq!(rs[0]["instances"].as_array().map(Vec::len), Some(2));
    assert_eq!(rs[0]["requestedRunDuration"]["seconds"], "86400");
    fake.control("POST", &format!("resize-requests/grant?name={GRANT}"));
    for i in 0..2 {
        let inst = p.launch(&member(i)).await.expect("granted");
        assert_eq!(
            inst.state,
            InstanceState::Running,
            "member {i} once granted"
        );
        assert_eq!(inst.pool_node.as_deref(), Some(member(i).name.as_str()));
    }
    assert_eq!(inserts(&fake), 1);
}

#[tokio::test]
async fn a_failed_request_is_a_capacity_error_for_every_member() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    p.launch(&member(0)).await.expect("queued");
    fake.control("POST", &format!("resize-requests/fail?name={GRANT}"));
    for i in 0..2 {
        let err = p.launch(&member(i)).await.expect_err("not granted");
        assert_eq!(err.category(), ErrorCategory::InsufficientCapacity, "{err}");
        assert!(err.to_string().contains("g2-standard-8"), "{err}");
    }
}

#[tokio::test]
async fn a_launch_repeated_after_a_restart_makes_no_second_request() {
    let fake = ComputeFake::start();
    provider(&fake)
        .await
        .launch(&member(0))
        .await
        .expect("queued");
    // a new process: nothing remembered but what the cloud holds
    let again = provider(&fake).await;
    for i in [0, 1, 0] {
        let inst = again.launch(&member(i)).await.expect("queued");
        assert_eq!(inst.state, InstanceState::Pending);
    }
    assert_eq!(requests(&fake).len(), 1);
    assert_eq!(inserts(&fake), 1);
}

#[tokio::test]
async fn terminating_a_member_of_a_queued_gang_cancels_its_request() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    let first = p.launch(&member(0)).await.expect("queued");
    p.launch(&member(1)).await.expect("queued");
    p.terminate(&first.provider_id).await.expect("terminated");
    assert_eq!(requests(&fake)[0]["state"], "CANCELLED");
    let err = p.launch(&member(1)).await.expect_err("given up");
    assert_eq!(err.category(), ErrorCategory::Permanent, "{err}");
    // the other member goes too, and a cancelled request is not cancelled twice
    p.terminate(&first.provider_id.replace("-0", "-1"))
        .await
        .expect("terminated");
}
