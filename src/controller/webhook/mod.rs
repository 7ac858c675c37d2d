//! The mutating admission webhook: every workload created with the
//! `muster.dev/queue` label is held until muster admits its gang — a
//! batch/v1 Job or a JobSet is made suspended, so no pod of it exists
//! before; a Pod of a pod group (`muster.dev/pod-group`) gets muster's
//! scheduling gate, so it is not scheduled before. A workload without the
//! label in a namespace that names a default queue (a namespace label,
//! `--default-queue-label`) gets that queue's label as well. A Job created
//! by a JobSet is the JobSet's: it is left alone.
//!
//! The API server sends an `AdmissionReview` (admission.k8s.io/v1) and applies
//! the JSON Patch of the answer. The webhook has no side effects, so a dry-run
//! request is answered like any other. The chart registers it with
//! `failurePolicy: Fail` and selectors that match only labelled Jobs (and
//! Jobs in namespaces with a default queue), so an unavailable webhook blocks
//! only the Jobs muster must manage.

pub mod tls;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::Value;

/// The path the webhook is served on for Jobs.
pub const JOB_PATH: &str = "/mutate-batch-v1-job";
/// The path the webhook is served on for the other workload kinds (the same
/// handler: the request names the kind).
pub const WORKLOAD_PATH: &str = "/mutate-workload";

/// How long the namespace of a possible default queue is waited for.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The label that puts a Job in a queue.
pub const QUEUE_LABEL: &str = "muster.dev/queue";

/// Why a request body could not be answered with an AdmissionReview.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The body is not an `AdmissionReview` object.
    #[error("the body is not an AdmissionReview")]
    Malformed,
    /// The answer could not be serialized.
    #[error("the answer could not be serialized")]
    Encode,
}

impl WebhookError {
    /// A bounded, user-facing reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            WebhookError::Malformed => "MalformedAdmissionReview",
            WebhookError::Encode => "EncodeFailed",
        }
    }
}

/// The webhook's configuration and its reader of namespaces.
pub struct Webhook {
    /// Reads a namespace's labels (the default queue); `None` disables
    /// default queues.
    pub namespaces: Option<Api<Namespace>>,
    /// The namespace label that names the namespace's default queue.
    pub default_queue_label: String,
}

/// What to do with one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not a workload muster manages (or not a creation): admitted unchanged.
    Ignore,
    /// Suspend it (a Job, a JobSet); `Some(queue)` also sets the queue label.
    Suspend(Option<String>),
    /// Gate it (a Pod of a pod group); `Some(queue)` also sets the queue label.
    Gate(Option<String>),
}

/// How a created object is held, if it is a workload muster manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// `spec.suspend`.
    Suspended,
    /// muster's scheduling gate.
    Gated,
}

/// How the object `req` creates is held: a batch/v1 Job (not one a JobSet
/// created), a JobSet, or a Pod that names a pod group.
fn held_create(req: &AdmissionRequest<DynamicObject>) -> Option<Held> {
    if req.operation != Operation::Create || req.sub_resource.is_some() {
        return None;
    }
    let k = &req.kind;
    let obj = req.object.as_ref()?;
    let jobset = crate::controller::workloads::jobset::KIND;
    match (k.group.as_str(), k.version.as_str(), k.kind.as_str()) {
        ("batch", "v1", "Job") => {
            let child = obj
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.kind == jobset.kind);
            (!child).then_some(Held::Suspended)
        }
        (g, v, kind) if g == jobset.group && v == jobset.version && kind == jobset.kind => {
            Some(Held::Suspended)
        }
        ("", "v1", "Pod") => obj
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(POD_GROUP_LABEL))
            .then_some(Held::Gated),
        _ => None,
    }
}

use crate::controller::workloads::pod_group::{POD_GROUP_LABEL, SCHEDULING_GATE};

/// The queue label of an object, if set and not empty.
fn queue_of(obj: &DynamicObject) -> Option<&str> {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(QUEUE_LABEL))
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// The decision for a request, given the default queue of its namespace.
pub fn decide(req: &AdmissionRequest<DynamicObject>, default_queue: Option<&str>) -> Decision {
    let Some(held) = held_create(req) else {
        return Decision::Ignore;
    };
    let Some(obj) = &req.object else {
        return Decision::Ignore;
    };
    let queue = if queue_of(obj).is_some() {
        None
    } else {
        match default_queue.filter(|q| !q.is_empty()) {
            Some(q) => Some(q.to_string()),
            None => return Decision::Ignore,
        }
    };
    match held {
        Held::Suspended => Decision::Suspend(queue),
        Held::Gated => Decision::Gate(queue),
    }
}

/// The JSON Patch (RFC 6902) of a decision on `obj`.
pub fn patch(obj: &DynamicObject, decision: &Decision) -> Vec<Value> {
    let mut ops = Vec::new();
    let queue = match decision {
        Decision::Ignore => return ops,
        Decision::Suspend(q) | Decision::Gate(q) => q,
    };
    if let Some(q) = queue {
        if obj.metadata.labels.is_some() {
            // "~1" escapes the "/" of the label key in a JSON Pointer
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels/muster.dev~1queue", "value": q}));
        } else {
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels", "value": {QUEUE_LABEL: q}}));
        }
    }
    if let Decision::Gate(_) = decision {
        let gate = serde_json::json!({"name": SCHEDULING_GATE});
        let gates = obj
            .data
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array);
        match gates {
            Some(g) if g.contains(&gate) => {}
            Some(_) => ops.push(serde_json::json!({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})),
            None if obj.data.get("spec").is_some_and(Value::is_object) => {
                ops.push(serde_json::json!({"op": "add", "path": "/spec/schedulingGates", "value": [gate]}));
            }
            None => ops.push(serde_json::json!({"op": "add", "path": "/spec", "value": {"schedulingGates": [gate]}})),
        }
        return ops;
    }
    if obj.data.get("spec").is_some_and(Value::is_object) {
        // "add" replaces an existing member
        ops.push(serde_json::json!({"op": "add", "path": "/spec/suspend", "value": true}));
    } else {
        ops.push(serde_json::json!({"op": "add", "path": "/spec", "value": {"suspend": true}}));
    }
    ops
}

/// The AdmissionReview of a response. The patch goes out as base64, as the
/// API server writes and documents its `[]byte` fields.
fn encode(resp: AdmissionResponse) -> Result<Vec<u8>, WebhookError> {
    use base64::Engine;
    let mut review = serde_json::to_value(resp.into_review()).map_err(|_| WebhookError::Encode)?;
    if let Some(patch) = review.pointer_mut("/response/patch") {
        let bytes: Vec<u8> =
            serde_json::from_value(patch.take()).map_err(|_| WebhookError::Encode)?;
        *patch = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    serde_json::to_vec(&review).map_err(|_| WebhookError::Encode)
}

impl Webhook {
    /// The default queue of `namespace`: `Ok(None)` when it names none.
    /// Bounded by [`LOOKUP_TIMEOUT`], well inside the API server's webhook
    /// timeout.
    async fn default_queue(&self, namespace: &str) -> Result<Option<String>, String> {
        let Some(api) = &self.namespaces else {
            return Ok(None);
        };
        let ns = match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(namespace)).await {
            Ok(Ok(ns)) => ns,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("timed out".to_string()),
        };
        Ok(ns
            .and_then(|ns| ns.metadata.labels)
            .and_then(|l| l.get(&self.default_queue_label).cloned()))
    }

    /// Answers one AdmissionReview body with an AdmissionReview body.
    pub async fn review(&self, body: &[u8]) -> Result<Vec<u8>, WebhookError> {
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_slice(body).map_err(|_| WebhookError::Malformed)?;
        let req: AdmissionRequest<DynamicObject> = match review.try_into() {
            Ok(req) => req,
            Err(_) => {
                return encode(AdmissionResponse::invalid(
                    "the AdmissionReview has no request",
                ));
            }
        };
        encode(self.answer(&req).await)
    }

    async fn answer(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let resp = AdmissionResponse::from(req);
        let unlabelled = req.object.as_ref().is_some_and(|o| queue_of(o).is_none());
        let default_queue = match (&req.namespace, held_create(req).is_some() && unlabelled) {
            (Some(ns), true) => match self.default_queue(ns).await {
                Ok(q) => q,
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "webhook: namespace not read");
                    return resp.deny("muster: the namespace's default queue could not be read");
                }
            },
            _ => None,
        };
        let decision = decide(req, default_queue.as_deref());
        let Some(obj) = &req.object else {
            return resp;
        };
        let ops = patch(obj, &decision);
        if ops.is_empty() {
            return resp;
        }
        match serde_json::from_value::<json_patch::Patch>(Value::Array(ops)) {
            Ok(p) => match resp.clone().with_patch(p) {
                Ok(r) => r,
                Err(_) => resp.deny("muster: the patch could not be encoded"),
            },
            Err(_) => resp.deny("muster: the patch could not be encoded"),
        }
    }
}

#[cfg(test)]
mod tests;
