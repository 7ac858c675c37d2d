//! Network labels of registered nodes: a Node of a PoolNode that carries
//! none of the network-topology labels (`muster_planner::labels::NETWORK_LAYERS`)
//! is described once by its cloud, off the planning path; when the cloud
//! says where the instance sits in its network (`Instance::network`,
//! broadest layer first), the Node is labelled with its cloud's keys — the
//! EKS keys on AWS, the GKE keys on GCP — so the planner and kube-scheduler
//! see the same domains EKS and GKE would label. A describe that fails is
//! asked again at a later cycle; one that answers, with or without a
//! network, is not asked again for that PoolNode.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use muster_planner::Provider;
use muster_planner::labels::{NETWORK_LAYERS, network_of};
use muster_provider_api::{Instance, ProviderError};

use crate::controller::base::api::{ActError, is_not_found, params};
use crate::controller::cloud::work::{Job, Progress};
use crate::controller::ctx::{Ctx, CycleProviders};

/// The network-topology label keys of `provider`'s nodes, broadest first;
/// empty for a cloud without them.
pub(crate) fn keys_of(provider: Provider) -> &'static [&'static str] {
    match provider {
        Provider::Aws => NETWORK_LAYERS[0],
        Provider::Gcp => NETWORK_LAYERS[1],
        _ => &[],
    }
}

/// The labels that put a node of `provider` at `network` (broadest layer
/// first): one per layer the cloud has a key for.
pub(crate) fn labels_for(provider: Provider, network: &[String]) -> BTreeMap<String, String> {
    keys_of(provider)
        .iter()
        .zip(network)
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

/// Whether a described instance wakes the planning loop: one whose network
/// is known does (the Node is labelled next cycle); any other outcome waits
/// for a regular cycle.
fn wakes_the_loop(result: &Result<Instance, ProviderError>) -> bool {
    result.as_ref().is_ok_and(|i| !i.network.is_empty())
}

/// Labels `node` (of PoolNode `pool_node`, instance `provider_id` on
/// `node_class` of `provider`) with its network layers, describing the
/// instance first (once); nothing when the Node has any network label
/// already or the cloud has no such keys.
pub(crate) async fn label(
    ctx: &Ctx,
    providers: &CycleProviders,
    (pool_node, node_class, provider): (&str, &str, Provider),
    provider_id: &str,
    node: &Node,
) -> Result<(), ActError> {
    if keys_of(provider).is_empty() || !network_of(node.labels()).is_empty() {
        return Ok(());
    }
    let job = Job::Describe(pool_node.to_string());
    let cloud = providers.get(node_class)?;
    let id = provider_id.to_string();
    let describe = move || async move { cloud.describe(&id).await };
    let Progress::Done(result) =
        ctx.cloud
            .work
            .poll(job.clone(), node_class, wakes_the_loop, describe)
    else {
        return Ok(());
    };
    let instance = match result {
        Ok(i) => i,
        Err(e) => {
            // asked again at a later cycle
            ctx.cloud.work.forget(&job);
            tracing::debug!(poolnode = %pool_node, error = %e, "describe for network labels failed");
            return Ok(());
        }
    };
    let labels = labels_for(provider, &instance.network);
    if labels.is_empty() {
        ctx.cloud.work.settle(job);
        return Ok(());
    }
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    match nodes
        .patch(
            &node.name_any(),
            &params(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": labels}})),
        )
        .await
    {
        Ok(_) => {
            ctx.cloud.work.settle(job);
            Ok(())
        }
        Err(e) if is_not_found(&e) => {
            ctx.cloud.work.settle(job);
            Ok(())
        }
        Err(e) => {
            ctx.cloud.work.forget(&job);
            Err(ActError::api("label Node with its network")(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cloud_labels_its_own_keys_broadest_first() {
        let net = vec!["nn-a".to_string(), "nn-b".to_string(), "nn-c".to_string()];
        let aws = labels_for(Provider::Aws, &net);
        assert_eq!(
            aws.get("topology.k8s.aws/network-node-layer-1")
                .map(String::as_str),
            Some("nn-a")
        );
        assert_eq!(
            aws.get("topology.k8s.aws/network-node-layer-3")
                .map(String::as_str),
            Some("nn-c")
        );
        assert_eq!(network_of(&aws), net, "read back as written");
        let gcp = labels_for(Provider::Gcp, &net[..2]);
        assert_eq!(
            gcp.keys().collect::<Vec<_>>(),
            [
                "cloud.google.com/gce-topology-block",
                "cloud.google.com/gce-topology-subblock"
            ]
        );
        assert!(labels_for(Provider::Sim, &net).is_empty());
        assert!(labels_for(Provider::Aws, &[]).is_empty());
    }
}
