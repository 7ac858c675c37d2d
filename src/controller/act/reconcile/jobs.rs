//! The Job life cycle: brings each gang's `batch/v1` Job to what the gang's
//! state asks (queued: suspended with the submitted template; admitted:
//! pinned to its nodes and running), one write at a time, each chosen by the
//! planner's table ([`muster_planner::lifecycle::job`]) from the Job as the
//! API server returned it. The sequence and the upstream rule behind each
//! step are in `docs/controller.md`.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::ResourceExt;
use kube::api::{Api, Patch, PostParams};
use kube_runtime::events::EventType;
use muster_planner::lifecycle::job::{self as table, Step, Want};
use muster_planner::{GangPhase, Snapshot};

use super::super::{ActError, gang_label_value, params};
use crate::controller::ctx::Ctx;
use crate::controller::objects::{
    ADMITTED_NODES_ANNOTATION, Kind, ORIGINAL_TEMPLATE_ANNOTATION, STOPPING_ANNOTATION,
};
use crate::controller::translate::{Observed, Translation, gang, job as job_tr};

/// The most writes one Job gets in one cycle (a stop and a start are five).
const MAX_STEPS: usize = 6;

/// How long after this process started a Job a cache that still shows its
/// Gang unadmitted is taken to be behind, not the Job to run unadmitted.
pub const STARTED_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Jobs this process unsuspended, by UID, with when. Only ever delays the
/// stop of a Job found running unadmitted (the caches of Jobs and Gangs are
/// not updated together); after a restart it is empty and the observed
/// state alone decides, which is the safe side.
#[derive(Debug, Default)]
pub struct Started(std::sync::Mutex<std::collections::BTreeMap<String, std::time::Instant>>);

impl Started {
    /// Notes that the Job with `uid` was unsuspended now.
    pub fn note(&self, uid: &str) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, at| at.elapsed() < STARTED_GRACE);
        m.insert(uid.to_string(), std::time::Instant::now());
    }

    /// True when the Job with `uid` was unsuspended here within the grace.
    pub fn lately(&self, uid: &str) -> bool {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(uid).is_some_and(|at| at.elapsed() < STARTED_GRACE)
    }
}

/// What the table needs to know of a Job.
pub fn observe(job: &Job) -> table::Observed {
    let status = job.status.as_ref();
    let finished = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
    let pinned = job
        .annotations()
        .get(ADMITTED_NODES_ANNOTATION)
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect::<BTreeSet<_>>()
        })
        .filter(|s| !s.is_empty());
    table::Observed {
        finished,
        suspended: job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false),
        started: status.and_then(|s| s.start_time.as_ref()).is_some(),
        stopping: job
            .annotations()
            .get(STOPPING_ANNOTATION)
            .is_some_and(|v| v == "true"),
        pinned,
    }
}

/// True when the Job has pods or counts active ones: it was started.
fn has_pods(job: &Job, observed: &Observed) -> bool {
    let active = job.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0;
    active || !live_pods_of(observed, job).is_empty()
}

/// The Job's pods that have not finished.
pub fn live_pods_of<'a>(observed: &'a Observed, job: &Job) -> Vec<&'a str> {
    let ns = job.namespace().unwrap_or_default();
    let uid = job.uid();
    observed
        .pods
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
        .filter(|p| {
            p.owner_references().iter().any(|o| {
                o.kind == "Job"
                    && o.name == job.name_any()
                    && (uid.is_none() || uid.as_deref() == Some(o.uid.as_str()))
            })
        })
        .filter(|p| !matches!(p.phase.as_deref(), Some("Succeeded") | Some("Failed")))
        .map(|p| p.metadata.name.as_deref().unwrap_or_default())
        .collect()
}

/// Every labelled Job towards what its Gang's state asks: admitted or
/// running gangs keep (or get) their pins and run; every other Job is
/// queued — a fresh Job is suspended, and a Job found running without an
/// admission is stopped (its pods are deleted by the Job controller) and
/// queued. Returns how many writes it made.
pub async fn reconcile(ctx: &Ctx, observed: &Observed, tr: &Translation) -> usize {
    let mut writes = 0;
    for j in &observed.jobs {
        if job_tr::queue_of(j).is_none() || j.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let ns = j.namespace().unwrap_or_default();
        let name = j.name_any();
        let gang_obj = observed
            .of(Kind::Gang)
            .iter()
            .find(|g| g.namespace().as_deref() == Some(ns.as_str()) && g.name_any() == name);
        let view = gang_obj.map(|g| gang::status_of(g));
        let phase = view
            .as_ref()
            .and_then(|v| gang::phase(v.phase.as_deref()))
            .unwrap_or_default();
        if phase == GangPhase::Finished {
            continue;
        }
        let want = match (&view, phase) {
            (Some(v), GangPhase::Admitted | GangPhase::Running) if !v.assignments.is_empty() => {
                Want::Run(
                    v.assignments
                        .iter()
                        .map(|a| tr.registered.get(&a.node).unwrap_or(&a.node).clone())
                        .collect(),
                )
            }
            _ => Want::Queued,
        };
        let o = observe(j);
        if want == Want::Queued
            && !o.suspended
            && !o.stopping
            && o.pinned.is_some()
            && j.uid().is_some_and(|u| ctx.started.lately(&u))
        {
            // started here a moment ago: the Gang's cache is behind the Job's
            continue;
        }
        if want == Want::Queued && !o.suspended && !o.stopping && has_pods(j, observed) {
            ctx.events
                .publish_ref(
                    super::gangs::job_ref(j),
                    EventType::Warning,
                    crate::controller::reasons::STARTED_OUTSIDE_MUSTER,
                    "the Job's pods started before muster admitted it; it is suspended and queued (submit labelled Jobs with spec.suspend: true)"
                        .to_string(),
                )
                .await;
        }
        match drive(ctx, j, &want, &tr.snapshot).await {
            Ok(n) => writes += n,
            Err(e) => tracing::warn!(job = %name, namespace = %ns, error = %e, "job life cycle"),
        }
    }
    writes
}

/// Writes, one step at a time, until the Job is where `want` asks or a write
/// fails (the next cycle goes on from what it then observes). Each step is
/// decided from the object the previous write returned. Returns the number
/// of writes.
pub async fn drive(
    ctx: &Ctx,
    job: &Job,
    want: &Want,
    snapshot: &Snapshot,
) -> Result<usize, ActError> {
    let mut current = job.clone();
    let mut writes = 0;
    for _ in 0..MAX_STEPS {
        let step = table::next_step(&observe(&current), want);
        if step == Step::None {
            break;
        }
        tracing::debug!(job = %current.name_any(), step = step.as_str(), "job life cycle");
        current = write(ctx, &current, &step, snapshot).await?;
        writes += 1;
    }
    Ok(writes)
}

/// Carries out one step; returns the Job as the server stored it.
async fn write(ctx: &Ctx, job: &Job, step: &Step, snapshot: &Snapshot) -> Result<Job, ActError> {
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    match step {
        Step::None => Ok(job.clone()),
        Step::Suspend => jobs
            .patch(
                &name,
                &params(),
                &Patch::Merge(serde_json::json!({
                    "metadata": {"annotations": {STOPPING_ANNOTATION: "true"}},
                    "spec": {"suspend": true},
                })),
            )
            .await
            .map_err(ActError::api("suspend Job")),
        Step::ClearStartTime => jobs
            .patch_status(
                &name,
                &params(),
                &Patch::Merge(serde_json::json!({"status": {"startTime": null}})),
            )
            .await
            .map_err(ActError::api("clear Job startTime")),
        Step::Restore => {
            let mut next = job.clone();
            if let Some(spec) = next.spec.as_mut() {
                spec.template = submitted_template(job);
            }
            if let Some(a) = next.metadata.annotations.as_mut() {
                a.remove(ORIGINAL_TEMPLATE_ANNOTATION);
                a.remove(ADMITTED_NODES_ANNOTATION);
                a.remove(STOPPING_ANNOTATION);
            }
            // a merge patch cannot take the pins out (maps merge): the Job is
            // replaced, guarded by its resourceVersion (409 on a concurrent change)
            jobs.replace(&name, &PostParams::default(), &next)
                .await
                .map_err(ActError::api("restore Job template"))
        }
        Step::Pin(nodes) => {
            let submitted = submitted_template(job);
            let original = serde_json::to_string(&submitted)
                .map_err(|e| ActError::Missing(format!("template of Job {name}: {e}")))?;
            let taints: Vec<muster_planner::Taint> = snapshot
                .nodes
                .iter()
                .filter(|n| nodes.contains(&n.name))
                .flat_map(|n| n.taints.clone())
                .collect();
            let label = gang_label_value(&format!("{ns}/{name}"));
            let mut next = job.clone();
            if let Some(spec) = next.spec.as_mut() {
                spec.template = super::super::apply::admit::pin(submitted, nodes, &label, &taints);
            }
            let a = next
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            a.insert(ORIGINAL_TEMPLATE_ANNOTATION.to_string(), original);
            a.insert(
                ADMITTED_NODES_ANNOTATION.to_string(),
                nodes.iter().cloned().collect::<Vec<_>>().join(","),
            );
            a.remove(STOPPING_ANNOTATION);
            jobs.replace(&name, &PostParams::default(), &next)
                .await
                .map_err(ActError::api("pin Job"))
        }
        Step::Unsuspend => {
            let started = jobs
                .patch(
                    &name,
                    &params(),
                    &Patch::Merge(serde_json::json!({"spec": {"suspend": false}})),
                )
                .await
                .map_err(ActError::api("unsuspend Job"))?;
            if let Some(uid) = started.uid() {
                ctx.started.note(&uid);
            }
            Ok(started)
        }
    }
}

/// The pod template as submitted: the recorded one while pinned, else the
/// current one.
pub fn submitted_template(job: &Job) -> PodTemplateSpec {
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

#[cfg(test)]
mod tests {
    use super::*;
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
            Some(["a".to_string(), "b".to_string()].into_iter().collect())
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
    fn started_jobs_are_remembered_for_the_grace_only() {
        let s = Started::default();
        assert!(!s.lately("u1"));
        s.note("u1");
        assert!(s.lately("u1"));
        assert!(!s.lately("u2"));
        // an entry older than the grace no longer counts
        s.0.lock().expect("lock").insert(
            "old".into(),
            std::time::Instant::now() - STARTED_GRACE - std::time::Duration::from_secs(1),
        );
        assert!(!s.lately("old"));
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
}
