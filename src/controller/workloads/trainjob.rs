//! Kubeflow TrainJob (`trainer.kubeflow.org/v1alpha1`) behind the workload
//! seam: the pods come from the training runtime it references (a
//! ClusterTrainingRuntime, or a TrainingRuntime in its namespace), one pod
//! set per replicated job of the runtime's JobSet template.
//!
//! The upstream rules (kubeflow/trainer):
//!
//! - `pkg/runtime/core/trainingruntime.go` and `plugins/torch/torch.go`:
//!   the replicated job whose template carries
//!   `trainer.kubeflow.org/trainjob-ancestor-step: trainer` runs
//!   `spec.trainer.numNodes` pods (else `mlPolicy.numNodes`, else 1), and
//!   its `node` container gets `spec.trainer.resourcesPerNode`; every other
//!   replicated job runs `replicas × min(parallelism, completions)` pods;
//!   `spec.runtimePatches` are strategic-merge patches of the JobSet spec,
//!   one per manager;
//! - `pkg/runtime/framework/plugins/jobset/jobset.go`: the runtime patches
//!   may change only while the TrainJob is suspended before or after the
//!   write and none of its JobSet's jobs has active pods, so the pin is a
//!   runtime patch of muster's own (manager `muster.dev/controller`: node
//!   selector, tolerations and the [`crate::controller::workloads::templated::WORKLOAD_LABEL`] of
//!   each replicated job's pods, which the JobSet controller carries into
//!   its child Jobs on resume), the restore takes it out, and a stopped
//!   TrainJob counts as active until its jobs' pods are gone;
//! - the TrainJob keeps no start mark of its own (the JobSet controller
//!   clears its child Jobs'); finished: the `Complete` or `Failed`
//!   condition is `True`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Pins, Step};
use serde_json::{Value, json};

use crate::controller::base::api::ActError;
use crate::controller::base::objects::{ADMITTED_NODES_ANNOTATION, STOPPING_ANNOTATION};
use crate::controller::workloads::suspendable::{self, Actions, Suspendable};
use crate::controller::workloads::template::{self, PinStyle, encode_pins};
use crate::controller::workloads::templated::{self, WORKLOAD_LABEL};
use crate::controller::workloads::trainjob_jobset;
use crate::controller::workloads::writer::{self, Change, Stored, Target, Write};
use crate::controller::workloads::{
    AccessRule, CustomKind, Directives, PodSetTemplate, Related, Workload, WorkloadError,
    WorkloadKind,
};

/// The TrainJob custom resource.
pub const KIND: CustomKind = CustomKind {
    group: "trainer.kubeflow.org",
    version: "v1alpha1",
    kind: "TrainJob",
    plural: "trainjobs",
};

/// The cluster-wide training runtimes TrainJobs reference.
pub(crate) const CLUSTER_RUNTIME: CustomKind = CustomKind {
    group: "trainer.kubeflow.org",
    version: "v1alpha1",
    kind: "ClusterTrainingRuntime",
    plural: "clustertrainingruntimes",
};

/// The namespaced training runtimes.
pub(crate) const RUNTIME: CustomKind = CustomKind {
    group: "trainer.kubeflow.org",
    version: "v1alpha1",
    kind: "TrainingRuntime",
    plural: "trainingruntimes",
};

/// The runtimes and the JobSets (the Trainer's children) the adapter
/// reads: cached beside the TrainJobs.
pub(crate) const RELATED: &[Related] = &[
    Related {
        kind: CLUSTER_RUNTIME,
        namespaced: false,
    },
    Related {
        kind: RUNTIME,
        namespaced: true,
    },
    Related {
        kind: crate::controller::workloads::jobset::KIND,
        namespaced: true,
    },
];

/// What the controller does with TrainJobs and their runtimes.
pub(crate) const ACCESS: &[AccessRule] = &[
    AccessRule {
        group: "trainer.kubeflow.org",
        resources: &["trainjobs"],
        verbs: &["get", "list", "watch", "update", "patch"],
    },
    AccessRule {
        group: "trainer.kubeflow.org",
        resources: &["clustertrainingruntimes", "trainingruntimes"],
        verbs: &["get", "list", "watch"],
    },
    AccessRule {
        group: "jobset.x-k8s.io",
        resources: &["jobsets"],
        verbs: &["get", "list", "watch"],
    },
    AccessRule {
        group: "apiextensions.k8s.io",
        resources: &["customresourcedefinitions"],
        verbs: &["get"],
    },
];

/// The manager of muster's runtime patch.
pub(crate) const PATCH_MANAGER: &str = "muster.dev/controller";
/// The label marking the replicated job that runs the trainer.
pub(crate) const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";

/// A labelled TrainJob and the runtime it references (if it exists).
#[derive(Debug, Clone)]
pub(crate) struct TrainJobWorkload {
    /// The TrainJob.
    pub job: Arc<DynamicObject>,
    /// Its training runtime, as cached.
    pub runtime: Option<Arc<DynamicObject>>,
    /// The JobSet its Trainer built for it, once it exists
    /// ([`trainjob_jobset::is_child_of`]).
    pub jobset: Option<Arc<DynamicObject>>,
}

/// The runtime `job` references among the cached ones: (kind, namespace or
/// "", name).
pub(crate) fn runtime_ref(job: &DynamicObject) -> (CustomKind, String, String) {
    let r = job.data.pointer("/spec/runtimeRef");
    let name = r
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match r.and_then(|r| r.get("kind")).and_then(Value::as_str) {
        Some("TrainingRuntime") => (RUNTIME, job.namespace().unwrap_or_default(), name),
        _ => (CLUSTER_RUNTIME, String::new(), name),
    }
}

/// An MPI policy that runs its launcher as one of the nodes
/// (`mlPolicy.mpi.runLauncherAsNode`).
fn launcher_as_node(ml: Option<&Value>) -> bool {
    ml.and_then(|m| m.pointer("/mpi/runLauncherAsNode"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn patches(job: &DynamicObject) -> &[Value] {
    job.data
        .pointer("/spec/runtimePatches")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Merges a PodTemplatePatch into a template: labels, annotations and node
/// selectors merge; scheduling gates merge by name; other fields replace.
fn merge_pod_patch(t: &mut Value, patch: &Value) {
    for k in ["labels", "annotations"] {
        if let Some(Value::Object(add)) = patch.pointer(&format!("/metadata/{k}")) {
            let dst = &mut t["metadata"][k];
            if !dst.is_object() {
                *dst = json!({});
            }
            if let Value::Object(d) = dst {
                d.extend(add.clone());
            }
        }
    }
    let Some(Value::Object(spec)) = patch.get("spec") else {
        return;
    };
    if !t["spec"].is_object() {
        t["spec"] = json!({});
    }
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("nodeSelector", Value::Object(add)) => {
                let dst = &mut t["spec"]["nodeSelector"];
                if !dst.is_object() {
                    *dst = json!({});
                }
                if let Value::Object(d) = dst {
                    d.extend(add.clone());
                }
            }
            ("schedulingGates", Value::Array(add)) => {
                let dst = &mut t["spec"]["schedulingGates"];
                if !dst.is_array() {
                    *dst = json!([]);
                }
                if let Value::Array(d) = dst {
                    for g in add {
                        if !d.iter().any(|x| x.get("name") == g.get("name")) {
                            d.push(g.clone());
                        }
                    }
                }
            }
            (_, Value::Null) => {}
            _ => t["spec"][k] = v.clone(),
        }
    }
}

impl TrainJobWorkload {
    /// The replicated jobs' (name, pods, pod template) as the trainer builds
    /// them, without muster's own patch.
    fn replicated_jobs(&self) -> Result<Vec<(String, i64, Value)>, WorkloadError> {
        let runtime = self.runtime.as_ref().ok_or_else(|| {
            let (k, _, name) = runtime_ref(&self.job);
            WorkloadError::BadShape(format!("{} {name:?} not found", k.kind))
        })?;
        let spec = runtime.data.get("spec").cloned().unwrap_or(Value::Null);
        let ml = spec.get("mlPolicy");
        let trainer = self.job.data.pointer("/spec/trainer");
        let jobs = spec
            .pointer("/template/spec/replicatedJobs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::new();
        for rj in &jobs {
            let name = rj
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| WorkloadError::BadShape("a replicated job has no name".to_string()))?
                .to_string();
            let replicas = rj
                .get("replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(0);
            let jspec = rj.pointer("/template/spec").cloned().unwrap_or(Value::Null);
            let mut pod = jspec.get("template").cloned().unwrap_or(json!({}));
            let is_trainer = rj
                .pointer(&format!(
                    "/template/metadata/labels/{}",
                    ANCESTOR_LABEL.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                == Some("trainer");
            let per_job = if is_trainer && ml.is_some() {
                let from_ml = ml
                    .and_then(|m| m.get("numNodes"))
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                if let Some(res) = trainer.and_then(|t| t.get("resourcesPerNode"))
                    && let Some(Value::Array(cs)) = pod.pointer_mut("/spec/containers")
                {
                    for c in cs
                        .iter_mut()
                        .filter(|c| c.get("name").and_then(Value::as_str) == Some("node"))
                    {
                        for part in ["requests", "limits"] {
                            if let Some(Value::Object(add)) = res.get(part) {
                                let dst = &mut c["resources"][part];
                                if !dst.is_object() {
                                    *dst = json!({});
                                }
                                if let Value::Object(d) = dst {
                                    d.extend(add.clone());
                                }
                            }
                        }
                    }
                }
                match trainer
                    .and_then(|t| t.get("numNodes"))
                    .and_then(Value::as_i64)
                {
                    // an MPI launcher run as a node is one of the nodes
                    Some(n) if name == "node" && launcher_as_node(ml) => (n - 1).max(1),
                    Some(n) => n,
                    None => from_ml,
                }
            } else {
                let p = jspec
                    .get("parallelism")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                jspec
                    .get("completions")
                    .and_then(Value::as_i64)
                    .map_or(p, |c| p.min(c))
            };
            out.push((name, replicas.saturating_mul(per_job.max(0)), pod));
        }
        // the other managers' patches, in order
        for p in patches(&self.job) {
            if p.get("manager").and_then(Value::as_str) == Some(PATCH_MANAGER) {
                continue;
            }
            for rp in p
                .pointer("/trainingRuntimeSpec/template/spec/replicatedJobs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(pod_patch) = rp.pointer("/template/spec/template") else {
                    continue;
                };
                if let Some((_, _, pod)) = out
                    .iter_mut()
                    .find(|(n, _, _)| Some(n.as_str()) == rp.get("name").and_then(Value::as_str))
                {
                    merge_pod_patch(pod, pod_patch);
                }
            }
        }
        Ok(out)
    }
}

impl Workload for TrainJobWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::TrainJob
    }

    fn meta(&self) -> &ObjectMeta {
        &self.job.metadata
    }

    fn gang_owner(&self) -> Option<OwnerReference> {
        crate::controller::workloads::custom_owner(KIND, &self.job)
    }

    fn object_ref(&self) -> ObjectReference {
        crate::controller::workloads::custom_object_ref(KIND, &self.job)
    }

    fn pod_sets(&self) -> Result<Vec<PodSetTemplate>, WorkloadError> {
        if let Some(js) = &self.jobset {
            let derived = self.replicated_jobs().unwrap_or_default();
            return trainjob_jobset::pod_sets(js, &derived);
        }
        let mut out = Vec::new();
        for (name, pods, template) in self.replicated_jobs()? {
            let template: PodTemplateSpec = serde_json::from_value(template)
                .map_err(|e| WorkloadError::BadShape(format!("replicated job {name}: {e}")))?;
            out.push(PodSetTemplate {
                count: u32::try_from(pods).unwrap_or(u32::MAX),
                min_count: None,
                template,
                name,
            });
        }
        if out.is_empty() {
            return Err(WorkloadError::BadShape(
                "the training runtime has no replicated jobs".to_string(),
            ));
        }
        Ok(out)
    }

    fn waiting_pod_sets(&self) -> std::collections::BTreeSet<String> {
        // the Trainer's initializers come first (`dependsOn` in its runtimes)
        self.jobset
            .as_deref()
            .map(crate::controller::workloads::jobset::waiting)
            .unwrap_or_default()
    }

    fn observe(&self) -> Observed {
        let first = self
            .replicated_jobs()
            .ok()
            .and_then(|j| j.first().map(|(n, _, _)| n.clone()))
            .unwrap_or_default();
        let finished = templated::condition_true(&self.job, &["Complete", "Failed"]);
        templated::observe(&self.job, "/spec/suspend", finished, &first)
    }

    fn counts_active(&self) -> bool {
        jobs_active(&self.job)
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        suspendable::writes(self, step, directives)
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(writer::rewrap(self, stored, |o| TrainJobWorkload {
            job: Arc::new(o),
            runtime: self.runtime.clone(),
            jobset: self.jobset.clone(),
        }))
    }

    fn reread_from(&self) -> Option<(Target, &'static str)> {
        Some((self.target(), "read TrainJob"))
    }
}

/// A job of the TrainJob's JobSet has active pods (its `status.jobsStatus`).
fn jobs_active(job: &DynamicObject) -> bool {
    job.data
        .pointer("/status/jobsStatus")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| s.get("active").and_then(Value::as_i64).unwrap_or(0) > 0)
}

/// The names of a TrainJob's writes.
const ACTIONS: Actions = Actions {
    suspend: "suspend TrainJob",
    restore: "restore TrainJob",
    pin: "pin TrainJob",
    unsuspend: "unsuspend TrainJob",
};

/// The trainer writes its status as it stops, so a restore and a pin
/// replace the latest TrainJob, read first, guarded by its resourceVersion.
impl Suspendable for TrainJobWorkload {
    fn target(&self) -> Target {
        Target::custom(KIND, &self.job)
    }

    fn suspend_flag(&self) -> &'static str {
        "/spec/suspend"
    }

    fn actions(&self) -> Actions {
        ACTIONS
    }

    fn restore(&self) -> Result<Write, ActError> {
        Ok(Write {
            target: self.target(),
            change: Change::ReplaceLatest(Box::new(restored)),
            action: ACTIONS.restore,
        })
    }

    fn pin(&self, pins: &Pins, directives: &Directives) -> Result<Write, ActError> {
        let name = self.job.name_any();
        let gang = self.gang_name();
        let mut rjobs = Vec::new();
        for (set, _, pod) in self
            .replicated_jobs()
            .map_err(|e| ActError::Missing(format!("TrainJob {name}: {e}")))?
        {
            let submitted: PodTemplateSpec = serde_json::from_value(pod)
                .map_err(|e| ActError::Missing(format!("TrainJob {name}: {e}")))?;
            let pinned =
                template::pin_set(submitted, &set, pins, directives, PinStyle::NodeSelector);
            let spec = pinned.spec.unwrap_or_default();
            rjobs.push(json!({"name": set, "template": {"spec": {"template": {
                "metadata": {"labels": {WORKLOAD_LABEL: gang}},
                "spec": {"nodeSelector": spec.node_selector, "tolerations": spec.tolerations},
            }}}}));
        }
        let ours = json!({"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": rjobs}}}});
        let record = encode_pins(pins);
        Ok(Write {
            target: self.target(),
            change: Change::ReplaceLatest(Box::new(move |latest| {
                pinned(latest, ours, record).map(Some)
            })),
            action: ACTIONS.pin,
        })
    }
}

/// `latest` without muster's runtime patch, pins record and stopping mark;
/// `None` while a job of its JobSet still has active pods (the trainer's
/// webhook refuses a change of the patches then: the restore waits for
/// them).
fn restored(latest: &DynamicObject) -> Result<Option<DynamicObject>, ActError> {
    if jobs_active(latest) {
        return Ok(None);
    }
    let mut next = latest.clone();
    if let Some(Value::Array(list)) = next.data.pointer_mut("/spec/runtimePatches") {
        list.retain(|p| p.get("manager").and_then(Value::as_str) != Some(PATCH_MANAGER));
    }
    if let Some(a) = next.metadata.annotations.as_mut() {
        a.remove(ADMITTED_NODES_ANNOTATION);
        a.remove(STOPPING_ANNOTATION);
    }
    Ok(Some(next))
}

/// `latest` with `ours` in place of muster's runtime patch (appended after
/// the other managers'), the pins recorded (`record`), the stopping mark
/// taken out.
fn pinned(latest: &DynamicObject, ours: Value, record: String) -> Result<DynamicObject, ActError> {
    let mut next = latest.clone();
    let spec = next
        .data
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ActError::Missing(format!("TrainJob {} has no spec", latest.name_any())))?;
    let list = spec.entry("runtimePatches").or_insert_with(|| json!([]));
    if let Value::Array(list) = list {
        list.retain(|p| p.get("manager").and_then(Value::as_str) != Some(PATCH_MANAGER));
        list.push(ours);
    }
    let a = next
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    a.insert(ADMITTED_NODES_ANNOTATION.to_string(), record);
    a.remove(STOPPING_ANNOTATION);
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Arc<DynamicObject> {
        Arc::new(serde_json::from_value(v).expect("object"))
    }

    fn trainjob(extra: Value) -> TrainJobWorkload {
        let mut spec = json!({"runtimeRef": {"name": "torch"}, "suspend": true,
            "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}});
        if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
            s.extend(e);
        }
        TrainJobWorkload {
            job: obj(
                json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "llm", "namespace": "ns", "uid": "u1", "labels": {"muster.dev/queue": "q"}},
                "spec": spec}),
            ),
            runtime: Some(obj(
                json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
                "metadata": {"name": "torch"},
                "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                    {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {"containers": [
                        {"name": "dataset-initializer", "resources": {"requests": {"cpu": "2"}}}]}}}}},
                    {"name": "node", "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                        "spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}
                ]}}}}),
            )),
            jobset: None,
        }
    }

    #[test]
    fn runtime_jobs_are_pod_sets_sized_by_the_trainer() {
        let sets = trainjob(json!({})).pod_sets().expect("pod sets");
        let shape: Vec<(&str, u32)> = sets.iter().map(|s| (s.name.as_str(), s.count)).collect();
        assert_eq!(shape, [("dataset-initializer", 1), ("node", 4)]);
        let limits = sets[1].template.spec.as_ref().expect("spec").containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .expect("limits");
        assert_eq!(limits["nvidia.com/gpu"].0, "8");
        assert_eq!(trainjob(json!({})).gang_name(), "trainjob-llm");
    }

    #[test]
    fn other_managers_patches_apply_but_not_musters_own() {
        let w = trainjob(json!({"runtimePatches": [
            {"manager": "team", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}}}]}}}},
            {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"muster.dev/gang": "x"}}}}}}]}}}}
        ]}));
        let sets = w.pod_sets().expect("pod sets");
        let sel = sets[1]
            .template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .expect("selector");
        assert_eq!(sel.get("zone").map(String::as_str), Some("a"));
        assert!(!sel.contains_key("muster.dev/gang"));
    }

    #[test]
    fn a_pin_is_musters_runtime_patch_on_the_latest_trainjob() {
        let team = json!({"manager": "team", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}}}]}}}});
        let w = trainjob(json!({"runtimePatches": [team.clone()]}));
        let dirs = writer::sketch::directives("ns.trainjob-llm", &["g1"], &[]);
        let sketch = |step: Step| writer::sketch::writes(&w, step, &dirs);
        let at = "trainjobs ns/llm".to_string();
        assert_eq!(
            sketch(Step::Suspend)[0],
            (
                "suspend TrainJob",
                at.clone(),
                "patch",
                json!({"metadata": {"annotations": {STOPPING_ANNOTATION: "true"}}, "spec": {"suspend": true}})
            )
        );
        assert_eq!(
            sketch(Step::Unsuspend)[0],
            (
                "unsuspend TrainJob",
                at.clone(),
                "patch",
                json!({"spec": {"suspend": false}})
            )
        );
        assert!(sketch(Step::ClearStartTime).is_empty());
        let pins = writer::sketch::pins(&[("node", &["g1", "g2"])]);
        let mut pin = w.writes(&Step::Pin(pins), &dirs).expect("writes");
        assert_eq!(
            writer::sketch::of(&pin[0]),
            ("pin TrainJob", at, "replace-latest", Value::Null)
        );
        // the latest has an older patch of muster's and the stopping mark
        let mut latest = (*w.job).clone();
        latest.metadata.resource_version = Some("6".into());
        latest.metadata.annotations =
            Some([(STOPPING_ANNOTATION.to_string(), "true".to_string())].into());
        latest.data["spec"]["runtimePatches"] =
            json!([team, {"manager": PATCH_MANAGER, "old": true}]);
        let pinned = writer::sketch::revise(pin.remove(0), &latest).expect("pinned");
        let label = |set: &str| json!({"muster.dev/gang": "ns.trainjob-llm", format!("pod-set.muster.dev/{set}"): "ns.trainjob-llm"});
        let ours = json!({"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "template": {"spec": {"template": {
                "metadata": {"labels": {WORKLOAD_LABEL: "trainjob-llm"}},
                "spec": {"nodeSelector": label("dataset-initializer"), "tolerations": []}}}}},
            {"name": "node", "template": {"spec": {"template": {
                "metadata": {"labels": {WORKLOAD_LABEL: "trainjob-llm"}},
                "spec": {"nodeSelector": {"muster.dev/gang": "ns.trainjob-llm", "pod-set.muster.dev/node": "ns.trainjob-llm", "zone": "a"},
                    "tolerations": [writer::sketch::toleration()]}}}}}]}}}});
        let mut expected = serde_json::to_value(&latest).expect("json");
        expected["spec"]["runtimePatches"][1] = ours;
        expected["metadata"]["annotations"] = json!({ADMITTED_NODES_ANNOTATION: "g1,g2"});
        assert_eq!(pinned, expected);
    }

    #[test]
    fn a_restore_waits_for_the_jobs_pods_then_takes_musters_patch_out() {
        let team = json!({"manager": "team"});
        let w = trainjob(json!({"runtimePatches": [team.clone(), {"manager": PATCH_MANAGER}]}));
        let restore = || {
            let mut writes = w
                .writes(&Step::Restore, &writer::sketch::directives("g", &[], &[]))
                .expect("writes");
            assert_eq!(writes.len(), 1);
            assert_eq!(writer::sketch::of(&writes[0]).0, "restore TrainJob");
            writes.remove(0)
        };
        let mut latest = (*w.job).clone();
        latest.metadata.annotations = Some(
            [
                (ADMITTED_NODES_ANNOTATION.to_string(), "g1".to_string()),
                (STOPPING_ANNOTATION.to_string(), "true".to_string()),
            ]
            .into(),
        );
        latest.data["status"] = json!({"jobsStatus": [{"name": "node", "active": 2}]});
        assert_eq!(
            writer::sketch::revise(restore(), &latest),
            None,
            "nothing written while a job has active pods"
        );
        latest.data["status"] = json!({"jobsStatus": [{"name": "node", "active": 0}]});
        let restored = writer::sketch::revise(restore(), &latest).expect("restored");
        let mut expected = serde_json::to_value(&latest).expect("json");
        expected["spec"]["runtimePatches"] = json!([team]);
        expected["metadata"]["annotations"] = json!({});
        assert_eq!(restored, expected);
    }

    #[test]
    fn missing_runtime_is_a_shape_error_and_active_jobs_count() {
        let mut w = trainjob(json!({}));
        w.runtime = None;
        assert!(matches!(w.pod_sets(), Err(WorkloadError::BadShape(_))));
        let mut job = (*w.job).clone();
        job.data["status"] = json!({"jobsStatus": [{"name": "node", "active": 1}]});
        w.job = Arc::new(job);
        assert!(w.counts_active());
    }

    #[test]
    fn pod_sets_are_read_from_the_child_jobset_once_it_exists() {
        let mut w = trainjob(json!({}));
        let owner = json!([{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "name": "llm", "uid": "u1", "controller": true}]);
        // a plugin muster does not know gave the node job 3 pods; muster's pin is in
        let js = obj(
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "llm", "namespace": "ns", "ownerReferences": owner},
            "spec": {"replicatedJobs": [
                {"name": "dataset-initializer", "replicas": 1, "template": {"spec": {"parallelism": 1,
                    "completions": 1, "template": {"spec": {"containers": [{"name": "dataset-initializer"}]}}}}},
                {"name": "node", "replicas": 1, "template": {"spec": {"parallelism": 3, "completions": 3,
                    "template": {"metadata": {"labels": {WORKLOAD_LABEL: "trainjob-llm", "team": "a"}},
                        "spec": {"nodeSelector": {"muster.dev/gang": "ns.trainjob-llm"},
                            "tolerations": [{"key": "muster.dev/gang", "operator": "Exists"}],
                            "containers": [{"name": "node"}]}}}}}
            ]}}),
        );
        assert!(trainjob_jobset::is_child_of(&js, &w.job));
        let mut stranger = (*js).clone();
        stranger.metadata.owner_references = None;
        assert!(!trainjob_jobset::is_child_of(&stranger, &w.job));
        w.jobset = Some(js);
        let sets = w.pod_sets().expect("pod sets");
        let shape: Vec<(&str, u32)> = sets.iter().map(|s| (s.name.as_str(), s.count)).collect();
        assert_eq!(shape, [("dataset-initializer", 1), ("node", 3)]);
        let node = &sets[1].template;
        let labels = node
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .expect("labels");
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert!(
            !labels.contains_key(WORKLOAD_LABEL),
            "muster's pin is not submitted"
        );
        let spec = node.spec.as_ref().expect("spec");
        assert_eq!(
            (spec.node_selector.clone(), spec.tolerations.clone()),
            (None, None)
        );
    }

    #[test]
    fn an_mpi_launcher_run_as_a_node_is_one_of_the_nodes_before_the_jobset_exists() {
        let mut w = trainjob(json!({}));
        let mut rt = (**w.runtime.as_ref().expect("runtime")).clone();
        rt.data["spec"]["mlPolicy"] = json!({"numNodes": 1, "mpi": {"runLauncherAsNode": true}});
        w.runtime = Some(Arc::new(rt));
        let counts: Vec<u32> = w
            .pod_sets()
            .expect("pod sets")
            .iter()
            .map(|s| s.count)
            .collect();
        assert_eq!(counts, [1, 3], "4 nodes: the launcher and 3 node pods");
    }
}
