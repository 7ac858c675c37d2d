//! Launching, describing, listing and terminating instances.
//!
//! A launch is one `RunInstances` call for exactly one instance of the
//! offering the planner chose, with `ClientToken` set to the PoolNode's
//! idempotency key: EC2 returns the same instance for the same token, so a
//! launch repeated after a crash never buys a second machine. Spot goes
//! through `InstanceMarketOptions` (one-time, terminate on interruption).
//! A `reserved` offering launches into its capacity reservation
//! (`CapacityReservationSpecification.CapacityReservationTarget`), a
//! Capacity Block with `InstanceMarketOptions.MarketType` `capacity-block`
//! as well, which EC2 requires of launches into one (EC2 API Reference,
//! `RunInstances`; EC2 User Guide, "Launch instances into Capacity Blocks").
//! IMDSv2 is required unless the NodeClass says otherwise. The instance, its
//! volumes, its network interface and (spot) its spot request are tagged in
//! the same call, so that an IAM policy can require muster's cluster tag on
//! every resource a launch creates.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    BlockDeviceMapping, CapacityReservationSpecification, CapacityReservationTarget,
    EbsBlockDevice, Filter, HttpTokensState, IamInstanceProfileSpecification,
    InstanceInterruptionBehavior, InstanceMarketOptionsRequest, InstanceMetadataEndpointState,
    InstanceMetadataOptionsRequest, InstanceNetworkInterfaceSpecification, InstanceStateName,
    InstanceType, MarketType, ResourceType, SpotInstanceType, SpotMarketOptions, Tag,
    TagSpecification, VolumeType,
};
use base64::Engine;
use muster_crds::nodeclass::{AwsNodeClass, HttpTokens, Toggle};
use muster_planner::{
    CapacityReservation, CapacityType, OfferingKey, Provider, ReservationKind, Time,
};
use muster_provider_api::{Instance, InstanceState, LaunchRequest, ProviderError, tags};

use crate::bootstrap::launch_tags;
use crate::client::failure;
use crate::errors::classify;

/// `aws:///<zone>/<instance id>`, as the AWS cloud provider writes a Node's
/// `spec.providerID`.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The instance id of a provider id.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|id| id.starts_with("i-"))
}

/// What the launch resolved to: one subnet in the offering's zone, the
/// security groups and the image.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Subnet in the offering's zone.
    pub subnet: String,
    /// Security group ids.
    pub security_groups: Vec<String>,
    /// AMI id.
    pub image: String,
    /// User data, not yet base64-encoded.
    pub user_data: String,
    /// The EC2 placement group to launch into, if any.
    pub group: Option<String>,
    /// EFA interfaces to attach, one per network card (0: the default
    /// network interface only).
    pub efa_interfaces: u32,
    /// The capacity reservation to launch into (a `reserved` offering's),
    /// with its kind: a Capacity Block needs its own market type.
    pub reservation: Option<CapacityReservation>,
}

/// The network interfaces of an EFA launch, as the EC2 User Guide lays them
/// out for instances with several network cards ("Maximize network
/// bandwidth on accelerated computing instances"; Karpenter's
/// `generateNetworkInterfaces` does the same): one EFA interface per network
/// card, `NetworkCardIndex` i, device index 0 on card 0 (the primary
/// interface) and 1 on every other card, each in the subnet with the
/// security groups. EC2 refuses a request that names interfaces together
/// with an instance-level subnet or security groups, so those move here.
pub fn efa_interfaces(placement: &Placement) -> Vec<InstanceNetworkInterfaceSpecification> {
    (0..placement.efa_interfaces)
        .map(|i| {
            let card = i32::try_from(i).unwrap_or(i32::MAX);
            InstanceNetworkInterfaceSpecification::builder()
                .network_card_index(card)
                .device_index(if i == 0 { 0 } else { 1 })
                .interface_type("efa")
                .subnet_id(&placement.subnet)
                .set_groups(Some(placement.security_groups.clone()))
                .delete_on_termination(true)
                .build()
        })
        .collect()
}

/// Runs one instance. Errors are typed; capacity errors name the offering.
pub async fn launch(
    ec2: &aws_sdk_ec2::Client,
    class: &AwsNodeClass,
    placement: &Placement,
    request: &LaunchRequest,
) -> Result<Instance, ProviderError> {
    let offering = &request.offering;
    let eks = class.cluster.as_ref().map(|c| c.name.as_str());
    let all_tags = launch_tags(request, &class.tags, eks);
    let tag_list: Vec<Tag> = all_tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    let spec = |kind: ResourceType| {
        TagSpecification::builder()
            .resource_type(kind)
            .set_tags(Some(tag_list.clone()))
            .build()
    };
    let mo = &class.metadata_options;
    let metadata = InstanceMetadataOptionsRequest::builder()
        .http_tokens(match mo.http_tokens {
            HttpTokens::Required => HttpTokensState::Required,
            HttpTokens::Optional => HttpTokensState::Optional,
        })
        .http_endpoint(match mo.http_endpoint {
            Toggle::Enabled => InstanceMetadataEndpointState::Enabled,
            Toggle::Disabled => InstanceMetadataEndpointState::Disabled,
        })
        .http_put_response_hop_limit(mo.http_put_response_hop_limit)
        .build();
    let mut req = ec2
        .run_instances()
        .client_token(&request.idempotency_key)
        .instance_type(InstanceType::from(offering.instance_type.as_str()))
        .image_id(&placement.image)
        .placement(
            aws_sdk_ec2::types::Placement::builder()
                .availability_zone(&offering.zone)
                .set_group_name(placement.group.clone())
                .build(),
        )
        .min_count(1)
        .max_count(1)
        .user_data(base64::engine::general_purpose::STANDARD.encode(&placement.user_data))
        .metadata_options(metadata)
        .tag_specifications(spec(ResourceType::Instance))
        .tag_specifications(spec(ResourceType::Volume))
        .tag_specifications(spec(ResourceType::NetworkInterface));
    req = if placement.efa_interfaces > 0 {
        req.set_network_interfaces(Some(efa_interfaces(placement)))
    } else {
        req.subnet_id(&placement.subnet)
            .set_security_group_ids(Some(placement.security_groups.clone()))
    };
    if !class.instance_profile.is_empty() {
        req = req.iam_instance_profile(
            IamInstanceProfileSpecification::builder()
                .name(&class.instance_profile)
                .build(),
        );
    }
    for b in &class.block_device_mappings {
        let bytes = muster_planner::Quantity::parse(&b.ebs.volume_size.0)
            .map(|q| q.units_ceil())
            .unwrap_or(0);
        let size_gib = (bytes + (1 << 30) - 1) / (1 << 30);
        let mut ebs = EbsBlockDevice::builder()
            .volume_size(i32::try_from(size_gib.max(1)).unwrap_or(i32::MAX))
            .volume_type(VolumeType::from(
                serde_json::to_value(b.ebs.volume_type)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_else(|| "gp3".into())
                    .as_str(),
            ))
            .encrypted(b.ebs.encrypted)
            .delete_on_termination(b.ebs.delete_on_termination);
        if let Some(iops) = b.ebs.iops {
            ebs = ebs.iops(iops);
        }
        if let Some(t) = b.ebs.throughput {
            ebs = ebs.throughput(t);
        }
        if let Some(k) = &b.ebs.kms_key_id {
            ebs = ebs.kms_key_id(k);
        }
        req = req.block_device_mappings(
            BlockDeviceMapping::builder()
                .device_name(&b.device_name)
                .ebs(ebs.build())
                .build(),
        );
    }
    if offering.capacity_type == CapacityType::Spot {
        // the spot request is created (and authorized) as a resource of its own
        req = req.tag_specifications(spec(ResourceType::SpotInstancesRequest));
        req = req.instance_market_options(
            InstanceMarketOptionsRequest::builder()
                .market_type(MarketType::Spot)
                .spot_options(
                    SpotMarketOptions::builder()
                        .spot_instance_type(SpotInstanceType::OneTime)
                        .instance_interruption_behavior(InstanceInterruptionBehavior::Terminate)
                        .build(),
                )
                .build(),
        );
    }
    if let Some(r) = &placement.reservation {
        req = req.capacity_reservation_specification(
            CapacityReservationSpecification::builder()
                .capacity_reservation_target(
                    CapacityReservationTarget::builder()
                        .capacity_reservation_id(&r.id)
                        .build(),
                )
                .build(),
        );
        if r.kind == ReservationKind::CapacityBlock {
            req = req.instance_market_options(
                InstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::CapacityBlock)
                    .build(),
            );
        }
    }
    let resp = req
        .send()
        .await
        .map_err(|e| classify(&failure(&e), Some(offering)))?;
    let i = resp
        .instances()
        .first()
        .ok_or_else(|| ProviderError::Transient {
            message: "RunInstances returned no instance".into(),
            retry_after: None,
        })?;
    Ok(instance(i, Some(offering)))
}

/// An SDK instance as the trait's instance.
pub fn instance(i: &aws_sdk_ec2::types::Instance, asked: Option<&OfferingKey>) -> Instance {
    let zone = i
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap_or_default()
        .to_string();
    let id = i.instance_id().unwrap_or_default();
    let tags: BTreeMap<String, String> = i
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect();
    let spot = i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot");
    // An instance in a capacity reservation (ODCR or Capacity Block) names it.
    let reservation = i
        .capacity_reservation_id()
        .map(String::from)
        .or_else(|| asked.and_then(|a| a.reservation.clone()));
    let offering = OfferingKey {
        provider: Provider::Aws,
        zone: zone.clone(),
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .or_else(|| asked.map(|a| a.instance_type.clone()))
            .unwrap_or_default(),
        capacity_type: if spot || asked.is_some_and(|a| a.capacity_type == CapacityType::Spot) {
            CapacityType::Spot
        } else if reservation.is_some() {
            CapacityType::Reserved
        } else {
            CapacityType::OnDemand
        },
        reservation,
    };
    let state = match i.state().and_then(|s| s.name()) {
        Some(InstanceStateName::Pending) => InstanceState::Pending,
        Some(InstanceStateName::Running) => InstanceState::Running,
        Some(
            InstanceStateName::ShuttingDown
            | InstanceStateName::Stopping
            | InstanceStateName::Stopped,
        ) => InstanceState::ShuttingDown,
        Some(InstanceStateName::Terminated) => InstanceState::Terminated,
        _ => InstanceState::Pending,
    };
    Instance {
        provider_id: provider_id(&zone, id),
        offering,
        state,
        launched_at: Time(i.launch_time().map(|t| t.secs()).unwrap_or(0)),
        pool_node: tags.get(tags::POOL_NODE).cloned(),
        tags,
        network: Vec::new(),
    }
}

/// `DescribeInstances` with these filters (and ids), every page.
pub async fn describe(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
    filters: Vec<Filter>,
) -> Result<Vec<Instance>, ProviderError> {
    let mut out = Vec::new();
    let mut pages = ec2
        .describe_instances()
        .set_instance_ids((!ids.is_empty()).then(|| ids.to_vec()))
        .set_filters((!filters.is_empty()).then_some(filters))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&failure(&e), None))?;
        for r in page.reservations() {
            for i in r.instances() {
                out.push(instance(i, None));
            }
        }
    }
    out.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
    Ok(out)
}

/// Every instance tagged for `cluster` that is not terminated. EC2's tag
/// filter takes `*` and `?` as wildcards, so what it returns is kept only
/// when its tag equals `cluster`: orphan collection, which terminates what
/// this returns, never sees another cluster's instances.
pub async fn list(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) -> Result<Vec<Instance>, ProviderError> {
    let mut found = describe(
        ec2,
        &[],
        vec![
            Filter::builder()
                .name(format!("tag:{}", tags::CLUSTER))
                .values(cluster)
                .build(),
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .values("stopping")
                .values("stopped")
                .values("shutting-down")
                .build(),
        ],
    )
    .await?;
    found.retain(|i| i.tags.get(tags::CLUSTER).map(String::as_str) == Some(cluster));
    Ok(found)
}

/// Terminates an instance; one that is already gone is success.
pub async fn terminate(ec2: &aws_sdk_ec2::Client, provider_id: &str) -> Result<(), ProviderError> {
    let Some(id) = instance_id(provider_id) else {
        return Err(ProviderError::Permanent {
            message: format!("{provider_id} is not an EC2 provider id"),
        });
    };
    match ec2.terminate_instances().instance_ids(id).send().await {
        Ok(_) => Ok(()),
        Err(e) => match classify(&failure(&e), None) {
            ProviderError::NotFound { .. } => Ok(()),
            err => Err(err),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let pid = provider_id("us-east-1a", "i-0123456789abcdef0");
        assert_eq!(pid, "aws:///us-east-1a/i-0123456789abcdef0");
        assert_eq!(instance_id(&pid), Some("i-0123456789abcdef0"));
        assert_eq!(instance_id("gce://p/z/name"), None);
    }
}
