//! The mutating admission webhook: every batch/v1 Job created with the
//! `muster.dev/queue` label is made suspended, so no pod of it exists before
//! muster admits its gang. A Job without the label in a namespace that names a
//! default queue (a namespace label, `--default-queue-label`) gets that queue's
//! label as well.
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

/// The path the webhook is served on.
pub const JOB_PATH: &str = "/mutate-batch-v1-job";

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

/// What to do with one Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not a Job muster manages (or not a creation): admitted unchanged.
    Ignore,
    /// Suspend it; `Some(queue)` also sets the queue label.
    Suspend(Option<String>),
}

/// Whether `req` is the creation of a batch/v1 Job.
fn is_job_create(req: &AdmissionRequest<DynamicObject>) -> bool {
    req.operation == Operation::Create
        && req.kind.group == "batch"
        && req.kind.version == "v1"
        && req.kind.kind == "Job"
        && req.sub_resource.is_none()
}

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
    if !is_job_create(req) {
        return Decision::Ignore;
    }
    let Some(obj) = &req.object else {
        return Decision::Ignore;
    };
    if queue_of(obj).is_some() {
        return Decision::Suspend(None);
    }
    match default_queue.filter(|q| !q.is_empty()) {
        Some(q) => Decision::Suspend(Some(q.to_string())),
        None => Decision::Ignore,
    }
}

/// The JSON Patch (RFC 6902) of a decision on `obj`.
pub fn patch(obj: &DynamicObject, decision: &Decision) -> Vec<Value> {
    let mut ops = Vec::new();
    let Decision::Suspend(queue) = decision else {
        return ops;
    };
    if let Some(q) = queue {
        if obj.metadata.labels.is_some() {
            // "~1" escapes the "/" of the label key in a JSON Pointer
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels/muster.dev~1queue", "value": q}));
        } else {
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels", "value": {QUEUE_LABEL: q}}));
        }
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
        let req = match read_review(body)? {
            Ok(req) => req,
            Err(answer) => return Ok(answer),
        };
        let default_queue = match (&req.namespace, needs_default_queue(&req)) {
            (Some(ns), true) => match self.default_queue(ns).await {
                Ok(q) => q,
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "webhook: namespace not read");
                    let resp = AdmissionResponse::from(&req)
                        .deny("muster: the namespace's default queue could not be read");
                    return encode(resp);
                }
            },
            _ => None,
        };
        encode(answer(&req, default_queue.as_deref()))
    }
}

/// Reads one AdmissionReview body: the request, or (`Ok(Err(..))`) the
/// finished answer to a review without one. Only `admission.k8s.io/v1`
/// `AdmissionReview` is read (the version the chart registers): the answer
/// repeats the request's apiVersion and kind, and the API server refuses an
/// answer of any other (kubernetes/kubernetes,
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`,
/// VerifyAdmissionResponse).
pub fn read_review(
    body: &[u8],
) -> Result<Result<AdmissionRequest<DynamicObject>, Vec<u8>>, WebhookError> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|_| WebhookError::Malformed)?;
    if review.types.api_version != "admission.k8s.io/v1" || review.types.kind != "AdmissionReview" {
        return Err(WebhookError::Malformed);
    }
    match review.try_into() {
        Ok(req) => Ok(Ok(req)),
        Err(_) => encode(AdmissionResponse::invalid(
            "the AdmissionReview has no request",
        ))
        .map(Err),
    }
}

/// Whether the answer to `req` depends on its namespace's default queue:
/// the creation of a Job without the queue label.
pub fn needs_default_queue(req: &AdmissionRequest<DynamicObject>) -> bool {
    let unlabelled = req.object.as_ref().is_some_and(|o| queue_of(o).is_none());
    is_job_create(req) && unlabelled
}

/// The answer to `req`, given the default queue of its namespace, as the
/// AdmissionReview body sent back.
pub fn respond(
    req: &AdmissionRequest<DynamicObject>,
    default_queue: Option<&str>,
) -> Result<Vec<u8>, WebhookError> {
    encode(answer(req, default_queue))
}

fn answer(req: &AdmissionRequest<DynamicObject>, default_queue: Option<&str>) -> AdmissionResponse {
    let resp = AdmissionResponse::from(req);
    let decision = decide(req, default_queue);
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

#[cfg(test)]
mod tests;
