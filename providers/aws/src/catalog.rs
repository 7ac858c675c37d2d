//! Listing what can be bought: `DescribeInstanceTypes` (filtered to the
//! pool's types or families, or to GPU types; paginated),
//! `DescribeInstanceTypeOfferings` per availability zone, and the newest
//! `DescribeSpotPriceHistory` entry per type × zone.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, InstanceType, LocationType};
use muster_planner::PoolRequirements;
use muster_provider_api::ProviderError;

use crate::client::failure;
use crate::errors::classify;
use crate::shapes::TypeInfo;

/// Instance-type name patterns to ask for: the pool's types, its families
/// (`p4d` → `p4d.*`), else every GPU family.
pub fn type_patterns(requirements: &PoolRequirements) -> Vec<String> {
    if !requirements.instance_types.is_empty() {
        return requirements.instance_types.clone();
    }
    if !requirements.instance_families.is_empty() {
        return requirements
            .instance_families
            .iter()
            .map(|f| format!("{f}.*"))
            .collect();
    }
    [
        "p3*", "p4*", "p5*", "p6*", "g4dn.*", "g5.*", "g6.*", "g6e.*",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `DescribeInstanceTypes` for these name patterns.
pub async fn instance_types(
    ec2: &aws_sdk_ec2::Client,
    patterns: &[String],
) -> Result<Vec<TypeInfo>, ProviderError> {
    let mut out = Vec::new();
    let mut pages = ec2
        .describe_instance_types()
        .filters(
            Filter::builder()
                .name("instance-type")
                .set_values(Some(patterns.to_vec()))
                .build(),
        )
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&failure(&e), None))?;
        for t in page.instance_types() {
            let gpu = t.gpu_info().and_then(|g| g.gpus().first());
            out.push(TypeInfo {
                name: t
                    .instance_type()
                    .map(|x| x.as_str().to_string())
                    .unwrap_or_default(),
                vcpus: t
                    .v_cpu_info()
                    .and_then(|v| v.default_v_cpus())
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0),
                memory_mib: t
                    .memory_info()
                    .and_then(|m| m.size_in_mib())
                    .and_then(|m| u64::try_from(m).ok())
                    .unwrap_or(0),
                gpu_name: gpu.and_then(|g| g.name()).map(String::from),
                gpu_manufacturer: gpu.and_then(|g| g.manufacturer()).map(String::from),
                gpu_count: t
                    .gpu_info()
                    .map(|g| {
                        g.gpus()
                            .iter()
                            .filter_map(|d| d.count())
                            .map(|c| u32::try_from(c).unwrap_or(0))
                            .sum()
                    })
                    .unwrap_or(0),
                gpu_memory_mib: gpu
                    .and_then(|g| g.memory_info())
                    .and_then(|m| m.size_in_mib())
                    .and_then(|m| u64::try_from(m).ok())
                    .unwrap_or(0),
                efa: t
                    .network_info()
                    .and_then(|n| n.efa_supported())
                    .unwrap_or(false),
                max_efa_interfaces: t
                    .network_info()
                    .and_then(|n| n.efa_info())
                    .and_then(|e| e.maximum_efa_interfaces())
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0),
                architectures: t
                    .processor_info()
                    .map(|p| {
                        p.supported_architectures()
                            .iter()
                            .map(|a| a.as_str().to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Zones each type is offered in (`DescribeInstanceTypeOfferings`).
pub async fn zones(
    ec2: &aws_sdk_ec2::Client,
    types: &[String],
) -> Result<BTreeMap<String, Vec<String>>, ProviderError> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if types.is_empty() {
        return Ok(out);
    }
    let mut pages = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .filters(
            Filter::builder()
                .name("instance-type")
                .set_values(Some(types.to_vec()))
                .build(),
        )
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&failure(&e), None))?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                out.entry(t.as_str().to_string())
                    .or_default()
                    .push(z.to_string());
            }
        }
    }
    for z in out.values_mut() {
        z.sort();
        z.dedup();
    }
    Ok(out)
}

/// Spot price history entries of the last hours: (type, zone, price, epoch).
pub async fn spot_prices(
    ec2: &aws_sdk_ec2::Client,
    types: &[String],
    since_epoch: i64,
) -> Result<Vec<(String, String, f64, i64)>, ProviderError> {
    let mut out = Vec::new();
    if types.is_empty() {
        return Ok(out);
    }
    let mut pages = ec2
        .describe_spot_price_history()
        .set_instance_types(Some(
            types
                .iter()
                .map(|t| InstanceType::from(t.as_str()))
                .collect(),
        ))
        .product_descriptions("Linux/UNIX")
        .start_time(aws_sdk_ec2::primitives::DateTime::from_secs(since_epoch))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify(&failure(&e), None))?;
        for p in page.spot_price_history() {
            let (Some(t), Some(z), Some(price)) = (
                p.instance_type(),
                p.availability_zone(),
                p.spot_price().and_then(|s| s.parse::<f64>().ok()),
            ) else {
                continue;
            };
            let at = p.timestamp().map(|t| t.secs()).unwrap_or(0);
            out.push((t.as_str().to_string(), z.to_string(), price, at));
        }
    }
    Ok(out)
}
