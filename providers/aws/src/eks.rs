//! The EKS cluster a NodeClass joins: what `DescribeCluster` says about it
//! (API endpoint, CA bundle, service CIDR, IP family, Kubernetes version),
//! everything a node's bootstrap needs besides its own labels and taints.

use muster_provider_api::ProviderError;

use crate::client::failure;
use crate::errors::classify;

/// The cluster's IP family (`kubernetesNetworkConfig.ipFamily`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// Pods and services get IPv4 addresses.
    Ipv4,
    /// Pods and services get IPv6 addresses.
    Ipv6,
}

/// What a node needs to know to join an EKS cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Cluster name.
    pub name: String,
    /// API server endpoint, `https://…`.
    pub endpoint: String,
    /// The cluster CA bundle, base64-encoded PEM as EKS returns it.
    pub certificate_authority: String,
    /// Service CIDR of the cluster's IP family.
    pub service_cidr: String,
    /// IP family.
    pub ip_family: IpFamily,
    /// Kubernetes `major.minor`, e.g. `1.31`.
    pub version: String,
}

impl ClusterInfo {
    /// The cluster DNS service address: the tenth address of the IPv4
    /// service CIDR, as the EKS images compute it (`None` for IPv6, where
    /// the image derives it from the node's own configuration).
    pub fn dns_ip(&self) -> Option<String> {
        if self.ip_family != IpFamily::Ipv4 {
            return None;
        }
        let (base, _) = self.service_cidr.split_once('/')?;
        let ip: std::net::Ipv4Addr = base.parse().ok()?;
        Some(std::net::Ipv4Addr::from(u32::from(ip).checked_add(10)?).to_string())
    }
}

fn incomplete(name: &str, field: &str) -> ProviderError {
    ProviderError::Transient {
        message: format!("EKS cluster {name} has no {field} yet (is it still creating?)"),
        retry_after: None,
    }
}

/// `DescribeCluster`; a cluster that is not `ACTIVE` or lacks endpoint, CA or
/// service CIDR is a transient error (it is still being created or updated).
pub async fn describe(eks: &aws_sdk_eks::Client, name: &str) -> Result<ClusterInfo, ProviderError> {
    let resp = eks
        .describe_cluster()
        .name(name)
        .send()
        .await
        .map_err(|e| match classify(&failure(&e), None) {
            ProviderError::NotFound { .. } => ProviderError::NotFound {
                what: format!("spec.aws.cluster.name: EKS cluster {name}"),
            },
            other => other,
        })?;
    let c = resp
        .cluster()
        .ok_or_else(|| incomplete(name, "description"))?;
    if let Some(status) = c.status()
        && status.as_str() != "ACTIVE"
        && status.as_str() != "UPDATING"
    {
        return Err(ProviderError::Transient {
            message: format!("EKS cluster {name} is {}", status.as_str()),
            retry_after: None,
        });
    }
    let endpoint = c.endpoint().ok_or_else(|| incomplete(name, "endpoint"))?;
    let ca = c
        .certificate_authority()
        .and_then(|ca| ca.data())
        .ok_or_else(|| incomplete(name, "certificate authority"))?;
    let net = c.kubernetes_network_config();
    let ip_family = match net.and_then(|n| n.ip_family()).map(|f| f.as_str()) {
        Some("ipv6") => IpFamily::Ipv6,
        _ => IpFamily::Ipv4,
    };
    let cidr = match ip_family {
        IpFamily::Ipv4 => net.and_then(|n| n.service_ipv4_cidr()),
        IpFamily::Ipv6 => net.and_then(|n| n.service_ipv6_cidr()),
    }
    .ok_or_else(|| incomplete(name, "service CIDR"))?;
    let version = c.version().ok_or_else(|| incomplete(name, "version"))?;
    Ok(ClusterInfo {
        name: name.to_string(),
        endpoint: endpoint.to_string(),
        certificate_authority: ca.to_string(),
        service_cidr: cidr.to_string(),
        ip_family,
        version: version.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(cidr: &str, family: IpFamily) -> ClusterInfo {
        ClusterInfo {
            name: "c".into(),
            endpoint: "https://x".into(),
            certificate_authority: "Q0E=".into(),
            service_cidr: cidr.into(),
            ip_family: family,
            version: "1.31".into(),
        }
    }

    #[test]
    fn the_dns_address_is_the_tenth_of_the_service_cidr() {
        assert_eq!(
            info("172.20.0.0/16", IpFamily::Ipv4).dns_ip().as_deref(),
            Some("172.20.0.10")
        );
        assert_eq!(
            info("10.100.0.0/16", IpFamily::Ipv4).dns_ip().as_deref(),
            Some("10.100.0.10")
        );
        assert_eq!(info("fd00::/108", IpFamily::Ipv6).dns_ip(), None);
        assert_eq!(info("garbage", IpFamily::Ipv4).dns_ip(), None);
    }
}
