//! What a launch carries besides the instance type: tags and user data.
//!
//! Tags: `muster.dev/cluster`, `muster.dev/pool`, `muster.dev/poolnode`,
//! `muster.dev/gang` (when launched for one), `Name` (the PoolNode),
//! `kubernetes.io/cluster/<EKS cluster>=owned` when the NodeClass names one,
//! then the NodeClass's and the request's own tags (muster's keys win).
//!
//! User data by image family: [`nodeadm`](crate::nodeadm) for AL2023,
//! [`bottlerocket`](crate::bottlerocket) TOML. With the NodeClass's
//! `cluster` set, it carries the cluster's endpoint, CA and service CIDR
//! (from [`eks`](crate::eks)); without, the NodeClass's `userData` must.

use std::collections::BTreeMap;

use muster_crds::nodeclass::{AwsNodeClass, ImageFamily};
use muster_provider_api::{LaunchRequest, ProviderError, tags};

use crate::eks::ClusterInfo;
use crate::{alias, bottlerocket, nodeadm};

/// The tags of the instance and what it creates with it; with an EKS
/// cluster named, also `kubernetes.io/cluster/<name>=owned`, the ownership
/// tag the AWS cloud provider and load-balancer controllers read (the
/// NodeClass cannot set it: the key is reserved).
pub fn launch_tags(
    request: &LaunchRequest,
    class_tags: &BTreeMap<String, String>,
    eks_cluster: Option<&str>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = class_tags.clone();
    out.extend(request.tags.clone());
    if let Some(name) = eks_cluster {
        out.insert(format!("kubernetes.io/cluster/{name}"), "owned".into());
    }
    out.insert(tags::CLUSTER.into(), request.cluster.clone());
    out.insert(tags::POOL.into(), request.pool.clone());
    out.insert(tags::POOL_NODE.into(), request.name.clone());
    if let Some(g) = &request.gang {
        out.insert(tags::GANG.into(), g.clone());
    }
    out.insert("Name".into(), request.name.clone());
    out
}

/// The image family of a NodeClass: the alias's, else `imageFamily`, else
/// AL2023.
pub fn family(class: &AwsNodeClass) -> ImageFamily {
    class
        .ami_selector_terms
        .iter()
        .find_map(|t| t.alias.as_deref().and_then(alias::parse))
        .map(|a| a.family)
        .or(class.image_family)
        .unwrap_or(ImageFamily::Al2023)
}

/// The user data of one node (not yet base64-encoded): nodeadm MIME for
/// AL2023, TOML settings for Bottlerocket. A `userData` that cannot be merged
/// is a permanent error naming the field.
pub fn user_data(
    family: ImageFamily,
    cluster: Option<&ClusterInfo>,
    request: &LaunchRequest,
    class: &AwsNodeClass,
) -> Result<String, ProviderError> {
    let extra = class.user_data.as_deref();
    let out = match family {
        ImageFamily::Al2023 => nodeadm::user_data(
            cluster,
            &request.labels,
            &request.taints,
            class.max_pods,
            extra,
        )
        .map_err(|e| e.to_string()),
        ImageFamily::Bottlerocket => bottlerocket::user_data(
            cluster,
            &request.labels,
            &request.taints,
            class.max_pods,
            extra,
        )
        .map_err(|e| e.to_string()),
    };
    out.map_err(|message| ProviderError::Permanent { message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{CapacityType, OfferingKey, Provider};

    #[test]
    fn tags_carry_ownership_and_muster_keys_win() {
        let req = LaunchRequest {
            name: "a100-x-0".into(),
            idempotency_key: "k".into(),
            offering: OfferingKey {
                provider: Provider::Aws,
                zone: "us-east-1a".into(),
                instance_type: "p4d.24xlarge".into(),
                capacity_type: CapacityType::Spot,
                reservation: None,
            },
            pool: "a100".into(),
            cluster: "prod".into(),
            gang: Some("team-a/train".into()),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            tags: [("team".to_string(), "a".to_string())].into(),
            placement_group: None,
            grant: None,
        };
        let class: BTreeMap<String, String> = [
            ("cost-center".to_string(), "42".to_string()),
            (tags::CLUSTER.to_string(), "spoofed".to_string()),
        ]
        .into();
        let t = launch_tags(&req, &class, Some("prod-eks"));
        assert_eq!(t[tags::CLUSTER], "prod");
        assert_eq!(t[tags::POOL], "a100");
        assert_eq!(t[tags::POOL_NODE], "a100-x-0");
        assert_eq!(t[tags::GANG], "team-a/train");
        assert_eq!(t["Name"], "a100-x-0");
        assert_eq!(t["cost-center"], "42");
        assert_eq!(t["team"], "a");
        assert_eq!(t["kubernetes.io/cluster/prod-eks"], "owned");
        assert!(
            !launch_tags(&req, &class, None)
                .keys()
                .any(|k| k.starts_with("kubernetes.io/"))
        );
    }
}
