//! Eviction of a whole gang (preemption): the Job is suspended again (the Job
//! controller then deletes its pods) and its submitted pod template is
//! restored from the annotation, so it queues again exactly as submitted.

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use muster_planner::plan::Preemption;

use super::ActError;
use crate::controller::objects::{ADMITTED_NODES_ANNOTATION, ORIGINAL_TEMPLATE_ANNOTATION};
use crate::controller::planning_loop::Ctx;
use crate::controller::translate::Observed;

/// Carries out every preemption. Returns how many Jobs it suspended.
pub async fn run(ctx: &Ctx, preemptions: &[Preemption], observed: &Observed) -> usize {
    let mut n = 0;
    for p in preemptions {
        match evict(ctx, p, observed).await {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(gang = %p.victim, error = %e, "eviction failed"),
        }
    }
    n
}

async fn evict(ctx: &Ctx, p: &Preemption, observed: &Observed) -> Result<bool, ActError> {
    let Some((ns, name)) = p.victim.as_str().split_once('/') else {
        return Err(ActError::Missing(format!("gang id {}", p.victim)));
    };
    suspend(ctx, ns, name, observed).await
}

/// Suspends the gang's Job again and restores its submitted template.
pub async fn suspend(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    observed: &Observed,
) -> Result<bool, ActError> {
    let Some(job) = observed
        .jobs
        .iter()
        .find(|j| j.namespace().as_deref() == Some(ns) && j.name_any() == name)
    else {
        return Ok(false);
    };
    if job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false) {
        return Ok(false);
    }
    // A merge patch cannot take the pins out of the template (maps merge), so
    // the Job is replaced as a whole, guarded by its resourceVersion: a
    // concurrent change makes this a 409 and the next cycle tries again.
    let mut next: Job = (**job).clone();
    let original = job
        .annotations()
        .get(ORIGINAL_TEMPLATE_ANNOTATION)
        .and_then(|t| serde_json::from_str(t).ok());
    if let Some(spec) = next.spec.as_mut() {
        spec.suspend = Some(true);
        if let Some(t) = original {
            spec.template = t;
        }
    }
    if let Some(a) = next.metadata.annotations.as_mut() {
        a.remove(ORIGINAL_TEMPLATE_ANNOTATION);
        a.remove(ADMITTED_NODES_ANNOTATION);
    }
    next.status = None;
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    jobs.replace(name, &PostParams::default(), &next)
        .await
        .map_err(ActError::api("evict Job"))?;
    Ok(true)
}
