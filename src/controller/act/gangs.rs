//! Jobs → Gangs: every Job labelled `muster.dev/queue` gets a Gang of the
//! same name (owned by the Job, so it goes when the Job goes), and a Job
//! that is not suspended and has no pods yet is suspended.
//!
//! The race: between a Job's creation and this step the Job controller may
//! already have created pods. Such a Job is not suspended behind its back
//! (that would kill running pods); its Gang is created and an Event says it
//! started outside muster. The mutating webhook (design §2) closes the race
//! by suspending at admission; users may also submit Jobs suspended.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PostParams};
use kube::{Resource, ResourceExt};
use kube_runtime::events::EventType;

use super::{ActError, api, is_already_exists, params};
use crate::controller::objects::{ADMITTED_NODES_ANNOTATION, Kind, KindExt, QUEUE_LABEL};
use crate::controller::planning_loop::Ctx;
use crate::controller::translate::{Observed, job, node::pod_job};

/// Creates missing Gangs and suspends fresh Jobs. Returns how many writes it made.
pub async fn sync(ctx: &Ctx, observed: &Observed) -> usize {
    let gangs: BTreeSet<(String, String)> = observed
        .of(Kind::Gang)
        .iter()
        .map(|g| (g.namespace().unwrap_or_default(), g.name_any()))
        .collect();
    let with_pods: BTreeSet<(String, String)> =
        observed.pods.iter().filter_map(|p| pod_job(p)).collect();
    let mut writes = 0;
    for j in &observed.jobs {
        if job::queue_of(j).is_none() || j.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let key = (j.namespace().unwrap_or_default(), j.name_any());
        if !gangs.contains(&key) {
            match create_gang(ctx, j).await {
                Ok(true) => writes += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(job = %key.1, error = %e, "could not create gang"),
            }
        }
        let suspended = j.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false);
        let admitted = j.annotations().contains_key(ADMITTED_NODES_ANNOTATION);
        if suspended || admitted {
            continue;
        }
        let active = j.status.as_ref().and_then(|s| s.active).unwrap_or(0);
        if active > 0 || with_pods.contains(&key) {
            ctx.events
                .publish_ref(job_ref(j), EventType::Warning, "StartedOutsideMuster", format!(
                    "Job had pods before muster could suspend it; create it suspended or enable the webhook ({QUEUE_LABEL})"
                ))
                .await;
            continue;
        }
        let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &key.0);
        match jobs
            .patch(
                &key.1,
                &params(),
                &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
            )
            .await
        {
            Ok(_) => writes += 1,
            Err(e) => tracing::warn!(job = %key.1, error = %e, "could not suspend job"),
        }
    }
    writes
}

/// A reference to a Job for Events.
pub fn job_ref(j: &Job) -> ObjectReference {
    j.object_ref(&())
}

async fn create_gang(ctx: &Ctx, j: &Job) -> Result<bool, ActError> {
    let ns = j.namespace().unwrap_or_default();
    let spec = match job::gang_spec(j) {
        Ok(s) => s,
        Err(e) => {
            ctx.events
                .publish_ref(job_ref(j), EventType::Warning, e.reason(), e.to_string())
                .await;
            return Ok(false);
        }
    };
    let Some(owner) = j.controller_owner_ref(&()) else {
        return Err(ActError::Missing("Job uid".to_string()));
    };
    let mut obj = DynamicObject::new(&j.name_any(), &Kind::Gang.api_resource()).within(&ns);
    obj.metadata.owner_references = Some(vec![owner]);
    obj.metadata.labels = Some([(QUEUE_LABEL.to_string(), spec.queue.clone())].into());
    obj.data = serde_json::json!({ "spec": spec });
    match api(&ctx.client, Kind::Gang, Some(&ns))
        .create(&PostParams::default(), &obj)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_already_exists(&e) => Ok(false),
        Err(e) => Err(ActError::api("create Gang")(e)),
    }
}
