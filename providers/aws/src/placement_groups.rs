//! Cluster placement groups for gangs that must share a low-latency network.
//!
//! The planner names one group per gang launch attempt
//! (`muster_planner::naming::placement_group_name`) and the PoolNode records
//! it before anything is bought. Here that name becomes an EC2 placement
//! group:
//!
//! - **Made before the launch** (`CreatePlacementGroup`, strategy `cluster`),
//!   tagged in the same call with the cluster, the gang and the planner's name,
//!   so the IAM policy can require muster's cluster tag on it. A group that
//!   already exists (`InvalidPlacementGroup.Duplicate`) is success: every
//!   node of the gang asks, and a restart asks again.
//! - **Named per cluster**: EC2 group names are unique per account and
//!   region, so the EC2 name is `muster-<cluster>-<planner name>`; two
//!   clusters in one account never share a group.
//! - **Listed by tag** (`DescribePlacementGroups` filtered on
//!   `muster.dev/cluster`), read back as the planner's names.
//! - **Deleted by name** (`DeletePlacementGroup`) once no PoolNode names it;
//!   a group already gone is success, one whose instances are still
//!   terminating answers `InvalidPlacementGroup.InUse` and is tried again.
//!
//! EC2 API Reference: `CreatePlacementGroup`, `DescribePlacementGroups`,
//! `DeletePlacementGroup`; EC2 User Guide, "Placement groups" (a cluster
//! group lives in one Availability Zone; names up to 255 ASCII characters).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, PlacementStrategy, ResourceType, Tag, TagSpecification};
use muster_provider_api::{ProviderError, tags};

use crate::client::failure;
use crate::errors::classify;

/// The tag that carries the planner's name of a group.
pub const PLACEMENT_GROUP_TAG: &str = "muster.dev/placement-group";

/// The EC2 name of the planner's group `name` in `cluster`.
pub fn aws_name(cluster: &str, name: &str) -> String {
    format!("muster-{cluster}-{name}")
}

/// Makes the group unless it exists; returns its EC2 name.
pub async fn ensure(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    name: &str,
    gang: Option<&str>,
    class_tags: &BTreeMap<String, String>,
) -> Result<String, ProviderError> {
    let group = aws_name(cluster, name);
    let mut all: BTreeMap<String, String> = class_tags.clone();
    all.insert(tags::CLUSTER.into(), cluster.into());
    all.insert(PLACEMENT_GROUP_TAG.into(), name.into());
    if let Some(g) = gang {
        all.insert(tags::GANG.into(), g.into());
    }
    let spec = TagSpecification::builder()
        .resource_type(ResourceType::PlacementGroup)
        .set_tags(Some(
            all.iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect(),
        ))
        .build();
    match ec2
        .create_placement_group()
        .group_name(&group)
        .strategy(PlacementStrategy::Cluster)
        .tag_specifications(spec)
        .send()
        .await
    {
        Ok(_) => Ok(group),
        Err(e) => {
            let f = failure(&e);
            if f.code.as_deref() == Some("InvalidPlacementGroup.Duplicate") {
                Ok(group)
            } else {
                Err(classify(&f, None))
            }
        }
    }
}

/// The planner's names of the groups tagged for `cluster`.
pub async fn list(ec2: &aws_sdk_ec2::Client, cluster: &str) -> Result<Vec<String>, ProviderError> {
    let out = ec2
        .describe_placement_groups()
        .filters(
            Filter::builder()
                .name(format!("tag:{}", tags::CLUSTER))
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .map_err(|e| classify(&failure(&e), None))?;
    let mut names: Vec<String> = out
        .placement_groups()
        .iter()
        .filter_map(|g| {
            g.tags()
                .iter()
                .find(|t| t.key() == Some(PLACEMENT_GROUP_TAG))
                .and_then(|t| t.value())
                .map(String::from)
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Deletes the planner's group `name` of `cluster`; gone already is success.
pub async fn delete(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    name: &str,
) -> Result<(), ProviderError> {
    match ec2
        .delete_placement_group()
        .group_name(aws_name(cluster, name))
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let f = failure(&e);
            if f.code.as_deref() == Some("InvalidPlacementGroup.Unknown") {
                Ok(())
            } else {
                Err(classify(&f, None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_named_per_cluster() {
        assert_eq!(
            aws_name("prod", "team-a-big-pg0"),
            "muster-prod-team-a-big-pg0"
        );
        assert_ne!(aws_name("a", "x-pg0"), aws_name("b", "x-pg0"));
    }
}
