//! The launch request of a PoolNode's machine: the one place the labels and
//! taints a node registers with are composed. Every provider turns the
//! request's `labels` and `taints` into the kubelet's `--node-labels` and
//! `--register-with-taints` (nodeadm `NodeConfig`, Bottlerocket settings,
//! GKE `kube-env`, the plain GCP bootstrap, the simulated cloud's Node).

use std::collections::BTreeMap;

use muster_planner::Taint;
use muster_planner::labels::registration_labels;
use muster_provider_api::{Grant, GrantMember, LaunchRequest};

use crate::controller::base::objects::{POOLNODE_LABEL, PoolNodeSpec};
use crate::controller::translate::node::{offering_key, poolnode_gang};

#[cfg(all(test, feature = "aws", feature = "gcp"))]
mod device_plugin;

/// The request that launches PoolNode `name` of `cluster`: the pool's
/// `labels` with muster's (`muster.dev/pool`, `muster.dev/poolnode`, and
/// `nvidia.com/gpu.present=true` when the offering has GPUs, so the NVIDIA
/// device plugin's DaemonSet lands on it) and the pool's `taints`.
pub(crate) fn launch_request(
    name: &str,
    spec: &PoolNodeSpec,
    cluster: &str,
    labels: &BTreeMap<String, String>,
    taints: Vec<Taint>,
) -> LaunchRequest {
    // a negative count (never written by muster; the CRD refuses it) is no GPUs
    let gpus = u32::try_from(spec.offering.gpu_count).unwrap_or(0);
    let mut labels = registration_labels(&spec.pool, labels, gpus);
    labels.insert(POOLNODE_LABEL.to_string(), name.to_string());
    LaunchRequest {
        name: name.to_string(),
        idempotency_key: spec.idempotency_key.clone(),
        offering: offering_key(spec),
        pool: spec.pool.clone(),
        cluster: cluster.to_string(),
        gang: poolnode_gang(spec),
        labels,
        taints,
        tags: BTreeMap::new(),
        placement_group: spec.placement_group.clone(),
        grant: spec.grant.as_ref().map(|g| Grant {
            name: g.name.clone(),
            members: g
                .members
                .iter()
                .map(|m| GrantMember {
                    name: m.name.clone(),
                    idempotency_key: m.idempotency_key.clone(),
                })
                .collect(),
        }),
    }
}
