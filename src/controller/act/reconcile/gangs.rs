//! Jobs → Gangs: every Job labelled `muster.dev/queue` gets a Gang of the
//! same name (owned by the Job, so it goes when the Job goes). Keeping the
//! Job suspended until its gang is admitted — including a Job that started
//! before muster saw it — is the Job life cycle's ([`super::jobs`]).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DynamicObject, PostParams};
use kube::{Resource, ResourceExt};
use kube_runtime::events::EventType;

use super::super::{ActError, api, is_already_exists};
use crate::controller::ctx::Ctx;
use crate::controller::objects::{Kind, KindExt, QUEUE_LABEL};
use crate::controller::translate::{Observed, job};

/// Creates missing Gangs (and deletes those of a Job gone and created
/// again). Returns the Gangs it created, as the API server stored them, so
/// the cycle that created them plans them too instead of waiting for the
/// watch to bring them back.
pub async fn sync(ctx: &Ctx, observed: &Observed) -> Vec<DynamicObject> {
    let gangs: BTreeMap<(String, String), &DynamicObject> = observed
        .of(Kind::Gang)
        .iter()
        .map(|g| {
            (
                (g.namespace().unwrap_or_default(), g.name_any()),
                g.as_ref(),
            )
        })
        .collect();
    let mut created = Vec::new();
    for j in &observed.jobs {
        if job::queue_of(j).is_none() || j.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let key = (j.namespace().unwrap_or_default(), j.name_any());
        if let Some(g) = gangs.get(&key) {
            // the Gang of a deleted Job of the same name (the garbage
            // collector has not got to it yet): it goes, and the next cycle
            // creates this Job's own
            let owner = g
                .owner_references()
                .iter()
                .find(|o| o.kind == "Job" && o.controller == Some(true))
                .map(|o| o.uid.as_str());
            if owner.is_some_and(|o| Some(o) != j.metadata.uid.as_deref())
                && g.metadata.deletion_timestamp.is_none()
            {
                match delete_stale(ctx, g).await {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::warn!(gang = %key.1, error = %e, "could not delete stale gang")
                    }
                }
            }
        } else {
            match create_gang(ctx, j).await {
                Ok(Some(gang)) => created.push(gang),
                Ok(None) => {}
                Err(e) => tracing::warn!(job = %key.1, error = %e, "could not create gang"),
            }
        }
    }
    created
}

/// Deletes a Gang, on the condition that it is still the object seen (its UID).
async fn delete_stale(ctx: &Ctx, g: &DynamicObject) -> Result<(), ActError> {
    let ns = g.namespace().unwrap_or_default();
    let dp = kube::api::DeleteParams {
        preconditions: g.metadata.uid.clone().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api(&ctx.client, Kind::Gang, Some(&ns))
        .delete(&g.name_any(), &dp)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if crate::controller::act::is_not_found(&e) => Ok(()),
        Err(e) => Err(ActError::api("delete stale Gang")(e)),
    }
}

/// A reference to a Job for Events.
pub fn job_ref(j: &Job) -> ObjectReference {
    j.object_ref(&())
}

async fn create_gang(ctx: &Ctx, j: &Job) -> Result<Option<DynamicObject>, ActError> {
    let ns = j.namespace().unwrap_or_default();
    let spec = match job::gang_spec(j) {
        Ok(s) => s,
        Err(e) => {
            ctx.events
                .publish_ref(job_ref(j), EventType::Warning, e.reason(), e.to_string())
                .await;
            return Ok(None);
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
        Ok(stored) => Ok(Some(stored)),
        Err(e) if is_already_exists(&e) => Ok(None),
        Err(e) => Err(ActError::api("create Gang")(e)),
    }
}
