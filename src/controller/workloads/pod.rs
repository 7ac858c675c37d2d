//! What the watch caches keep of a Pod, and what they drop of a Node.
//!
//! A `k8s-openapi` Pod takes about 5 KiB in memory even when its JSON is
//! small (its spec and every container are wide structs of optional fields),
//! and a cluster has ten Pods per Node or more. The Pod cache therefore keeps
//! a [`CachedPod`]: the metadata (without `managedFields`, and with only the
//! annotations muster reads) and the handful of fields the controller reads —
//! the node it is bound to, its effective resource requests (already as
//! planner resources), its phase and when it finished. Nodes are kept whole
//! but without the fields nothing reads (`status.images`, which real kubelets
//! fill with every image on the machine, `nodeInfo`, addresses, volumes).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as KubeTime};
use serde::Deserialize;

use muster_planner::Resources;

use crate::controller::workloads::requests::pod_requests;

/// Annotation of static (mirror) pods.
pub(crate) const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The part of a Pod the controller reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(from = "Pod")]
pub struct CachedPod {
    /// Metadata, without `managedFields` and without labels (see
    /// [`CachedPod::label`]).
    pub metadata: ObjectMeta,
    /// Labels, sorted by key: a small map costs a whole B-tree node (about
    /// half a KiB) per Pod.
    pub labels: Vec<(String, String)>,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// Effective requests (containers summed, the largest init container,
    /// limits standing in for missing requests); zero when they do not parse.
    pub requests: Resources,
    /// `status.phase`.
    pub phase: Option<String>,
    /// The newest `finishedAt` of its terminated containers.
    pub finished_at: Option<KubeTime>,
    /// While the pod carries muster's scheduling gate (a pod group's pod not
    /// yet released): what a pin needs of its spec. `None` for every other pod.
    pub gated: Option<Box<Gated>>,
}

/// The scheduling directives of a pod held by muster's scheduling gate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gated {
    /// `spec.schedulingGates`, by name.
    pub gates: Vec<String>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations`.
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// The required node affinity
    /// (`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`):
    /// the planner places the group only on nodes it allows.
    pub required_affinity: Option<k8s_openapi::api::core::v1::NodeSelector>,
}

impl From<Pod> for CachedPod {
    fn from(pod: Pod) -> CachedPod {
        let mut metadata = pod.metadata;
        metadata.managed_fields = None;
        // a BTreeMap iterates in key order: the Vec is sorted
        let labels: Vec<(String, String)> = metadata.labels.take().into_iter().flatten().collect();
        // real Pods carry large annotations (configs, checksums); keep muster's
        // own and the mirror-pod marker
        if let Some(a) = metadata.annotations.as_mut() {
            a.retain(|k, _| k.starts_with("muster.dev/") || k == MIRROR_ANNOTATION);
        }
        if metadata
            .annotations
            .as_ref()
            .is_some_and(BTreeMap::is_empty)
        {
            metadata.annotations = None;
        }
        let status = pod.status.unwrap_or_default();
        let finished_at = status
            .container_statuses
            .iter()
            .flatten()
            .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.clone())
            .max_by_key(|t| t.0);
        let gated = pod.spec.as_ref().and_then(|s| {
            let gates: Vec<String> = s
                .scheduling_gates
                .iter()
                .flatten()
                .map(|g| g.name.clone())
                .collect();
            gates
                .iter()
                .any(|g| g == crate::controller::workloads::pod_group::SCHEDULING_GATE)
                .then(|| {
                    Box::new(Gated {
                        gates,
                        node_selector: s.node_selector.clone().unwrap_or_default(),
                        tolerations: s.tolerations.clone().unwrap_or_default(),
                        required_affinity: s
                            .affinity
                            .as_ref()
                            .and_then(|a| a.node_affinity.as_ref())
                            .and_then(|n| {
                                n.required_during_scheduling_ignored_during_execution
                                    .clone()
                            }),
                    })
                })
        });
        CachedPod {
            metadata,
            labels,
            gated,
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            requests: pod
                .spec
                .as_ref()
                .and_then(|s| pod_requests(s).ok())
                .and_then(|m| {
                    Resources::parse_map(m.iter().map(|(a, b)| (a.as_str(), b.as_str()))).ok()
                })
                .unwrap_or_default(),
            phase: status.phase,
            finished_at,
        }
    }
}

impl CachedPod {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&String> {
        self.labels
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.labels[i].1)
    }
}

impl k8s_openapi::Resource for CachedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for CachedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Drops what nothing reads from a Node before it is cached.
pub(crate) fn slim_node(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(st) = node.status.as_mut() {
        st.images = None;
        st.node_info = None;
        st.addresses = None;
        st.volumes_attached = None;
        st.volumes_in_use = None;
        st.daemon_endpoints = None;
        st.config = None;
        st.runtime_handlers = None;
        st.features = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_pod_keeps_what_is_read() {
        let pod: CachedPod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "a", "labels": {"app": "x"},
                "annotations": {"muster.dev/do-not-disrupt": "true", "checksum/config": "abc"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "a", "image": "i", "env": [{"name": "X", "value": "1"}],
                 "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "1"}}},
                {"name": "b", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
            ], "initContainers": [{"name": "i", "image": "i", "resources": {"requests": {"cpu": "4"}}}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "a", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-23T10:00:05Z"}}},
                {"name": "b", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-23T10:00:09Z"}}}
            ]}
        }))
        .expect("pod");
        assert_eq!(pod.node_name.as_deref(), Some("n1"));
        assert_eq!(pod.phase.as_deref(), Some("Succeeded"));
        assert!(pod.metadata.managed_fields.is_none());
        let annotations: Vec<&String> = pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(annotations, ["muster.dev/do-not-disrupt"]);
        assert_eq!(pod.label("app").map(String::as_str), Some("x"));
        assert_eq!(pod.label("zzz"), None);
        assert!(pod.metadata.labels.is_none());
        // containers summed (1.5 CPU), the init container is larger (4)
        assert_eq!(pod.requests.cpu_millis, 4000);
        assert_eq!(pod.requests.gpu_millis, 2000);
        assert_eq!(
            pod.finished_at.map(|t| t.0.to_string()),
            Some("2026-11-23T10:00:09Z".to_string())
        );
    }

    #[test]
    fn a_cached_pod_is_much_smaller_than_a_pod() {
        assert!(std::mem::size_of::<CachedPod>() * 4 < std::mem::size_of::<Pod>());
    }
}
