//! Jobs → Gangs: every Job labelled `muster.dev/queue` gets a Gang of the
//! same name (owned by the Job, so it goes when the Job goes). Keeping the
//! Job suspended until its gang is admitted — including a Job that started
//! before muster saw it — is the Job life cycle's ([`super::jobs`]).

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DynamicObject, PostParams};
use kube::{Resource, ResourceExt};
use kube_runtime::events::EventType;

use super::{ActError, api, is_already_exists};
use crate::controller::objects::{Kind, KindExt, QUEUE_LABEL};
use crate::controller::planning_loop::Ctx;
use crate::controller::translate::{Observed, job};

/// Creates missing Gangs. Returns how many it created.
pub async fn sync(ctx: &Ctx, observed: &Observed) -> usize {
    let gangs: BTreeSet<(String, String)> = observed
        .of(Kind::Gang)
        .iter()
        .map(|g| (g.namespace().unwrap_or_default(), g.name_any()))
        .collect();
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
