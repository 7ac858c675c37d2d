//! Pod groups behind the workload seam: plain Pods sharing a
//! `muster.dev/pod-group` label, the group's size in the
//! `muster.dev/pod-group-size` annotation, each held by the
//! `muster.dev/admission` scheduling gate the admission webhook adds when it
//! is created. The group is one pod set, `main`, of `size` pods; it becomes
//! a Gang once all of them exist, and is released together.
//!
//! The upstream rules the writes follow (Kubernetes
//! `pkg/apis/core/validation/validation.go`, `ValidatePodUpdate` and
//! `validatePodSchedulingGates`; KEP-3521 and KEP-3838):
//!
//! - scheduling gates may be set only at creation and afterwards only
//!   removed; a pod with gates is not scheduled;
//! - while a pod is gated its node selector may only gain entries, its
//!   required node affinity only be narrowed, and tolerations may be added
//!   at any time;
//! - so a pod is pinned once (node selector on the gang's and the pod set's
//!   node labels, tolerations of its nodes' taints) and released by
//!   removing the gate — one update may do both, since it is checked
//!   against the gated pod. A gate cannot come back: a released group is
//!   stopped by deleting its pods ([`muster_planner::lifecycle::workload::Rules::PODS`]);
//!   whoever created them creates them again, gated, and they queue anew.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use muster_planner::lifecycle::workload::{Observed, Step};

use crate::controller::base::api::ActError;
use crate::controller::base::objects::{ADMITTED_NODES_ANNOTATION, GANG_LABEL, QUEUE_LABEL};
use crate::controller::workloads::pod::CachedPod;
use crate::controller::workloads::template::{decode_pins, encode_pins, pod_set_label};
use crate::controller::workloads::writer::{Change, Stored, Target, Write};
use crate::controller::workloads::{
    Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// Label on Pods: the group they belong to.
pub(crate) const POD_GROUP_LABEL: &str = "muster.dev/pod-group";
/// Annotation on Pods: how many pods the group has.
pub(crate) const GROUP_SIZE_ANNOTATION: &str = "muster.dev/pod-group-size";
/// The scheduling gate that holds a pod until its group is admitted.
pub(crate) const SCHEDULING_GATE: &str = "muster.dev/admission";
/// What the controller does with the pods of groups beyond reading them:
/// pin and release them, and delete them to stop a group.
pub(crate) const ACCESS: &[crate::controller::workloads::AccessRule] =
    &[crate::controller::workloads::AccessRule {
        group: "",
        resources: &["pods"],
        verbs: &["patch", "update", "delete"],
    }];

/// The name of a pod group's one pod set.
pub const POD_SET: &str = "main";

/// True when the pod is held by muster's scheduling gate.
pub fn gated(pod: &CachedPod) -> bool {
    pod.gated.is_some()
}

/// True when the pod carries the record of a pin.
fn pin_recorded(pod: &CachedPod) -> bool {
    pod.annotations().contains_key(ADMITTED_NODES_ANNOTATION)
}

/// One pod group: its pods (not finished ones and finished ones alike),
/// sorted by name.
#[derive(Debug, Clone)]
pub struct PodGroup {
    meta: ObjectMeta,
    pods: Vec<Arc<CachedPod>>,
}

/// The pod groups among `pods`, by namespace and group name.
pub fn groups(pods: &[Arc<CachedPod>]) -> Vec<PodGroup> {
    let mut by: BTreeMap<(String, String), Vec<Arc<CachedPod>>> = BTreeMap::new();
    for p in pods {
        // a pod another workload's controller made belongs to that workload
        if p.metadata.deletion_timestamp.is_some()
            || crate::controller::workloads::managed_controller(p.owner_references()).is_some()
        {
            continue;
        }
        if let Some(g) = p.label(POD_GROUP_LABEL) {
            by.entry((p.namespace().unwrap_or_default(), g.clone()))
                .or_default()
                .push(p.clone());
        }
    }
    by.into_iter()
        .map(|((ns, name), mut pods)| {
            pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            // the group reads its queue and annotations from its first pod
            let first = &pods[0];
            let mut labels = BTreeMap::new();
            if let Some(q) = first.label(QUEUE_LABEL) {
                labels.insert(QUEUE_LABEL.to_string(), q.clone());
            }
            let meta = ObjectMeta {
                name: Some(name),
                namespace: Some(ns),
                labels: Some(labels),
                annotations: first.metadata.annotations.clone(),
                ..ObjectMeta::default()
            };
            PodGroup { meta, pods }
        })
        .collect()
}

/// A group's size, from its [`GROUP_SIZE_ANNOTATION`].
pub(crate) fn size_of(meta: &ObjectMeta) -> Result<u32, WorkloadError> {
    let v = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(GROUP_SIZE_ANNOTATION))
        .ok_or(WorkloadError::BadAnnotation(
            GROUP_SIZE_ANNOTATION,
            "missing".to_string(),
        ))?;
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            WorkloadError::BadAnnotation(
                GROUP_SIZE_ANNOTATION,
                format!("{v:?} is not a positive integer"),
            )
        })
}

impl PodGroup {
    /// A group of `pods` (sorted here) described by `meta`: its name,
    /// namespace, queue label and the size annotation. For kinds whose
    /// groups are not marked by [`POD_GROUP_LABEL`] (a LeaderWorkerSet's).
    pub(crate) fn new(meta: ObjectMeta, mut pods: Vec<Arc<CachedPod>>) -> PodGroup {
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        PodGroup { meta, pods }
    }

    /// The group as stored after its writes: each patched pod as the server
    /// returned it, deleted pods (or pods found gone) out, the others as
    /// they were.
    pub(crate) fn stored_group(&self, stored: Vec<Stored>) -> Result<PodGroup, ActError> {
        let mut by_name = BTreeMap::new();
        for s in stored {
            by_name.insert(s.name.clone(), s.typed::<Pod>()?);
        }
        let pods = self
            .pods
            .iter()
            .filter_map(|p| match by_name.remove(&p.name_any()) {
                None => Some(p.clone()),
                Some(Some(pod)) => Some(Arc::new(CachedPod::from(pod))),
                Some(None) => None,
            })
            .collect();
        Ok(PodGroup {
            meta: self.meta.clone(),
            pods,
        })
    }

    fn size(&self) -> Result<u32, WorkloadError> {
        size_of(&self.meta)
    }

    fn live(&self) -> impl Iterator<Item = &Arc<CachedPod>> {
        self.pods
            .iter()
            .filter(|p| !matches!(p.phase.as_deref(), Some("Succeeded" | "Failed")))
    }
}

/// The merge patch that pins a gated pod (node selector entries added,
/// tolerations appended, the pin recorded) and, with `release`, removes
/// muster's gate.
fn pin_patch(
    pod: &CachedPod,
    nodes: &std::collections::BTreeSet<String>,
    pins_record: Option<&str>,
    directives: &Directives,
    release: bool,
) -> serde_json::Value {
    let held = pod.gated.as_deref().cloned().unwrap_or_default();
    let mut spec = serde_json::Map::new();
    if let Some(record) = pins_record {
        let mut selector = held.node_selector.clone();
        selector.insert(GANG_LABEL.to_string(), directives.gang_label.clone());
        selector.insert(pod_set_label(POD_SET), directives.gang_label.clone());
        spec.insert("nodeSelector".into(), serde_json::json!(selector));
        // tolerations may only be added: the pod's own, then the nodes' taints
        let template = PodTemplateSpec {
            metadata: None,
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                tolerations: Some(held.tolerations.clone()),
                ..Default::default()
            }),
        };
        let pinned = crate::controller::workloads::template::pin(
            template,
            POD_SET,
            nodes,
            &directives.gang_label,
            &directives.taints_of(nodes),
            crate::controller::workloads::template::PinStyle::NodeSelector,
        );
        let tolerations = pinned.spec.and_then(|s| s.tolerations).unwrap_or_default();
        if tolerations != held.tolerations {
            spec.insert("tolerations".into(), serde_json::json!(tolerations));
        }
        let mut out = serde_json::json!({
            "metadata": {"annotations": {ADMITTED_NODES_ANNOTATION: record}},
        });
        if release {
            spec.insert("schedulingGates".into(), gates_without_muster(&held.gates));
        }
        out["spec"] = serde_json::Value::Object(spec);
        return out;
    }
    serde_json::json!({"spec": {"schedulingGates": gates_without_muster(&held.gates)}})
}

fn gates_without_muster(gates: &[String]) -> serde_json::Value {
    serde_json::Value::Array(
        gates
            .iter()
            .filter(|g| *g != SCHEDULING_GATE)
            .map(|g| serde_json::json!({"name": g}))
            .collect(),
    )
}

impl Workload for PodGroup {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::PodGroup
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn gang_owner(&self) -> Option<OwnerReference> {
        None
    }

    fn object_ref(&self) -> ObjectReference {
        // Events go to the group's first pod
        let first = &self.pods[0];
        ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Pod".to_string()),
            name: first.metadata.name.clone(),
            namespace: first.metadata.namespace.clone(),
            uid: first.metadata.uid.clone(),
            ..ObjectReference::default()
        }
    }

    fn pod_sets(&self) -> Result<Vec<PodSetTemplate>, WorkloadError> {
        let size = self.size()?;
        let first = &self.pods[0];
        // the cache keeps a pod's effective requests and, while gated, its
        // node selector and tolerations: enough to place it
        let requests: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
            first
                .requests
                .to_quantities()
                .into_iter()
                .map(|(k, q)| {
                    (
                        k,
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.to_string()),
                    )
                })
                .collect();
        let held = first.gated.as_deref().cloned().unwrap_or_default();
        let template: PodTemplateSpec = PodTemplateSpec {
            metadata: None,
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                containers: vec![k8s_openapi::api::core::v1::Container {
                    name: "pod".to_string(),
                    resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                        requests: Some(requests),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                node_selector: (!held.node_selector.is_empty()).then_some(held.node_selector),
                tolerations: (!held.tolerations.is_empty()).then_some(held.tolerations),
                affinity: held.required_affinity.map(|required| {
                    k8s_openapi::api::core::v1::Affinity {
                        node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
                            required_during_scheduling_ignored_during_execution: Some(required),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }
                }),
                ..Default::default()
            }),
        };
        Ok(vec![PodSetTemplate {
            name: POD_SET.to_string(),
            count: size,
            min_count: crate::controller::workloads::job::min_count(&self.meta)?,
            template,
        }])
    }

    fn incomplete(&self) -> Option<String> {
        match self.size() {
            Ok(size) => {
                let have = self.live().count();
                (have < size as usize).then(|| format!("{have} of {size} pods exist"))
            }
            // a bad size is reported when the Gang would be made
            Err(_) => None,
        }
    }

    fn observe(&self) -> Observed {
        let live: Vec<&Arc<CachedPod>> = self.live().collect();
        let finished = live.is_empty() && !self.pods.is_empty();
        let released = live.iter().any(|p| !gated(p));
        // a released pod without a pin was not released by muster: the
        // group reads as pinned nowhere, so the table stops it
        let unpinned_release = live
            .iter()
            .any(|p| !gated(p) && !p.annotations().contains_key(ADMITTED_NODES_ANNOTATION));
        let pinned = if unpinned_release {
            Some(muster_planner::lifecycle::workload::Pins::new())
        } else {
            live.iter()
                .filter_map(|p| p.annotations().get(ADMITTED_NODES_ANNOTATION).cloned())
                .find_map(|v| decode_pins(&v, POD_SET))
        };
        Observed {
            finished,
            suspended: live.iter().any(|p| gated(p)) || !released,
            started: released,
            stopping: false,
            pinned,
            releasing: false,
        }
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        let ns = self.meta.namespace.clone().unwrap_or_default();
        let target = |p: &CachedPod| Target::typed::<Pod>(&ns, &p.name_any());
        Ok(match step {
            // held by gates, not by a flag: nothing to clear or restore
            Step::None | Step::ClearStartTime | Step::Restore => Vec::new(),
            // released pods and pods pinned before are deleted (pinned, they
            // could only be narrowed further); gated, unpinned ones wait as
            // they are
            Step::Suspend => self
                .live()
                .filter(|p| !gated(p) || pin_recorded(p))
                .map(|p| Write {
                    target: target(p),
                    change: Change::Delete {
                        uid: p.metadata.uid.clone(),
                    },
                    action: "delete pod of group",
                })
                .collect(),
            // each gated pod is pinned once (a pod with a record keeps it:
            // its node selector could only be narrowed further) and, with an
            // unsuspend, released in the same patch
            Step::Pin(_) | Step::Unsuspend => {
                let pins = match step {
                    Step::Pin(p) => p.clone(),
                    _ => self.observe().pinned.unwrap_or_default(),
                };
                let release = *step == Step::Unsuspend;
                let record = encode_pins(&pins);
                let nodes = pins.values().flatten().cloned().collect();
                self.pods
                    .iter()
                    .filter(|p| gated(p) && (release || !pin_recorded(p)))
                    .map(|p| Write {
                        target: target(p),
                        change: Change::Patch(pin_patch(
                            p,
                            &nodes,
                            (!pin_recorded(p)).then_some(record.as_str()),
                            directives,
                            release,
                        )),
                        action: if release {
                            "release pod of group"
                        } else {
                            "pin pod of group"
                        },
                    })
                    .collect()
            }
        })
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(Box::new(self.stored_group(stored)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::workloads::writer;
    use serde_json::json;

    fn pod(name: &str, gated: bool, extra: serde_json::Value) -> Arc<CachedPod> {
        let mut body = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name,
                "labels": {POD_GROUP_LABEL: "g", QUEUE_LABEL: "q"},
                "annotations": {GROUP_SIZE_ANNOTATION: "2"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "tolerations": [{"key": "a", "operator": "Exists"}]},
            "status": {"phase": "Pending"}
        });
        if gated {
            body["spec"]["schedulingGates"] = json!([{"name": SCHEDULING_GATE}, {"name": "other"}]);
        }
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        let p: Pod = serde_json::from_value(body).expect("pod");
        Arc::new(CachedPod::from(p))
    }

    #[test]
    fn a_group_is_complete_at_its_size_and_held_while_gated() {
        let one = groups(&[pod("a", true, json!({}))]);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].incomplete().as_deref(), Some("1 of 2 pods exist"));
        let two = groups(&[pod("b", true, json!({})), pod("a", true, json!({}))]);
        let g = &two[0];
        assert_eq!(g.incomplete(), None);
        assert_eq!(g.gang_name(), "podgroup-g");
        let sets = g.pod_sets().expect("pod sets");
        assert_eq!(sets[0].count, 2);
        let o = g.observe();
        assert!(o.suspended && !o.started && o.pinned.is_none() && !o.finished);
    }

    /// A group of four: p0 released and pinned (running), p1 gated and
    /// pinned, p2 gated, p3 finished.
    fn four() -> PodGroup {
        let with = |name: &str, gated: bool, record: bool, phase: &str| {
            let mut p = (*pod(name, gated, json!({"status": {"phase": phase}}))).clone();
            if record {
                p.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(ADMITTED_NODES_ANNOTATION.to_string(), "n1".to_string());
            }
            Arc::new(p)
        };
        let mut g = groups(&[
            with("p0", false, true, "Running"),
            with("p1", true, true, "Pending"),
            with("p2", true, false, "Pending"),
            with("p3", false, false, "Succeeded"),
        ]);
        g.remove(0)
    }

    fn sketch(g: &PodGroup, step: Step) -> Vec<writer::sketch::Sketch> {
        let dirs = writer::sketch::directives("ns.podgroup-g", &["n1"], &[]);
        writer::sketch::writes(g, step, &dirs)
    }

    #[test]
    fn a_suspend_deletes_released_and_pinned_pods_by_uid() {
        let g = four();
        assert_eq!(
            sketch(&g, Step::Suspend),
            [
                (
                    "delete pod of group",
                    "pods ns/p0".to_string(),
                    "delete",
                    json!("p0")
                ),
                (
                    "delete pod of group",
                    "pods ns/p1".to_string(),
                    "delete",
                    json!("p1")
                ),
            ]
        );
        for step in [Step::None, Step::ClearStartTime, Step::Restore] {
            assert!(sketch(&g, step).is_empty(), "held by gates, not by a flag");
        }
        assert!(g.reread_from().is_none());
    }

    #[test]
    fn a_pin_patches_gated_pods_once_and_an_unsuspend_releases_every_gated_pod() {
        let g = four();
        let pinned_p2 = json!({
            "metadata": {"annotations": {ADMITTED_NODES_ANNOTATION: "n1"}},
            "spec": {"nodeSelector": {GANG_LABEL: "ns.podgroup-g", "pod-set.muster.dev/main": "ns.podgroup-g"},
                "tolerations": [{"key": "a", "operator": "Exists"},
                    writer::sketch::toleration()]}});
        let pins = writer::sketch::pins(&[(POD_SET, &["n1"])]);
        // p1 carries a pin already: only p2 is pinned
        assert_eq!(
            sketch(&g, Step::Pin(pins)),
            [(
                "pin pod of group",
                "pods ns/p2".to_string(),
                "patch",
                pinned_p2.clone()
            )]
        );
        let mut released_p2 = pinned_p2;
        released_p2["spec"]["schedulingGates"] = json!([{"name": "other"}]);
        assert_eq!(
            sketch(&g, Step::Unsuspend),
            [
                (
                    "release pod of group",
                    "pods ns/p1".to_string(),
                    "patch",
                    json!({"spec": {"schedulingGates": [{"name": "other"}]}})
                ),
                (
                    "release pod of group",
                    "pods ns/p2".to_string(),
                    "patch",
                    released_p2
                ),
            ]
        );
    }

    #[test]
    fn the_group_as_stored_drops_deleted_pods_and_takes_patched_ones() {
        let g = four();
        let p2 = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p2", "namespace": "ns", "uid": "p2",
                "annotations": {ADMITTED_NODES_ANNOTATION: "n1"}},
            "spec": {"containers": [{"name": "c"}], "schedulingGates": [{"name": "other"}]},
            "status": {"phase": "Pending"}});
        let stored = vec![
            Stored {
                name: "p0".into(),
                object: None,
                action: "delete pod of group",
            },
            Stored {
                name: "p2".into(),
                object: Some(serde_json::from_value(p2).expect("object")),
                action: "release pod of group",
            },
        ];
        let next = g.stored_group(stored).expect("stored");
        let names: Vec<(&str, bool)> = next
            .pods
            .iter()
            .map(|p| (p.metadata.name.as_deref().unwrap_or_default(), gated(p)))
            .collect();
        assert_eq!(names, [("p1", true), ("p2", false), ("p3", false)]);
        assert!(pin_recorded(&next.pods[1]), "p2 as the server stored it");
    }

    #[test]
    fn the_release_patch_keeps_other_gates_and_only_adds_tolerations() {
        let p = pod("a", true, json!({}));
        let dirs = Directives {
            gang_label: "ns.podgroup-g".into(),
            taints: [(
                "n1".to_string(),
                vec![muster_planner::Taint {
                    key: "gpu".into(),
                    value: "true".into(),
                    effect: muster_planner::TaintEffect::NoSchedule,
                }],
            )]
            .into(),
            counts: Default::default(),
        };
        let nodes = ["n1".to_string()].into();
        let patch = pin_patch(&p, &nodes, Some("n1"), &dirs, true);
        assert_eq!(patch["spec"]["schedulingGates"], json!([{"name": "other"}]));
        assert_eq!(patch["spec"]["nodeSelector"][GANG_LABEL], "ns.podgroup-g");
        let tols = patch["spec"]["tolerations"]
            .as_array()
            .expect("tolerations");
        assert_eq!(tols.len(), 2, "{tols:?}");
        assert_eq!(tols[0]["key"], "a", "the pod's own come first");
        assert_eq!(
            patch["metadata"]["annotations"][ADMITTED_NODES_ANNOTATION],
            "n1"
        );
    }
}
