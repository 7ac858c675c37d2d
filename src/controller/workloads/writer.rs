//! The one writer of workloads, in the manner of Kueue's `jobframework`
//! (`Suspend`, `RestorePodSetsInfo` and `RunWithPodSetsInfo` change the
//! object in memory; the framework makes the API call): an adapter turns a
//! table step into the [`Write`]s it needs, as data computed from the
//! object in memory ([`Workload::writes`]); [`write`] carries them out with
//! the API client, in order, and hands what the server stored back to the
//! adapter ([`Workload::stored`]), which wraps it as a workload again.
//! [`reread`] reads the object anew after a write was refused with 409
//! Conflict.
//!
//! Every call is named by the bounded action of its write ("pin Job", ...),
//! which its error carries ([`ActError::api`]); patches are JSON merge
//! patches under muster's field manager ([`params`]); a replace sends the
//! resourceVersion of the object it was made from, so the server refuses it
//! with 409 when the object changed meanwhile.

use std::fmt;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PostParams, Preconditions};
use kube::core::ApiResource;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::controller::base::api::{ActError, is_not_found, params};
use crate::controller::workloads::{CustomKind, Directives, Workload};
use muster_planner::lifecycle::workload::Step;

/// The object a write goes to: its API resource, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The API resource (group, version, plural).
    pub(crate) resource: ApiResource,
    /// Its namespace.
    pub(crate) namespace: String,
    /// Its name.
    pub(crate) name: String,
}

impl Target {
    /// A namespaced object of a built-in kind (`K`: a Job, a Pod) in
    /// `namespace`, named `name`.
    pub(crate) fn typed<K>(namespace: &str, name: &str) -> Target
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        Target {
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// `obj`, of the custom kind `kind`.
    pub(crate) fn custom(kind: CustomKind, obj: &DynamicObject) -> Target {
        Target {
            resource: kind.api_resource(),
            namespace: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
        }
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.namespace, &self.resource)
    }
}

/// Makes the object to replace from the latest one the server has; `None`
/// when nothing is to be written after all (the latest object is then what
/// is stored).
pub(crate) type Revise =
    Box<dyn FnOnce(&DynamicObject) -> Result<Option<DynamicObject>, ActError> + Send>;

/// What a write does to its object.
pub(crate) enum Change {
    /// A JSON merge patch of the object.
    Patch(Value),
    /// A JSON merge patch of its status subresource.
    PatchStatus(Value),
    /// The object replaced by this one, guarded by the resourceVersion it
    /// carries.
    Replace(DynamicObject),
    /// The object read (a 404 is an error), then replaced by what the
    /// [`Revise`] makes of it, guarded by the resourceVersion read: for
    /// kinds whose controller writes them as they stop, so that the object
    /// in memory is stale by the time it is restored or pinned.
    ReplaceLatest(Revise),
    /// The object deleted on the condition that it still has this UID; an
    /// object already gone (404) counts as deleted.
    Delete {
        /// The UID precondition, if the object has one.
        uid: Option<String>,
    },
}

impl fmt::Debug for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Patch(p) => f.debug_tuple("Patch").field(p).finish(),
            Change::PatchStatus(p) => f.debug_tuple("PatchStatus").field(p).finish(),
            Change::Replace(o) => f.debug_tuple("Replace").field(o).finish(),
            Change::ReplaceLatest(_) => f.write_str("ReplaceLatest(..)"),
            Change::Delete { uid } => f.debug_struct("Delete").field("uid", uid).finish(),
        }
    }
}

/// One API call a table step asks of a workload.
#[derive(Debug)]
pub(crate) struct Write {
    /// The object written.
    pub(crate) target: Target,
    /// What is done to it.
    pub(crate) change: Change,
    /// The bounded name of the write, for its errors and metrics.
    pub(crate) action: &'static str,
}

/// What the server returned for one write (or a read again).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The object's name.
    pub(crate) name: String,
    /// The object as the server stored it; `None` when it was deleted (or
    /// was gone already).
    pub(crate) object: Option<DynamicObject>,
    /// The action of the call that returned it.
    pub(crate) action: &'static str,
}

impl Stored {
    /// The object as a built-in kind (a Job, a Pod): an answer that does not
    /// decode as one is the call's error, as the typed API's is.
    pub(crate) fn typed<K: DeserializeOwned>(self) -> Result<Option<K>, ActError> {
        let Some(obj) = self.object else {
            return Ok(None);
        };
        serde_json::to_value(obj)
            .and_then(serde_json::from_value)
            .map(Some)
            .map_err(|e| ActError::api(self.action)(kube::Error::SerdeError(e)))
    }
}

/// The last object stored, if any: a kind written as one object makes at
/// most one write a step.
pub(crate) fn last_object(stored: Vec<Stored>) -> Option<DynamicObject> {
    stored.into_iter().rev().find_map(|s| s.object)
}

/// The last object stored, as a built-in kind (see [`Stored::typed`]).
pub(crate) fn last_typed<K: DeserializeOwned>(stored: Vec<Stored>) -> Result<Option<K>, ActError> {
    match stored.into_iter().rev().find(|s| s.object.is_some()) {
        Some(s) => s.typed(),
        None => Ok(None),
    }
}

/// A built-in object (`what` names it for the error) as the dynamic object
/// a [`Change::Replace`] sends: the same JSON.
pub(crate) fn dynamic<K: Serialize>(obj: &K, what: &str) -> Result<DynamicObject, ActError> {
    serde_json::to_value(obj)
        .and_then(serde_json::from_value)
        .map_err(|e| ActError::Missing(format!("{what}: {e}")))
}

/// Carries out `step` on `workload`: its writes, in order, stopping at the
/// first that fails; returns the workload as the server stored it.
pub(crate) async fn write(
    client: &kube::Client,
    workload: &dyn Workload,
    step: &Step,
    directives: &Directives,
) -> Result<Box<dyn Workload>, ActError> {
    let mut stored = Vec::new();
    for w in workload.writes(step, directives)? {
        stored.push(carry_out(client, w).await?);
    }
    workload.stored(stored)
}

/// The workload as the server has it now, read again after a write was
/// refused because it changed meanwhile (its controller wrote its status);
/// `None` when it is gone, or where there is nothing to read again (see
/// [`Workload::reread_from`]).
pub(crate) async fn reread(
    client: &kube::Client,
    workload: &dyn Workload,
) -> Result<Option<Box<dyn Workload>>, ActError> {
    let Some((target, action)) = workload.reread_from() else {
        return Ok(None);
    };
    let Some(obj) = target
        .api(client)
        .get_opt(&target.name)
        .await
        .map_err(ActError::api(action))?
    else {
        return Ok(None);
    };
    workload
        .stored(vec![Stored {
            name: target.name,
            object: Some(obj),
            action,
        }])
        .map(Some)
}

/// One write, with the API client.
async fn carry_out(client: &kube::Client, w: Write) -> Result<Stored, ActError> {
    let Write {
        target,
        change,
        action,
    } = w;
    let api = target.api(client);
    let name = target.name;
    let object = match change {
        Change::Patch(p) => api.patch(&name, &params(), &Patch::Merge(p)).await,
        Change::PatchStatus(p) => api.patch_status(&name, &params(), &Patch::Merge(p)).await,
        Change::Replace(next) => api.replace(&name, &PostParams::default(), &next).await,
        Change::ReplaceLatest(revise) => {
            let latest = api.get(&name).await.map_err(ActError::api(action))?;
            match revise(&latest)? {
                Some(next) => api.replace(&name, &PostParams::default(), &next).await,
                None => Ok(latest),
            }
        }
        Change::Delete { uid } => {
            let dp = DeleteParams {
                preconditions: uid.map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(ActError::api(action)(e)),
            }
            return Ok(Stored {
                name,
                object: None,
                action,
            });
        }
    }
    .map_err(ActError::api(action))?;
    Ok(Stored {
        name,
        object: Some(object),
        action,
    })
}
