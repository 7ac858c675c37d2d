//! `batch/v1` Job behind the workload seam: one pod set, `main`, of
//! `parallelism` pods (indexed or not: the completion mode changes nothing
//! muster decides), elastic down to the `muster.dev/min-count` annotation.
//!
//! The writes follow the Job rules the life-cycle table states (Kubernetes
//! `pkg/apis/batch/validation/validation.go`, `pkg/registry/batch/job/strategy.go`):
//! the template changes only while the stored Job is suspended and has no
//! `status.startTime`, and `startTime` is cleared through `jobs/status`.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use muster_planner::lifecycle::workload::{Observed, Pins, Step};

use crate::controller::base::api::ActError;
use crate::controller::base::objects::{
    ADMITTED_NODES_ANNOTATION, MIN_COUNT_ANNOTATION, ORIGINAL_PARALLELISM_ANNOTATION,
    ORIGINAL_TEMPLATE_ANNOTATION, STOPPING_ANNOTATION,
};
use crate::controller::workloads::suspendable::{self, Actions, Suspendable};
use crate::controller::workloads::template::{self, PinStyle, decode_pins, encode_pins};
use crate::controller::workloads::verbatim;
use crate::controller::workloads::writer::{self, Change, Stored, Target, Write};
use crate::controller::workloads::{
    Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// The name of a Job's one pod set.
pub const POD_SET: &str = "main";

/// A labelled Job.
#[derive(Debug, Clone)]
pub(crate) struct JobWorkload(pub Arc<Job>);

/// True when the Job was created by another workload kind muster runs (a
/// JobSet's or TrainJob's child Jobs, a RayJob's submitter): that workload
/// is the gang, not the Job.
pub(crate) fn owned_by_other_kind(job: &Job) -> bool {
    crate::controller::workloads::managed_controller(job.owner_references()).is_some()
}

/// The least count of a workload from its `muster.dev/min-count`
/// annotation.
pub fn min_count(meta: &ObjectMeta) -> Result<Option<u32>, WorkloadError> {
    match meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(MIN_COUNT_ANNOTATION))
    {
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|e| WorkloadError::BadAnnotation(MIN_COUNT_ANNOTATION, e.to_string())),
        None => Ok(None),
    }
}

/// What the table needs to know of a Job.
pub fn observe(job: &Job) -> Observed {
    let status = job.status.as_ref();
    let finished = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
    Observed {
        finished,
        suspended: job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false),
        started: status.and_then(|s| s.start_time.as_ref()).is_some(),
        stopping: job
            .annotations()
            .get(STOPPING_ANNOTATION)
            .is_some_and(|v| v == "true"),
        pinned: job
            .annotations()
            .get(ADMITTED_NODES_ANNOTATION)
            .and_then(|v| decode_pins(v, POD_SET)),
        releasing: false,
    }
}

/// `parallelism` and `completions` as submitted: the recorded ones while
/// admitted at fewer pods, else the current ones.
pub(crate) fn submitted_sizes(job: &Job) -> (i32, Option<i32>) {
    let spec = job.spec.as_ref();
    let current = (
        spec.and_then(|s| s.parallelism).unwrap_or(1),
        spec.and_then(|s| s.completions),
    );
    let Some(rec) = job.annotations().get(ORIGINAL_PARALLELISM_ANNOTATION) else {
        return current;
    };
    let mut parts = rec.split('/');
    let p = parts.next().and_then(|p| p.trim().parse().ok());
    let c = parts.next().and_then(|c| c.trim().parse().ok());
    match p {
        Some(p) => (p, c.or(current.1)),
        None => current,
    }
}

/// The sizes an admission of `admitted` pods asks of the Job: `parallelism`
/// lowered to it, and an Indexed Job's `completions` with it where they
/// were equal (the only way the Job's rules let `completions` change); the
/// record of the submitted sizes when they changed.
pub(crate) fn elastic_sizes(
    job: &Job,
    admitted: Option<u32>,
) -> (i32, Option<i32>, Option<String>) {
    let (p, c) = submitted_sizes(job);
    let Some(n) = admitted.and_then(|n| i32::try_from(n).ok()) else {
        return (p, c, None);
    };
    if n <= 0 || n >= p {
        return (p, c, None);
    }
    let indexed = job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed");
    match c {
        Some(c) if indexed && c == p => (n, Some(n), Some(format!("{p}/{c}"))),
        // an Indexed Job whose completions differ keeps them; its pods run
        // `n` at a time
        _ => (n, c, Some(p.to_string())),
    }
}

/// The pod template as submitted: the recorded one while pinned, else the
/// current one.
pub(crate) fn submitted_template(job: &Job) -> PodTemplateSpec {
    let current = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    job.annotations()
        .get(ORIGINAL_TEMPLATE_ANNOTATION)
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(current)
}

impl Workload for JobWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::Job
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn gang_owner(&self) -> Option<OwnerReference> {
        self.0.controller_owner_ref(&())
    }

    fn object_ref(&self) -> ObjectReference {
        self.0.object_ref(&())
    }

    fn pod_sets(&self) -> Result<Vec<PodSetTemplate>, WorkloadError> {
        let count = u32::try_from(submitted_sizes(&self.0).0.max(0)).unwrap_or(0);
        Ok(vec![PodSetTemplate {
            name: POD_SET.to_string(),
            count,
            min_count: min_count(&self.0.metadata)?,
            template: submitted_template(&self.0),
        }])
    }

    fn observe(&self) -> Observed {
        observe(&self.0)
    }

    fn counts_active(&self) -> bool {
        self.0.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        suspendable::writes(self, step, directives)
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        let job = writer::last_typed::<Job>(stored)?;
        Ok(Box::new(job.map_or_else(
            || self.clone(),
            |j| JobWorkload(Arc::new(j)),
        )))
    }

    fn reread_from(&self) -> Option<(Target, &'static str)> {
        Some((self.target(), "read Job"))
    }
}

/// The names of a Job's writes.
const ACTIONS: Actions = Actions {
    suspend: "suspend Job",
    restore: "restore Job template",
    pin: "pin Job",
    unsuspend: "unsuspend Job",
};

/// The change from `job` (as in memory) to `next`, as the merge patch of
/// just what differs, guarded by the resourceVersion of `job`
/// ([`verbatim`]): the pins and their removal as `null`s, and none of the
/// fields the typed Job does not know, which the server keeps as they are.
/// A Job its controller wrote meanwhile is refused with 409 and read again.
fn difference(job: &Job, next: &Job) -> Result<Change, ActError> {
    let json = |j: &Job| {
        serde_json::to_value(j)
            .map_err(|e| ActError::Missing(format!("Job {}: {e}", job.name_any())))
    };
    let version = job.resource_version().unwrap_or_default();
    Ok(Change::Patch(verbatim::guarded(
        verbatim::merge_patch(&json(job)?, &json(next)?),
        &version,
    )))
}

/// A Job's writes are merge patches of what changed, guarded by its
/// resourceVersion (see [`difference`]).
impl Suspendable for JobWorkload {
    fn target(&self) -> Target {
        Target::typed::<Job>(&self.namespace(), &self.0.name_any())
    }

    fn suspend_flag(&self) -> &'static str {
        "/spec/suspend"
    }

    fn actions(&self) -> Actions {
        ACTIONS
    }

    fn clear_start_time(&self) -> Option<Write> {
        Some(Write {
            target: self.target(),
            change: Change::PatchStatus(serde_json::json!({"status": {"startTime": null}})),
            action: "clear Job startTime",
        })
    }

    fn restore(&self) -> Result<Write, ActError> {
        let job = &self.0;
        let mut next = (**job).clone();
        let (parallelism, completions) = submitted_sizes(job);
        if let Some(spec) = next.spec.as_mut() {
            spec.template = submitted_template(job);
            spec.parallelism = Some(parallelism);
            spec.completions = completions;
        }
        if let Some(a) = next.metadata.annotations.as_mut() {
            a.remove(ORIGINAL_PARALLELISM_ANNOTATION);
            a.remove(ORIGINAL_TEMPLATE_ANNOTATION);
            a.remove(ADMITTED_NODES_ANNOTATION);
            a.remove(STOPPING_ANNOTATION);
        }
        Ok(Write {
            target: self.target(),
            change: difference(job, &next)?,
            action: ACTIONS.restore,
        })
    }

    fn pin(&self, pins: &Pins, directives: &Directives) -> Result<Write, ActError> {
        let job = &self.0;
        let name = job.name_any();
        let submitted = submitted_template(job);
        let original = serde_json::to_string(&submitted)
            .map_err(|e| ActError::Missing(format!("template of Job {name}: {e}")))?;
        let nodes = pins.values().flatten().cloned().collect();
        let (parallelism, completions, sizes) =
            elastic_sizes(job, directives.counts.get(POD_SET).copied());
        let mut next = (**job).clone();
        if let Some(spec) = next.spec.as_mut() {
            spec.parallelism = Some(parallelism);
            spec.completions = completions;
            spec.template = template::pin(
                submitted,
                POD_SET,
                &nodes,
                &directives.gang_label,
                &directives.taints_of(&nodes),
                PinStyle::Affinity,
            );
        }
        let a = next
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        a.insert(ORIGINAL_TEMPLATE_ANNOTATION.to_string(), original);
        a.insert(ADMITTED_NODES_ANNOTATION.to_string(), encode_pins(pins));
        match sizes {
            Some(rec) => a.insert(ORIGINAL_PARALLELISM_ANNOTATION.to_string(), rec),
            None => a.remove(ORIGINAL_PARALLELISM_ANNOTATION),
        };
        a.remove(STOPPING_ANNOTATION);
        Ok(Write {
            target: self.target(),
            change: difference(job, &next)?,
            action: ACTIONS.pin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::base::objects::GANG_LABEL;
    use serde_json::json;

    fn job(body: serde_json::Value) -> Job {
        serde_json::from_value(body).expect("job")
    }

    #[test]
    fn observes_the_facts_the_table_needs() {
        let j = job(json!({
            "metadata": {"name": "j", "annotations": {ADMITTED_NODES_ANNOTATION: "b,a", STOPPING_ANNOTATION: "true"}},
            "spec": {"suspend": true, "template": {}},
            "status": {"startTime": "2026-01-01T00:00:00Z"}
        }));
        let o = observe(&j);
        assert!(o.suspended && o.started && o.stopping && !o.finished);
        assert_eq!(
            o.pinned,
            Some(
                [(
                    POD_SET.to_string(),
                    ["a".to_string(), "b".to_string()].into()
                )]
                .into()
            )
        );
        let done = job(json!({
            "metadata": {"name": "j"},
            "spec": {"template": {}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}
        }));
        let o = observe(&done);
        assert!(o.finished && !o.suspended && !o.started && o.pinned.is_none());
    }

    #[test]
    fn submitted_template_prefers_the_record() {
        let j = job(json!({
            "metadata": {"name": "j", "annotations": {ORIGINAL_TEMPLATE_ANNOTATION: "{\"metadata\":{\"labels\":{\"a\":\"1\"}}}"}},
            "spec": {"template": {"metadata": {"labels": {"pinned": "yes"}}}}
        }));
        let t = submitted_template(&j);
        assert_eq!(
            t.metadata
                .and_then(|m| m.labels)
                .and_then(|l| l.get("a").cloned())
                .as_deref(),
            Some("1")
        );
    }

    #[test]
    fn one_pod_set_from_parallelism_elastic_to_min_count() {
        let w = JobWorkload(Arc::new(job(json!({
            "metadata": {"name": "j", "annotations": {MIN_COUNT_ANNOTATION: "2"}},
            "spec": {"parallelism": 4, "completionMode": "Indexed", "completions": 4, "template": {}}
        }))));
        let sets = w.pod_sets().expect("pod sets");
        assert_eq!(sets.len(), 1);
        assert_eq!((sets[0].count, sets[0].min_count), (4, Some(2)));
        let bad = JobWorkload(Arc::new(job(json!({
            "metadata": {"name": "j", "annotations": {MIN_COUNT_ANNOTATION: "many"}},
            "spec": {"template": {}}
        }))));
        assert_eq!(
            bad.pod_sets().expect_err("bad").reason(),
            "InvalidAnnotation"
        );
    }

    #[test]
    fn admitted_at_fewer_pods_the_job_runs_fewer_and_keeps_what_was_submitted() {
        let j = |mode: &str, completions: i32| {
            job(json!({
                "metadata": {"name": "j"},
                "spec": {"parallelism": 4, "completions": completions, "completionMode": mode, "template": {}}
            }))
        };
        // not elastic: as submitted
        assert_eq!(
            elastic_sizes(&j("NonIndexed", 8), Some(4)),
            (4, Some(8), None)
        );
        assert_eq!(elastic_sizes(&j("NonIndexed", 8), None), (4, Some(8), None));
        // fewer pods: parallelism lowered, completions kept
        assert_eq!(
            elastic_sizes(&j("NonIndexed", 8), Some(2)),
            (2, Some(8), Some("4".to_string()))
        );
        // Indexed with completions = parallelism: both, in tandem
        assert_eq!(
            elastic_sizes(&j("Indexed", 4), Some(2)),
            (2, Some(2), Some("4/4".to_string()))
        );
        // the record gives back the submitted sizes, whatever the Job says now
        let pinned = job(json!({
            "metadata": {"name": "j", "annotations": {ORIGINAL_PARALLELISM_ANNOTATION: "4/4"}},
            "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": {}}
        }));
        assert_eq!(submitted_sizes(&pinned), (4, Some(4)));
        assert_eq!(
            JobWorkload(Arc::new(pinned)).pod_sets().expect("sets")[0].count,
            4
        );
    }

    /// An Indexed Job of 4 pods, elastic down to 2, suspended and marked
    /// stopping, at resourceVersion 7.
    fn submitted() -> serde_json::Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "resourceVersion": "7",
                "annotations": {MIN_COUNT_ANNOTATION: "2", STOPPING_ANNOTATION: "true"}},
            "spec": {"suspend": true, "parallelism": 4, "completions": 4, "completionMode": "Indexed",
                "template": {"metadata": {"labels": {"app": "x"}},
                    "spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}})
    }

    fn directives(counts: &[(&str, u32)]) -> Directives {
        writer::sketch::directives("ns.j", &["n1"], counts)
    }

    fn writes(w: &JobWorkload, step: &Step, dirs: &Directives) -> Vec<Write> {
        w.writes(step, dirs).expect("writes")
    }

    #[test]
    fn suspend_clear_and_unsuspend_are_patches_of_the_job_and_its_status() {
        let w = JobWorkload(Arc::new(job(submitted())));
        let dirs = directives(&[]);
        let sketch = |step: Step| writer::sketch::writes(&w, step, &dirs);
        let at = "jobs ns/j".to_string();
        assert_eq!(
            sketch(Step::Suspend),
            [(
                "suspend Job",
                at.clone(),
                "patch",
                json!({"metadata": {"annotations": {STOPPING_ANNOTATION: "true"}}, "spec": {"suspend": true}})
            )]
        );
        assert_eq!(
            sketch(Step::ClearStartTime),
            [(
                "clear Job startTime",
                at.clone(),
                "patch-status",
                json!({"status": {"startTime": null}})
            )]
        );
        assert_eq!(
            sketch(Step::Unsuspend),
            [(
                "unsuspend Job",
                at,
                "patch",
                json!({"spec": {"suspend": false}})
            )]
        );
        assert!(sketch(Step::None).is_empty());
        assert_eq!(
            w.reread_from().map(|(t, a)| (t.resource.plural, t.name, a)),
            Some(("jobs".to_string(), "j".to_string(), "read Job"))
        );
    }

    #[test]
    fn a_pin_patches_the_job_pinned_and_sized_and_a_restore_gives_it_back() {
        let w = JobWorkload(Arc::new(job(submitted())));
        let pins = writer::sketch::pins(&[(POD_SET, &["n1", "n2"])]);
        let pin = writes(&w, &Step::Pin(pins), &directives(&[(POD_SET, 2)]));
        assert_eq!(pin.len(), 1);
        let (action, at, verb, patch) = writer::sketch::of(&pin[0]);
        assert_eq!(
            (action, at.as_str(), verb),
            ("pin Job", "jobs ns/j", "patch")
        );
        assert_eq!(
            patch["metadata"]["resourceVersion"], "7",
            "guarded by the version it was made from"
        );
        // the server applies the merge patch to the Job it stores, which
        // has a pod field the typed Job does not know: it stays
        let stored = || {
            let mut j = submitted();
            j["spec"]["template"]["spec"]["hostnameOverride"] = json!("trainer-0");
            j
        };
        let mut body = stored();
        json_patch::merge(&mut body, &patch);
        assert_eq!(
            body["spec"]["template"]["spec"]["hostnameOverride"],
            "trainer-0"
        );
        let template = submitted()["spec"]["template"].clone();
        let recorded: serde_json::Value = serde_json::from_str(
            body["metadata"]["annotations"][ORIGINAL_TEMPLATE_ANNOTATION]
                .as_str()
                .expect("record"),
        )
        .expect("json");
        assert_eq!(recorded, template, "the template as submitted");
        let mut expected = stored();
        expected["metadata"]["annotations"] = json!({
            MIN_COUNT_ANNOTATION: "2",
            ADMITTED_NODES_ANNOTATION: "n1,n2",
            ORIGINAL_PARALLELISM_ANNOTATION: "4/4",
            ORIGINAL_TEMPLATE_ANNOTATION: body["metadata"]["annotations"][ORIGINAL_TEMPLATE_ANNOTATION],
        });
        // admitted at 2 of 4 pods: an Indexed Job's sizes move together
        expected["spec"]["parallelism"] = json!(2);
        expected["spec"]["completions"] = json!(2);
        let spec = &mut expected["spec"]["template"]["spec"];
        spec["nodeSelector"] = json!({GANG_LABEL: "ns.j"});
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}});
        spec["tolerations"] = json!([writer::sketch::toleration()]);
        assert_eq!(body, expected);

        let pinned = JobWorkload(Arc::new(job(body.clone())));
        let restore = writes(&pinned, &Step::Restore, &directives(&[]));
        let (action, _, verb, patch) = writer::sketch::of(&restore[0]);
        assert_eq!((action, verb), ("restore Job template", "patch"));
        json_patch::merge(&mut body, &patch);
        let mut expected = stored();
        expected["metadata"]["annotations"] = json!({MIN_COUNT_ANNOTATION: "2"});
        assert_eq!(body, expected, "as submitted, without muster's records");
    }

    #[test]
    fn what_the_server_stored_is_the_job_again() {
        let w = JobWorkload(Arc::new(job(submitted())));
        let mut answer = submitted();
        answer["metadata"]["resourceVersion"] = json!("8");
        let stored = Stored {
            name: "j".into(),
            object: Some(serde_json::from_value(answer).expect("object")),
            action: "pin Job",
        };
        let again = w.stored(vec![stored]).expect("stored");
        assert_eq!(again.meta().resource_version.as_deref(), Some("8"));
        // nothing stored: the Job as it was
        let same = w.stored(Vec::new()).expect("stored");
        assert_eq!(same.meta().resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn child_jobs_of_a_jobset_are_not_workloads_of_their_own() {
        let child = job(json!({
            "metadata": {"name": "js-workers-0", "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": true}
            ]},
            "spec": {"template": {}}
        }));
        assert!(owned_by_other_kind(&child));
        assert!(!owned_by_other_kind(&job(
            json!({"metadata": {"name": "j"}, "spec": {"template": {}}})
        )));
    }
}
