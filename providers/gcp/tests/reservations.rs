//! Compute Engine reservations against the Compute fake
//! (`tests/compute_fake.py`, its rules in `tests/gke_fake/reservations.py`):
//! the selected reservations as `reserved` offerings with the machines they
//! have left, a gang launched into one as plain VMs and as GKE nodes, the
//! count taken down per launch, a launch past the reservation's room
//! answered with the offering's capacity error, and the machines' network
//! layers read back.

use std::collections::BTreeMap;

use muster_planner::{CapacityType, OfferingKey, PoolRequirements, Provider};
use muster_provider_api::{CloudProvider, InstanceState, LaunchRequest, ProviderError};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::{Value, json};

const ZA: &str = "us-central1-a";
const ZB: &str = "us-central1-b";

fn reserved(ty: &str, zone: &str, reservation: &str) -> OfferingKey {
    OfferingKey {
        provider: Provider::Gcp,
        zone: zone.into(),
        instance_type: ty.into(),
        capacity_type: CapacityType::Reserved,
        reservation: Some(reservation.into()),
    }
}

fn request(name: &str, offering: OfferingKey) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("key-{name}"),
        offering,
        pool: "reserved".into(),
        cluster: "prod".into(),
        gang: Some("team-a.train".into()),
        labels: [("muster.dev/pool".to_string(), "reserved".to_string())].into(),
        taints: Vec::new(),
        tags: BTreeMap::new(),
        placement_group: None,
        grant: None,
    }
}

fn both() -> PoolRequirements {
    PoolRequirements {
        capacity_types: vec![CapacityType::Reserved, CapacityType::OnDemand],
        ..PoolRequirements::default()
    }
}

/// `inUseCount` of a reservation, as the fake holds it.
fn in_use(fake: &ComputeFake, project: &str, zone: &str, name: &str) -> i64 {
    let r = fake.get(&format!(
        "/compute/v1/projects/{project}/zones/{zone}/reservations/{name}"
    ));
    r["specificReservation"]["inUseCount"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1)
}

fn left(list: &[muster_planner::Offering], id: &str) -> Option<u32> {
    list.iter()
        .find(|o| o.key().reservation.as_deref() == Some(id))
        .and_then(|o| o.reservation.as_ref().map(|r| r.available))
}

fn plain_spec(reservations: Value) -> Value {
    json!({"gcp": {
        "project": "test-project", "region": "us-central1", "zones": [ZA, ZB],
        "image": "projects/cos-cloud/global/images/family/cos-stable",
        "reservations": reservations,
    }})
}

#[tokio::test]
async fn plain_vms_launch_a_gang_into_a_reservation_until_it_is_full() {
    let fake = ComputeFake::start();
    for q in [
        "project=test-project&zone=us-central1-a&name=a100-resv&machineType=a2-highgpu-1g&count=2&specific=true",
        "project=test-project&zone=us-central1-b&name=t4-resv&machineType=n1-standard-8&count=3&acceleratorType=nvidia-tesla-t4&acceleratorCount=4",
        "project=host-project&zone=us-central1-b&name=shared-l4&machineType=g2-standard-8&count=1&shareWith=test-project",
        "project=test-project&zone=us-central1-a&name=not-selected&machineType=g2-standard-8&count=5",
        "project=test-project&zone=us-central1-a&name=t4-resv&machineType=n1-standard-8&count=1&status=CREATING",
    ] {
        fake.control("POST", &format!("reservation?{q}"));
    }
    // listings of two a page: the provider reads every page
    fake.control("POST", "list-page?n=2");
    let selected = json!([{"name": "a100-resv"}, {"name": "t4-resv"},
                          {"name": "shared-l4", "project": "host-project"}]);
    let p = GcpProvider::new("gcp", &plain_spec(selected), &fake.options())
        .await
        .expect("provider");
    let list = p.offerings(&both()).await.expect("offerings");
    let reserved_list: Vec<_> = list
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .map(|o| {
            (
                o.zone.as_str(),
                o.instance_type.as_str(),
                o.key().reservation,
            )
        })
        .collect();
    assert_eq!(
        reserved_list,
        [
            (ZA, "a2-highgpu-1g", Some("a100-resv".to_string())),
            (
                ZB,
                "g2-standard-8",
                Some("projects/host-project/reservations/shared-l4".to_string())
            ),
            (
                ZB,
                "n1-standard-8+4xnvidia-tesla-t4",
                Some("t4-resv".to_string())
            ),
        ],
        "the selected READY ones, each in its zone; {list:?}"
    );
    assert_eq!(left(&list, "a100-resv"), Some(2));
    assert_eq!(left(&list, "t4-resv"), Some(3));
    assert!(
        list.iter()
            .filter(|o| o.capacity_type == CapacityType::Reserved)
            .all(|o| o.price == Some(muster_planner::Price::ZERO))
    );

    // a gang of two into the reservation
    let offering = reserved("a2-highgpu-1g", ZA, "a100-resv");
    let mut ids = Vec::new();
    for n in ["r-0", "r-1"] {
        let i = p
            .launch(&request(n, offering.clone()))
            .await
            .expect("launch");
        assert_eq!(i.offering, offering, "read back into its reservation");
        ids.push(i.provider_id);
    }
    assert_eq!(in_use(&fake, "test-project", ZA, "a100-resv"), 2);
    let list = p.offerings(&both()).await.expect("offerings");
    assert_eq!(
        left(&list, "a100-resv"),
        Some(0),
        "the kept count went down"
    );
    // over-booked: Compute refuses, the offering has no capacity
    let err = p
        .launch(&request("r-2", offering.clone()))
        .await
        .expect_err("full");
    match &err {
        ProviderError::InsufficientCapacity {
            offering: o,
            message,
        } => {
            assert_eq!(o, &offering);
            assert!(
                message.contains("does not have available resources"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // a shared reservation is named by its owner
    let shared = reserved(
        "g2-standard-8",
        ZB,
        "projects/host-project/reservations/shared-l4",
    );
    p.launch(&request("s-0", shared)).await.expect("shared");
    assert_eq!(in_use(&fake, "host-project", ZB, "shared-l4"), 1);
    // an on-demand machine of the reserved shape stays out of the reservations
    let od = OfferingKey {
        capacity_type: CapacityType::OnDemand,
        reservation: None,
        ..reserved("n1-standard-8+4xnvidia-tesla-t4", ZB, "")
    };
    p.launch(&request("od-0", od)).await.expect("on-demand");
    assert_eq!(in_use(&fake, "test-project", ZB, "t4-resv"), 0);
    // a reservation the NodeClass does not select is never launched into
    let err = p
        .launch(&request(
            "x-0",
            reserved("g2-standard-8", ZA, "not-selected"),
        ))
        .await
        .expect_err("not selected");
    assert!(matches!(err, ProviderError::NotFound { .. }), "{err:?}");

    // where the gang's machines sit
    fake.control(
        "POST",
        "topology?name=muster-key-r-0&cluster=c1&block=b-7&subblock=sb-2&host=h-31",
    );
    let i = p.describe(&ids[0]).await.expect("describe");
    assert_eq!(i.network, ["b-7", "sb-2", "h-31"]);
    let listed = p.list("prod").await.expect("list");
    let r1 = listed
        .iter()
        .find(|i| i.provider_id == ids[1])
        .expect("listed");
    assert!(r1.network.is_empty(), "no topology given for r-1");
    p.terminate(&ids[0]).await.expect("terminate");
    assert_eq!(in_use(&fake, "test-project", ZA, "a100-resv"), 1);

    // without reservations selected, no reserved offering and no affinity
    let none = GcpProvider::new("gcp", &plain_spec(json!([])), &fake.options())
        .await
        .expect("provider");
    let list = none.offerings(&both()).await.expect("offerings");
    assert!(
        list.iter()
            .all(|o| o.capacity_type != CapacityType::Reserved)
    );
}

#[tokio::test]
async fn gke_nodes_of_a_gang_go_through_a_pool_of_the_reservation_until_it_is_full() {
    let fake = ComputeFake::start();
    fake.control(
        "POST",
        "reservation?project=my-project&zone=us-central1-a&name=l4-resv&machineType=g2-standard-8&count=2&specific=true",
    );
    let spec = json!({"gcp": {
        "project": "my-project", "region": "us-central1", "zones": [ZA, ZB],
        "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
        "reservations": [{"name": "l4-resv"}],
    }});
    let p = GcpProvider::new("gke", &spec, &fake.options())
        .await
        .expect("provider");
    let list = p.offerings(&both()).await.expect("offerings");
    assert_eq!(left(&list, "l4-resv"), Some(2), "{list:?}");
    let offering = reserved("g2-standard-8", ZA, "l4-resv");
    fake.control(
        "POST",
        "topology?name=muster-key-g-0&block=b-1&subblock=sb-1&host=h-1",
    );
    let mut ids = Vec::new();
    for n in ["g-0", "g-1"] {
        let i = p
            .launch(&request(n, offering.clone()))
            .await
            .expect("launch");
        assert_eq!(i.state, InstanceState::Running);
        assert_eq!(i.offering, offering);
        ids.push(i.provider_id);
    }
    assert_eq!(in_use(&fake, "my-project", ZA, "l4-resv"), 2);
    let pools: Vec<Value> = fake
        .get("/v1/projects/my-project/locations/us-central1/clusters/prod/nodePools")["nodePools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("muster-r-l4-resv-"))
        })
        .collect();
    assert_eq!(pools.len(), 1, "one pool of the reservation: {pools:?}");
    assert_eq!(
        pools[0]["config"]["reservationAffinity"]["values"],
        json!(["l4-resv"])
    );
    let list = p.offerings(&both()).await.expect("offerings");
    assert_eq!(left(&list, "l4-resv"), Some(0));
    let err = p
        .launch(&request("g-2", offering.clone()))
        .await
        .expect_err("full");
    assert!(
        matches!(&err, ProviderError::InsufficientCapacity { offering: o, .. } if *o == offering),
        "{err:?}"
    );
    let calls = fake.calls();
    assert_eq!(
        calls["POST projects/zones/instanceGroupManagers/deleteInstances"], 1,
        "the refused instance is taken out of the group: {calls}"
    );
    // the node's network, from Compute and as GKE labels it
    let i = p.describe(&ids[0]).await.expect("describe");
    assert_eq!(i.network, ["b-1", "sb-1", "h-1"]);
    let v: Value = serde_json::from_str(&fake.control("GET", "gke/join?name=muster-key-g-0"))
        .expect("verdict");
    let labels = &v["node"]["metadata"]["labels"];
    assert_eq!(labels["cloud.google.com/gce-topology-block"], "b-1");
    assert_eq!(labels["cloud.google.com/gce-topology-host"], "h-1");
    p.terminate(&ids[1]).await.expect("terminate");
    let _ = fake.calls(); // the group acts at the next request
    assert_eq!(in_use(&fake, "my-project", ZA, "l4-resv"), 1);
}
