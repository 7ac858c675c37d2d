//! The AWS provider with the real `aws-sdk-ec2` and `aws-sdk-sqs` clients
//! against a local moto server (`tests/moto_server.py`), one per test.
//!
//! moto does not honour `ClientToken`, raise capacity errors or throttle;
//! the launcher patches its EC2 backend so that it does (see its docstring),
//! as real EC2 does.

use std::collections::{BTreeMap, BTreeSet};

use muster_planner::orphans::{Known, orphans};
use muster_planner::{CapacityType, Dur, GpuModel, OfferingKey, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, InstanceState, InterruptionKind, LaunchRequest, ProviderError, owned_instances,
    tags,
};
use muster_provider_aws::moto::Moto;
use muster_provider_aws::{AwsOptions, AwsProvider};
use serde_json::json;

async fn world(moto: &Moto) -> serde_json::Value {
    moto.node_class_spec().await
}

async fn provider(moto: &Moto, spec: &serde_json::Value) -> AwsProvider {
    provider_with(spec, moto.options()).await
}

async fn provider_with(spec: &serde_json::Value, options: AwsOptions) -> AwsProvider {
    AwsProvider::new(spec, options).await.expect("provider")
}

fn key(ty: &str, zone: &str, capacity: CapacityType) -> OfferingKey {
    OfferingKey {
        provider: Provider::Aws,
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

/// Launches one on-demand g5.xlarge in us-east-1a and returns the instance
/// as EC2 describes it.
async fn launch_one(p: &AwsProvider, ec2: &aws_sdk_ec2::Client) -> aws_sdk_ec2::types::Instance {
    let i = p
        .launch(&request(
            "n-0",
            "k-0",
            key("g5.xlarge", "us-east-1a", CapacityType::OnDemand),
        ))
        .await
        .expect("launch");
    let id = i.provider_id.rsplit('/').next().unwrap_or_default();
    ec2.describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("describe")
        .reservations()
        .first()
        .and_then(|r| r.instances().first())
        .cloned()
        .expect("the launched instance")
}

#[tokio::test]
async fn offerings_carry_gpu_model_count_memory_and_prices() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    let all = PoolRequirements {
        instance_types: ["p4d.24xlarge", "p5.48xlarge", "g5.xlarge", "g6.xlarge"]
            .map(String::from)
            .to_vec(),
        capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
        ..PoolRequirements::default()
    };
    let list = p.offerings(&all).await.expect("offerings");
    let one = |ty: &str| {
        list.iter()
            .find(|o| o.instance_type == ty && o.capacity_type == CapacityType::OnDemand)
            .unwrap_or_else(|| panic!("{ty} offered"))
    };
    for (ty, model, count, mib) in [
        ("p4d.24xlarge", "A100", 8, 40_960),
        ("p5.48xlarge", "H100", 8, 81_920),
        ("g5.xlarge", "A10G", 1, 22_888),
        ("g6.xlarge", "L4", 1, 22_888),
    ] {
        let o = one(ty);
        assert_eq!(
            o.gpu_model.as_ref().map(|m| m.as_str()),
            Some(model),
            "{ty}"
        );
        assert_eq!((o.gpu_count, o.gpu_memory_mib), (count, mib), "{ty}");
        assert_eq!(o.resources.gpu_millis, u64::from(count) * 1000);
        assert!(o.price.is_some(), "{ty} has a list price");
    }
    assert!(one("p4d.24xlarge").placement_groups, "EFA");
    // only zones the NodeClass has subnets in
    assert!(
        list.iter()
            .all(|o| o.zone == "us-east-1a" || o.zone == "us-east-1b")
    );
    assert!(list.iter().any(|o| o.capacity_type == CapacityType::Spot));
    // a pool requirement filters
    let h100 = PoolRequirements {
        gpu_models: vec![GpuModel::new("H100")],
        ..PoolRequirements::default()
    };
    let list = p.offerings(&h100).await.expect("offerings");
    assert!(!list.is_empty());
    assert!(
        list.iter().all(|o| o.instance_type.starts_with("p5")),
        "{list:?}"
    );
}

#[tokio::test]
async fn a_gang_of_four_is_launched_tagged_listed_and_terminated() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    let mut pids = Vec::new();
    for i in 0..4 {
        let r = request(
            &format!("a100-big-{i}"),
            &format!("key-{i}"),
            key("p4d.24xlarge", "us-east-1a", CapacityType::OnDemand),
        );
        let inst = p.launch(&r).await.expect("launch");
        assert!(
            inst.provider_id.starts_with("aws:///us-east-1a/i-"),
            "{}",
            inst.provider_id
        );
        assert_eq!(
            inst.pool_node.as_deref(),
            Some(format!("a100-big-{i}").as_str())
        );
        pids.push(inst.provider_id);
    }
    let listed = p.list("prod").await.expect("list");
    assert_eq!(listed.len(), 4);
    for i in &listed {
        assert_eq!(i.tags[tags::CLUSTER], "prod");
        assert_eq!(i.tags[tags::POOL], "a100");
        assert_eq!(i.tags[tags::GANG], "team-a/big");
        assert_eq!(i.tags["Name"], i.tags[tags::POOL_NODE]);
        assert_eq!(i.tags["cost-center"], "42");
        assert_eq!(i.offering.instance_type, "p4d.24xlarge");
    }
    // (listing by cluster, terminating twice and unknown ids are the
    // conformance suite's); a terminated instance reads back as such
    p.terminate(&pids[0]).await.expect("terminate");
    let gone = p.describe(&pids[0]).await.expect("describe");
    assert_eq!(gone.state, InstanceState::Terminated);
}

#[tokio::test]
async fn capacity_errors_carry_ec2_s_words_and_a_whole_type_can_be_short() {
    // (naming the offering and leaving nothing behind are the conformance
    // suite's)
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    moto.control("POST", "/ice?offering=p4d.24xlarge@us-east-1a");
    let asked = key("p4d.24xlarge", "us-east-1a", CapacityType::Spot);
    match p.launch(&request("n-0", "k-0", asked.clone())).await {
        Err(ProviderError::InsufficientCapacity { message, .. }) => {
            assert!(
                message.contains("InsufficientInstanceCapacity"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // the same type in another zone is fine
    p.launch(&request(
        "n-1",
        "k-1",
        key("p4d.24xlarge", "us-east-1b", CapacityType::Spot),
    ))
    .await
    .expect("other zone");
    // a whole type
    moto.control("POST", "/ice?offering=p5.48xlarge");
    for zone in ["us-east-1a", "us-east-1b"] {
        let r = p
            .launch(&request(
                "n-2",
                "k-2",
                key("p5.48xlarge", zone, CapacityType::OnDemand),
            ))
            .await;
        assert!(
            matches!(r, Err(ProviderError::InsufficientCapacity { .. })),
            "{r:?}"
        );
    }
}

#[tokio::test]
async fn throttling_is_retried_and_permanent_errors_are_not() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    moto.control("POST", "/throttle?n=2");
    p.launch(&request(
        "n-0",
        "k-0",
        key("g5.xlarge", "us-east-1a", CapacityType::OnDemand),
    ))
    .await
    .expect("succeeds after two throttled attempts");
    assert_eq!(moto.run_instances_calls(), 3);
    // bounded: more throttling than attempts is a Transient error
    moto.control("POST", "/reset");
    moto.control("POST", "/throttle?n=100");
    let r = p
        .launch(&request(
            "n-1",
            "k-1",
            key("g5.xlarge", "us-east-1a", CapacityType::OnDemand),
        ))
        .await;
    assert!(matches!(r, Err(ProviderError::Transient { .. })), "{r:?}");
    assert_eq!(moto.run_instances_calls(), 5, "AwsOptions::max_attempts");
    moto.control("POST", "/reset");
    moto.control("POST", "/fail?code=UnauthorizedOperation");
    match p
        .launch(&request(
            "n-2",
            "k-2",
            key("g5.xlarge", "us-east-1a", CapacityType::OnDemand),
        ))
        .await
    {
        Err(ProviderError::Permanent { message }) => {
            assert!(message.contains("UnauthorizedOperation"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        moto.run_instances_calls(),
        1,
        "a permanent error is not retried"
    );
}

/// A spot launch on an account without EC2's spot service-linked role, by
/// a role that may not create it, is refused with a typed error that names
/// the step; on-demand is unaffected; once the role exists (the step done),
/// or when muster's role may create it, spot launches succeed.
#[tokio::test]
async fn spot_without_the_service_linked_role_names_the_step_and_works_once_it_exists() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    moto.control("POST", "/spot-role?state=absent");
    let spot = key("g5.xlarge", "us-east-1a", CapacityType::Spot);
    match p.launch(&request("s-0", "k-s0", spot.clone())).await {
        Err(ProviderError::CapacityTypeNotPermitted {
            capacity_type,
            message,
        }) => {
            assert_eq!(capacity_type, CapacityType::Spot);
            assert!(
                message.contains("AuthFailure.ServiceLinkedRoleCreationNotPermitted"),
                "{message}"
            );
            assert!(
                message.contains(
                    "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com"
                ),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(moto.run_instances_calls(), 1, "not retried");
    p.launch(&request(
        "o-0",
        "k-o0",
        key("g5.xlarge", "us-east-1a", CapacityType::OnDemand),
    ))
    .await
    .expect("on-demand needs no such role");
    // the operator runs the documented step
    moto.control("POST", "/spot-role?state=exists");
    p.launch(&request("s-1", "k-s1", spot.clone()))
        .await
        .expect("spot once the role exists");
    // a role that may create it: EC2 creates it at the first spot launch
    moto.reset();
    moto.control("POST", "/spot-role?state=creatable");
    p.launch(&request("s-2", "k-s2", spot))
        .await
        .expect("spot, creating the role");
    let created: Vec<_> = moto
        .log()
        .into_iter()
        .filter(|e| e["createsServiceLinkedRole"] == "spot.amazonaws.com")
        .collect();
    assert_eq!(created.len(), 1, "the implied authorization is logged once");
}

/// In a zone with several selected subnets a launch goes into a private
/// one (no public address on launch) before a public one, however many
/// more addresses the public one has; the resolution reports what the
/// choice reads.
#[tokio::test]
async fn launches_go_into_the_zone_s_private_subnet_first() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let c = moto.clients().await;
    let vpc = c
        .ec2
        .describe_vpcs()
        .send()
        .await
        .expect("vpcs")
        .vpcs()
        .first()
        .and_then(|v| v.vpc_id())
        .expect("the default VPC")
        .to_string();
    // a small private subnet beside the default (public) one of us-east-1a
    let private = c
        .ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("172.31.200.0/28")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("subnet")
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_string();
    c.ec2
        .create_tags()
        .resources(&private)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("team")
                .value("gpu")
                .build(),
        )
        .send()
        .await
        .expect("tag");
    let p = provider(&moto, &spec).await;
    let r = p.resolve().await.expect("resolve");
    let in_a: Vec<_> = r
        .subnets
        .iter()
        .filter(|s| s.zone == "us-east-1a")
        .collect();
    assert_eq!(in_a.len(), 2, "{in_a:?}");
    let public = in_a
        .iter()
        .find(|s| s.id != private)
        .expect("the default subnet");
    assert_eq!(
        public.public,
        Some(true),
        "moto's default subnets are public"
    );
    let mine = in_a.iter().find(|s| s.id == private).expect("private");
    assert_eq!(mine.public, Some(false));
    assert!(
        public.available_ips > mine.available_ips,
        "{public:?} {mine:?}"
    );
    let described = launch_one(&p, &c.ec2).await;
    let subnet = described.subnet_id().expect("subnet of the instance");
    assert_eq!(subnet, private);
}

#[tokio::test]
async fn orphan_collection_terminates_exactly_the_orphans() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    let mut pids = Vec::new();
    for i in 0..3 {
        let r = request(
            &format!("pn-{i}"),
            &format!("k-{i}"),
            key("g6.xlarge", "us-east-1a", CapacityType::OnDemand),
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
    let now = owned.iter().map(|o| o.launched_at).max().unwrap_or(Time(0)) + Dur::secs(3600);
    let doomed = orphans(&owned, &known, now, Dur::secs(600));
    assert_eq!(doomed, [pids[2].clone()]);
    for pid in &doomed {
        p.terminate(pid).await.expect("terminate");
    }
    let left: Vec<String> = p
        .list("prod")
        .await
        .expect("list")
        .into_iter()
        .map(|i| i.provider_id)
        .collect();
    let mut want = vec![pids[0].clone(), pids[1].clone()];
    want.sort();
    assert_eq!(left, want);
    // within the grace period nothing is collected
    assert!(
        orphans(
            &owned,
            &Known::default(),
            owned[0].launched_at,
            Dur::secs(600)
        )
        .is_empty()
    );
}

/// Orphan collection of cluster `prod` sees only instances tagged exactly
/// `prod`: not those of `prod-eu` or `pro`, and a name with EC2's filter
/// wildcards matches no other cluster's.
#[tokio::test]
async fn orphan_collection_sees_only_its_own_cluster_name() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    let mut by_cluster: BTreeMap<&str, String> = BTreeMap::new();
    for (i, cluster) in ["prod", "prod-eu", "pro"].into_iter().enumerate() {
        let mut r = request(
            &format!("pn-{i}"),
            &format!("k-{i}"),
            key("g6.xlarge", "us-east-1a", CapacityType::OnDemand),
        );
        r.cluster = cluster.into();
        by_cluster.insert(cluster, p.launch(&r).await.expect("launch").provider_id);
    }
    let owned = owned_instances(&p, "prod").await.expect("list");
    let listed: Vec<&str> = owned.iter().map(|o| o.provider_id.as_str()).collect();
    assert_eq!(listed, [by_cluster["prod"].as_str()]);
    // nothing accounted for, long past the grace: only prod's is an orphan
    let now = owned[0].launched_at + Dur::secs(3600);
    assert_eq!(
        orphans(&owned, &Known::default(), now, Dur::secs(600)),
        [by_cluster["prod"].clone()]
    );
    for wildcard in ["prod*", "pro?", "*"] {
        let owned = owned_instances(&p, wildcard).await.expect("list");
        assert!(owned.is_empty(), "{wildcard} lists {owned:?}");
    }
}

#[tokio::test]
async fn interruption_messages_reach_the_right_instance_and_are_deleted() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let c = moto.clients().await;
    let url = c
        .sqs
        .create_queue()
        .queue_name("muster-interruptions")
        .send()
        .await
        .expect("queue")
        .queue_url()
        .expect("url")
        .to_string();
    let mut options = moto.options();
    options.interruption_queue = Some(url.clone());
    let p = provider_with(&spec, options).await;
    let a = p
        .launch(&request(
            "pn-a",
            "k-a",
            key("g6.xlarge", "us-east-1b", CapacityType::Spot),
        ))
        .await
        .expect("launch");
    let b = p
        .launch(&request(
            "pn-b",
            "k-b",
            key("g6.xlarge", "us-east-1a", CapacityType::Spot),
        ))
        .await
        .expect("launch");
    let id = |pid: &str| pid.rsplit('/').next().unwrap_or_default().to_string();
    for body in [
        json!({"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
               "time": "2026-11-23T10:00:05Z", "detail": {"instance-id": id(&a.provider_id), "instance-action": "terminate"}}).to_string(),
        json!({"detail-type": "EC2 Instance Rebalance Recommendation", "source": "aws.ec2",
               "detail": {"instance-id": id(&b.provider_id)}}).to_string(),
        json!({"detail-type": "AWS Health Event", "source": "aws.health",
               "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange",
                          "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                          "affectedEntities": [{"entityValue": id(&a.provider_id)}, {"entityValue": id(&b.provider_id)}]}}).to_string(),
        json!({"detail-type": "AWS Health Event", "source": "aws.health",
               "detail": {"service": "EC2", "eventTypeCategory": "issue",
                          "affectedEntities": [{"entityValue": id(&a.provider_id)}]}}).to_string(),
        "not an event".to_string(),
    ] {
        c.sqs
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("send");
    }
    let mut got = p.interruptions().await.expect("interruptions");
    got.sort_by(|x, y| (&x.provider_id, x.kind.as_str()).cmp(&(&y.provider_id, y.kind.as_str())));
    let mut want = vec![
        (a.provider_id.clone(), InterruptionKind::SpotInterruption),
        (
            b.provider_id.clone(),
            InterruptionKind::RebalanceRecommendation,
        ),
        (
            a.provider_id.clone(),
            InterruptionKind::ScheduledMaintenance,
        ),
        (
            b.provider_id.clone(),
            InterruptionKind::ScheduledMaintenance,
        ),
    ];
    want.sort_by(|x, y| (&x.0, x.1.as_str()).cmp(&(&y.0, y.1.as_str())));
    let got_pairs: Vec<(String, InterruptionKind)> = got
        .iter()
        .map(|n| (n.provider_id.clone(), n.kind))
        .collect();
    assert_eq!(got_pairs, want);
    let spot = got
        .iter()
        .find(|n| n.kind == InterruptionKind::SpotInterruption)
        .expect("spot");
    assert_eq!(spot.at, Time(1_795_428_005));
    // every message was deleted, the junk one too
    assert!(p.interruptions().await.expect("again").is_empty());
    let left = c
        .sqs
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .expect("receive");
    assert!(left.messages().is_empty());
}

#[tokio::test]
async fn selectors_that_match_nothing_are_named() {
    let moto = Moto::start();
    let mut spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    let r = p.resolve().await.expect("resolves");
    assert_eq!(r.zones, ["us-east-1a", "us-east-1b"]);
    assert_eq!(r.subnets.len(), 2);
    assert_eq!(r.security_groups.len(), 1);
    assert_eq!(r.images.len(), 1);
    spec["aws"]["subnetSelectorTerms"] = json!([{"tags": {"team": "none"}}]);
    let p = provider(&moto, &spec).await;
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => {
            assert!(
                what.contains("subnetSelectorTerms") && what.contains("team=none"),
                "{what}"
            )
        }
        other => panic!("{other:?}"),
    }
    let mut spec = world_again(&spec);
    spec["aws"]["amiSelectorTerms"] = json!([{"id": "ami-0000000000000dead"}]);
    let p = provider(&moto, &spec).await;
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => {
            assert!(
                what.contains("amiSelectorTerms") && what.contains("ami-0000000000000dead"),
                "{what}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn security_groups_are_selected_by_id_name_or_tags_and_all_attached() {
    let moto = Moto::start();
    let mut spec = world(&moto).await;
    let c = moto.clients().await;
    let group = |name: &'static str, tags: Vec<(&'static str, &'static str)>| {
        let ec2 = c.ec2.clone();
        async move {
            let g = ec2
                .create_security_group()
                .group_name(name)
                .description(name)
                .send()
                .await
                .expect("security group");
            let id = g.group_id().expect("group id").to_string();
            for (k, v) in tags {
                ec2.create_tags()
                    .resources(&id)
                    .tags(aws_sdk_ec2::types::Tag::builder().key(k).value(v).build())
                    .send()
                    .await
                    .expect("tag");
            }
            id
        }
    };
    // what the cluster's nodes need besides the cluster security group
    let efs = group("efs-clients", vec![]).await;
    let monitoring = group("monitoring", vec![("role", "scrape")]).await;
    let by_id = group("by-id", vec![]).await;
    // a name that matches, tags that do not: both must hold within a term
    let wrong_tag = group("shared-wrong-tag", vec![("env", "dev")]).await;
    spec["aws"]["securityGroupSelectorTerms"] = json!([
        {"tags": {"team": "gpu"}},
        {"name": "efs-clients"},
        {"tags": {"role": "*"}},
        {"id": by_id},
        {"name": "shared-*", "tags": {"env": "prod"}},
    ]);
    let p = provider(&moto, &spec).await;
    let r = p.resolve().await.expect("resolves");
    let got: BTreeSet<String> = r.security_groups.iter().map(|g| g.id.clone()).collect();
    let gpu_nodes = r
        .security_groups
        .iter()
        .find(|g| g.name.as_deref() == Some("gpu-nodes"))
        .expect("the tagged group")
        .id
        .clone();
    let want: BTreeSet<String> = [gpu_nodes, efs.clone(), monitoring, by_id]
        .into_iter()
        .collect();
    assert_eq!(got, want);
    assert!(!got.contains(&wrong_tag));
    // every selected group is attached to the launched instance
    let described = launch_one(&p, &c.ec2).await;
    let attached: BTreeSet<String> = described
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(String::from))
        .collect();
    assert_eq!(attached, want);
    // terms that match nothing are named, name and tags alike
    spec["aws"]["securityGroupSelectorTerms"] =
        json!([{"name": "no-such-group"}, {"name": "efs-clients", "tags": {"team": "none"}}]);
    let p = provider(&moto, &spec).await;
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => assert_eq!(
            what,
            "spec.aws.securityGroupSelectorTerms (name no-such-group; name efs-clients tags team=none)"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_full_subnet_and_the_zone_it_leaves_without_one_are_reported() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let c = moto.clients().await;
    let vpc = c
        .ec2
        .describe_vpcs()
        .send()
        .await
        .expect("vpcs")
        .vpcs()
        .iter()
        .find(|v| v.is_default() == Some(true))
        .and_then(|v| v.vpc_id())
        .expect("default VPC")
        .to_string();
    // a /28 in us-east-1c: 11 addresses, all taken by one interface
    let small = c
        .ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("172.31.200.0/28")
        .availability_zone("us-east-1c")
        .send()
        .await
        .expect("subnet")
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_string();
    c.ec2
        .create_tags()
        .resources(&small)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("team")
                .value("gpu")
                .build(),
        )
        .send()
        .await
        .expect("tag");
    c.ec2
        .create_network_interface()
        .subnet_id(&small)
        .secondary_private_ip_address_count(10)
        .send()
        .await
        .expect("interface");
    let p = provider(&moto, &spec).await;
    let r = p.resolve().await.expect("resolves");
    let full = r.subnets.iter().find(|s| s.id == small).expect("resolved");
    assert_eq!(full.available_ips, Some(0));
    let u = muster_provider_api::ResolvedSubnet::usability(&r.subnets);
    assert_eq!(u.full, [(small.clone(), "us-east-1c".to_string())]);
    assert_eq!(u.zones_without_subnet, ["us-east-1c"]);
    assert!(!u.all_usable());
}

/// The spec with its subnets selectable again.
fn world_again(spec: &serde_json::Value) -> serde_json::Value {
    let mut s = spec.clone();
    s["aws"]["subnetSelectorTerms"] = json!([{"tags": {"team": "gpu"}}]);
    s
}

/// The `NetworkInterface.N.<field>` values of a logged RunInstances call,
/// by interface.
fn interfaces(entry: &serde_json::Value) -> BTreeMap<u32, BTreeMap<String, String>> {
    let mut out: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
    for (k, v) in entry["params"].as_object().into_iter().flatten() {
        let Some(rest) = k.strip_prefix("NetworkInterface.") else {
            continue;
        };
        let Some((n, field)) = rest.split_once('.') else {
            continue;
        };
        let value = v[0].as_str().unwrap_or_default().to_string();
        if let Ok(n) = n.parse() {
            out.entry(n).or_default().insert(field.to_string(), value);
        }
    }
    out
}

#[tokio::test]
async fn a_gang_in_a_placement_group_gets_the_group_and_every_efa_interface() {
    let moto = Moto::start();
    let spec = world(&moto).await;
    let p = provider(&moto, &spec).await;
    moto.reset();
    let in_group = |name: &str, ty: &str, zone: &str| {
        let mut r = request(
            name,
            &format!("k-{name}"),
            key(ty, zone, CapacityType::OnDemand),
        );
        r.placement_group = Some("team-a-big-pg0".into());
        r
    };
    p.launch(&in_group("a", "p4d.24xlarge", "us-east-1a"))
        .await
        .expect("first node: the group is made");
    p.launch(&in_group("b", "p4d.24xlarge", "us-east-1a"))
        .await
        .expect("second node: the group exists");
    let log = moto.log();
    let creates: Vec<_> = log
        .iter()
        .filter(|e| e["action"] == "CreatePlacementGroup")
        .collect();
    assert_eq!(
        creates.len(),
        2,
        "each launch asks; the second is a duplicate"
    );
    assert_eq!(
        creates[0]["params"]["GroupName"][0], "muster-prod-team-a-big-pg0",
        "named per cluster"
    );
    assert_eq!(creates[0]["params"]["Strategy"][0], "cluster");
    let runs: Vec<_> = log
        .iter()
        .filter(|e| e["action"] == "RunInstances")
        .collect();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        assert_eq!(
            run["params"]["Placement.GroupName"][0],
            "muster-prod-team-a-big-pg0"
        );
        assert!(
            run["params"].get("SubnetId").is_none(),
            "subnet moves to the interfaces"
        );
        let nics = interfaces(run);
        // p4d.24xlarge: 4 network cards, 4 EFA interfaces (DescribeInstanceTypes)
        assert_eq!(nics.len(), 4, "{nics:?}");
        for (i, nic) in nics.values().enumerate() {
            assert_eq!(nic["InterfaceType"], "efa");
            assert_eq!(nic["NetworkCardIndex"], i.to_string());
            assert_eq!(nic["DeviceIndex"], if i == 0 { "0" } else { "1" });
            assert!(nic.contains_key("SubnetId") && nic.contains_key("SecurityGroupId.1"));
        }
    }
    assert_eq!(
        p.placement_groups("prod").await.expect("groups"),
        ["team-a-big-pg0"]
    );
    assert!(
        p.placement_groups("staging")
            .await
            .expect("groups")
            .is_empty()
    );
    // a type without EFA in a group: the group, the default interface only
    moto.reset();
    p.launch(&in_group("c", "g5.xlarge", "us-east-1a"))
        .await
        .expect("g5 in the group");
    let run = moto
        .log()
        .into_iter()
        .find(|e| e["action"] == "RunInstances")
        .expect("run");
    assert!(interfaces(&run).is_empty());
    assert!(run["params"].get("SubnetId").is_some());
    // a cluster placement group lives in one zone: the fake refuses another
    let other_zone = p.launch(&in_group("d", "p4d.24xlarge", "us-east-1b")).await;
    assert!(
        matches!(&other_zone, Err(ProviderError::Permanent { message }) if message.contains("cannot span")),
        "{other_zone:?}"
    );
    // a group with live instances is not deleted (EC2: InUse, tried again)
    let in_use = p.delete_placement_group("prod", "team-a-big-pg0").await;
    assert!(
        matches!(&in_use, Err(ProviderError::Transient { message, .. }) if message.contains("InvalidPlacementGroup.InUse")),
        "{in_use:?}"
    );
    for i in p.list("prod").await.expect("list") {
        p.terminate(&i.provider_id).await.expect("terminate");
    }
    p.delete_placement_group("prod", "team-a-big-pg0")
        .await
        .expect("deleted once empty");
    p.delete_placement_group("prod", "team-a-big-pg0")
        .await
        .expect("gone is success");
    assert!(p.placement_groups("prod").await.expect("groups").is_empty());
    // a launch into a group deleted under it answers a retryable error
    let gone = {
        let c = moto.clients().await;
        c.ec2
            .run_instances()
            .image_id(
                spec["aws"]["amiSelectorTerms"][0]["id"]
                    .as_str()
                    .unwrap_or_default(),
            )
            .instance_type(aws_sdk_ec2::types::InstanceType::P4d24xlarge)
            .placement(
                aws_sdk_ec2::types::Placement::builder()
                    .group_name("muster-prod-nothing")
                    .build(),
            )
            .min_count(1)
            .max_count(1)
            .send()
            .await
    };
    assert!(
        gone.as_ref()
            .err()
            .and_then(|e| aws_sdk_ec2::error::ProvideErrorMetadata::code(e))
            == Some("InvalidPlacementGroup.Unknown"),
        "{gone:?}"
    );
}

/// The fake's EFA rules (moto_server.py): each one refuses what EC2 refuses.
#[tokio::test]
async fn the_fake_refuses_efa_requests_ec2_refuses() {
    use aws_sdk_ec2::types::{InstanceNetworkInterfaceSpecification as Nic, InstanceType};
    let moto = Moto::start();
    let spec = world(&moto).await;
    let c = moto.clients().await;
    let ami = spec["aws"]["amiSelectorTerms"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let subnets = c.ec2.describe_subnets().send().await.expect("subnets");
    let subnet = subnets.subnets()[0]
        .subnet_id()
        .unwrap_or_default()
        .to_string();
    let nic = |card: i32, device: i32| {
        Nic::builder()
            .network_card_index(card)
            .device_index(device)
            .interface_type("efa")
            .subnet_id(&subnet)
            .build()
    };
    let run = |ty: InstanceType, nics: Vec<Nic>, sg: bool| {
        let mut r = c
            .ec2
            .run_instances()
            .image_id(&ami)
            .instance_type(ty)
            .min_count(1)
            .max_count(1)
            .set_network_interfaces(Some(nics));
        if sg {
            r = r.security_group_ids("sg-1");
        }
        r.send()
    };
    let code = |r: &Result<_, aws_sdk_ec2::error::SdkError<_, _>>| -> Option<String> {
        r.as_ref().err().and_then(
            |e: &aws_sdk_ec2::error::SdkError<
                aws_sdk_ec2::operation::run_instances::RunInstancesError,
                _,
            >| { aws_sdk_ec2::error::ProvideErrorMetadata::code(e).map(String::from) },
        )
    };
    let ok = run(InstanceType::P4d24xlarge, vec![nic(0, 0), nic(1, 1)], false).await;
    assert!(ok.is_ok(), "{ok:?}");
    let cases = [
        (
            run(InstanceType::G5Xlarge, vec![nic(0, 0)], false).await,
            "InvalidParameterValue",
            "EFA on a type without it",
        ),
        (
            run(
                InstanceType::P4d24xlarge,
                vec![nic(0, 0), nic(1, 1), nic(2, 1), nic(3, 1), nic(3, 1)],
                false,
            )
            .await,
            "InvalidParameterValue",
            "more than MaximumEfaInterfaces",
        ),
        (
            run(InstanceType::P4d24xlarge, vec![nic(0, 0), nic(4, 1)], false).await,
            "InvalidParameterValue",
            "a card past MaximumNetworkCards",
        ),
        (
            run(InstanceType::P4d24xlarge, vec![nic(0, 1), nic(1, 1)], false).await,
            "InvalidParameterValue",
            "no primary interface",
        ),
        (
            run(InstanceType::P4d24xlarge, vec![nic(0, 0)], true).await,
            "InvalidParameterCombination",
            "interfaces with instance-level groups",
        ),
    ];
    for (result, want, what) in &cases {
        assert_eq!(code(result).as_deref(), Some(*want), "{what}: {result:?}");
    }
}
