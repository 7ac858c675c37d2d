//! Kubeflow PyTorchJob (`kubeflow.org/v1`) behind the workload seam: each
//! replica type is one pod set (`master`: 1 pod, `worker`: its replicas), so
//! a CPU master and GPU workers are admitted together.
//!
//! The upstream rules the writes follow (kubeflow/training-operator,
//! release 1.9):
//!
//! - `pkg/controller.v1/common/job.go` (`ReconcileJobs`): while
//!   `spec.runPolicy.suspend` is true every pod of the job is deleted; when
//!   it is lifted the controller creates the pods from the replica specs'
//!   templates as they are then, and resets `status.startTime`;
//! - `pkg/webhooks/pytorch/pytorchjob_webhook.go`: no rule on template
//!   changes, so a PyTorchJob keeps no start mark
//!   ([`muster_planner::lifecycle::workload::Rules::TEMPLATED`]) and is pinned
//!   by required node affinity on the node names, like a Job
//!   ([`crate::controller::workloads::template::PinStyle::Affinity`]);
//! - finished: the `Succeeded` or `Failed` condition is `True`;
//! - its pods carry `training.kubeflow.org/job-name` and
//!   `training.kubeflow.org/operator-name: pytorchjob-controller`
//!   (`pkg/controller.v1/common/util.go`).
//!
//! `elasticPolicy` is not elasticity muster can use: the operator always
//! creates `replicas` workers, so the worker pod set is of that size.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Step};
use serde_json::Value;

use crate::controller::base::api::ActError;
use crate::controller::workloads::pod::CachedPod;
use crate::controller::workloads::suspendable::{self, Actions};
use crate::controller::workloads::template::PinStyle;
use crate::controller::workloads::templated::{self, TemplateAt, TemplatedKind};
use crate::controller::workloads::writer::{self, Stored, Target, Write};
use crate::controller::workloads::{
    AccessRule, CustomKind, Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// The PyTorchJob custom resource.
pub const KIND: CustomKind = CustomKind {
    group: "kubeflow.org",
    version: "v1",
    kind: "PyTorchJob",
    plural: "pytorchjobs",
};

/// What the controller does with PyTorchJobs: read and watch them, suspend,
/// pin and restore them.
pub(crate) const ACCESS: &[AccessRule] = &[AccessRule {
    group: "kubeflow.org",
    resources: &["pytorchjobs"],
    verbs: &["get", "list", "watch", "update", "patch"],
}];

/// The label the operator puts on every pod of a job: its name.
pub(crate) const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// The label naming the operator that made the pod.
pub(crate) const OPERATOR_LABEL: &str = "training.kubeflow.org/operator-name";
/// This kind's operator name.
pub(crate) const OPERATOR: &str = "pytorchjob-controller";

/// How a PyTorchJob is written: its suspend flag in `runPolicy`, pinned by
/// node affinity.
const TEMPLATED: TemplatedKind = TemplatedKind {
    kind: KIND,
    suspend: "/spec/runPolicy/suspend",
    style: PinStyle::Affinity,
    actions: Actions {
        suspend: "suspend PyTorchJob",
        restore: "restore PyTorchJob templates",
        pin: "pin PyTorchJob",
        unsuspend: "unsuspend PyTorchJob",
    },
    complete: None,
};

/// A labelled PyTorchJob.
#[derive(Debug, Clone)]
pub(crate) struct PyTorchJobWorkload(pub Arc<DynamicObject>);

/// The replica types, master first, with their specs.
fn replica_specs(obj: &DynamicObject) -> Vec<(String, &Value)> {
    let mut out: Vec<(String, &Value)> = obj
        .data
        .pointer("/spec/pytorchReplicaSpecs")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v))
        .collect();
    out.sort_by_key(|(k, _)| (k != "Master", k.clone()));
    out
}

fn template_at(obj: &DynamicObject) -> Vec<TemplateAt> {
    replica_specs(obj)
        .into_iter()
        .map(|(rtype, _)| TemplateAt {
            pod_set: rtype.to_lowercase(),
            pointer: format!("/spec/pytorchReplicaSpecs/{rtype}/template"),
        })
        .collect()
}

/// The gang a pod of a PyTorchJob belongs to.
pub(crate) fn pod_gang_name(pod: &CachedPod) -> Option<String> {
    (pod.label(OPERATOR_LABEL).map(String::as_str) == Some(OPERATOR))
        .then(|| pod.label(JOB_NAME_LABEL))
        .flatten()
        .map(|n| WorkloadKind::PyTorchJob.gang_name(n))
}

impl Workload for PyTorchJobWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::PyTorchJob
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
        let at = template_at(&self.0);
        let mut templates = templated::submitted(&self.0, &at)?;
        let mut out = Vec::new();
        for (rtype, spec) in replica_specs(&self.0) {
            let replicas = spec
                .get("replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(0);
            let name = rtype.to_lowercase();
            out.push(PodSetTemplate {
                count: u32::try_from(replicas).unwrap_or(u32::MAX),
                min_count: None,
                template: templates.remove(&name).unwrap_or_default(),
                name,
            });
        }
        if out.is_empty() {
            return Err(WorkloadError::BadShape(
                "spec.pytorchReplicaSpecs is empty".to_string(),
            ));
        }
        Ok(out)
    }

    fn observe(&self) -> Observed {
        let obj = &self.0;
        let first = template_at(obj)
            .first()
            .map(|a| a.pod_set.clone())
            .unwrap_or_default();
        let finished = templated::condition_true(obj, &["Succeeded", "Failed"]);
        templated::observe(obj, TEMPLATED.suspend, finished, &first)
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        suspendable::writes(
            &TEMPLATED.on(&self.0, template_at(&self.0), None),
            step,
            directives,
        )
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(writer::rewrap(self, stored, |o| {
            PyTorchJobWorkload(Arc::new(o))
        }))
    }

    fn reread_from(&self) -> Option<(Target, &'static str)> {
        Some((Target::custom(KIND, &self.0), "read PyTorchJob"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pytorchjob() -> PyTorchJobWorkload {
        PyTorchJobWorkload(Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "bert", "namespace": "ns", "uid": "u1", "labels": {"muster.dev/queue": "q"}},
                "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {
                    "Worker": {"replicas": 4, "template": {"spec": {"containers": [
                        {"name": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}},
                    "Master": {"replicas": 1, "template": {"spec": {"containers": [
                        {"name": "pytorch", "resources": {"requests": {"cpu": "4"}}}]}}}
                }},
                "status": {"conditions": [{"type": "Suspended", "status": "True"}]}
            }))
            .expect("pytorchjob"),
        ))
    }

    #[test]
    fn master_and_workers_are_pod_sets() {
        let w = pytorchjob();
        let sets = w.pod_sets().expect("pod sets");
        let shape: Vec<(&str, u32)> = sets.iter().map(|s| (s.name.as_str(), s.count)).collect();
        assert_eq!(shape, [("master", 1), ("worker", 4)]);
        let o = w.observe();
        assert!(o.suspended && !o.started && !o.finished && o.pinned.is_none());
        assert_eq!(w.gang_name(), "pytorchjob-bert");
    }

    #[test]
    fn the_suspend_flag_is_in_run_policy_and_there_is_no_start_mark() {
        let w = pytorchjob();
        let dirs = writer::sketch::directives("ns.pytorchjob-bert", &[], &[]);
        let sketch = |step: Step| writer::sketch::writes(&w, step, &dirs);
        let at = "pytorchjobs ns/bert".to_string();
        assert_eq!(
            sketch(Step::Suspend),
            [(
                "suspend PyTorchJob",
                at.clone(),
                "patch",
                json!({"metadata": {"annotations": {crate::controller::base::objects::STOPPING_ANNOTATION: "true"}},
                    "spec": {"runPolicy": {"suspend": true}}})
            )]
        );
        assert_eq!(
            sketch(Step::Unsuspend),
            [(
                "unsuspend PyTorchJob",
                at.clone(),
                "patch",
                json!({"spec": {"runPolicy": {"suspend": false}}})
            )]
        );
        assert!(sketch(Step::ClearStartTime).is_empty());
        // a restore and a pin replace the latest object, read first
        for (step, action) in [
            (Step::Restore, "restore PyTorchJob templates"),
            (Step::Pin(Default::default()), "pin PyTorchJob"),
        ] {
            assert_eq!(
                sketch(step),
                [(action, at.clone(), "replace-latest", Value::Null)]
            );
        }
    }

    #[test]
    fn a_pin_and_a_restore_are_made_of_the_latest_object() {
        let w = pytorchjob();
        // the operator wrote the object since it was observed
        let mut latest = serde_json::to_value(&*w.0).expect("json");
        latest["metadata"]["resourceVersion"] = json!("9");
        latest["status"] =
            json!({"conditions": [{"type": "Suspended", "status": "True"}], "replicaStatuses": {}});
        let latest_obj: DynamicObject = serde_json::from_value(latest.clone()).expect("object");
        let pins = writer::sketch::pins(&[("master", &["c1"]), ("worker", &["g1", "g2"])]);
        let dirs = writer::sketch::directives("ns.pytorchjob-bert", &["g1"], &[]);
        let mut pin = w.writes(&Step::Pin(pins), &dirs).expect("writes");
        let pinned = writer::sketch::revise(pin.remove(0), &latest_obj).expect("pinned");
        let mut expected = latest.clone();
        let annotations = &pinned["metadata"]["annotations"];
        let record: Value = serde_json::from_str(
            annotations["muster.dev/original-template"]
                .as_str()
                .expect("record"),
        )
        .expect("json");
        assert_eq!(
            record,
            json!({"master": latest["spec"]["pytorchReplicaSpecs"]["Master"]["template"],
                "worker": latest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]})
        );
        expected["metadata"]["annotations"] = json!({
            "muster.dev/admitted-nodes": "master=c1;worker=g1,g2",
            "muster.dev/original-template": annotations["muster.dev/original-template"],
        });
        let node = |n: &str| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]});
        let affinity = |nodes: &[&str]| {
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": nodes.iter().map(|n| node(n)).collect::<Vec<_>>()}}})
        };
        let specs = &mut expected["spec"]["pytorchReplicaSpecs"];
        let master = &mut specs["Master"]["template"]["spec"];
        master["nodeSelector"] = json!({"muster.dev/gang": "ns.pytorchjob-bert"});
        master["affinity"] = affinity(&["c1"]);
        master["tolerations"] = json!([]);
        let worker = &mut specs["Worker"]["template"]["spec"];
        worker["nodeSelector"] = json!({"muster.dev/gang": "ns.pytorchjob-bert"});
        worker["affinity"] = affinity(&["g1", "g2"]);
        worker["tolerations"] = json!([writer::sketch::toleration()]);
        assert_eq!(
            pinned, expected,
            "the latest object pinned, at its resourceVersion"
        );

        // the restore: the pinned object, as read, back to the latest as submitted
        let pinned_obj: DynamicObject = serde_json::from_value(pinned).expect("object");
        let mut restore = PyTorchJobWorkload(Arc::new(pinned_obj.clone()))
            .writes(&Step::Restore, &dirs)
            .expect("writes");
        let restored = writer::sketch::revise(restore.remove(0), &pinned_obj).expect("restored");
        latest["metadata"]["annotations"] = json!({});
        assert_eq!(restored, latest);
    }

    #[test]
    fn succeeded_or_failed_is_finished() {
        for t in ["Succeeded", "Failed"] {
            let mut obj = (*pytorchjob().0).clone();
            obj.data["status"] = json!({"conditions": [{"type": t, "status": "True"}]});
            assert!(PyTorchJobWorkload(Arc::new(obj)).observe().finished, "{t}");
        }
    }

    #[test]
    fn pods_attributed_by_operator_labels() {
        let pod = |labels: Value| {
            let p: k8s_openapi::api::core::v1::Pod =
                serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels}}))
                    .expect("pod");
            CachedPod::from(p)
        };
        let ours = pod(json!({JOB_NAME_LABEL: "bert", OPERATOR_LABEL: OPERATOR}));
        assert_eq!(pod_gang_name(&ours).as_deref(), Some("pytorchjob-bert"));
        assert_eq!(pod_gang_name(&pod(json!({JOB_NAME_LABEL: "bert"}))), None);
    }
}
