//! KubeRay RayJob (`ray.io/v1`) behind the workload seam: the pod sets of its
//! `rayClusterSpec` (head and worker groups, see [`crate::controller::workloads::raycluster`]) and,
//! in `K8sJobMode` (the default), the submitter (`submitter`, one pod: the
//! `submitterPodTemplate`, or the one KubeRay builds without it); in
//! `SidecarMode` the submitter is a container KubeRay adds to the head pod,
//! which the head pod set therefore asks for as well.
//!
//! The upstream rules the writes follow (ray-project/kuberay
//! `ray-operator/controllers/ray/rayjob_controller.go` and
//! `utils/validation.go`):
//!
//! - `spec.suspend` moves an Initializing or Running job to Suspending
//!   (`updateStatusToSuspendingIfNeeded`: from no other state), which
//!   deletes its RayCluster and submitter Job, whatever the flag says
//!   meanwhile, and ends Suspended; lifting it goes back to New, which
//!   creates a new RayCluster from `rayClusterSpec` as it is then, and the
//!   submitter from `submitterPodTemplate`. A job that is Waiting
//!   (InteractiveMode, for its job id) or Retrying ignores the flag, and New
//!   passes through Initializing first. So the flag counts as honoured only
//!   once the job is New (nothing created yet) or Suspended: before that the
//!   job is `releasing` (the table writes nothing, no restore, no re-pin) and
//!   counts as active (its gang gets no capacity while pending) —
//!   [`DEPLOYMENT_ACTIVE`];
//! - InteractiveMode is refused ([`INTERACTIVE_MODE`]): a job waiting for its
//!   id holds its cluster and never honours the flag, so muster could not stop
//!   it; past the webhook such a RayJob is reported and not queued;
//! - `enableInTreeAutoscaling` is refused as for a RayCluster
//!   ([`raycluster::AUTOSCALING`]);
//! - suspending needs `shutdownAfterJobFinishes` (else the job turns
//!   ValidationFailed), which the admission webhook therefore requires of a
//!   queued RayJob, as Kueue's does ([`NEEDS_SHUTDOWN`]; past the webhook
//!   such a RayJob is reported and not queued);
//! - no rule on template changes: no start mark; pinned by required node
//!   affinity; the submitter's default template is written into
//!   `submitterPodTemplate` by the pin (as Kueue's `RunWithPodSetsInfo`
//!   does) and taken out again by the restore;
//! - finished: `jobDeploymentStatus` Complete or Failed;
//! - the cluster's pods carry `ray.io/cluster` with the generated cluster
//!   name only, so the pin labels every template with
//!   [`crate::controller::workloads::templated::WORKLOAD_LABEL`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Step};
use serde_json::{Value, json};

use crate::controller::base::api::ActError;
use crate::controller::workloads::raycluster::{self, HEAD};
use crate::controller::workloads::suspendable::{self, Actions};
use crate::controller::workloads::template::PinStyle;
use crate::controller::workloads::templated::{self, TemplateAt, TemplatedKind};
use crate::controller::workloads::writer::{self, Stored, Target, Write};
use crate::controller::workloads::{
    AccessRule, CustomKind, Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// The RayJob custom resource.
pub const KIND: CustomKind = CustomKind {
    group: "ray.io",
    version: "v1",
    kind: "RayJob",
    plural: "rayjobs",
};

/// What the controller does with RayJobs: read and watch them, suspend, pin
/// and restore them.
pub(crate) const ACCESS: &[AccessRule] = &[AccessRule {
    group: "ray.io",
    resources: &["rayjobs"],
    verbs: &["get", "list", "watch", "update", "patch"],
}];

/// The submitter's pod set.
pub(crate) const SUBMITTER: &str = "submitter";

/// How a RayJob is written: pinned by node affinity, its default submitter
/// filled in by the pin.
const TEMPLATED: TemplatedKind = TemplatedKind {
    kind: KIND,
    suspend: "/spec/suspend",
    style: PinStyle::Affinity,
    actions: Actions {
        suspend: "suspend RayJob",
        restore: "restore RayJob templates",
        pin: "pin RayJob",
        unsuspend: "unsuspend RayJob",
    },
    complete: Some(default_submitter),
};

/// What a queued RayJob in InteractiveMode is refused with (by the webhook
/// at creation; past it, reported on the RayJob, which is not queued).
pub(crate) const INTERACTIVE_MODE: &str = "muster: a queued RayJob cannot use spec.submissionMode: InteractiveMode: KubeRay does not honour spec.suspend while such a job waits for its job id (Waiting), so muster could not stop it to preempt or evict it; use K8sJobMode (the default), HTTPMode or SidecarMode";

/// The `jobDeploymentStatus` values in which KubeRay may still run what the
/// job created (`rayjob_controller.go`): its RayCluster exists or is being
/// created or deleted. Suspend is honoured from Initializing and Running
/// only, Waiting and Retrying ignore it, Suspending deletes before it ends
/// Suspended.
pub(crate) const DEPLOYMENT_ACTIVE: &[&str] = &[
    "Initializing",
    "Running",
    "Waiting",
    "Suspending",
    "Retrying",
];

/// A labelled RayJob.
#[derive(Debug, Clone)]
pub(crate) struct RayJobWorkload(pub Arc<DynamicObject>);

fn submission_mode(obj: &DynamicObject) -> &str {
    obj.data
        .pointer("/spec/submissionMode")
        .and_then(Value::as_str)
        .unwrap_or("K8sJobMode")
}

fn k8s_job_mode(obj: &DynamicObject) -> bool {
    submission_mode(obj) == "K8sJobMode"
}

fn deployment_status(obj: &DynamicObject) -> &str {
    obj.data
        .pointer("/status/jobDeploymentStatus")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// What a queued RayJob without `shutdownAfterJobFinishes` is refused with.
pub(crate) const NEEDS_SHUTDOWN: &str = "muster: a queued RayJob must set spec.shutdownAfterJobFinishes: KubeRay suspends (and muster stops) only RayJobs that delete their cluster when done";

/// Why muster cannot run `obj` as a gang, if it cannot: InteractiveMode, an
/// autoscaling cluster, or a cluster kept after the job (which KubeRay
/// refuses to suspend: `ValidationFailed`).
pub(crate) fn unsupported(obj: &DynamicObject) -> Option<&'static str> {
    if submission_mode(obj) == "InteractiveMode" {
        return Some(INTERACTIVE_MODE);
    }
    let shutdown = obj
        .data
        .pointer("/spec/shutdownAfterJobFinishes")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    raycluster::unsupported(&cluster_spec(obj)).or((!shutdown).then_some(NEEDS_SHUTDOWN))
}

fn cluster_spec(obj: &DynamicObject) -> Value {
    obj.data
        .pointer("/spec/rayClusterSpec")
        .cloned()
        .unwrap_or(Value::Null)
}

fn template_at(obj: &DynamicObject) -> Vec<TemplateAt> {
    let mut at = raycluster::template_at(&cluster_spec(obj), "/spec/rayClusterSpec");
    if k8s_job_mode(obj) {
        at.push(TemplateAt {
            pod_set: SUBMITTER.to_string(),
            pointer: "/spec/submitterPodTemplate".to_string(),
        });
    }
    at
}

/// The submitter KubeRay builds when `submitterPodTemplate` is unset: a
/// `ray-job-submitter` container with the head's image, requests of 500m
/// CPU and 200Mi (limits 1 CPU, 1Gi), restartPolicy Never
/// (`common/job.go`, `GetSubmitterTemplate`).
fn default_submitter(obj: &DynamicObject, templates: &mut BTreeMap<String, PodTemplateSpec>) {
    let Some(t) = templates.get_mut(SUBMITTER) else {
        return;
    };
    if t.spec.is_some() {
        return;
    }
    if let Ok(d) = serde_json::from_value(json!({"spec": {
        "restartPolicy": "Never",
        "containers": [submitter_container(obj)]
    }})) {
        *t = d;
    }
}

/// KubeRay's default submitter container (`common/job.go`,
/// `GetDefaultSubmitterContainer`): the head's image, 500m CPU and 200Mi
/// requested, 1 CPU and 1Gi limited.
fn submitter_container(obj: &DynamicObject) -> Value {
    let image = obj
        .data
        .pointer("/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0/image")
        .cloned()
        .unwrap_or(Value::Null);
    json!({"name": "ray-job-submitter", "image": image, "resources": {
        "requests": {"cpu": "500m", "memory": "200Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"}}})
}

/// In SidecarMode KubeRay adds the submitter container to the head pod of
/// the cluster it creates (`rayjob_controller.go`,
/// `constructRayClusterForRayJob` and `getSubmitterContainer`), which the
/// head template does not show: the head pod set asks for it too. Only the
/// pod set is changed, never what is written to the RayJob.
fn sidecar_submitter(obj: &DynamicObject, templates: &mut BTreeMap<String, PodTemplateSpec>) {
    let Some(spec) = templates.get_mut(HEAD).and_then(|t| t.spec.as_mut()) else {
        return;
    };
    if let Ok(c) = serde_json::from_value(submitter_container(obj)) {
        spec.containers.push(c);
    }
}

impl Workload for RayJobWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::RayJob
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
        let cluster = cluster_spec(&self.0);
        if cluster.is_null() {
            return Err(WorkloadError::BadShape(
                "spec.rayClusterSpec is missing (a RayJob on an existing cluster is not queued)"
                    .to_string(),
            ));
        }
        if let Some(why) = unsupported(&self.0) {
            return Err(WorkloadError::Unsupported(why));
        }
        let mut templates = templated::submitted(&self.0, &template_at(&self.0))?;
        default_submitter(&self.0, &mut templates);
        if submission_mode(&self.0) == "SidecarMode" {
            sidecar_submitter(&self.0, &mut templates);
        }
        let submitter = templates.remove(SUBMITTER);
        let mut sets = raycluster::pod_sets(&cluster, templates)?;
        if let Some(template) = submitter {
            sets.push(PodSetTemplate {
                name: SUBMITTER.to_string(),
                count: 1,
                min_count: None,
                template,
            });
        }
        Ok(sets)
    }

    fn observe(&self) -> Observed {
        let obj = &self.0;
        let deployment = deployment_status(obj);
        let finished = matches!(deployment, "Complete" | "Failed");
        let mut o = templated::observe(obj, TEMPLATED.suspend, finished, HEAD);
        o.releasing = o.suspended && DEPLOYMENT_ACTIVE.contains(&deployment);
        o
    }

    /// KubeRay may still run the job's cluster: see [`DEPLOYMENT_ACTIVE`].
    fn counts_active(&self) -> bool {
        DEPLOYMENT_ACTIVE.contains(&deployment_status(&self.0))
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        suspendable::writes(
            &TEMPLATED.on(&self.0, template_at(&self.0), Some(self.gang_name())),
            step,
            directives,
        )
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(writer::rewrap(self, stored, |o| {
            RayJobWorkload(Arc::new(o))
        }))
    }

    fn reread_from(&self) -> Option<(Target, &'static str)> {
        Some((Target::custom(KIND, &self.0), "read RayJob"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rayjob(mode: Option<&str>) -> RayJobWorkload {
        let mut spec = json!({"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head", "image": "ray:2"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                  "template": {"spec": {"containers": [{"name": "w"}]}}}]}});
        if let Some(m) = mode {
            spec["submissionMode"] = json!(m);
        }
        RayJobWorkload(Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "rj", "namespace": "ns", "uid": "u1", "labels": {"muster.dev/queue": "q"}},
                "spec": spec,
            }))
            .expect("rayjob"),
        ))
    }

    #[test]
    fn cluster_groups_and_the_default_submitter_are_pod_sets() {
        let sets = rayjob(None).pod_sets().expect("pod sets");
        let shape: Vec<(&str, u32)> = sets.iter().map(|s| (s.name.as_str(), s.count)).collect();
        assert_eq!(shape, [("head", 1), ("gpu", 2), ("submitter", 1)]);
        let c = &sets[2].template.spec.as_ref().expect("spec").containers[0];
        assert_eq!(
            (c.name.as_str(), c.image.as_deref()),
            ("ray-job-submitter", Some("ray:2"))
        );
        // no submitter pod outside K8sJobMode
        let sets = rayjob(Some("HTTPMode")).pod_sets().expect("pod sets");
        assert_eq!(sets.len(), 2);
        assert_eq!(rayjob(None).gang_name(), "rayjob-rj");
    }

    #[test]
    fn a_pin_writes_the_default_submitter_labelled_and_a_restore_takes_it_out() {
        let w = rayjob(None);
        let dirs = writer::sketch::directives("ns.rayjob-rj", &[], &[]);
        let pins =
            writer::sketch::pins(&[("head", &["c1"]), ("gpu", &["g1"]), ("submitter", &["c1"])]);
        let mut pin = w.writes(&Step::Pin(pins), &dirs).expect("writes");
        assert_eq!(
            writer::sketch::of(&pin[0]),
            (
                "pin RayJob",
                "rayjobs ns/rj".to_string(),
                "replace-latest",
                Value::Null
            )
        );
        let pinned = writer::sketch::revise(pin.remove(0), &w.0).expect("pinned");
        let submitter = &pinned["spec"]["submitterPodTemplate"];
        assert_eq!(
            submitter["spec"]["containers"][0]["name"],
            "ray-job-submitter"
        );
        assert_eq!(submitter["spec"]["containers"][0]["image"], "ray:2");
        // every template names the gang: KubeRay names the cluster's pods
        // after a generated cluster
        for t in [
            submitter,
            &pinned["spec"]["rayClusterSpec"]["headGroupSpec"]["template"],
            &pinned["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"],
        ] {
            assert_eq!(
                t["metadata"]["labels"][templated::WORKLOAD_LABEL],
                "rayjob-rj"
            );
        }
        // the record keeps the submitter as submitted: none
        let record: Value = serde_json::from_str(
            pinned["metadata"]["annotations"]["muster.dev/original-template"]
                .as_str()
                .expect("record"),
        )
        .expect("json");
        assert_eq!(record["submitter"], json!({}));

        let pinned: DynamicObject = serde_json::from_value(pinned).expect("object");
        let mut restore = RayJobWorkload(Arc::new(pinned.clone()))
            .writes(&Step::Restore, &dirs)
            .expect("writes");
        assert_eq!(
            writer::sketch::of(&restore[0]).0,
            "restore RayJob templates"
        );
        let restored = writer::sketch::revise(restore.remove(0), &pinned).expect("restored");
        let mut expected = serde_json::to_value(&*w.0).expect("json");
        expected["metadata"]["annotations"] = json!({});
        assert_eq!(restored, expected, "no submitter template, as submitted");
    }

    /// A RayJob muster suspended (stop mark, pins recorded) in `status`.
    fn suspended_in(status: &str) -> RayJobWorkload {
        let mut obj = (*rayjob(None).0).clone();
        obj.metadata.annotations = Some(
            [
                ("muster.dev/stopping".to_string(), "true".to_string()),
                (
                    "muster.dev/admitted-nodes".to_string(),
                    "gpu=g1,g2;head=c1;submitter=c1".to_string(),
                ),
            ]
            .into(),
        );
        obj.data["status"] = json!({"jobDeploymentStatus": status});
        RayJobWorkload(Arc::new(obj))
    }

    #[test]
    fn a_suspend_kuberay_has_not_honoured_yet_holds_the_job_where_it_runs() {
        use muster_planner::lifecycle::workload::{Want, next_step};
        let elsewhere = writer::sketch::pins(&[
            ("head", &["c1"]),
            ("gpu", &["g3", "g4"]),
            ("submitter", &["c1"]),
        ]);
        let rules = WorkloadKind::RayJob.rules();
        // KubeRay moves only Initializing and Running to Suspending, ignores
        // the flag while Waiting or Retrying, and deletes before Suspended
        for status in [
            "Initializing",
            "Running",
            "Waiting",
            "Suspending",
            "Retrying",
        ] {
            let w = suspended_in(status);
            assert!(w.counts_active(), "{status}: its cluster may still run");
            for want in [Want::Queued, Want::Run(elsewhere.clone())] {
                assert_eq!(
                    next_step(&w.observe(), &want, rules),
                    Step::None,
                    "{status}: nothing written before KubeRay reports it suspended"
                );
            }
        }
        // Suspended (and New: nothing created yet): restored, or pinned anew
        for status in ["Suspended", ""] {
            let w = suspended_in(status);
            assert!(!w.counts_active(), "{status}");
            assert_eq!(next_step(&w.observe(), &Want::Queued, rules), Step::Restore);
            assert_eq!(
                next_step(&w.observe(), &Want::Run(elsewhere.clone()), rules),
                Step::Pin(elsewhere.clone()),
                "{status}"
            );
        }
    }

    #[test]
    fn interactive_mode_and_autoscaling_are_not_queued() {
        let err = rayjob(Some("InteractiveMode"))
            .pod_sets()
            .expect_err("refused");
        assert_eq!(err.reason(), "UnsupportedWorkload");
        assert!(err.to_string().contains("spec.submissionMode"), "{err}");
        let mut obj = (*rayjob(None).0).clone();
        obj.data["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = json!(true);
        let err = RayJobWorkload(Arc::new(obj))
            .pod_sets()
            .expect_err("refused");
        assert!(err.to_string().contains("enableInTreeAutoscaling"), "{err}");
        for mode in [None, Some("HTTPMode"), Some("SidecarMode")] {
            assert!(rayjob(mode).pod_sets().is_ok(), "{mode:?}");
        }
    }

    #[test]
    fn in_sidecar_mode_the_head_asks_for_the_submitter_container() {
        let sets = rayjob(Some("SidecarMode")).pod_sets().expect("pod sets");
        let shape: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(shape, ["head", "gpu"], "no submitter pod");
        let head = &sets[0].template.spec.as_ref().expect("spec").containers;
        let names: Vec<&str> = head.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["head", "ray-job-submitter"]);
        let requests = head[1]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .expect("requests");
        assert_eq!(requests["cpu"].0, "500m");
        assert_eq!(requests["memory"].0, "200Mi");
        // the other modes leave the head as submitted
        let sets = rayjob(None).pod_sets().expect("pod sets");
        assert_eq!(
            sets[0]
                .template
                .spec
                .as_ref()
                .expect("spec")
                .containers
                .len(),
            1
        );
    }

    #[test]
    fn complete_or_failed_is_finished() {
        for (status, finished) in [
            ("Complete", true),
            ("Failed", true),
            ("Running", false),
            ("Suspended", false),
        ] {
            let mut obj = (*rayjob(None).0).clone();
            obj.data["status"] = json!({"jobDeploymentStatus": status});
            assert_eq!(
                RayJobWorkload(Arc::new(obj)).observe().finished,
                finished,
                "{status}"
            );
        }
    }
}
