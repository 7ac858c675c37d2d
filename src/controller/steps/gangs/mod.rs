//! Workloads → Gangs: every workload labelled `muster.dev/queue` (a Job, a
//! JobSet, a complete pod group, ...) gets a Gang named after it (owned by
//! it where it is one object, so it goes when the workload goes). Keeping
//! the workload suspended until its gang is admitted — including one that
//! started before muster saw it — is the workload life cycle's
//! ([`crate::controller::steps::workloads`]).

pub(crate) mod status;

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{DynamicObject, PostParams};
use kube_runtime::events::EventType;

use crate::controller::base::api::{ActError, api, is_already_exists};
use crate::controller::base::objects::{Kind, KindExt, QUEUE_LABEL};
use crate::controller::ctx::Ctx;
use muster_planner::lifecycle;

use crate::controller::base::time;
use crate::controller::observe::Observed;
use crate::controller::translate::{gang, workload};
use crate::controller::workloads::{self, Workload, WorkloadKind, pod_group};

/// Creates missing Gangs (and deletes those of a Job gone and created
/// again). Returns the Gangs it created, as the API server stored them, so
/// the cycle that created them plans them too instead of waiting for the
/// watch to bring them back.
pub(crate) async fn sync(ctx: &Ctx, observed: &Observed) -> Vec<DynamicObject> {
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
    for w in crate::controller::observe::workloads::all(observed) {
        if let Some(why) = w.incomplete() {
            tracing::debug!(workload = %w.name(), namespace = %w.namespace(), why, "no gang yet");
            continue;
        }
        let key = (w.namespace(), w.gang_name());
        if let Some(g) = gangs.get(&key) {
            // the Gang of a deleted workload of the same name (the garbage
            // collector has not got to it yet): it goes, and the next cycle
            // creates this workload's own
            let owner = g
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.as_str());
            let mine = w.gang_owner().map(|o| o.uid);
            if owner.is_some_and(|o| Some(o) != mine.as_deref())
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
            match create_gang(ctx, w.as_ref()).await {
                Ok(Some(gang)) => created.push(gang),
                Ok(None) => {}
                Err(e) => tracing::warn!(gang = %key.1, error = %e, "could not create gang"),
            }
        }
    }
    if observed.kinds.contains(&workloads::WorkloadKind::PodGroup) {
        end_ownerless(ctx, observed).await;
    }
    created
}

/// Deletes the Gangs of pod groups whose pods are gone, as the planner's
/// rule for gangs without an owner says
/// ([`muster_planner::lifecycle::gang::ownerless_ends`]): the garbage
/// collector deletes every other Gang with its workload.
async fn end_ownerless(ctx: &Ctx, observed: &Observed) {
    let now = time::now();
    for g in observed.of(Kind::Gang) {
        if g.metadata.deletion_timestamp.is_some() || !g.owner_references().is_empty() {
            continue;
        }
        let ns = g.namespace().unwrap_or_default();
        let gang_name = g.name_any();
        let Some(group) = gang_name.strip_prefix(&WorkloadKind::PodGroup.gang_name("")) else {
            continue;
        };
        let pods_left = observed
            .pods
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(ns.as_str())
                    && p.label(pod_group::POD_GROUP_LABEL).map(String::as_str) == Some(group)
            })
            .count();
        let view = gang::record_of(g);
        let phase = view.phase.unwrap_or_default();
        let requeue_after = view.requeue_after;
        if !lifecycle::gang::ownerless_ends(phase, pods_left, requeue_after, now) {
            continue;
        }
        match delete_stale(ctx, g).await {
            Ok(()) => {
                tracing::info!(gang = %gang_name, namespace = %ns, phase = ?phase, "pod group gone: its gang deleted")
            }
            Err(e) => {
                tracing::warn!(gang = %gang_name, error = %e, "could not delete the gang of a pod group gone")
            }
        }
    }
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
        Err(e) if crate::controller::base::api::is_not_found(&e) => Ok(()),
        Err(e) => Err(ActError::api("delete stale Gang")(e)),
    }
}

async fn create_gang(ctx: &Ctx, w: &dyn Workload) -> Result<Option<DynamicObject>, ActError> {
    let ns = w.namespace();
    let spec = match w
        .pod_sets()
        .and_then(|sets| workload::gang_spec(w.meta(), &sets))
    {
        Ok(s) => s,
        Err(e) => {
            ctx.events
                .publish_ref(
                    w.object_ref(),
                    EventType::Warning,
                    e.reason(),
                    e.to_string(),
                )
                .await;
            return Ok(None);
        }
    };
    let mut obj = DynamicObject::new(&w.gang_name(), &Kind::Gang.api_resource()).within(&ns);
    match w.gang_owner() {
        Some(owner) => obj.metadata.owner_references = Some(vec![owner]),
        None if w.kind() == workloads::WorkloadKind::PodGroup => {}
        None => return Err(ActError::Missing(format!("uid of {}", w.name()))),
    }
    obj.metadata.labels = Some([(QUEUE_LABEL.to_string(), spec.queue.clone())].into());
    obj.data = serde_json::json!({ "spec": spec });
    match api(&ctx.client, Kind::Gang, Some(&ns))
        .create(&PostParams::default(), &obj)
        .await
    {
        Ok(stored) => {
            // told once, on the Gang made without what the workload asked
            let annotations = w.meta().annotations.clone().unwrap_or_default();
            if let (_, Some(problem)) = workload::network_topology(&annotations) {
                ctx.events
                    .warn(
                        Kind::Gang,
                        &stored,
                        crate::controller::base::reasons::INVALID_NETWORK_TOPOLOGY,
                        problem,
                    )
                    .await;
            }
            Ok(Some(stored))
        }
        Err(e) if is_already_exists(&e) => Ok(None),
        Err(e) => Err(ActError::api("create Gang")(e)),
    }
}
