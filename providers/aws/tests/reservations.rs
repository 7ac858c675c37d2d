//! Capacity reservations and instance topology against the moto launcher
//! (`tests/moto_server.py`), which adds `CreateCapacityReservation`,
//! `DescribeCapacityReservations`, Capacity Blocks, launches into them and
//! `DescribeInstanceTopology` to moto as the EC2 API Reference describes
//! them; the last test checks that the stand-in refuses what EC2 refuses.

use std::collections::BTreeMap;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use muster_planner::{
    CapacityType, Offering, OfferingKey, PoolRequirements, Price, Provider, ReservationKind, Time,
};
use muster_provider_api::{CloudProvider, LaunchRequest, ProviderError};
use muster_provider_aws::moto::Moto;
use muster_provider_aws::{AwsProvider, topology};
use serde_json::{Value, json};

const P5: &str = "p5.48xlarge";
const P4D: &str = "p4d.24xlarge";

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A NodeClass spec selecting `terms` as its capacity reservations
/// (`Moto::node_class_spec` makes the subnets' tags and the security group,
/// once per server).
async fn spec_with(moto: &Moto, terms: Value) -> Value {
    with_terms(&moto.node_class_spec().await, terms)
}

fn with_terms(spec: &Value, terms: Value) -> Value {
    let mut spec = spec.clone();
    spec["aws"]["capacityReservationSelectorTerms"] = terms;
    spec
}

async fn provider(moto: &Moto, spec: &Value) -> AwsProvider {
    AwsProvider::new(spec, moto.options())
        .await
        .expect("provider")
}

fn reserved_pool(types: &[&str]) -> PoolRequirements {
    PoolRequirements {
        instance_types: types.iter().map(|t| t.to_string()).collect(),
        capacity_types: vec![CapacityType::OnDemand, CapacityType::Reserved],
        ..PoolRequirements::default()
    }
}

fn request(name: &str, offering: OfferingKey) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("key-{name}"),
        offering,
        pool: "h100".into(),
        cluster: "prod".into(),
        gang: Some("team-a/train".into()),
        labels: [("muster.dev/pool".to_string(), "h100".to_string())].into(),
        taints: Vec::new(),
        tags: BTreeMap::new(),
        placement_group: None,
        grant: None,
    }
}

fn reserved<'a>(list: &'a [Offering], id: &str) -> Option<&'a Offering> {
    list.iter()
        .find(|o| o.reservation.as_ref().is_some_and(|r| r.id == id))
}

/// The RunInstances entries of the launcher's log.
fn run_instances(moto: &Moto) -> Vec<Value> {
    moto.log()
        .into_iter()
        .filter(|e| e["action"] == "RunInstances")
        .collect()
}

fn param(entry: &Value, key: &str) -> Option<String> {
    entry["params"][key][0].as_str().map(String::from)
}

const TARGET: &str =
    "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId";

async fn described(moto: &Moto, provider_id: &str) -> aws_sdk_ec2::types::Instance {
    let id = provider_id.rsplit('/').next().unwrap_or_default();
    moto.clients()
        .await
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("describe")
        .reservations()
        .first()
        .and_then(|r| r.instances().first())
        .cloned()
        .expect("the instance")
}

#[tokio::test]
async fn reserved_offerings_come_from_id_and_tag_terms() {
    let moto = Moto::start();
    let ml = [("team", "ml")];
    let by_tag = moto.capacity_reservation(P5, "us-east-1a", 2, &ml).await;
    let by_id = moto.capacity_reservation(P4D, "us-east-1b", 1, &[]).await;
    let t = now();
    let block = moto.capacity_block(P5, "us-east-1b", 4, (t + 3600, t + 25 * 3600), &ml);
    // not selected: another tag value; a zone without a subnet; ended
    let other = moto
        .capacity_reservation(P5, "us-east-1a", 1, &[("team", "web")])
        .await;
    let no_subnet = moto.capacity_reservation(P5, "us-east-1c", 1, &ml).await;
    let ended = moto.capacity_block(P5, "us-east-1a", 1, (t - 7200, t - 3600), &ml);
    // every page of the answer is read
    moto.page_size(1);
    let base = moto.node_class_spec().await;
    let spec = with_terms(&base, json!([{"id": by_id}, {"tags": {"team": "ml"}}]));
    let p = provider(&moto, &spec).await;
    let list = p
        .offerings(&reserved_pool(&[P5, P4D]))
        .await
        .expect("offerings");

    let ids: Vec<&str> = list
        .iter()
        .filter_map(|o| o.reservation.as_ref().map(|r| r.id.as_str()))
        .collect();
    let mut want = vec![by_tag.as_str(), by_id.as_str(), block.as_str()];
    want.sort();
    let mut got = ids.clone();
    got.sort();
    assert_eq!(got, want, "not {other}, {no_subnet} nor {ended}");
    for o in list.iter().filter(|o| o.reservation.is_some()) {
        assert_eq!(o.capacity_type, CapacityType::Reserved);
        assert_eq!(o.price, Some(Price::ZERO), "paid for whether used or not");
        let od = list
            .iter()
            .find(|d| {
                d.capacity_type == CapacityType::OnDemand
                    && d.instance_type == o.instance_type
                    && d.zone == o.zone
            })
            .expect("the on-demand offering of the same type and zone");
        assert_eq!(o.resources, od.resources, "{}", o.instance_type);
        assert_eq!(
            (o.gpu_count, &o.gpu_model, o.placement_groups),
            (od.gpu_count, &od.gpu_model, od.placement_groups)
        );
        assert_eq!(
            o.key().reservation,
            o.reservation.as_ref().map(|r| r.id.clone())
        );
    }
    let a = reserved(&list, &by_tag).expect("tagged ODCR");
    let r = a.reservation.as_ref().expect("reservation");
    assert_eq!(
        (a.instance_type.as_str(), a.zone.as_str()),
        (P5, "us-east-1a")
    );
    assert_eq!(
        (r.kind, r.available, r.starts_at, r.ends_at),
        (ReservationKind::OnDemand, 2, None, None)
    );
    let b = reserved(&list, &by_id).expect("ODCR by id");
    assert_eq!(
        (b.instance_type.as_str(), b.zone.as_str()),
        (P4D, "us-east-1b")
    );
    let cb = reserved(&list, &block).expect("Capacity Block");
    let r = cb.reservation.as_ref().expect("reservation");
    assert_eq!(r.kind, ReservationKind::CapacityBlock);
    assert_eq!(
        r.starts_at,
        Some(Time(t + 3600)),
        "a scheduled block starts later"
    );
    assert_eq!(r.ends_at, Some(Time(t + 25 * 3600)), "and carries its end");
    assert_eq!(r.available, 4);

    // a pool that takes no reserved capacity asks nothing about reservations
    moto.reset();
    let od_only = PoolRequirements {
        instance_types: vec![P5.into()],
        ..PoolRequirements::default()
    };
    let list = p.offerings(&od_only).await.expect("offerings");
    assert!(list.iter().all(|o| o.reservation.is_none()));
    // nor does a NodeClass without terms
    let plain = provider(&moto, &base).await;
    let list = plain
        .offerings(&reserved_pool(&[P5]))
        .await
        .expect("offerings");
    assert!(list.iter().all(|o| o.reservation.is_none()));
    assert!(
        !moto
            .log()
            .iter()
            .any(|e| e["action"] == "DescribeCapacityReservations"),
        "no DescribeCapacityReservations without terms or a reserved pool"
    );
}

#[tokio::test]
async fn a_launch_lands_in_its_odcr_and_takes_one() {
    let moto = Moto::start();
    let cr = moto.capacity_reservation(P5, "us-east-1a", 2, &[]).await;
    let p = provider(&moto, &spec_with(&moto, json!([{"id": cr}])).await).await;
    let list = p.offerings(&reserved_pool(&[P5])).await.expect("offerings");
    let key = reserved(&list, &cr).expect("offered").key();
    moto.reset();
    let i = p
        .launch(&request("h-0", key.clone()))
        .await
        .expect("launch");
    assert_eq!(i.offering, key, "the instance names its reservation");
    let ec2 = described(&moto, &i.provider_id).await;
    assert_eq!(ec2.capacity_reservation_id(), Some(cr.as_str()));
    assert_eq!(moto.available(&cr).await, Some(1), "one slot taken");
    let run = run_instances(&moto);
    assert_eq!(run.len(), 1);
    assert_eq!(param(&run[0], TARGET).as_deref(), Some(cr.as_str()));
    assert_eq!(
        param(&run[0], "InstanceMarketOptions.MarketType"),
        None,
        "an ODCR is on-demand capacity"
    );
    // the same idempotency key: the same instance, no second slot
    let again = p.launch(&request("h-0", key.clone())).await.expect("again");
    assert_eq!(again.provider_id, i.provider_id);
    assert_eq!(moto.available(&cr).await, Some(1));
    // what describe reads back is the same offering
    let d = p.describe(&i.provider_id).await.expect("describe");
    assert_eq!(d.offering, key);
}

#[tokio::test]
async fn over_booking_is_refused() {
    let moto = Moto::start();
    let cr = moto.capacity_reservation(P5, "us-east-1a", 1, &[]).await;
    let p = provider(&moto, &spec_with(&moto, json!([{"id": cr}])).await).await;
    let pool = reserved_pool(&[P5]);
    let list = p.offerings(&pool).await.expect("offerings");
    let key = reserved(&list, &cr).expect("offered").key();
    p.launch(&request("h-0", key.clone()))
        .await
        .expect("the one slot");
    // within the reuse window the offering already shows the slot taken
    let list = p.offerings(&pool).await.expect("offerings");
    let o = reserved(&list, &cr).expect("still selected");
    assert_eq!(o.reservation.as_ref().map(|r| r.available), Some(0));
    assert!(!o.available, "nothing left to launch into");
    // and a launch into it anyway is EC2's capacity error, naming the offering
    match p.launch(&request("h-1", key.clone())).await {
        Err(ProviderError::InsufficientCapacity { offering, message }) => {
            assert_eq!(offering, key);
            assert!(message.contains("ReservationCapacityExceeded"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(moto.available(&cr).await, Some(0));
}

#[tokio::test]
async fn a_capacity_block_launch_carries_the_capacity_block_market_type() {
    let moto = Moto::start();
    let t = now();
    let end = t + 24 * 3600;
    let block = moto.capacity_block(P5, "us-east-1a", 2, (t - 60, end), &[("team", "ml")]);
    let spec = spec_with(&moto, json!([{"tags": {"team": "ml"}}])).await;
    let p = provider(&moto, &spec).await;
    let list = p.offerings(&reserved_pool(&[P5])).await.expect("offerings");
    let o = reserved(&list, &block).expect("the block is offered");
    let r = o.reservation.as_ref().expect("reservation");
    assert_eq!(r.kind, ReservationKind::CapacityBlock);
    assert_eq!(
        r.ends_at,
        Some(Time(end)),
        "the offering carries the block's end"
    );
    assert_eq!(r.starts_at, Some(Time(t - 60)));
    moto.reset();
    let i = p.launch(&request("cb-0", o.key())).await.expect("launch");
    let run = run_instances(&moto);
    assert_eq!(run.len(), 1);
    assert_eq!(
        param(&run[0], "InstanceMarketOptions.MarketType").as_deref(),
        Some("capacity-block")
    );
    assert_eq!(param(&run[0], TARGET).as_deref(), Some(block.as_str()));
    assert_eq!(i.offering.capacity_type, CapacityType::Reserved, "not spot");
    let ec2 = described(&moto, &i.provider_id).await;
    assert_eq!(ec2.capacity_reservation_id(), Some(block.as_str()));
    assert_eq!(moto.available(&block).await, Some(1));
    let d = p.describe(&i.provider_id).await.expect("describe");
    assert_eq!(d.offering.capacity_type, CapacityType::Reserved);
    assert_eq!(d.offering.reservation.as_deref(), Some(block.as_str()));
}

#[tokio::test]
async fn a_reservation_the_node_class_does_not_select_is_not_launched_into() {
    let moto = Moto::start();
    let cr = moto.capacity_reservation(P5, "us-east-1a", 1, &[]).await;
    let base = moto.node_class_spec().await;
    let p = provider(&moto, &with_terms(&base, json!([{"tags": {"team": "ml"}}]))).await;
    let key = OfferingKey {
        provider: Provider::Aws,
        zone: "us-east-1a".into(),
        instance_type: P5.into(),
        capacity_type: CapacityType::Reserved,
        reservation: Some(cr.clone()),
    };
    moto.reset();
    match p.launch(&request("h-0", key)).await {
        Err(ProviderError::NotFound { what }) => assert!(what.contains(&cr), "{what}"),
        other => panic!("{other:?}"),
    }
    assert!(run_instances(&moto).is_empty());
    // an id term naming a reservation that does not exist is named
    let p = provider(
        &moto,
        &with_terms(&base, json!([{"id": "cr-0123456789abcdef0"}])),
    )
    .await;
    match p.offerings(&reserved_pool(&[P5])).await {
        Err(ProviderError::NotFound { what }) => {
            assert!(what.contains("capacityReservationSelectorTerms"), "{what}");
            assert!(
                what.contains("InvalidCapacityReservationId.NotFound"),
                "{what}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn instances_report_their_network_nodes() {
    let moto = Moto::start();
    let p = provider(&moto, &moto.node_class_spec().await).await;
    let on_demand = |ty: &str, zone: &str| OfferingKey {
        provider: Provider::Aws,
        zone: zone.into(),
        instance_type: ty.into(),
        capacity_type: CapacityType::OnDemand,
        reservation: None,
    };
    let mut gang = Vec::new();
    for name in ["g-0", "g-1"] {
        let mut r = request(name, on_demand(P5, "us-east-1a"));
        r.placement_group = Some("team-a-train-pg0".into());
        gang.push(p.launch(&r).await.expect("gang launch"));
    }
    let alone = p
        .launch(&request("a-0", on_demand(P5, "us-east-1a")))
        .await
        .expect("launch");
    let elsewhere = p
        .launch(&request("b-0", on_demand(P5, "us-east-1b")))
        .await
        .expect("launch");
    let small = p
        .launch(&request("s-0", on_demand("g6.xlarge", "us-east-1a")))
        .await
        .expect("launch");
    moto.reset();
    let mut nets = Vec::new();
    for i in gang.iter().chain([&alone, &elsewhere]) {
        let d = p.describe(&i.provider_id).await.expect("describe");
        assert_eq!(d.network.len(), 3, "three layers, top first");
        nets.push(d.network);
    }
    assert_eq!(nets[0], nets[1], "one placement group: one bottom node");
    assert_eq!(nets[0][..2], nets[2][..2], "one zone: the top two layers");
    assert_ne!(nets[0][2], nets[2][2]);
    assert_ne!(nets[0][0], nets[3][0], "another zone");
    let d = p.describe(&small.provider_id).await.expect("describe");
    assert!(d.network.is_empty(), "g6 has no topology");
    let asked = moto
        .log()
        .iter()
        .filter(|e| e["action"] == "DescribeInstanceTopology")
        .count();
    assert_eq!(asked, 4, "a type without topology is not asked about");

    // many instances at once, every page
    moto.page_size(1);
    let ec2 = moto.clients().await.ec2;
    let ids: Vec<String> = gang
        .iter()
        .chain([&alone, &elsewhere, &small])
        .filter_map(|i| i.provider_id.rsplit('/').next().map(String::from))
        .collect();
    let nodes = topology::network_nodes(&ec2, &ids).await.expect("topology");
    assert_eq!(nodes.len(), 4, "all but the g6");
    assert_eq!(nodes.get(&ids[0]), Some(&nets[0]));
}

type RunResult = Result<
    aws_sdk_ec2::operation::run_instances::RunInstancesOutput,
    aws_sdk_ec2::error::SdkError<
        aws_sdk_ec2::operation::run_instances::RunInstancesError,
        aws_sdk_ec2::config::http::HttpResponse,
    >,
>;

/// `ok`, or the error code of a RunInstances answer.
fn code(r: RunResult) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code().unwrap_or("?").to_string(),
    }
}

/// The stand-in refuses what EC2 refuses: launches into a reservation of
/// another type or zone, a Capacity Block without its market type or before
/// its start, the capacity-block market type outside one, an unknown
/// reservation, a full one; and it gives a slot back at termination.
#[tokio::test]
async fn the_fake_refuses_what_ec2_refuses_of_reservations() {
    let moto = Moto::start();
    let spec = moto.node_class_spec().await;
    let ec2 = moto.clients().await.ec2;
    let ami = spec["aws"]["amiSelectorTerms"][0]["id"]
        .as_str()
        .expect("ami")
        .to_string();
    let odcr = moto.capacity_reservation(P5, "us-east-1a", 1, &[]).await;
    let t = now();
    let block = moto.capacity_block(P5, "us-east-1a", 1, (t - 60, t + 3600), &[]);
    let later = moto.capacity_block(P5, "us-east-1a", 1, (t + 3600, t + 7200), &[]);
    let run = |ty: &str, zone: &str, target: Option<&str>, market: Option<&str>| {
        let mut req = ec2
            .run_instances()
            .image_id(&ami)
            .instance_type(ty.into())
            .placement(
                aws_sdk_ec2::types::Placement::builder()
                    .availability_zone(zone)
                    .build(),
            )
            .min_count(1)
            .max_count(1);
        if let Some(id) = target {
            req = req.capacity_reservation_specification(
                aws_sdk_ec2::types::CapacityReservationSpecification::builder()
                    .capacity_reservation_target(
                        aws_sdk_ec2::types::CapacityReservationTarget::builder()
                            .capacity_reservation_id(id)
                            .build(),
                    )
                    .build(),
            );
        }
        if let Some(m) = market {
            req = req.instance_market_options(
                aws_sdk_ec2::types::InstanceMarketOptionsRequest::builder()
                    .market_type(m.into())
                    .build(),
            );
        }
        req.send()
    };
    let cb = Some("capacity-block");
    for (what, got, want) in [
        (
            "another type",
            code(run(P4D, "us-east-1a", Some(&odcr), None).await),
            "InvalidParameterValue",
        ),
        (
            "another zone",
            code(run(P5, "us-east-1b", Some(&odcr), None).await),
            "InvalidParameterValue",
        ),
        (
            "a block without its market type",
            code(run(P5, "us-east-1a", Some(&block), None).await),
            "InvalidParameterValue",
        ),
        (
            "a block before its start",
            code(run(P5, "us-east-1a", Some(&later), cb).await),
            "InvalidParameterValue",
        ),
        (
            "capacity-block into an ODCR",
            code(run(P5, "us-east-1a", Some(&odcr), cb).await),
            "InvalidParameterValue",
        ),
        (
            "capacity-block without a target",
            code(run(P5, "us-east-1a", None, cb).await),
            "InvalidParameterValue",
        ),
        (
            "an unknown reservation",
            code(run(P5, "us-east-1a", Some("cr-0123456789abcdef0"), None).await),
            "InvalidCapacityReservationId.NotFound",
        ),
        (
            "the ODCR",
            code(run(P5, "us-east-1a", Some(&odcr), None).await),
            "ok",
        ),
        (
            "the full ODCR",
            code(run(P5, "us-east-1a", Some(&odcr), None).await),
            "ReservationCapacityExceeded",
        ),
        (
            "the block",
            code(run(P5, "us-east-1a", Some(&block), cb).await),
            "ok",
        ),
    ] {
        assert_eq!(got, want, "{what}");
    }
    // the instance in the ODCR ends: its slot is free again
    let inside = ec2
        .describe_instances()
        .send()
        .await
        .expect("describe")
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find(|i| i.capacity_reservation_id() == Some(odcr.as_str()))
        .and_then(|i| i.instance_id().map(String::from))
        .expect("the instance in the ODCR");
    ec2.terminate_instances()
        .instance_ids(&inside)
        .send()
        .await
        .expect("terminate");
    assert_eq!(moto.available(&odcr).await, Some(1));
    // DescribeCapacityReservations: unknown ids and filters are errors
    let err = ec2
        .describe_capacity_reservations()
        .capacity_reservation_ids("cr-0123456789abcdef0")
        .send()
        .await
        .expect_err("unknown id");
    assert_eq!(err.code(), Some("InvalidCapacityReservationId.NotFound"));
    let err = ec2
        .describe_capacity_reservations()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("colour")
                .values("blue")
                .build(),
        )
        .send()
        .await
        .expect_err("unknown filter");
    assert_eq!(err.code(), Some("InvalidParameterValue"));
    // DescribeInstanceTopology takes at most 100 ids
    let many: Vec<String> = (0..101).map(|n| format!("i-{n:017x}")).collect();
    let err = ec2
        .describe_instance_topology()
        .set_instance_ids(Some(many))
        .send()
        .await
        .expect_err("101 ids");
    assert_eq!(err.code(), Some("InvalidParameterValue"));
}
