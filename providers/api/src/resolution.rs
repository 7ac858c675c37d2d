//! What a provider resolved from its NodeClass: the concrete subnets,
//! security groups, images and zones its selectors matched. The controller
//! copies it into the NodeClass status; a selector that matches nothing is a
//! [`ProviderError::NotFound`](crate::ProviderError::NotFound) naming the
//! selector, which becomes a `Ready=False` condition.

use serde::{Deserialize, Serialize};

/// A subnet a selector matched (AWS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedSubnet {
    /// Subnet id.
    pub id: String,
    /// Zone name, e.g. `us-east-1a`.
    pub zone: String,
    /// Zone id, e.g. `use1-az1`, when the cloud reports it.
    pub zone_id: Option<String>,
}

/// A security group a selector matched (AWS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedSecurityGroup {
    /// Group id.
    pub id: String,
    /// Group name.
    pub name: Option<String>,
}

/// An image a selector matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedImage {
    /// Image id (AWS AMI id) or self link (GCP).
    pub id: String,
    /// Image name.
    pub name: Option<String>,
    /// CPU architecture, e.g. `x86_64`.
    pub architecture: Option<String>,
}

/// Everything a provider resolved from its NodeClass. Fields a cloud has no
/// notion of stay empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// Subnets (AWS).
    pub subnets: Vec<ResolvedSubnet>,
    /// Security groups (AWS).
    pub security_groups: Vec<ResolvedSecurityGroup>,
    /// Images.
    pub images: Vec<ResolvedImage>,
    /// Zones machines may be placed in.
    pub zones: Vec<String>,
}
