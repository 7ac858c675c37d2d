//! Where instances sit in the AWS network: `DescribeInstanceTopology`
//! (EC2 API Reference) answers, for running instances of the types that
//! support it, the network nodes above each instance, ordered from the top
//! layer down (three for most types, four for some) — the order of
//! `Instance::network`, broadest layer first. At most 100 instance ids per
//! call; instances of other types, or not running, are left out of the
//! answer, and their network stays empty.
//!
//! Node labels: Amazon EKS labels nodes of the supported types with these
//! nodes itself, as `topology.k8s.aws/network-node-layer-1` (top) to
//! `-layer-3` (`-layer-4` on four-layer types). The Amazon EKS User Guide,
//! "Place distributed AI/ML workloads with network topology labels"
//! (ml-workload-topology), documents the labels; the AWS cloud controller
//! manager EKS runs applies them when it initializes a node
//! (kubernetes/cloud-provider-aws pull requests #1038, backported to
//! Kubernetes 1.30 and 1.31 in #1044 and #1042, and #1100, which requires
//! them on the types known to support the API). On EKS a controller
//! therefore need not write them; `Instance::network` is what the planner
//! reads about a machine before its node exists, and what a cluster
//! without that cloud controller manager would be labelled from.

use std::collections::BTreeMap;

use muster_provider_api::ProviderError;

use crate::client::failure;
use crate::errors::classify;

/// Instance ids per `DescribeInstanceTopology` call (the API's limit).
pub const IDS_PER_CALL: usize = 100;

/// Instance families `DescribeInstanceTopology` describes (EC2 User Guide,
/// "Prerequisites for Amazon EC2 instance topology", instance types). Other
/// types are never asked about: the answer would be empty.
const FAMILIES: &[&str] = &[
    "g6e",
    "g7e",
    "hpc6a",
    "hpc6id",
    "hpc7a",
    "hpc7g",
    "hpc8a",
    "p3dn",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "p6-b300",
    "p6e-gb200",
    "trn1",
    "trn1n",
    "trn2",
    "trn2u",
];

/// True when instances of `instance_type` may have a topology to describe.
pub fn supported(instance_type: &str) -> bool {
    let family = instance_type.split('.').next().unwrap_or_default();
    FAMILIES.contains(&family)
}

/// The network nodes of each instance id EC2 describes, top layer first;
/// ids it leaves out have none. Calls in chunks of [`IDS_PER_CALL`], every
/// page.
pub async fn network_nodes(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
) -> Result<BTreeMap<String, Vec<String>>, ProviderError> {
    let mut out = BTreeMap::new();
    for chunk in ids.chunks(IDS_PER_CALL) {
        let mut pages = ec2
            .describe_instance_topology()
            .set_instance_ids(Some(chunk.to_vec()))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(&failure(&e), None))?;
            for i in page.instances() {
                let nodes = i.network_nodes();
                if let (Some(id), false) = (i.instance_id(), nodes.is_empty()) {
                    out.insert(id.to_string(), nodes.to_vec());
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_documented_families_are_asked_about() {
        for t in [
            "p4d.24xlarge",
            "p5.48xlarge",
            "p5en.48xlarge",
            "trn1.2xlarge",
            "g6e.xlarge",
        ] {
            assert!(supported(t), "{t}");
        }
        for t in ["g6.xlarge", "g5.48xlarge", "p4.24xlarge", "m5.large", ""] {
            assert!(!supported(t), "{t}");
        }
    }
}
