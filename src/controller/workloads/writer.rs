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
use serde::de::DeserializeOwned;
use serde_json::Value;

use muster_planner::lifecycle::workload::Step;

use crate::controller::base::api::{ActError, is_not_found, params};
use crate::controller::workloads::{CustomKind, Directives, Workload};

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
    Replace(Box<DynamicObject>),
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
    /// decode as one is the call's error, as the typed API's is (though, for
    /// the pods of a group, found once every pod is written).
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

/// `current` again from the last object stored (a kind written as one
/// object makes at most one write a step), wrapped by `wrap`; `current`
/// itself when nothing was stored (a step the kind writes nothing for).
pub(crate) fn rewrap<W: Workload + Clone + 'static>(
    current: &W,
    stored: Vec<Stored>,
    wrap: impl FnOnce(DynamicObject) -> W,
) -> Box<dyn Workload> {
    Box::new(
        stored
            .into_iter()
            .rev()
            .find_map(|s| s.object)
            .map_or_else(|| current.clone(), wrap),
    )
}

/// The last object stored, as a built-in kind (see [`Stored::typed`]).
pub(crate) fn last_typed<K: DeserializeOwned>(stored: Vec<Stored>) -> Result<Option<K>, ActError> {
    match stored.into_iter().rev().find(|s| s.object.is_some()) {
        Some(s) => s.typed(),
        None => Ok(None),
    }
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

/// What the adapters' tests read of their writes.
#[cfg(test)]
pub(crate) mod sketch {
    use super::*;

    /// A write as `(action, "<plural> <namespace>/<name>", verb, body)`.
    pub(crate) type Sketch = (&'static str, String, &'static str, Value);

    /// The writes `step` asks of `w`, sketched (see [`of`]).
    pub(crate) fn writes(w: &dyn Workload, step: Step, directives: &Directives) -> Vec<Sketch> {
        w.writes(&step, directives)
            .expect("writes")
            .iter()
            .map(of)
            .collect()
    }

    /// A write sketched: the verb `patch`, `patch-status`, `replace`,
    /// `replace-latest` or `delete`; the body the patch, the object
    /// replaced, or the delete's UID precondition (`null` for a replace of
    /// the latest object, see [`revise`]).
    pub(crate) fn of(w: &Write) -> Sketch {
        let t = &w.target;
        let at = format!("{} {}/{}", t.resource.plural, t.namespace, t.name);
        let (verb, body) = match &w.change {
            Change::Patch(p) => ("patch", p.clone()),
            Change::PatchStatus(p) => ("patch-status", p.clone()),
            Change::Replace(o) => ("replace", serde_json::to_value(o).expect("object")),
            Change::ReplaceLatest(_) => ("replace-latest", Value::Null),
            Change::Delete { uid } => ("delete", serde_json::json!(uid)),
        };
        (w.action, at, verb, body)
    }

    /// Directives for the gang labelled `gang`, each node of `tainted`
    /// carrying the taint `gpu=true:NoSchedule`, `counts` pods admitted by
    /// pod set.
    pub(crate) fn directives(gang: &str, tainted: &[&str], counts: &[(&str, u32)]) -> Directives {
        let taint = muster_planner::Taint {
            key: "gpu".into(),
            value: "true".into(),
            effect: muster_planner::TaintEffect::NoSchedule,
        };
        Directives {
            gang_label: gang.to_string(),
            taints: tainted
                .iter()
                .map(|n| (n.to_string(), vec![taint.clone()]))
                .collect(),
            counts: counts.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    /// The toleration of the taint [`directives`] puts on its nodes.
    pub(crate) fn toleration() -> Value {
        serde_json::json!({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"})
    }

    /// Pins of each pod set to its nodes.
    pub(crate) fn pins(sets: &[(&str, &[&str])]) -> muster_planner::lifecycle::workload::Pins {
        sets.iter()
            .map(|(set, nodes)| {
                (
                    set.to_string(),
                    nodes.iter().map(|n| n.to_string()).collect(),
                )
            })
            .collect()
    }

    /// The object a replace of the latest object makes of `latest`
    /// (`None`: nothing written).
    pub(crate) fn revise(w: Write, latest: &DynamicObject) -> Option<Value> {
        match w.change {
            Change::ReplaceLatest(f) => f(latest)
                .expect("revised")
                .map(|o| serde_json::to_value(o).expect("object")),
            other => panic!("not a replace of the latest object: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use http::{Request, Response};
    use http_body_util::BodyExt;
    use k8s_openapi::api::batch::v1::Job;
    use kube::client::Body;
    use serde_json::json;

    use super::*;
    use crate::controller::base::objects::FIELD_MANAGER;
    use crate::controller::workloads::job::JobWorkload;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// An API server that answers from a script, in order, and records
    /// each request as `METHOD uri content-type body`.
    #[derive(Clone, Default)]
    struct Server {
        answers: Arc<Mutex<Vec<(u16, Value)>>>,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl Server {
        fn answering(answers: Vec<(u16, Value)>) -> (Server, kube::Client) {
            let server = Server {
                answers: Arc::new(Mutex::new(answers)),
                ..Server::default()
            };
            (server.clone(), kube::Client::new(server, "default"))
        }

        fn seen(&self) -> Vec<String> {
            std::mem::take(&mut *self.seen.lock().expect("lock"))
        }
    }

    impl tower_service::Service<Request<Body>> for Server {
        type Response = Response<Body>;
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<Body>) -> Self::Future {
            let server = self.clone();
            Box::pin(async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await?.to_bytes();
                let kind = parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
                    .to_string();
                server.seen.lock().expect("lock").push(format!(
                    "{} {} {kind} {}",
                    parts.method,
                    parts.uri,
                    String::from_utf8_lossy(&body)
                ));
                let (code, answer) = server.answers.lock().expect("lock").remove(0);
                Ok(Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&answer)?))?)
            })
        }
    }

    fn status(code: u16, reason: &str) -> (u16, Value) {
        let s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": reason, "reason": reason, "code": code});
        (code, s)
    }

    fn job(rv: &str) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "resourceVersion": rv},
            "spec": {"template": {}}})
    }

    fn target() -> Target {
        Target::typed::<Job>("ns", "j")
    }

    fn write(change: Change) -> Write {
        Write {
            target: target(),
            change,
            action: "pin Job",
        }
    }

    fn dynamic(v: Value) -> DynamicObject {
        serde_json::from_value(v).expect("object")
    }

    #[tokio::test]
    async fn each_change_is_its_call_with_musters_field_manager() {
        let path = "/apis/batch/v1/namespaces/ns/jobs/j";
        let fm = format!("fieldManager={FIELD_MANAGER}");
        let merge = "application/merge-patch+json";
        let (server, client) = Server::answering(vec![(200, job("2")); 6]);
        let patch = json!({"spec": {"suspend": true}});
        let stored = carry_out(&client, write(Change::Patch(patch.clone())))
            .await
            .expect("patch");
        assert_eq!(
            (stored.name.as_str(), stored.action),
            ("j", "pin Job"),
            "what the server stored, named"
        );
        assert_eq!(
            stored.object.and_then(|o| o.metadata.resource_version),
            Some("2".to_string())
        );
        let status = json!({"status": {"startTime": null}});
        carry_out(&client, write(Change::PatchStatus(status.clone())))
            .await
            .expect("status");
        carry_out(&client, write(Change::Replace(Box::new(dynamic(job("1"))))))
            .await
            .expect("replace");
        assert_eq!(
            server.seen(),
            [
                format!("PATCH {path}?&{fm} {merge} {patch}"),
                format!("PATCH {path}/status?&{fm} {merge} {status}"),
                format!("PUT {path}? application/json {}", job("1")),
            ]
        );
        // the latest read, then replaced as revised; nothing written when
        // the revision makes nothing
        let revised = carry_out(
            &client,
            write(Change::ReplaceLatest(Box::new(|latest| {
                let mut next = latest.clone();
                next.data["spec"]["parallelism"] = json!(2);
                Ok(Some(next))
            }))),
        )
        .await
        .expect("replace latest");
        assert!(revised.object.is_some());
        let mut next = job("2");
        next["spec"]["parallelism"] = json!(2);
        assert_eq!(
            server.seen(),
            [
                format!("GET {path} - "),
                format!("PUT {path}? application/json {next}"),
            ]
        );
        let unchanged = carry_out(
            &client,
            write(Change::ReplaceLatest(Box::new(|_| Ok(None)))),
        )
        .await
        .expect("read only");
        assert_eq!(
            unchanged
                .object
                .map(|o| serde_json::to_value(o).expect("json")),
            Some(job("2"))
        );
        assert_eq!(server.seen(), [format!("GET {path} - ")]);
    }

    #[tokio::test]
    async fn a_delete_holds_to_the_uid_and_a_pod_gone_is_deleted() {
        let (server, client) = Server::answering(vec![
            (
                200,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            ),
            status(404, "NotFound"),
            status(500, "InternalError"),
        ]);
        let pod = |uid: Option<&str>| Write {
            target: Target::typed::<k8s_openapi::api::core::v1::Pod>("ns", "p"),
            change: Change::Delete {
                uid: uid.map(String::from),
            },
            action: "delete pod of group",
        };
        for _ in 0..2 {
            let gone = carry_out(&client, pod(Some("u1"))).await.expect("deleted");
            assert!(gone.object.is_none() && gone.name == "p");
        }
        let err = carry_out(&client, pod(None)).await.expect_err("refused");
        assert!(
            matches!(
                err,
                ActError::Api {
                    action: "delete pod of group",
                    ..
                }
            ),
            "{err}"
        );
        let with_uid = r#"{"preconditions":{"uid":"u1"}}"#;
        assert_eq!(
            server.seen(),
            [
                format!("DELETE /api/v1/namespaces/ns/pods/p? application/json {with_uid}"),
                format!("DELETE /api/v1/namespaces/ns/pods/p? application/json {with_uid}"),
                "DELETE /api/v1/namespaces/ns/pods/p? application/json {}".to_string(),
            ]
        );
    }

    #[tokio::test]
    async fn errors_carry_the_action_of_the_write_and_stop_before_the_replace() {
        let (server, client) = Server::answering(vec![status(409, "Conflict")]);
        let err = carry_out(&client, write(Change::Replace(Box::new(dynamic(job("1"))))))
            .await
            .expect_err("conflict");
        assert!(err.is_conflict(), "{err}");
        assert!(matches!(
            err,
            ActError::Api {
                action: "pin Job",
                ..
            }
        ));
        // a read refused is the write's error, and nothing is replaced
        let (server2, client2) = Server::answering(vec![status(404, "NotFound")]);
        let err = carry_out(
            &client2,
            write(Change::ReplaceLatest(Box::new(|_| {
                panic!("revised without a latest object")
            }))),
        )
        .await
        .expect_err("not found");
        assert!(matches!(
            err,
            ActError::Api {
                action: "pin Job",
                ..
            }
        ));
        assert_eq!(server.seen().len() + server2.seen().len(), 2);
        // an answer that is not the kind is the write's error too
        let odd = Stored {
            name: "j".into(),
            object: Some(dynamic(
                json!({"metadata": {"name": "j"}, "spec": {"parallelism": "x"}}),
            )),
            action: "pin Job",
        };
        let err = odd.typed::<Job>().expect_err("not a Job");
        assert!(
            matches!(
                &err,
                ActError::Api {
                    action: "pin Job",
                    source: kube::Error::SerdeError(_)
                }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn reread_reads_the_object_again_and_wraps_it() {
        let w = JobWorkload(Arc::new(serde_json::from_value(job("1")).expect("job")));
        let (server, client) = Server::answering(vec![(200, job("5")), status(404, "NotFound")]);
        let fresh = reread(&client, &w).await.expect("read").expect("there");
        assert_eq!(fresh.meta().resource_version.as_deref(), Some("5"));
        assert!(reread(&client, &w).await.expect("read").is_none(), "gone");
        assert_eq!(
            server.seen(),
            [
                "GET /apis/batch/v1/namespaces/ns/jobs/j - ".to_string(),
                "GET /apis/batch/v1/namespaces/ns/jobs/j - ".to_string(),
            ]
        );
    }
}
