//! JobSet (`jobset.x-k8s.io/v1alpha2`) behind the workload seam: each
//! replicated job is one pod set of the gang (`replicas` Jobs of
//! `min(parallelism, completions)` pods), so a CPU driver and GPU workers are
//! admitted together.
//!
//! The upstream rules the writes follow (kubernetes-sigs/jobset):
//!
//! - `pkg/webhooks/jobset_webhook.go` (`ValidateUpdate`): `spec.replicatedJobs`
//!   is immutable, except the pod templates' labels, annotations, node
//!   selector, tolerations and scheduling gates while the old or the new
//!   object is suspended. Affinity is never mutable, so a JobSet is pinned
//!   by node selector: the gang's node label and one label per pod set
//!   ([`crate::controller::workloads::template::PinStyle::NodeSelector`]).
//! - `pkg/controllers/jobset_controller.go`: a suspended JobSet suspends its
//!   child Jobs (whose controller deletes their pods); on resume it merges
//!   the templates' labels, annotations, node selector, tolerations and
//!   scheduling gates into each child Job, clears the child's
//!   `status.startTime` itself, then unsuspends it. The JobSet has no start
//!   mark of its own ([`muster_planner::lifecycle::workload::Rules::TEMPLATED`]).
//! - Finished: the `Completed` or `Failed` condition is `True`.
//!
//! A JobSet is never elastic: `ValidateUpdate` keeps each replicated job's
//! `replicas`, `parallelism` and `completions` immutable, suspended or not
//! (only the alpha `ElasticJobSet` feature gate, off by default, lets an
//! Indexed job's parallelism and completions change), so a gang admitted
//! below full size could not be shrunk to the pods admitted and the
//! surplus would stay Pending. The `muster.dev/min-count` annotation on a
//! JobSet is therefore refused ([`MIN_COUNT`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Pins, Step};
use serde_json::Value;

use crate::controller::base::api::ActError;
use crate::controller::base::objects::{
    ADMITTED_NODES_ANNOTATION, MIN_COUNT_ANNOTATION, ORIGINAL_TEMPLATE_ANNOTATION,
    STOPPING_ANNOTATION,
};
use crate::controller::workloads::suspendable::{self, Actions, Suspendable};
use crate::controller::workloads::template::{self, PinStyle, encode_pins};
use crate::controller::workloads::templated;
use crate::controller::workloads::writer::{self, Change, Stored, Target, Write};
use crate::controller::workloads::{
    AccessRule, CustomKind, Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// The JobSet custom resource.
pub const KIND: CustomKind = CustomKind {
    group: "jobset.x-k8s.io",
    version: "v1alpha2",
    kind: "JobSet",
    plural: "jobsets",
};

/// What the controller does with JobSets: read and watch them, suspend,
/// pin and restore them.
pub(crate) const ACCESS: &[AccessRule] = &[AccessRule {
    group: "jobset.x-k8s.io",
    resources: &["jobsets"],
    verbs: &["get", "list", "watch", "update", "patch"],
}];

/// The label the JobSet controller puts on every pod of a JobSet: its name.
pub(crate) const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";

/// What a queued JobSet with `muster.dev/min-count` is refused with (by the
/// webhook at creation; past it, reported on the JobSet, which is not
/// queued).
pub(crate) const MIN_COUNT: &str = "muster: a JobSet cannot carry the muster.dev/min-count annotation: the JobSet webhook keeps spec.replicatedJobs (replicas, parallelism, completions) immutable even while suspended, so muster could not start it with fewer pods than it asks for; remove the annotation";

/// The annotation by which a JobSet, or one of its replicated jobs' Job
/// templates, asks for exclusive placement (`api/jobset/v1alpha2/
/// jobset_types.go`, `ExclusiveKey`).
pub(crate) const EXCLUSIVE_ANNOTATION: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";

/// What a queued JobSet asking for exclusive placement is refused with.
pub(crate) const EXCLUSIVE: &str = "muster: a queued JobSet cannot ask for exclusive placement (annotation alpha.jobset.sigs.k8s.io/exclusive-topology on the JobSet or a replicated job's template): the JobSet webhook then gives each child Job's leader pod required affinity to one topology domain and anti-affinity to every other Job's, and refuses its other pods until the leader is scheduled, while muster pins the pods to the nodes it admits without keeping Jobs in separate domains, so a Job could wait for good; remove it, or run this JobSet outside muster's queues";

/// Why muster cannot run `obj`'s JobSet as a gang, if it cannot: the
/// min-count annotation, or exclusive placement.
pub(crate) fn unsupported(obj: &DynamicObject) -> Option<&'static str> {
    let has = |a: Option<&Value>, key: &str| a.and_then(|a| a.get(key)).is_some();
    let annotations = obj.metadata.annotations.as_ref();
    if annotations.is_some_and(|a| a.contains_key(MIN_COUNT_ANNOTATION)) {
        return Some(MIN_COUNT);
    }
    let exclusive = annotations.is_some_and(|a| a.contains_key(EXCLUSIVE_ANNOTATION))
        || replicated_jobs(obj).iter().any(|rj| {
            has(
                rj.pointer("/template/metadata/annotations"),
                EXCLUSIVE_ANNOTATION,
            )
        });
    exclusive.then_some(EXCLUSIVE)
}

/// A labelled JobSet.
#[derive(Debug, Clone)]
pub(crate) struct JobSetWorkload(pub Arc<DynamicObject>);

fn replicated_jobs(obj: &DynamicObject) -> &[Value] {
    obj.data
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The replicated jobs of JobSet `obj` that the JobSet controller does not
/// create yet: those whose `dependsOn` is not reached. kubernetes-sigs/jobset
/// `pkg/controllers/depends_on.go` (`dependencyReachedStatus`): every
/// dependency's `status.replicatedJobsStatus` entry must exist, and count
/// as many succeeded Jobs as it has replicas for `Complete`, as many ready,
/// failed and succeeded ones for `Ready`.
pub(crate) fn waiting(obj: &DynamicObject) -> BTreeSet<String> {
    let rjobs = replicated_jobs(obj);
    let replicas = |name: &str| {
        rjobs
            .iter()
            .find(|r| r.get("name").and_then(Value::as_str) == Some(name))
            .map_or(1, |r| int(r.get("replicas"), 1))
    };
    let statuses = obj
        .data
        .pointer("/status/replicatedJobsStatus")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let reached = |dep: &Value| {
        let name = dep.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(st) = statuses
            .iter()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
        else {
            return false;
        };
        let n = |k: &str| int(st.get(k), 0);
        match dep.get("status").and_then(Value::as_str) {
            Some("Complete") => n("succeeded") == replicas(name),
            Some("Ready") => n("ready") + n("failed") + n("succeeded") == replicas(name),
            _ => false,
        }
    };
    rjobs
        .iter()
        .filter(|r| {
            r.get("dependsOn")
                .and_then(Value::as_array)
                .is_some_and(|deps| !deps.iter().all(reached))
        })
        .filter_map(|r| r.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn int(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(default)
}

/// The submitted pod templates by replicated job: the record while pinned,
/// else the current ones.
fn submitted_templates(
    obj: &DynamicObject,
) -> Result<BTreeMap<String, PodTemplateSpec>, WorkloadError> {
    if let Some(rec) = obj.annotations().get(ORIGINAL_TEMPLATE_ANNOTATION)
        && let Ok(m) = serde_json::from_str::<BTreeMap<String, PodTemplateSpec>>(rec)
    {
        return Ok(m);
    }
    let mut out = BTreeMap::new();
    for (i, rj) in replicated_jobs(obj).iter().enumerate() {
        let name = rj.get("name").and_then(Value::as_str).ok_or_else(|| {
            WorkloadError::BadShape(format!("spec.replicatedJobs[{i}].name is missing"))
        })?;
        let t = rj
            .pointer("/template/spec/template")
            .cloned()
            .unwrap_or(Value::Null);
        let t: PodTemplateSpec = serde_json::from_value(t).map_err(|e| {
            WorkloadError::BadShape(format!(
                "spec.replicatedJobs[{i}].template.spec.template: {e}"
            ))
        })?;
        out.insert(name.to_string(), t);
    }
    Ok(out)
}

/// The object with each replicated job's pod template replaced.
fn with_templates(
    obj: &DynamicObject,
    templates: &BTreeMap<String, PodTemplateSpec>,
) -> Result<DynamicObject, ActError> {
    let mut next = obj.clone();
    if let Some(list) = next
        .data
        .pointer_mut("/spec/replicatedJobs")
        .and_then(Value::as_array_mut)
    {
        for rj in list {
            let Some(name) = rj.get("name").and_then(Value::as_str).map(String::from) else {
                continue;
            };
            let Some(t) = templates.get(&name) else {
                continue;
            };
            let v = templated::set_template(rj.pointer("/template/spec/template"), t, &name)?;
            if let Some(spec) = rj
                .pointer_mut("/template/spec")
                .and_then(Value::as_object_mut)
            {
                spec.insert("template".to_string(), v);
            }
        }
    }
    Ok(next)
}

impl Workload for JobSetWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::JobSet
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
        if let Some(why) = unsupported(&self.0) {
            return Err(WorkloadError::Unsupported(why));
        }
        let templates = submitted_templates(&self.0)?;
        let jobs = replicated_jobs(&self.0);
        let mut out = Vec::new();
        for rj in jobs {
            let name = rj.get("name").and_then(Value::as_str).unwrap_or_default();
            let replicas = int(rj.get("replicas"), 1).max(0);
            let spec = rj.pointer("/template/spec");
            let parallelism = int(spec.and_then(|s| s.get("parallelism")), 1).max(0);
            let pods = match spec
                .and_then(|s| s.get("completions"))
                .and_then(Value::as_i64)
            {
                Some(c) => parallelism.min(c.max(0)),
                None => parallelism,
            };
            out.push(PodSetTemplate {
                name: name.to_string(),
                count: u32::try_from(replicas.saturating_mul(pods)).unwrap_or(u32::MAX),
                min_count: None,
                template: templates.get(name).cloned().unwrap_or_default(),
            });
        }
        if out.is_empty() {
            return Err(WorkloadError::BadShape(
                "spec.replicatedJobs is empty".to_string(),
            ));
        }
        Ok(out)
    }

    fn observe(&self) -> Observed {
        let obj = &self.0;
        let sole = replicated_jobs(obj)
            .first()
            .and_then(|rj| rj.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let finished = templated::condition_true(obj, &["Completed", "Failed"]);
        templated::observe(obj, "/spec/suspend", finished, &sole)
    }

    fn waiting_pod_sets(&self) -> BTreeSet<String> {
        waiting(&self.0)
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        // no start mark: the JobSet controller clears its child Jobs' own
        suspendable::writes(self, step, directives)
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(writer::rewrap(self, stored, |o| {
            JobSetWorkload(Arc::new(o))
        }))
    }

    fn reread_from(&self) -> Option<(Target, &'static str)> {
        Some((self.target(), "read JobSet"))
    }
}

/// The names of a JobSet's writes.
const ACTIONS: Actions = Actions {
    suspend: "suspend JobSet",
    restore: "restore JobSet templates",
    pin: "pin JobSet",
    unsuspend: "unsuspend JobSet",
};

/// A JobSet is replaced from the object in memory, guarded by its
/// resourceVersion: when the JobSet controller wrote its status meanwhile
/// the replace is refused with 409 and the JobSet read again.
impl Suspendable for JobSetWorkload {
    fn target(&self) -> Target {
        Target::custom(KIND, &self.0)
    }

    fn suspend_flag(&self) -> &'static str {
        "/spec/suspend"
    }

    fn actions(&self) -> Actions {
        ACTIONS
    }

    fn restore(&self) -> Result<Write, ActError> {
        let obj = &self.0;
        let submitted = submitted_templates(obj).map_err(|e| {
            ActError::Missing(format!("templates of JobSet {}: {e}", obj.name_any()))
        })?;
        let mut next = with_templates(obj, &submitted)?;
        if let Some(a) = next.metadata.annotations.as_mut() {
            a.remove(ORIGINAL_TEMPLATE_ANNOTATION);
            a.remove(ADMITTED_NODES_ANNOTATION);
            a.remove(STOPPING_ANNOTATION);
        }
        Ok(Write {
            target: self.target(),
            change: Change::Replace(Box::new(next)),
            action: ACTIONS.restore,
        })
    }

    fn pin(&self, pins: &Pins, directives: &Directives) -> Result<Write, ActError> {
        let obj = &self.0;
        let name = obj.name_any();
        let submitted = submitted_templates(obj)
            .map_err(|e| ActError::Missing(format!("templates of JobSet {name}: {e}")))?;
        let original = serde_json::to_string(&submitted)
            .map_err(|e| ActError::Missing(format!("templates of JobSet {name}: {e}")))?;
        let pinned = template::pin_sets(&submitted, pins, directives, PinStyle::NodeSelector);
        let mut next = with_templates(obj, &pinned)?;
        let a = next
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        a.insert(ORIGINAL_TEMPLATE_ANNOTATION.to_string(), original);
        a.insert(ADMITTED_NODES_ANNOTATION.to_string(), encode_pins(pins));
        a.remove(STOPPING_ANNOTATION);
        Ok(Write {
            target: self.target(),
            change: Change::Replace(Box::new(next)),
            action: ACTIONS.pin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jobset(body: Value) -> JobSetWorkload {
        JobSetWorkload(Arc::new(serde_json::from_value(body).expect("jobset")))
    }

    fn driver_and_workers() -> JobSetWorkload {
        jobset(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u1", "labels": {"muster.dev/queue": "q"}},
            "spec": {"suspend": true, "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"containers": [
                    {"name": "d", "resources": {"requests": {"cpu": "2"}}}]}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [
                    {"name": "w", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}
            ]}
        }))
    }

    /// upstream's `dependencyReachedStatus`, case by case
    #[test]
    fn a_replicated_job_waits_until_its_dependencies_reach_their_status() {
        let cases: &[(&str, Value, &[&str])] = &[
            ("no status yet: both wait", json!([]), &["workers", "eval"]),
            (
                "the driver complete: the workers go, eval waits for them to be ready",
                json!([{"name": "driver", "succeeded": 1}]),
                &["eval"],
            ),
            (
                "the driver ready only: Complete is not reached",
                json!([{"name": "driver", "ready": 1}]),
                &["workers", "eval"],
            ),
            (
                "one of two worker Jobs ready: short of the replicas",
                json!([{"name": "driver", "succeeded": 1}, {"name": "workers", "ready": 1}]),
                &["eval"],
            ),
            (
                "ready, failed and succeeded count for Ready",
                json!([{"name": "driver", "succeeded": 1}, {"name": "workers", "ready": 1, "failed": 1}]),
                &[],
            ),
        ];
        for (what, statuses, want) in cases {
            let mut js = (*driver_and_workers().0).clone();
            js.data["spec"]["replicatedJobs"][1]["dependsOn"] =
                json!([{"name": "driver", "status": "Complete"}]);
            let mut eval = js.data["spec"]["replicatedJobs"][1].clone();
            eval["name"] = json!("eval");
            eval["dependsOn"] = json!([{"name": "workers", "status": "Ready"}]);
            if let Some(rjobs) = js.data["spec"]["replicatedJobs"].as_array_mut() {
                rjobs.push(eval);
            }
            js.data["status"] = json!({"replicatedJobsStatus": statuses});
            let got = JobSetWorkload(Arc::new(js)).waiting_pod_sets();
            let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(got, want, "{what}");
        }
        assert!(driver_and_workers().waiting_pod_sets().is_empty());
    }

    #[test]
    fn a_min_count_annotation_is_not_queued() {
        // one replicated job of 4 pods, asking to start with 2: the JobSet
        // webhook would refuse the smaller replicas or parallelism
        let elastic = jobset(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u1",
                         "labels": {"muster.dev/queue": "q"}, "annotations": {"muster.dev/min-count": "2"}},
            "spec": {"suspend": true, "replicatedJobs": [
                {"name": "workers", "replicas": 1, "template": {"spec": {"parallelism": 4, "completions": 4, "template": {"spec": {"containers": [
                    {"name": "w", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}
            ]}
        }));
        let err = elastic.pod_sets().expect_err("refused");
        assert_eq!(err.reason(), "UnsupportedWorkload");
        assert!(err.to_string().contains("muster.dev/min-count"), "{err}");
    }

    #[test]
    fn each_replicated_job_is_a_pod_set() {
        let sets = driver_and_workers().pod_sets().expect("pod sets");
        let shape: Vec<(&str, u32)> = sets.iter().map(|s| (s.name.as_str(), s.count)).collect();
        assert_eq!(shape, [("driver", 1), ("workers", 4)]);
        assert!(sets.iter().all(|s| s.min_count.is_none()));
        let o = driver_and_workers().observe();
        assert!(o.suspended && !o.started && !o.finished && o.pinned.is_none());
        assert_eq!(driver_and_workers().gang_name(), "jobset-train");
    }

    #[test]
    fn pinning_writes_node_selectors_and_keeps_the_submitted_templates() {
        let js = driver_and_workers();
        let submitted = submitted_templates(&js.0).expect("templates");
        let pins: muster_planner::lifecycle::workload::Pins = [
            ("driver".to_string(), ["cpu-1".to_string()].into()),
            (
                "workers".to_string(),
                ["g1".to_string(), "g2".to_string()].into(),
            ),
        ]
        .into();
        let pinned: BTreeMap<String, PodTemplateSpec> = submitted
            .iter()
            .map(|(set, t)| {
                let nodes = pins[set].clone();
                (
                    set.clone(),
                    template::pin(
                        t.clone(),
                        set,
                        &nodes,
                        "ns.jobset-train",
                        &[],
                        PinStyle::NodeSelector,
                    ),
                )
            })
            .collect();
        let mut next = with_templates(&js.0, &pinned).expect("pinned");
        next.metadata.annotations = Some(
            [
                (
                    ORIGINAL_TEMPLATE_ANNOTATION.to_string(),
                    serde_json::to_string(&submitted).expect("json"),
                ),
                (ADMITTED_NODES_ANNOTATION.to_string(), encode_pins(&pins)),
            ]
            .into(),
        );
        let w = JobSetWorkload(Arc::new(next.clone()));
        assert_eq!(w.observe().pinned, Some(pins));
        let driver_selector = next
            .data
            .pointer("/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector")
            .cloned()
            .expect("selector");
        assert_eq!(
            driver_selector["pod-set.muster.dev/driver"],
            "ns.jobset-train"
        );
        assert!(driver_selector.get("pod-set.muster.dev/workers").is_none());
        // the record gives back the templates as submitted
        assert_eq!(submitted_templates(&next).expect("record"), submitted);
    }

    fn at_version(rv: &str) -> Value {
        let mut v = serde_json::to_value(&*driver_and_workers().0).expect("json");
        v["metadata"]["resourceVersion"] = json!(rv);
        v
    }

    #[test]
    fn suspend_and_unsuspend_patch_the_flag_and_there_is_no_start_mark() {
        let js = jobset(at_version("3"));
        let dirs = writer::sketch::directives("ns.jobset-train", &[], &[]);
        let sketch = |step: Step| writer::sketch::writes(&js, step, &dirs);
        let at = "jobsets ns/train".to_string();
        assert_eq!(
            sketch(Step::Suspend),
            [(
                "suspend JobSet",
                at.clone(),
                "patch",
                json!({"metadata": {"annotations": {STOPPING_ANNOTATION: "true"}}, "spec": {"suspend": true}})
            )]
        );
        assert_eq!(
            sketch(Step::Unsuspend),
            [(
                "unsuspend JobSet",
                at,
                "patch",
                json!({"spec": {"suspend": false}})
            )]
        );
        // the JobSet controller clears its child Jobs' start marks itself
        assert!(sketch(Step::ClearStartTime).is_empty());
        assert_eq!(
            js.reread_from().map(|(t, a)| (t.resource.plural, a)),
            Some(("jobsets".to_string(), "read JobSet"))
        );
    }

    #[test]
    fn a_pin_replaces_the_jobset_in_memory_by_node_selector_and_a_restore_gives_it_back() {
        let js = jobset(at_version("3"));
        let pins = writer::sketch::pins(&[("driver", &["cpu-1"]), ("workers", &["g1", "g2"])]);
        let dirs = writer::sketch::directives("ns.jobset-train", &["g1"], &[]);
        let pin = js.writes(&Step::Pin(pins), &dirs).expect("writes");
        assert_eq!(pin.len(), 1);
        let (action, at, verb, body) = writer::sketch::of(&pin[0]);
        assert_eq!(
            (action, at.as_str(), verb),
            ("pin JobSet", "jobsets ns/train", "replace")
        );
        let mut expected = at_version("3");
        let record: BTreeMap<String, Value> = serde_json::from_str(
            body["metadata"]["annotations"][ORIGINAL_TEMPLATE_ANNOTATION]
                .as_str()
                .expect("record"),
        )
        .expect("json");
        let submitted = |i: usize| {
            expected["spec"]["replicatedJobs"][i]["template"]["spec"]["template"].clone()
        };
        assert_eq!(
            record,
            [
                ("driver".to_string(), submitted(0)),
                ("workers".to_string(), submitted(1))
            ]
            .into()
        );
        expected["metadata"]["annotations"] = json!({
            ADMITTED_NODES_ANNOTATION: "driver=cpu-1;workers=g1,g2",
            ORIGINAL_TEMPLATE_ANNOTATION: body["metadata"]["annotations"][ORIGINAL_TEMPLATE_ANNOTATION],
        });
        // affinity is immutable in a JobSet: the pod set's node label, no
        // node names; only the workers' nodes are tainted
        let pod = |e: &mut Value, i: usize, set: &str, tolerations: Value| {
            let spec = &mut e["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"];
            spec["nodeSelector"] = json!({"muster.dev/gang": "ns.jobset-train",
                format!("pod-set.muster.dev/{set}"): "ns.jobset-train"});
            spec["tolerations"] = tolerations;
        };
        pod(&mut expected, 0, "driver", json!([]));
        pod(
            &mut expected,
            1,
            "workers",
            json!([writer::sketch::toleration()]),
        );
        assert_eq!(body, expected);

        let restore = jobset(body).writes(&Step::Restore, &dirs).expect("writes");
        let (action, _, verb, body) = writer::sketch::of(&restore[0]);
        assert_eq!((action, verb), ("restore JobSet templates", "replace"));
        let mut expected = at_version("3");
        expected["metadata"]["annotations"] = json!({});
        assert_eq!(body, expected, "the templates as submitted, from memory");
    }

    #[test]
    fn completed_or_failed_is_finished() {
        for t in ["Completed", "Failed"] {
            let js = jobset(json!({
                "metadata": {"name": "x"},
                "spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {}}}}]},
                "status": {"conditions": [{"type": t, "status": "True"}]}
            }));
            assert!(js.observe().finished, "{t}");
        }
    }
}
