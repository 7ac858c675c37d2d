//! KubeRay RayCluster (`ray.io/v1`) behind the workload seam: the head group
//! is one pod set (`head`, one pod) and each worker group one more (named
//! after the group, `replicas` clamped to `[minReplicas, maxReplicas]` times
//! `numOfHosts` pods).
//!
//! Autoscaling (`enableInTreeAutoscaling: true`) is refused
//! ([`AUTOSCALING`]), for a RayCluster and a RayJob's cluster alike, rather
//! than run elastic: the Ray autoscaler writes each group's `replicas`
//! anywhere between its bounds whenever Ray asks for more, so pods beyond
//! what muster admitted would be created (onto the nodes pinned to the gang,
//! or left Pending), and scaling down deletes only the workers the
//! autoscaler names (`raycluster_controller.go`, `reconcilePods`: random
//! deletes are off with autoscaling), so a smaller admission would not
//! shrink a running cluster either; and KubeRay adds an `autoscaler`
//! container to the head pod (`common/pod.go`, `BuildAutoscalerContainer`:
//! 500m CPU and 512Mi requested and limited) that the submitted head
//! template does not show. Running it elastic would need the planner to
//! hold capacity for `maxReplicas` and re-admit on every scale-up; until
//! then the webhook refuses such an object at creation and one that got past
//! it is reported and not queued.
//!
//! The upstream rules the writes follow (ray-project/kuberay
//! `ray-operator/controllers/ray/raycluster_controller.go`):
//!
//! - `spec.suspend`: the cluster turns `RayClusterSuspending`, every pod is
//!   deleted (atomically: whatever the flag says meanwhile), then
//!   `RayClusterSuspended`; lifting it creates the pods again from the
//!   group templates as they are then;
//! - no webhook rule on template changes (`pkg/webhooks/v1/raycluster_webhook.go`
//!   checks names only), so a RayCluster keeps no start mark and is pinned by
//!   required node affinity ([`crate::controller::workloads::template::PinStyle::Affinity`]);
//! - a RayCluster never finishes: its gang ends when it is deleted;
//! - its pods carry `ray.io/cluster: <name>` (`common/pod.go`, `labelPod`).
//!
//! A RayCluster a RayJob created is that RayJob's (see [`crate::controller::workloads::rayjob`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Step};
use serde_json::Value;

use crate::controller::base::api::ActError;
use crate::controller::workloads::suspendable::{self, Actions};
use crate::controller::workloads::template::PinStyle;
use crate::controller::workloads::templated::{self, TemplateAt, TemplatedKind};
use crate::controller::workloads::writer::{self, Stored, Target, Write};
use crate::controller::workloads::{
    AccessRule, CustomKind, Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// The RayCluster custom resource.
pub const KIND: CustomKind = CustomKind {
    group: "ray.io",
    version: "v1",
    kind: "RayCluster",
    plural: "rayclusters",
};

/// What the controller does with RayClusters: read and watch them, suspend,
/// pin and restore them.
pub(crate) const ACCESS: &[AccessRule] = &[AccessRule {
    group: "ray.io",
    resources: &["rayclusters"],
    verbs: &["get", "list", "watch", "update", "patch"],
}];

/// The label KubeRay puts on every pod of a cluster: its name.
pub(crate) const CLUSTER_LABEL: &str = "ray.io/cluster";
/// The head group's pod set.
pub(crate) const HEAD: &str = "head";

/// What a queued RayCluster or RayJob with autoscaling is refused with (by
/// the webhook at creation; past it, reported on the object, which is not
/// queued).
pub(crate) const AUTOSCALING: &str = "muster: a queued RayCluster or RayJob cannot set enableInTreeAutoscaling: true (spec.enableInTreeAutoscaling, spec.rayClusterSpec.enableInTreeAutoscaling of a RayJob): the Ray autoscaler would add worker pods beyond the gang muster admitted, and KubeRay adds an autoscaler container (500m CPU, 512Mi) to the head pod, which muster does not count; leave it unset and size each worker group with replicas";

/// How a RayCluster is written: pinned by node affinity.
const TEMPLATED: TemplatedKind = TemplatedKind {
    kind: KIND,
    suspend: "/spec/suspend",
    style: PinStyle::Affinity,
    actions: Actions {
        suspend: "suspend RayCluster",
        restore: "restore RayCluster templates",
        pin: "pin RayCluster",
        unsuspend: "unsuspend RayCluster",
    },
    complete: None,
};

/// Why muster cannot run the cluster spec `cluster` as a gang, if it
/// cannot: autoscaling.
pub(crate) fn unsupported(cluster: &Value) -> Option<&'static str> {
    cluster
        .get("enableInTreeAutoscaling")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        .then_some(AUTOSCALING)
}

/// A labelled RayCluster.
#[derive(Debug, Clone)]
pub(crate) struct RayClusterWorkload(pub Arc<DynamicObject>);

fn int(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(default)
}

/// Where the templates of a cluster spec at `base` are
/// (`/spec` for a RayCluster, `/spec/rayClusterSpec` for a RayJob).
pub(crate) fn template_at(cluster: &Value, base: &str) -> Vec<TemplateAt> {
    let mut at = vec![TemplateAt {
        pod_set: HEAD.to_string(),
        pointer: format!("{base}/headGroupSpec/template"),
    }];
    for (i, g) in groups(cluster).iter().enumerate() {
        at.push(TemplateAt {
            pod_set: group_name(g),
            pointer: format!("{base}/workerGroupSpecs/{i}/template"),
        });
    }
    at
}

fn groups(cluster: &Value) -> &[Value] {
    cluster
        .get("workerGroupSpecs")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn group_name(g: &Value) -> String {
    g.get("groupName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The pod sets of a cluster spec, with the templates as submitted; an
/// autoscaling cluster is [`WorkloadError::Unsupported`].
pub fn pod_sets(
    cluster: &Value,
    mut templates: BTreeMap<String, k8s_openapi::api::core::v1::PodTemplateSpec>,
) -> Result<Vec<PodSetTemplate>, WorkloadError> {
    if let Some(why) = unsupported(cluster) {
        return Err(WorkloadError::Unsupported(why));
    }
    let mut out = vec![PodSetTemplate {
        name: HEAD.to_string(),
        count: 1,
        min_count: None,
        template: templates.remove(HEAD).unwrap_or_default(),
    }];
    for g in groups(cluster) {
        let name = group_name(g);
        if name.is_empty() || name == HEAD {
            return Err(WorkloadError::BadShape(format!(
                "worker group name {name:?} is empty or names the head"
            )));
        }
        let hosts = int(g.get("numOfHosts"), 1).max(1);
        let lo = int(g.get("minReplicas"), 0).max(0);
        let hi = int(g.get("maxReplicas"), i64::from(i32::MAX)).max(lo);
        let replicas = if g.get("suspend").and_then(Value::as_bool) == Some(true) {
            0
        } else {
            int(g.get("replicas"), 0).clamp(lo, hi)
        };
        let count = u32::try_from(replicas.saturating_mul(hosts)).unwrap_or(u32::MAX);
        out.push(PodSetTemplate {
            count,
            min_count: None,
            template: templates.remove(&name).unwrap_or_default(),
            name,
        });
    }
    Ok(out)
}

impl Workload for RayClusterWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::RayCluster
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn gang_owner(&self) -> Option<OwnerReference> {
        crate::controller::workloads::custom_owner(KIND, &self.0)
    }

    fn object_ref(&self) -> ObjectReference {
        crate::controller::workloads::custom_object_ref(KIND, &self.0)
    }

    fn pod_sets(&self) -> Result<Vec<PodSetTemplate>, WorkloadError> {
        let spec = self.0.data.get("spec").cloned().unwrap_or(Value::Null);
        let templates = templated::submitted(&self.0, &template_at(&spec, "/spec"))?;
        pod_sets(&spec, templates)
    }

    fn observe(&self) -> Observed {
        // a RayCluster never finishes: its gang ends when it is deleted
        templated::observe(&self.0, TEMPLATED.suspend, false, HEAD)
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        let spec = self.0.data.get("spec").cloned().unwrap_or(Value::Null);
        let at = template_at(&spec, "/spec");
        suspendable::writes(&TEMPLATED.on(&self.0, at, None), step, directives)
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(writer::rewrap(self, stored, |o| {
            RayClusterWorkload(Arc::new(o))
        }))
    }

    fn reread_from(&self) -> Option<(Target, &'static str)> {
        Some((Target::custom(KIND, &self.0), "read RayCluster"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use serde_json::json;

    fn cluster(autoscaling: bool) -> RayClusterWorkload {
        RayClusterWorkload(Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "rc", "namespace": "ns", "uid": "u1", "labels": {"muster.dev/queue": "q"}},
                "spec": {"suspend": true, "enableInTreeAutoscaling": autoscaling,
                    "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
                    "workerGroupSpecs": [
                        {"groupName": "gpu", "replicas": 6, "minReplicas": 2, "maxReplicas": 4, "numOfHosts": 2,
                         "template": {"spec": {"containers": [{"name": "w"}]}}},
                        {"groupName": "cpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 1, "suspend": true,
                         "template": {"spec": {"containers": [{"name": "c"}]}}}
                    ]}
            }))
            .expect("raycluster"),
        ))
    }

    #[test]
    fn head_and_worker_groups_are_pod_sets() {
        let sets = cluster(false).pod_sets().expect("pod sets");
        let shape: Vec<(&str, u32, Option<u32>)> = sets
            .iter()
            .map(|s| (s.name.as_str(), s.count, s.min_count))
            .collect();
        // replicas clamped to maxReplicas, times the hosts; a suspended group runs none
        assert_eq!(
            shape,
            [("head", 1, None), ("gpu", 8, None), ("cpu", 0, None)]
        );
        assert_eq!(cluster(false).gang_name(), "raycluster-rc");
        assert!(cluster(false).observe().suspended);
    }

    #[test]
    fn an_autoscaling_cluster_is_not_queued() {
        let err = cluster(true).pod_sets().expect_err("refused");
        assert_eq!(err.reason(), "UnsupportedWorkload");
        assert!(err.to_string().contains("enableInTreeAutoscaling"), "{err}");
        assert!(cluster(false).pod_sets().is_ok());
    }

    #[test]
    fn a_pin_of_fewer_pods_keeps_the_sizes_and_a_restore_gives_the_templates_back() {
        let w = cluster(false);
        let dirs = writer::sketch::directives("ns.raycluster-rc", &[], &[("gpu", 4)]);
        let sketch = |step: Step| writer::sketch::writes(&w, step, &dirs);
        let at = "rayclusters ns/rc".to_string();
        assert_eq!(
            sketch(Step::Suspend)[0],
            (
                "suspend RayCluster",
                at.clone(),
                "patch",
                json!({"metadata": {"annotations": {"muster.dev/stopping": "true"}}, "spec": {"suspend": true}})
            )
        );
        assert_eq!(
            sketch(Step::Unsuspend)[0],
            (
                "unsuspend RayCluster",
                at.clone(),
                "patch",
                json!({"spec": {"suspend": false}})
            )
        );
        assert!(sketch(Step::ClearStartTime).is_empty());
        assert_eq!(
            sketch(Step::Restore)[0],
            (
                "restore RayCluster templates",
                at.clone(),
                "replace-latest",
                Value::Null
            )
        );
        let pins = writer::sketch::pins(&[("head", &["c1"]), ("gpu", &["g1", "g2"])]);
        let mut pin = w.writes(&Step::Pin(pins), &dirs).expect("writes");
        assert_eq!(
            writer::sketch::of(&pin[0]),
            ("pin RayCluster", at, "replace-latest", Value::Null)
        );
        let mut latest = (*w.0).clone();
        latest.metadata.resource_version = Some("4".into());
        let pinned = writer::sketch::revise(pin.remove(0), &latest).expect("pinned");
        assert_eq!(pinned["metadata"]["resourceVersion"], "4");
        // no elasticity: the replicas stay as submitted
        assert_eq!(pinned["spec"]["workerGroupSpecs"][0]["replicas"], 6);
        assert!(
            pinned["metadata"]["annotations"]
                .get("muster.dev/original-sizes")
                .is_none()
        );
        assert_eq!(
            pinned["metadata"]["annotations"]["muster.dev/admitted-nodes"],
            "gpu=g1,g2;head=c1"
        );
        let gpu = &pinned["spec"]["workerGroupSpecs"][0]["template"]["spec"];
        assert_eq!(
            gpu["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [1]["matchFields"][0]["values"],
            json!(["g2"])
        );
        // a group admitted nowhere is pinned to nowhere: its own node label
        assert_eq!(
            pinned["spec"]["workerGroupSpecs"][1]["template"]["spec"]["nodeSelector"],
            json!({"muster.dev/gang": "ns.raycluster-rc", "pod-set.muster.dev/cpu": "ns.raycluster-rc"})
        );

        let pinned: DynamicObject = serde_json::from_value(pinned).expect("object");
        let mut restore = RayClusterWorkload(Arc::new(pinned.clone()))
            .writes(&Step::Restore, &dirs)
            .expect("writes");
        let restored = writer::sketch::revise(restore.remove(0), &pinned).expect("restored");
        let mut expected = serde_json::to_value(&latest).expect("json");
        expected["metadata"]["annotations"] = json!({});
        assert_eq!(restored, expected, "as submitted: templates unpinned");
    }

    #[test]
    fn a_rayjob_cluster_is_the_rayjobs() {
        let mut obj = (*cluster(false).0).clone();
        obj.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayJob".into(),
            name: "job".into(),
            uid: "u2".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        let owner = |o: &DynamicObject| {
            crate::controller::workloads::managed_controller(o.owner_references())
        };
        assert_eq!(
            owner(&obj),
            Some(crate::controller::workloads::WorkloadKind::RayJob)
        );
        assert_eq!(owner(&cluster(false).0), None);
    }
}
