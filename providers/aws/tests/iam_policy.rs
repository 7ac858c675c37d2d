//! The documented IAM policy (`docs/aws-iam-policy.json`) against every call
//! the provider makes: a moto run records each AWS call (launcher
//! `GET /log`), [`iam::calls`] turns it into the authorizations AWS makes
//! for it, and [`iam::policy`] evaluates the policy on each. A call the
//! policy would deny, or one without an authorization model, fails. The
//! file's `${CLUSTER}` placeholder is filled in with the name the runs tag
//! their instances with, as the EKS guide's `sed` does.

mod iam;

use std::collections::BTreeMap;

use iam::calls::requests;
use iam::policy::{Decision, Request, evaluate, wildcard};
use muster_planner::{CapacityType, OfferingKey, PoolRequirements, Provider};
use muster_provider_api::{CloudProvider, LaunchRequest};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use serde_json::{Value, json};

/// The documented policy as written, with its placeholder.
const POLICY: &str = include_str!("../../../docs/aws-iam-policy.json");

/// The cluster name the runs tag their instances with.
const CLUSTER: &str = "prod";

/// The policy for cluster `cluster`: the placeholder `${CLUSTER}` replaced.
fn policy_for(cluster: &str) -> Value {
    serde_json::from_str(&POLICY.replace("${CLUSTER}", cluster)).expect("the policy is JSON")
}

fn policy() -> Value {
    policy_for(CLUSTER)
}

fn denials(policy: &Value, log: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for entry in log {
        match requests(entry) {
            Ok(reqs) => {
                for r in reqs {
                    match evaluate(policy, &r) {
                        Ok(Decision::Allow) => {}
                        Ok(d) => out.push(format!(
                            "{} on {}: {d:?} ({:?})",
                            r.action, r.resource, r.context
                        )),
                        Err(e) => out.push(format!("{} on {}: {e}", r.action, r.resource)),
                    }
                }
            }
            Err(e) => out.push(e),
        }
    }
    out
}

#[test]
fn the_evaluator_follows_the_iam_evaluation_rules() {
    assert!(wildcard(
        "arn:aws:ec2:*:*:instance/*",
        "arn:aws:ec2:us-east-1:1:instance/i-1",
        false
    ));
    assert!(!wildcard(
        "arn:aws:ec2:*:*:instance/*",
        "arn:aws:ec2:us-east-1:1:volume/v-1",
        false
    ));
    assert!(wildcard("ec2:Describe*", "EC2:describeimages", true));
    assert!(wildcard("i-?", "i-1", false) && !wildcard("i-?", "i-12", false));
    assert!(
        !wildcard("Role/x", "role/x", false),
        "resources compare case-sensitively"
    );
    let p = json!({"Statement": [
        {"Sid": "A", "Effect": "Allow", "Action": "s:Do", "Resource": "*",
         "Condition": {"StringLike": {"aws:RequestTag/team": "a*"}}},
        {"Sid": "All", "Effect": "Allow", "Action": "s:Keys", "Resource": "*",
         "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["team", "env"]}}},
        {"Sid": "Any", "Effect": "Allow", "Action": "s:Any", "Resource": "*",
         "Condition": {"ForAnyValue:StringEquals": {"aws:TagKeys": "team"}}},
        {"Sid": "NoProd", "Effect": "Deny", "Action": "s:*", "Resource": "*",
         "Condition": {"StringEquals": {"aws:RequestTag/env": "prod"}}}
    ]});
    let ok = |r: &Request| evaluate(&p, r).expect("evaluates");
    let tagged = |k: &str, v: &str| {
        Request::new("s:Do", "x").with(&format!("aws:RequestTag/{k}"), vec![v.into()])
    };
    assert_eq!(ok(&tagged("team", "alpha")), Decision::Allow);
    assert_eq!(ok(&tagged("team", "beta")), Decision::ImplicitDeny);
    // an absent key fails a single-valued operator
    assert_eq!(ok(&Request::new("s:Do", "x")), Decision::ImplicitDeny);
    // explicit deny wins over the allow
    let both = tagged("team", "alpha").with("aws:RequestTag/env", vec!["prod".into()]);
    assert_eq!(ok(&both), Decision::ExplicitDeny("NoProd".into()));
    // ForAllValues: vacuously true without the key, false with a key outside the set
    assert_eq!(ok(&Request::new("s:Keys", "x")), Decision::Allow);
    let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    assert_eq!(
        ok(&Request::new("s:Keys", "x").with("aws:TagKeys", keys(&["team"]))),
        Decision::Allow
    );
    assert_eq!(
        ok(&Request::new("s:Keys", "x").with("aws:TagKeys", keys(&["team", "owner"]))),
        Decision::ImplicitDeny
    );
    // ForAnyValue: false without the key
    assert_eq!(ok(&Request::new("s:Any", "x")), Decision::ImplicitDeny);
    assert_eq!(
        ok(&Request::new("s:Any", "x").with("aws:TagKeys", keys(&["x", "team"]))),
        Decision::Allow
    );
    // condition keys compare case-insensitively
    assert_eq!(
        ok(&Request::new("s:Do", "x").with("AWS:REQUESTTAG/TEAM", vec!["a".into()])),
        Decision::Allow
    );
    // an operator the evaluator does not know is an error, not a silent match
    let unknown = json!({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*",
        "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}}]});
    assert!(evaluate(&unknown, &Request::new("s:Do", "x")).is_err());
}

/// A RunInstances call as the launcher logs it.
fn run_instances(tagged: &[&str], spot: bool) -> Value {
    let mut params = serde_json::Map::new();
    let mut put = |k: &str, v: &str| {
        params.insert(k.into(), json!([v]));
    };
    put("ImageId", "ami-1");
    put("SubnetId", "subnet-1");
    put("SecurityGroupId.1", "sg-1");
    for (n, kind) in tagged.iter().enumerate() {
        put(&format!("TagSpecification.{}.ResourceType", n + 1), kind);
        put(
            &format!("TagSpecification.{}.Tag.1.Key", n + 1),
            "muster.dev/cluster",
        );
        put(&format!("TagSpecification.{}.Tag.1.Value", n + 1), CLUSTER);
    }
    if spot {
        put("InstanceMarketOptions.MarketType", "spot");
    }
    json!({"service": "ec2", "action": "RunInstances", "region": "us-east-1",
           "account": "123456789012", "params": params,
           "passedRoles": ["arn:aws:iam::123456789012:role/muster-node-role"]})
}

/// A launch into a capacity reservation is authorized on the reservation
/// too (Service Authorization Reference, `RunInstances`: resource type
/// `capacity-reservation`).
#[test]
fn a_launch_into_a_capacity_reservation_names_the_reservation() {
    let mut entry = run_instances(&["instance", "volume", "network-interface"], false);
    entry["params"]["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] =
        json!(["cr-0abc"]);
    let reqs = requests(&entry).expect("modelled");
    assert!(
        reqs.iter().any(|r| r.action == "ec2:RunInstances"
            && r.resource == "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0abc"),
        "{reqs:?}"
    );
}

#[test]
fn a_launch_that_leaves_a_created_resource_untagged_is_denied() {
    let p = policy();
    let all = ["instance", "volume", "network-interface"];
    assert!(denials(&p, &[run_instances(&all, false)]).is_empty());
    let no_eni = denials(&p, &[run_instances(&["instance", "volume"], false)]);
    assert_eq!(no_eni.len(), 1, "{no_eni:?}");
    assert!(no_eni[0].contains("network-interface/*"), "{no_eni:?}");
    let spot_untagged = denials(&p, &[run_instances(&all, true)]);
    assert_eq!(spot_untagged.len(), 1, "{spot_untagged:?}");
    assert!(
        spot_untagged[0].contains("spot-instances-request/*"),
        "{spot_untagged:?}"
    );
    let spot = [
        "instance",
        "volume",
        "network-interface",
        "spot-instances-request",
    ];
    assert!(denials(&p, &[run_instances(&spot, true)]).is_empty());
    // a role outside muster-node-* cannot be passed
    let mut other_role = run_instances(&all, false);
    other_role["passedRoles"] = json!(["arn:aws:iam::123456789012:role/admin"]);
    assert_eq!(denials(&p, &[other_role]).len(), 1);
}

/// The KMS statements (`docs/aws-iam-policy-kms.json`, attached when a
/// NodeClass encrypts volumes with its own key) for the key `arn`.
fn kms_policy(arn: &str) -> Value {
    serde_json::from_str(
        &include_str!("../../../docs/aws-iam-policy-kms.json").replace("${KMS_KEY_ARN}", arn),
    )
    .expect("the KMS policy is JSON")
}

/// Both policies as one (IAM unions the statements of a role's policies).
fn with(mut base: Value, extra: &Value) -> Value {
    let more = extra["Statement"].as_array().cloned().unwrap_or_default();
    base["Statement"]
        .as_array_mut()
        .expect("statements")
        .extend(more);
    base
}

#[test]
fn a_volume_key_needs_the_kms_statements_for_that_key_only() {
    let key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    let mut launch = run_instances(&["instance", "volume", "network-interface"], false);
    launch["params"]["BlockDeviceMapping.1.DeviceName"] = json!(["/dev/xvda"]);
    launch["params"]["BlockDeviceMapping.1.Ebs.KmsKeyId"] = json!([key]);
    let base = denials(&policy(), std::slice::from_ref(&launch));
    assert_eq!(base.len(), 4, "without the KMS statements: {base:?}");
    assert!(
        base.iter()
            .all(|d| d.starts_with("kms:") && d.contains(key)),
        "{base:?}"
    );
    assert!(
        denials(
            &with(policy(), &kms_policy(key)),
            std::slice::from_ref(&launch)
        )
        .is_empty()
    );
    // the statements for another key do not cover this one
    let other = "arn:aws:kms:us-east-1:123456789012:key/ffff";
    assert_eq!(
        denials(&with(policy(), &kms_policy(other)), &[launch]).len(),
        4
    );
}

#[test]
fn a_node_role_under_a_path_may_be_passed() {
    let all = ["instance", "volume", "network-interface"];
    for role in [
        "arn:aws:iam::123456789012:role/muster-node-prod",
        "arn:aws:iam::123456789012:role/eks/nodes/muster-node-prod",
    ] {
        let mut launch = run_instances(&all, false);
        launch["passedRoles"] = json!([role]);
        assert!(denials(&policy(), &[launch]).is_empty(), "{role}");
    }
    let mut admin = run_instances(&all, false);
    admin["passedRoles"] = json!(["arn:aws:iam::123456789012:role/eks/admin"]);
    assert_eq!(denials(&policy(), &[admin]).len(), 1);
}

/// Creating the spot service-linked role is allowed for that role only:
/// without the policy's statement the implied authorization is denied, and
/// the statement allows no other service's role.
#[test]
fn the_spot_service_linked_role_may_be_created_and_no_other() {
    let spot = [
        "instance",
        "volume",
        "network-interface",
        "spot-instances-request",
    ];
    let mut creating = run_instances(&spot, true);
    creating["createsServiceLinkedRole"] = json!("spot.amazonaws.com");
    let p = policy();
    assert!(denials(&p, std::slice::from_ref(&creating)).is_empty());
    // the statement removed: denied
    let mut without = p.clone();
    without["Statement"]
        .as_array_mut()
        .expect("statements")
        .retain(|s| s["Sid"] != "CreateTheSpotServiceLinkedRole");
    let denied = denials(&without, std::slice::from_ref(&creating));
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert!(
        denied[0].starts_with("iam:CreateServiceLinkedRole on arn:aws:iam::123456789012:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot"),
        "{denied:?}"
    );
    // another service's role: denied
    let other = Request::new(
        "iam:CreateServiceLinkedRole",
        "arn:aws:iam::123456789012:role/aws-service-role/spotfleet.amazonaws.com/AWSServiceRoleForEC2SpotFleet",
    )
    .with("iam:AWSServiceName", vec!["spotfleet.amazonaws.com".into()]);
    assert_ne!(evaluate(&p, &other).ok(), Some(Decision::Allow));
}

#[test]
fn terminating_an_instance_without_the_cluster_tag_is_denied() {
    let p = policy();
    let entry = |tags: Value| {
        json!({"service": "ec2", "action": "TerminateInstances", "region": "us-east-1",
               "account": "123456789012", "params": {"InstanceId.1": ["i-1"]},
               "resourceTags": {"i-1": tags}})
    };
    assert!(denials(&p, &[entry(json!({"muster.dev/cluster": CLUSTER}))]).is_empty());
    assert_eq!(denials(&p, &[entry(json!({"team": "a"}))]).len(), 1);
}

/// The policy is scoped to one cluster's tag value: another cluster's
/// instances (a name sharing a prefix included) cannot be terminated, nor
/// launched or tagged for it, by this cluster's controller.
#[test]
fn another_clusters_instances_are_denied() {
    let p = policy();
    let terminate = |value: &str| {
        json!({"service": "ec2", "action": "TerminateInstances", "region": "us-east-1",
               "account": "123456789012", "params": {"InstanceId.1": ["i-1"]},
               "resourceTags": {"i-1": {"muster.dev/cluster": value}}})
    };
    for other in ["staging", "prod-eu", "pro", "*"] {
        let denied = denials(&p, &[terminate(other)]);
        assert_eq!(denied.len(), 1, "{other}: {denied:?}");
        assert!(
            denied[0].starts_with("ec2:TerminateInstances on ")
                && denied[0].contains("ImplicitDeny"),
            "{other}: {denied:?}"
        );
    }
    // the same instance, once the policy is that of its own cluster
    assert!(denials(&policy_for("staging"), &[terminate("staging")]).is_empty());
    // a launch tagged for another cluster: every created resource and its tags refused
    let all = ["instance", "volume", "network-interface"];
    let denied = denials(&policy_for("staging"), &[run_instances(&all, false)]);
    assert_eq!(
        denied
            .iter()
            .filter(|d| d.starts_with("ec2:RunInstances"))
            .count(),
        3,
        "{denied:?}"
    );
    assert_eq!(
        denied
            .iter()
            .filter(|d| d.starts_with("ec2:CreateTags"))
            .count(),
        3,
        "{denied:?}"
    );
}

/// Every statement that names the cluster tag compares it with the
/// `${CLUSTER}` placeholder, never a wildcard that would match every
/// cluster's instances.
#[test]
fn the_cluster_tag_conditions_name_the_placeholder() {
    let raw: Value = serde_json::from_str(POLICY).expect("the policy is JSON");
    let mut scoped = Vec::new();
    for st in raw["Statement"].as_array().expect("statements") {
        let sid = st["Sid"].as_str().unwrap_or("?");
        let Some(cond) = st.get("Condition").and_then(Value::as_object) else {
            continue;
        };
        for (op, keys) in cond {
            for (key, value) in keys.as_object().expect("condition keys") {
                if key.to_ascii_lowercase().ends_with("tag/muster.dev/cluster") {
                    assert_eq!(op, "StringEquals", "{sid}: {key}");
                    assert_eq!(value, "${CLUSTER}", "{sid}: {key}");
                    scoped.push(sid.to_string());
                }
            }
        }
    }
    assert_eq!(
        scoped,
        [
            "LaunchOnlyTaggedForTheCluster",
            "LaunchIntoTheClustersPlacementGroups",
            "PlacementGroupsOnlyTaggedForTheCluster",
            "TagPlacementGroupsOnlyAtCreation",
            "DeleteOnlyTheClustersPlacementGroups",
            "TagOnlyAtLaunch",
            "TerminateOnlyTheClustersInstances"
        ]
    );
}

fn launch_request(name: &str, zone: &str, capacity: CapacityType) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("key-{name}"),
        offering: OfferingKey {
            provider: Provider::Aws,
            zone: zone.into(),
            instance_type: "g6.xlarge".into(),
            capacity_type: capacity,
            reservation: None,
        },
        pool: "l4".into(),
        cluster: CLUSTER.into(),
        gang: Some("team-a/train".into()),
        labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
        taints: Vec::new(),
        tags: BTreeMap::new(),
        placement_group: None,
        grant: None,
    }
}

#[tokio::test]
async fn the_policy_allows_every_call_of_an_end_to_end_run() {
    let moto = Moto::start();
    let mut spec = moto.node_class_spec().await;
    let ami = spec["aws"]["amiSelectorTerms"][0]["id"]
        .as_str()
        .expect("ami")
        .to_string();
    moto.eks_cluster("prod", "1.31").await;
    for arch in ["x86_64", "arm64"] {
        moto.public_parameter(
            &format!("/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/{arch}/nvidia/recommended/image_id"),
            &ami,
        );
    }
    spec["aws"]["cluster"] = json!({"name": "prod"});
    spec["aws"]["amiSelectorTerms"] = json!([{"alias": "al2023@latest"}]);
    let c = moto.clients().await;
    let url = c
        .sqs
        .create_queue()
        .queue_name("muster-interruptions-prod")
        .send()
        .await
        .expect("queue")
        .queue_url()
        .expect("url")
        .to_string();
    let mut options = moto.options();
    options.interruption_queue = Some(url.clone());
    moto.reset();
    // a fresh account: no spot service-linked role yet; the first spot
    // launch creates it with muster's permissions
    moto.control("POST", "/spot-role?state=creatable");

    // everything the controller asks of a provider
    let p = AwsProvider::new(&spec, options).await.expect("provider");
    p.resolve().await.expect("resolve");
    let reqs = PoolRequirements {
        instance_types: vec!["g6.xlarge".into()],
        capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
        ..PoolRequirements::default()
    };
    assert!(!p.offerings(&reqs).await.expect("offerings").is_empty());
    let a = p
        .launch(&launch_request(
            "l4-a",
            "us-east-1a",
            CapacityType::OnDemand,
        ))
        .await
        .expect("on-demand launch");
    let b = p
        .launch(&launch_request("l4-b", "us-east-1b", CapacityType::Spot))
        .await
        .expect("spot launch");
    // a gang of two EFA nodes in its placement group
    let mut gang = Vec::new();
    for name in ["a100-a", "a100-b"] {
        let mut r = launch_request(name, "us-east-1a", CapacityType::OnDemand);
        r.offering.instance_type = "p4d.24xlarge".into();
        r.placement_group = Some("team-a-train-pg0".into());
        gang.push(p.launch(&r).await.expect("launch into the placement group"));
    }
    p.describe(&a.provider_id).await.expect("describe");
    assert_eq!(p.list(CLUSTER).await.expect("list").len(), 4);
    let mut log = moto.log();

    // an interruption notice (sent by the test, not muster) ...
    let id = b
        .provider_id
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    c.sqs
        .send_message()
        .queue_url(&url)
        .message_body(
            json!({"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
                   "detail": {"instance-id": id, "instance-action": "terminate"}})
            .to_string(),
        )
        .send()
        .await
        .expect("send");
    moto.reset();
    // ... read, then both machines terminated
    assert_eq!(p.interruptions().await.expect("interruptions").len(), 1);
    p.terminate(&a.provider_id).await.expect("terminate");
    p.terminate(&b.provider_id).await.expect("terminate");
    assert_eq!(
        p.placement_groups(CLUSTER).await.expect("groups"),
        ["team-a-train-pg0"]
    );
    for i in &gang {
        p.terminate(&i.provider_id).await.expect("terminate");
    }
    p.delete_placement_group(CLUSTER, "team-a-train-pg0")
        .await
        .expect("the emptied group is deleted");
    assert!(
        p.placement_groups(CLUSTER)
            .await
            .expect("groups")
            .is_empty()
    );
    log.extend(moto.log());

    let actions: std::collections::BTreeSet<String> = log
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["service"].as_str().unwrap_or("?"),
                e["action"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert!(
        log.iter()
            .any(|e| e["createsServiceLinkedRole"] == "spot.amazonaws.com"),
        "the spot launch created the service-linked role"
    );
    for must in [
        "eks:DescribeCluster",
        "ssm:GetParameter",
        "ec2:RunInstances",
        "ec2:TerminateInstances",
        "ec2:CreatePlacementGroup",
        "ec2:DescribePlacementGroups",
        "ec2:DeletePlacementGroup",
        "sqs:ReceiveMessage",
    ] {
        assert!(
            actions.contains(must),
            "the run made no {must} call: {actions:?}"
        );
    }
    let denied = denials(&policy(), &log);
    assert!(
        denied.is_empty(),
        "the policy denies:\n{}",
        denied.join("\n")
    );
    // each placement-group statement removed: exactly its calls denied
    for (sid, action) in [
        (
            "PlacementGroupsOnlyTaggedForTheCluster",
            "ec2:CreatePlacementGroup",
        ),
        ("LaunchIntoTheClustersPlacementGroups", "ec2:RunInstances"),
        (
            "DeleteOnlyTheClustersPlacementGroups",
            "ec2:DeletePlacementGroup",
        ),
    ] {
        let mut without = policy();
        without["Statement"]
            .as_array_mut()
            .expect("statements")
            .retain(|st| st["Sid"] != sid);
        let denied = denials(&without, &log);
        assert!(!denied.is_empty(), "{sid} removed, nothing denied");
        assert!(
            denied
                .iter()
                .all(|d| d.starts_with(&format!("{action} on ")) && d.contains("placement-group/")),
            "{sid} removed: {denied:?}"
        );
    }
}
