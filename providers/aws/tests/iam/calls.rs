//! The authorizations AWS makes for each call muster sent, from the moto
//! launcher's call log. Resource types per action follow the Service
//! Authorization Reference ("Actions, resources, and condition keys for
//! Amazon EC2 / Amazon EKS / AWS Systems Manager / Amazon SQS / IAM"):
//!
//! - EC2 `Describe*`: resource `*`.
//! - `ec2:RunInstances`: the image, the subnet, every security group and the
//!   key pair it names; the instance, its network interface, its volumes
//!   and (spot) its spot instances request it creates, each with the
//!   `aws:RequestTag/*` and `aws:TagKeys` of the tag specification for that
//!   resource type. Every resource tagged at launch is also an
//!   `ec2:CreateTags` authorization with `ec2:CreateAction` =
//!   `RunInstances`. The instance profile's role is an `iam:PassRole` with
//!   `iam:PassedToService` = `ec2.amazonaws.com`.
//!   A launch into a placement group (`Placement.GroupName`) also names the
//!   group, with `aws:ResourceTag/*` from the tags it carries; a launch with
//!   network interfaces (EFA) names their subnets and security groups
//!   instead of instance-level ones. A launch into a capacity reservation
//!   (`CapacityReservationSpecification.CapacityReservationTarget`) also
//!   names the reservation (`capacity-reservation/<id>`).
//!   A volume encrypted with a customer managed key
//!   (`BlockDeviceMapping.N.Ebs.KmsKeyId`) is also `kms:CreateGrant` (with
//!   `kms:GrantIsForAWSResource` = true), `kms:Decrypt`, `kms:DescribeKey` and
//!   `kms:GenerateDataKeyWithoutPlaintext` on that key, each with
//!   `kms:ViaService` = `ec2.REGION.amazonaws.com` (EBS User Guide, "How
//!   Amazon EBS uses AWS KMS": EC2 acts with the caller's permissions).
//! - `ec2:CreatePlacementGroup`: the group it creates, with the
//!   `aws:RequestTag/*` of its tag specification, and `ec2:CreateTags` on it
//!   with `ec2:CreateAction` = `CreatePlacementGroup`.
//!   `ec2:DeletePlacementGroup`: the group, with its `aws:ResourceTag/*`.
//! - `ec2:TerminateInstances`: each instance, with `aws:ResourceTag/*` from
//!   the tags it carries.
//! - A spot `RunInstances` on an account without the spot service-linked
//!   role (the launcher's `createsServiceLinkedRole`): also
//!   `iam:CreateServiceLinkedRole` on
//!   `arn:aws:iam::ACCOUNT:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot`
//!   with `iam:AWSServiceName` = `spot.amazonaws.com` (EC2 creates the role
//!   with the caller's permissions; IAM User Guide, "Service-linked role
//!   permissions").
//! - `eks:DescribeCluster`: the cluster; `ssm:GetParameter`: the parameter
//!   (public parameters live in no account: `arn:aws:ssm:REGION::parameter/...`);
//!   SQS actions: the queue.
//!
//! A call this file has no model for fails the test: every new call muster
//! makes must be modelled, then allowed by the policy.

use std::collections::BTreeMap;

use serde_json::Value;

use super::policy::Request;

fn first(params: &Value, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::Array(a) => a.first()?.as_str().map(String::from),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// `Prefix.N` values of an EC2 query, in order of N.
fn numbered(params: &Value, prefix: &str) -> Vec<String> {
    let mut out: Vec<(u32, String)> = params
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| {
            let n = k.strip_prefix(prefix)?.strip_prefix('.')?.parse().ok()?;
            Some((n, first(params, k)?))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, v)| v).collect()
}

/// Tag specifications of a RunInstances query: resource type → tags.
fn tag_specifications(params: &Value) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for n in 1.. {
        let Some(kind) = first(params, &format!("TagSpecification.{n}.ResourceType")) else {
            break;
        };
        let mut tags = BTreeMap::new();
        for t in 1.. {
            let Some(k) = first(params, &format!("TagSpecification.{n}.Tag.{t}.Key")) else {
                break;
            };
            let v =
                first(params, &format!("TagSpecification.{n}.Tag.{t}.Value")).unwrap_or_default();
            tags.insert(k, v);
        }
        out.insert(kind, tags);
    }
    out
}

fn with_request_tags(mut r: Request, tags: Option<&BTreeMap<String, String>>) -> Request {
    if let Some(tags) = tags {
        for (k, v) in tags {
            r = r.with(&format!("aws:RequestTag/{k}"), vec![v.clone()]);
        }
        r = r.with("aws:TagKeys", tags.keys().cloned().collect());
    }
    r
}

fn with_resource_tags(mut r: Request, tags: &Value) -> Request {
    for (k, v) in tags.as_object().into_iter().flatten() {
        r = r.with(
            &format!("aws:ResourceTag/{k}"),
            vec![v.as_str().unwrap_or_default().to_string()],
        );
    }
    r
}

/// The N of every `NetworkInterface.N.*` parameter, in order.
fn network_interfaces(params: &Value) -> Vec<u32> {
    let mut out: Vec<u32> = params
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| {
            k.strip_prefix("NetworkInterface.")?
                .split('.')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The authorizations of one logged call.
pub fn requests(entry: &Value) -> Result<Vec<Request>, String> {
    let service = entry["service"].as_str().unwrap_or("?");
    let action = entry["action"].as_str().unwrap_or("?");
    let region = entry["region"].as_str().unwrap_or("us-east-1");
    let account = entry["account"].as_str().unwrap_or("123456789012");
    let params = &entry["params"];
    let ec2 = |kind: &str, id: &str| format!("arn:aws:ec2:{region}:{account}:{kind}/{id}");
    Ok(match (service, action) {
        ("ec2", a) if a.starts_with("Describe") => vec![Request::new(&format!("ec2:{a}"), "*")],
        ("ec2", "RunInstances") => {
            let run = "ec2:RunInstances";
            let mut out = Vec::new();
            let image = first(params, "ImageId").ok_or("RunInstances without ImageId")?;
            out.push(Request::new(
                run,
                &format!("arn:aws:ec2:{region}::image/{image}"),
            ));
            let interfaces = network_interfaces(params);
            if interfaces.is_empty() {
                let subnet = first(params, "SubnetId").ok_or("RunInstances without SubnetId")?;
                out.push(Request::new(run, &ec2("subnet", &subnet)));
                for sg in numbered(params, "SecurityGroupId") {
                    out.push(Request::new(run, &ec2("security-group", &sg)));
                }
            }
            for n in &interfaces {
                let subnet = first(params, &format!("NetworkInterface.{n}.SubnetId"))
                    .ok_or("a network interface without SubnetId")?;
                out.push(Request::new(run, &ec2("subnet", &subnet)));
                for sg in numbered(params, &format!("NetworkInterface.{n}.SecurityGroupId")) {
                    out.push(Request::new(run, &ec2("security-group", &sg)));
                }
            }
            let mut keys: Vec<String> = params
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| {
                    k.starts_with("BlockDeviceMapping.") && k.ends_with(".Ebs.KmsKeyId")
                })
                .filter_map(|(k, _)| first(params, k))
                .collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let arn = if key.starts_with("arn:") {
                    key
                } else {
                    format!("arn:aws:kms:{region}:{account}:key/{key}")
                };
                let via = vec![format!("ec2.{region}.amazonaws.com")];
                for action in [
                    "kms:CreateGrant",
                    "kms:Decrypt",
                    "kms:DescribeKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                ] {
                    let mut r = Request::new(action, &arn).with("kms:ViaService", via.clone());
                    if action == "kms:CreateGrant" {
                        r = r.with("kms:GrantIsForAWSResource", vec!["true".into()]);
                    }
                    out.push(r);
                }
            }
            if let Some(group) = first(params, "Placement.GroupName") {
                out.push(with_resource_tags(
                    Request::new(run, &ec2("placement-group", &group)),
                    &entry["placementGroupTags"],
                ));
            }
            if let Some(k) = first(params, "KeyName") {
                out.push(Request::new(run, &ec2("key-pair", &k)));
            }
            if let Some(cr) = first(
                params,
                "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId",
            ) {
                out.push(Request::new(run, &ec2("capacity-reservation", &cr)));
            }
            let specs = tag_specifications(params);
            let mut created = vec!["instance", "network-interface", "volume"];
            if first(params, "InstanceMarketOptions.MarketType").as_deref() == Some("spot") {
                created.push("spot-instances-request");
            }
            for kind in created {
                let arn = ec2(kind, "*");
                out.push(with_request_tags(Request::new(run, &arn), specs.get(kind)));
                if let Some(tags) = specs.get(kind) {
                    out.push(
                        with_request_tags(Request::new("ec2:CreateTags", &arn), Some(tags))
                            .with("ec2:CreateAction", vec!["RunInstances".into()]),
                    );
                }
            }
            for kind in specs.keys() {
                if ![
                    "instance",
                    "network-interface",
                    "volume",
                    "spot-instances-request",
                ]
                .contains(&kind.as_str())
                {
                    return Err(format!("RunInstances tags a {kind}, which is not modelled"));
                }
            }
            for role in entry["passedRoles"].as_array().into_iter().flatten() {
                let role = role.as_str().unwrap_or_default();
                out.push(
                    Request::new("iam:PassRole", role)
                        .with("iam:PassedToService", vec!["ec2.amazonaws.com".into()]),
                );
            }
            if let Some(service) = entry["createsServiceLinkedRole"].as_str() {
                out.push(
                    Request::new(
                        "iam:CreateServiceLinkedRole",
                        &format!(
                            "arn:aws:iam::{account}:role/aws-service-role/{service}/AWSServiceRoleForEC2Spot"
                        ),
                    )
                    .with("iam:AWSServiceName", vec![service.to_string()]),
                );
            }
            out
        }
        ("ec2", "CreatePlacementGroup") => {
            let group =
                first(params, "GroupName").ok_or("CreatePlacementGroup without GroupName")?;
            let arn = ec2("placement-group", &group);
            let specs = tag_specifications(params);
            let tags = specs.get("placement-group");
            let mut out = vec![with_request_tags(
                Request::new("ec2:CreatePlacementGroup", &arn),
                tags,
            )];
            if let Some(tags) = tags {
                out.push(
                    with_request_tags(Request::new("ec2:CreateTags", &arn), Some(tags))
                        .with("ec2:CreateAction", vec!["CreatePlacementGroup".into()]),
                );
            }
            out
        }
        ("ec2", "DeletePlacementGroup") => {
            let group =
                first(params, "GroupName").ok_or("DeletePlacementGroup without GroupName")?;
            vec![with_resource_tags(
                Request::new("ec2:DeletePlacementGroup", &ec2("placement-group", &group)),
                &entry["placementGroupTags"],
            )]
        }
        ("ec2", "TerminateInstances") => numbered(params, "InstanceId")
            .into_iter()
            .map(|id| {
                let mut r = Request::new("ec2:TerminateInstances", &ec2("instance", &id));
                if let Some(tags) = entry["resourceTags"][&id].as_object() {
                    for (k, v) in tags {
                        r = r.with(
                            &format!("aws:ResourceTag/{k}"),
                            vec![v.as_str().unwrap_or_default().to_string()],
                        );
                    }
                }
                r
            })
            .collect(),
        ("eks", "DescribeCluster") => {
            let name = entry["path"]
                .as_str()
                .and_then(|p| p.trim_end_matches('/').rsplit('/').next())
                .ok_or("DescribeCluster without a cluster in its path")?;
            vec![Request::new(
                "eks:DescribeCluster",
                &format!("arn:aws:eks:{region}:{account}:cluster/{name}"),
            )]
        }
        ("ssm", "GetParameter") => {
            let name = params["Name"].as_str().ok_or("GetParameter without Name")?;
            let owner = if name.starts_with("/aws/") {
                ""
            } else {
                account
            };
            vec![Request::new(
                "ssm:GetParameter",
                &format!("arn:aws:ssm:{region}:{owner}:parameter{name}"),
            )]
        }
        ("sqs", a @ ("ReceiveMessage" | "DeleteMessage" | "DeleteMessageBatch")) => {
            let url = params["QueueUrl"]
                .as_str()
                .ok_or("SQS call without QueueUrl")?;
            let queue = url.rsplit('/').next().unwrap_or_default();
            // DeleteMessageBatch is authorized as sqs:DeleteMessage
            let a = if a == "DeleteMessageBatch" {
                "DeleteMessage"
            } else {
                a
            };
            vec![Request::new(
                &format!("sqs:{a}"),
                &format!("arn:aws:sqs:{region}:{account}:{queue}"),
            )]
        }
        (s, a) => return Err(format!("no authorization model for {s}:{a}")),
    })
}
