//! The GCP provider with the real `google-cloud-compute-v1` client against a
//! local fake of the Compute REST calls it makes (`tests/compute_fake.py`),
//! one per test.

use std::collections::BTreeMap;

use muster_planner::orphans::{Known, orphans};
use muster_planner::{CapacityType, Dur, GpuModel, OfferingKey, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, LaunchRequest, ProviderError, label_key, owned_instances, tags,
};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::json;

fn spec() -> serde_json::Value {
    json!({"gcp": {
        "project": "test-project",
        "region": "us-central1",
        "zones": ["us-central1-a", "us-central1-b"],
        "image": "projects/cos-cloud/global/images/family/cos-stable",
        "labels": {"cost-center": "42"}
    }})
}

async fn provider(fake: &ComputeFake) -> GcpProvider {
    GcpProvider::new("gcp-default", &spec(), &fake.options())
        .await
        .expect("provider")
}

fn key(ty: &str, zone: &str, capacity: CapacityType) -> OfferingKey {
    OfferingKey {
        provider: Provider::Gcp,
        zone: zone.into(),
        instance_type: ty.into(),
        capacity_type: capacity,
        reservation: None,
    }
}

fn request(name: &str, key_: &str, offering: OfferingKey) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: key_.into(),
        offering,
        pool: "a100".into(),
        cluster: "prod".into(),
        gang: Some("team-a/big".into()),
        labels: [("muster.dev/pool".to_string(), "a100".to_string())].into(),
        taints: Vec::new(),
        tags: BTreeMap::new(),
        placement_group: None,
        grant: None,
    }
}

#[tokio::test]
async fn offerings_for_a100_h100_and_l4_machine_types() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    let all = PoolRequirements {
        capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
        ..PoolRequirements::default()
    };
    let list = p.offerings(&all).await.expect("offerings");
    let one = |ty: &str| {
        list.iter()
            .find(|o| {
                o.instance_type == ty
                    && o.zone == "us-central1-a"
                    && o.capacity_type == CapacityType::Spot
            })
            .unwrap_or_else(|| panic!("{ty}: {list:?}"))
    };
    for (ty, model, count) in [
        ("a2-highgpu-8g", "A100", 8),
        ("a3-highgpu-8g", "H100", 8),
        ("g2-standard-4", "L4", 1),
    ] {
        let o = one(ty);
        assert!(
            o.gpu_model
                .as_ref()
                .is_some_and(|m| m.satisfies(&GpuModel::new(model))),
            "{ty}: {:?}",
            o.gpu_model
        );
        assert_eq!(o.gpu_count, count, "{ty}");
        assert!(o.price.is_some(), "{ty} priced");
    }
    // N1 with attachable T4s: one offering per accelerator count
    let t4: Vec<u32> = list
        .iter()
        .filter(|o| o.instance_type.starts_with("n1-standard-8+") && o.zone == "us-central1-a")
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .filter(|o| {
            o.gpu_model
                .as_ref()
                .is_some_and(|m| m.satisfies(&GpuModel::new("T4")))
        })
        .map(|o| o.gpu_count)
        .collect();
    assert_eq!(t4, [1, 2, 4], "{list:?}");
    // both zones, spot and on-demand
    assert!(list.iter().any(|o| o.zone == "us-central1-b"));
    assert!(
        list.iter()
            .any(|o| o.capacity_type == CapacityType::OnDemand)
    );
    let h100 = PoolRequirements {
        gpu_models: vec![GpuModel::new("H100")],
        ..PoolRequirements::default()
    };
    let list = p.offerings(&h100).await.expect("offerings");
    assert!(!list.is_empty());
    assert!(
        list.iter().all(|o| o.instance_type.starts_with("a3-")),
        "{list:?}"
    );
}

/// Machine and accelerator types listed a page of one item at a time give
/// the offerings one page gives: the provider reads every page.
#[tokio::test]
async fn offerings_read_every_page_of_the_type_listings() {
    let all = PoolRequirements {
        capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
        ..PoolRequirements::default()
    };
    let whole = {
        let fake = ComputeFake::start();
        provider(&fake)
            .await
            .offerings(&all)
            .await
            .expect("offerings")
    };
    let fake = ComputeFake::start();
    fake.control("POST", "list-page?n=1");
    let paged = provider(&fake)
        .await
        .offerings(&all)
        .await
        .expect("offerings");
    assert!(
        paged
            .iter()
            .any(|o| o.instance_type == "n1-standard-8+4xnvidia-tesla-t4"),
        "accelerators of later pages: {paged:?}"
    );
    assert_eq!(paged, whole);
}

#[tokio::test]
async fn a_three_node_spot_gang_is_launched_labelled_and_listed() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    let mut pids = Vec::new();
    for i in 0..3 {
        let inst = p
            .launch(&request(
                &format!("a100-big-{i}"),
                &format!("key-{i}"),
                key("a2-highgpu-8g", "us-central1-a", CapacityType::Spot),
            ))
            .await
            .expect("launch");
        assert!(
            inst.provider_id
                .starts_with("gce://test-project/us-central1-a/"),
            "{}",
            inst.provider_id
        );
        assert_eq!(inst.offering.capacity_type, CapacityType::Spot);
        pids.push(inst.provider_id);
    }
    let listed = p.list("prod").await.expect("list");
    assert_eq!(listed.len(), 3);
    for i in &listed {
        assert_eq!(i.tags[&label_key(tags::CLUSTER)], "prod");
        assert_eq!(i.tags[&label_key(tags::POOL)], "a100");
        assert_eq!(i.tags["cost-center"], "42");
        assert!(
            i.pool_node
                .as_deref()
                .is_some_and(|n| n.starts_with("a100-big-")),
            "{i:?}"
        );
    }
    // the fake keeps what was sent: spot scheduling that deletes on preemption
    let one = p.describe(&pids[0]).await.expect("describe");
    assert_eq!(one.offering.instance_type, "a2-highgpu-8g");
    assert_eq!(
        one.offering.capacity_type,
        CapacityType::Spot,
        "SPOT scheduling sent"
    );
}

#[tokio::test]
async fn an_instance_with_the_same_name_is_adopted_not_duplicated() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    let r = request(
        "n-0",
        "same-key",
        key("g2-standard-4", "us-central1-b", CapacityType::OnDemand),
    );
    let a = p.launch(&r).await.expect("first");
    // (the same request id again is the conformance suite's); after GCE
    // forgot the request id, the taken name is adopted
    fake.control("POST", "forget");
    let other = GcpProvider::new("gcp-default", &spec(), &fake.options())
        .await
        .expect("provider");
    let b = other.launch(&r).await.expect("again");
    assert_eq!(a.provider_id, b.provider_id);
    assert_eq!(p.list("prod").await.expect("list").len(), 1);
}

#[tokio::test]
async fn quota_errors_are_typed_and_leave_nothing() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    fake.control("POST", "quota?machineType=a2-highgpu-8g");
    let r = p
        .launch(&request(
            "n-2",
            "k-2",
            key("a2-highgpu-8g", "us-central1-a", CapacityType::OnDemand),
        ))
        .await;
    assert!(
        matches!(r, Err(ProviderError::QuotaExceeded { .. })),
        "{r:?}"
    );
    assert!(
        p.list("prod").await.expect("list").is_empty(),
        "nothing partial stays"
    );
}

#[tokio::test]
async fn failed_answers_are_typed() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    fake.control("POST", "fail?code=400");
    let r = p
        .launch(&request(
            "n-0",
            "k-0",
            key("g2-standard-4", "us-central1-a", CapacityType::OnDemand),
        ))
        .await;
    assert!(matches!(r, Err(ProviderError::Permanent { .. })), "{r:?}");
    // one 503 is retried by the client and the call succeeds
    fake.control("POST", "fail?code=503");
    assert!(p.list("prod").await.expect("retried").is_empty());
    // a 503 that does not go away is Transient
    fake.control("POST", "fail?code=503&n=1000");
    let r = p.list("prod").await;
    assert!(matches!(r, Err(ProviderError::Transient { .. })), "{r:?}");
}

#[tokio::test]
async fn orphan_collection_deletes_exactly_the_orphans() {
    let fake = ComputeFake::start();
    let p = provider(&fake).await;
    let mut pids = Vec::new();
    for i in 0..3 {
        let r = request(
            &format!("pn-{i}"),
            &format!("k-{i}"),
            key("g2-standard-4", "us-central1-a", CapacityType::OnDemand),
        );
        pids.push(p.launch(&r).await.expect("launch").provider_id);
    }
    // pn-0 recorded its instance; pn-1 exists mid-launch; pn-2 is gone
    let known = Known {
        pool_nodes: ["pn-0".to_string(), "pn-1".to_string()].into(),
        provider_ids: [pids[0].clone()].into(),
        ..Known::default()
    };
    let owned = owned_instances(&p, "prod").await.expect("list");
    let later = owned.iter().map(|o| o.launched_at).max().unwrap_or(Time(0)) + Dur::secs(3600);
    let doomed = orphans(&owned, &known, later, Dur::secs(600));
    assert_eq!(doomed, [pids[2].clone()]);
    for pid in &doomed {
        p.terminate(pid).await.expect("delete");
    }
    let mut left: Vec<String> = p
        .list("prod")
        .await
        .expect("list")
        .into_iter()
        .map(|i| i.provider_id)
        .collect();
    left.sort();
    let mut want = vec![pids[0].clone(), pids[1].clone()];
    want.sort();
    assert_eq!(left, want);
}

#[tokio::test]
async fn without_zones_every_zone_of_the_region_is_used() {
    let fake = ComputeFake::start();
    let mut spec = spec();
    spec["gcp"]["zones"] = json!([]);
    let p = GcpProvider::new("gcp-default", &spec, &fake.options())
        .await
        .expect("provider");
    let r = p.resolve().await.expect("resolve");
    assert_eq!(r.zones, ["us-central1-a", "us-central1-b", "us-central1-c"]);
}
