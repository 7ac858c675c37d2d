//! The mutating admission webhook: every workload created with the
//! `muster.dev/queue` label is held until muster admits its gang — a
//! batch/v1 Job or a JobSet is made suspended, so no pod of it exists
//! before; a Pod of a pod group (`muster.dev/pod-group`) gets muster's
//! scheduling gate, so it is not scheduled before; a TrainJob, RayCluster or
//! RayJob gets `spec.suspend`, a PyTorchJob `spec.runPolicy.suspend`, and a
//! LeaderWorkerSet's leader and worker templates get the gate. Every pod of
//! a LeaderWorkerSet muster manages (`leaderworkerset.sigs.k8s.io/name`, the
//! set labelled with a queue) gets the gate again when it is created, read
//! from the set itself: a server-side re-apply or a template edit can drop
//! the gate from the templates, and a pod created ungated would run outside
//! muster (as Kueue gates every pod of a LeaderWorkerSet in its pod webhook,
//! `pkg/controller/jobs/leaderworkerset`). A RayJob that would not delete its
//! cluster when done (`shutdownAfterJobFinishes` false) is refused: KubeRay
//! does not suspend it (as Kueue's webhook refuses it). So are what muster
//! cannot run as a gang, with the message its adapter reports when such an
//! object gets past the webhook: a RayJob in InteractiveMode, a RayCluster
//! or RayJob with autoscaling, a JobSet with `muster.dev/min-count` (see
//! `workloads::rayjob`, `raycluster` and `jobset`). A workload without the
//! label in a namespace that names a default queue (a namespace label,
//! `--default-queue-label`) gets that queue's label as well. A Job created
//! by a JobSet, a TrainJob or a RayJob, and a RayCluster a RayJob creates,
//! are that workload's: they are left alone.
//!
//! The API server sends an `AdmissionReview` (admission.k8s.io/v1) and applies
//! the JSON Patch of the answer. The webhook has no side effects, so a dry-run
//! request is answered like any other. The chart registers it with
//! `failurePolicy: Fail` and selectors that match only labelled Jobs (and
//! Jobs in namespaces with a default queue), so an unavailable webhook blocks
//! only the Jobs muster must manage.

pub mod issue;
pub mod managed;
pub mod rotation;
pub mod tls;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use muster_crds::gpuqueue::GpuQueueSpec;
use serde_json::Value;

use crate::controller::base::objects::{Kind, KindExt};
use crate::controller::translate::namespaces::selects;
use crate::controller::translate::pool::spec;

/// The path the webhook is served on for Jobs.
pub(crate) const JOB_PATH: &str = "/mutate-batch-v1-job";
/// The path the webhook is served on for the other workload kinds (the same
/// handler: the request names the kind).
pub(crate) const WORKLOAD_PATH: &str = "/mutate-workload";

/// How long the namespace of a possible default queue, or the
/// LeaderWorkerSet of a pod, is waited for.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The label that puts a Job in a queue.
pub(crate) const QUEUE_LABEL: &str = "muster.dev/queue";

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
    pub(crate) fn as_str(&self) -> &'static str {
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
    /// Reads the LeaderWorkerSet a created pod belongs to (is it muster's?);
    /// `None` leaves pods of LeaderWorkerSets to the gate of their templates.
    pub leader_worker_sets: Option<kube::Client>,
    /// The namespace label that names the namespace's default queue.
    pub default_queue_label: String,
    /// Reads the GPUQueue a created workload joins and its namespace's
    /// labels, to refuse a workload whose queue does not admit its
    /// namespace; `None` skips the check (the Gang then reports
    /// `NamespaceNotAllowed`).
    pub queues: Option<kube::Client>,
}

/// What to do with one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Not a workload muster manages (or not a creation): admitted unchanged.
    Ignore,
    /// Suspend it (a Job, a JobSet); `Some(queue)` also sets the queue label.
    Suspend(Option<String>),
    /// Gate it (a Pod of a pod group); `Some(queue)` also sets the queue label.
    Gate(Option<String>),
    /// Set the suspend flag at this pointer (a PyTorchJob's
    /// `/spec/runPolicy/suspend`); `Some(queue)` also sets the queue label.
    SuspendAt(&'static str, Option<String>),
    /// Gate the pod templates at these pointers (a LeaderWorkerSet's);
    /// `Some(queue)` also sets the queue label.
    GateTemplates(&'static [&'static str], Option<String>),
    /// Refuse the creation, with this message.
    Deny(&'static str),
}

/// How a created object is held, if it is a workload muster manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// `spec.suspend`.
    Suspended,
    /// muster's scheduling gate.
    Gated,
    /// A suspend flag elsewhere than `spec.suspend` (JSON pointer).
    SuspendedAt(&'static str),
    /// muster's scheduling gate in the pod templates at these pointers (to
    /// their `spec`), those present.
    TemplatesGated(&'static [&'static str]),
    /// Refused, with the reason.
    Refused(&'static str),
    /// muster's scheduling gate if the pod's LeaderWorkerSet is muster's.
    GatedIfSetIs,
}

/// The templates of a LeaderWorkerSet that get the gate.
const LWS_TEMPLATE_SPECS: &[&str] = &[
    "/spec/leaderWorkerTemplate/leaderTemplate/spec",
    "/spec/leaderWorkerTemplate/workerTemplate/spec",
];

/// What a pod is refused with when its LeaderWorkerSet cannot be read.
pub(crate) const LWS_NOT_READ: &str = "muster: the pod's LeaderWorkerSet could not be read, so whether muster must gate the pod is not known; retry";

/// What a RayJob without `shutdownAfterJobFinishes` is refused with.
#[cfg(test)]
pub(crate) const RAYJOB_NEEDS_SHUTDOWN: &str = rayjob::NEEDS_SHUTDOWN;

/// True when the controller of `obj` is an object of a kind muster runs
/// (see [`crate::controller::workloads::managed_controller`]): that
/// workload holds it.
fn controlled_by_workload(obj: &DynamicObject) -> bool {
    let owners = obj.metadata.owner_references.as_deref().unwrap_or_default();
    crate::controller::workloads::managed_controller(owners).is_some()
}

/// How the object `req` creates is held: a batch/v1 Job, a JobSet, a
/// third-party workload, a Pod that names a pod group, or a Pod of a
/// LeaderWorkerSet — none of them when its controller is a workload muster
/// runs (a JobSet's Jobs, a TrainJob's JobSet, a RayJob's cluster), except
/// a LeaderWorkerSet's pods, which its set's gang holds by their gates.
fn held_create(req: &AdmissionRequest<DynamicObject>) -> Option<Held> {
    if req.operation != Operation::Create || req.sub_resource.is_some() {
        return None;
    }
    let k = &req.kind;
    let obj = req.object.as_ref()?;
    let jobset = crate::controller::workloads::jobset::KIND;
    let child = controlled_by_workload(obj);
    if child && !(k.group.is_empty() && k.kind == "Pod") {
        return None;
    }
    match (k.group.as_str(), k.version.as_str(), k.kind.as_str()) {
        ("batch", "v1", "Job") => Some(Held::Suspended),
        ("trainer.kubeflow.org", "v1alpha1", "TrainJob") => Some(Held::Suspended),
        ("kubeflow.org", "v1", "PyTorchJob") => Some(Held::SuspendedAt("/spec/runPolicy/suspend")),
        ("ray.io", "v1", "RayCluster") => {
            // a RayJob's cluster is its RayJob's: left above
            let spec = obj.data.get("spec").unwrap_or(&Value::Null);
            Some(raycluster::unsupported(spec).map_or(Held::Suspended, Held::Refused))
        }
        ("ray.io", "v1", "RayJob") => {
            let selector = obj
                .data
                .pointer("/spec/clusterSelector")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty());
            // on an existing cluster: that cluster's gang, not one of its own
            (!selector).then(|| rayjob::unsupported(obj).map_or(Held::Suspended, Held::Refused))
        }
        ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet") => Some(
            lws::unsupported(obj).map_or(Held::TemplatesGated(LWS_TEMPLATE_SPECS), Held::Refused),
        ),
        (g, v, kind) if g == jobset.group && v == jobset.version && kind == jobset.kind => Some(
            crate::controller::workloads::jobset::unsupported(obj)
                .map_or(Held::Suspended, Held::Refused),
        ),
        ("", "v1", "Pod") => {
            let labels = obj.metadata.labels.as_ref()?;
            if labels.contains_key(POD_GROUP_LABEL) && !child {
                Some(Held::Gated)
            } else if labels.get(lws::NAME_LABEL).is_some_and(|n| !n.is_empty()) {
                Some(Held::GatedIfSetIs)
            } else {
                None
            }
        }
        _ => None,
    }
}

use crate::controller::workloads::pod_group::{POD_GROUP_LABEL, SCHEDULING_GATE};
use crate::controller::workloads::{lws, raycluster, rayjob};

/// The queue label of an object, if set and not empty.
fn queue_of(obj: &DynamicObject) -> Option<&str> {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(QUEUE_LABEL))
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// The queue the workload `req` creates joins: its label, else the
/// namespace's default queue; `None` for what muster does not hold at
/// creation, what it refuses anyway, and a LeaderWorkerSet's pods (their
/// set was checked when it was created).
fn joins(req: &AdmissionRequest<DynamicObject>, default_queue: Option<&str>) -> Option<String> {
    match held_create(req)? {
        Held::GatedIfSetIs | Held::Refused(_) => None,
        _ => {
            let obj = req.object.as_ref()?;
            queue_of(obj)
                .or(default_queue.filter(|q| !q.is_empty()))
                .map(String::from)
        }
    }
}

/// The LeaderWorkerSet whose pod `req` creates (in the request's
/// namespace), by the pod's `leaderworkerset.sigs.k8s.io/name` label: the
/// set the answer depends on.
pub(crate) fn leader_worker_set_of(req: &AdmissionRequest<DynamicObject>) -> Option<&str> {
    if held_create(req)? != Held::GatedIfSetIs {
        return None;
    }
    req.object
        .as_ref()?
        .metadata
        .labels
        .as_ref()?
        .get(lws::NAME_LABEL)
        .map(String::as_str)
}

/// The decision for a request, given the default queue of its namespace.
/// A pod of a LeaderWorkerSet is judged as one whose set is not found (see
/// [`decide_with`]). The tests' shorthand.
#[cfg(test)]
pub(crate) fn decide(
    req: &AdmissionRequest<DynamicObject>,
    default_queue: Option<&str>,
) -> Decision {
    decide_with(req, default_queue, None)
}

/// The decision for a request, given the default queue of its namespace
/// and, for a pod of a LeaderWorkerSet, that set as read (`None`: not
/// found). Such a pod is gated when its set is labelled with a queue: the
/// controller manages a LeaderWorkerSet by that label alone, so the pod of an
/// unlabelled set (even in a namespace with a default queue, which labels a
/// set only when it is created) is admitted unchanged, rather than gated
/// with nobody to release it. The pod itself is not labelled: its gang's
/// queue is its set's.
pub(crate) fn decide_with(
    req: &AdmissionRequest<DynamicObject>,
    default_queue: Option<&str>,
    set: Option<&DynamicObject>,
) -> Decision {
    let Some(held) = held_create(req) else {
        return Decision::Ignore;
    };
    let Some(obj) = &req.object else {
        return Decision::Ignore;
    };
    if held == Held::GatedIfSetIs {
        return match set.and_then(queue_of) {
            Some(_) => Decision::Gate(None),
            None => Decision::Ignore,
        };
    }
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
        Held::SuspendedAt(p) => Decision::SuspendAt(p, queue),
        Held::TemplatesGated(ps) => Decision::GateTemplates(ps, queue),
        Held::Refused(why) => Decision::Deny(why),
        Held::GatedIfSetIs => Decision::Ignore,
    }
}

/// The JSON Patch operation that sets `value` at `pointer`, adding the
/// objects on the way that `obj` does not have ("add" replaces a member).
fn add_at(obj: &DynamicObject, pointer: &str, value: Value) -> Value {
    let parts: Vec<&str> = pointer.split('/').filter(|p| !p.is_empty()).collect();
    // the deepest object on the way that exists
    let mut depth = 0;
    while depth < parts.len() - 1 {
        let prefix = format!("/{}", parts[..=depth].join("/"));
        if !obj.data.pointer(&prefix).is_some_and(Value::is_object) {
            break;
        }
        depth += 1;
    }
    let nested = parts[depth + 1..].iter().rev().fold(value, |inner, key| {
        let mut m = serde_json::Map::new();
        m.insert((*key).to_string(), inner);
        Value::Object(m)
    });
    serde_json::json!({"op": "add", "path": format!("/{}", parts[..=depth].join("/")), "value": nested})
}

/// The operations that add muster's gate to the pod spec at `spec` (a
/// pointer), keeping the gates already there.
fn gate_ops(obj: &DynamicObject, spec: &str) -> Vec<Value> {
    let gate = serde_json::json!({"name": SCHEDULING_GATE});
    match obj
        .data
        .pointer(&format!("{spec}/schedulingGates"))
        .and_then(Value::as_array)
    {
        Some(g) if g.contains(&gate) => vec![],
        Some(_) => vec![
            serde_json::json!({"op": "add", "path": format!("{spec}/schedulingGates/-"), "value": gate}),
        ],
        None => vec![add_at(
            obj,
            &format!("{spec}/schedulingGates"),
            serde_json::json!([gate]),
        )],
    }
}

/// The JSON Patch (RFC 6902) of a decision on `obj`.
pub(crate) fn patch(obj: &DynamicObject, decision: &Decision) -> Vec<Value> {
    let mut ops = Vec::new();
    let queue = match decision {
        Decision::Ignore | Decision::Deny(_) => return ops,
        Decision::Suspend(q)
        | Decision::Gate(q)
        | Decision::SuspendAt(_, q)
        | Decision::GateTemplates(_, q) => q,
    };
    if let Some(q) = queue {
        if obj.metadata.labels.is_some() {
            // "~1" escapes the "/" of the label key in a JSON Pointer
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels/muster.dev~1queue", "value": q}));
        } else {
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels", "value": {QUEUE_LABEL: q}}));
        }
    }
    if let Decision::SuspendAt(pointer, _) = decision {
        ops.push(add_at(obj, pointer, Value::Bool(true)));
        return ops;
    }
    if let Decision::GateTemplates(specs, _) = decision {
        for spec in *specs {
            // a template the object has (a LeaderWorkerSet's leader template is optional)
            let template = spec.trim_end_matches("/spec");
            if obj.data.pointer(template).is_some_and(Value::is_object) {
                ops.extend(gate_ops(obj, spec));
            }
        }
        return ops;
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

/// The object `name` read through `api`, bounded by [`LOOKUP_TIMEOUT`]
/// (well inside the API server's webhook timeout): `Ok(None)` when it does
/// not exist, the error's text when it cannot be read.
async fn lookup<K>(api: &Api<K>, name: &str) -> Result<Option<K>, String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(name)).await {
        Ok(Ok(obj)) => Ok(obj),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".to_string()),
    }
}

impl Webhook {
    /// The default queue of `namespace`: `Ok(None)` when it names none.
    /// Bounded by [`LOOKUP_TIMEOUT`], well inside the API server's webhook
    /// timeout.
    async fn default_queue(&self, namespace: &str) -> Result<Option<String>, String> {
        let Some(api) = &self.namespaces else {
            return Ok(None);
        };
        let ns = lookup(api, namespace).await?;
        Ok(ns
            .and_then(|ns| ns.metadata.labels)
            .and_then(|l| l.get(&self.default_queue_label).cloned()))
    }

    /// The LeaderWorkerSet `name` in `namespace`: `Ok(None)` when there is
    /// none (or no reader). Bounded by [`LOOKUP_TIMEOUT`].
    async fn leader_worker_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, String> {
        let Some(client) = &self.leader_worker_sets else {
            return Ok(None);
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &lws::KIND.api_resource());
        lookup(&api, name).await
    }

    /// Whether GPUQueue `queue` admits `namespace` (its
    /// `spec.namespaceSelector` selects the namespace's labels):
    /// `Ok(None)` when there is no reader, no such queue or no readable
    /// spec (the Gang says why). Bounded by [`LOOKUP_TIMEOUT`] per read.
    async fn queue_admits(&self, namespace: &str, queue: &str) -> Result<Option<bool>, String> {
        let Some(client) = &self.queues else {
            return Ok(None);
        };
        let queues: Api<DynamicObject> =
            Api::all_with(client.clone(), &Kind::GpuQueue.api_resource());
        let Some(q) = lookup(&queues, queue).await? else {
            return Ok(None);
        };
        let Ok(spec) = spec::<GpuQueueSpec>(Kind::GpuQueue, &q) else {
            return Ok(None);
        };
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns = lookup(&namespaces, namespace).await?;
        let mut labels = ns.and_then(|n| n.metadata.labels).unwrap_or_default();
        labels.insert("kubernetes.io/metadata.name".into(), namespace.into());
        Ok(Some(selects(spec.namespace_selector.as_ref(), &labels)))
    }

    /// Answers one AdmissionReview body with an AdmissionReview body.
    pub async fn review(&self, body: &[u8]) -> Result<Vec<u8>, WebhookError> {
        let req = match read_review(body)? {
            Ok(req) => req,
            Err(answer) => return Ok(answer),
        };
        // a pod of a LeaderWorkerSet: gated if the set is muster's, refused
        // if the set cannot be read (rather than admitted ungated)
        let set = match (&req.namespace, leader_worker_set_of(&req)) {
            (Some(ns), Some(name)) => match self.leader_worker_set(ns, name).await {
                Ok(set) => set,
                Err(e) => {
                    tracing::warn!(namespace = %ns, leaderworkerset = %name, error = %e, "webhook: LeaderWorkerSet not read");
                    return encode(AdmissionResponse::from(&req).deny(LWS_NOT_READ));
                }
            },
            _ => None,
        };
        let default_queue = match (&req.namespace, needs_default_queue(&req)) {
            (Some(ns), true) => match self.default_queue(ns).await {
                Ok(q) => q,
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "webhook: namespace not read");
                    return encode(
                        AdmissionResponse::from(&req)
                            .deny("muster: the namespace's default queue could not be read"),
                    );
                }
            },
            _ => None,
        };
        // tenancy: the queue a workload joins must admit its namespace
        if let (Some(ns), Some(queue)) = (&req.namespace, joins(&req, default_queue.as_deref())) {
            match self.queue_admits(ns, &queue).await {
                Ok(Some(false)) => {
                    return encode(AdmissionResponse::from(&req).deny(format!(
                        "muster: GPUQueue {queue} does not admit namespace {ns} (its \
                         spec.namespaceSelector does not select the namespace): use a queue \
                         that admits {ns}, or ask the platform team to add {ns} to {queue}"
                    )));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(namespace = %ns, queue = %queue, error = %e, "webhook: queue not read");
                    return encode(AdmissionResponse::from(&req).deny(format!(
                        "muster: GPUQueue {queue} could not be read to check that it admits \
                         namespace {ns}; retry"
                    )));
                }
            }
        }
        encode(answer(&req, default_queue.as_deref(), set.as_ref()))
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
/// the creation of a workload muster holds, without the queue label (not a
/// pod of a LeaderWorkerSet: its set's label decides).
pub fn needs_default_queue(req: &AdmissionRequest<DynamicObject>) -> bool {
    let unlabelled = req.object.as_ref().is_some_and(|o| queue_of(o).is_none());
    let held = held_create(req);
    held.is_some() && held != Some(Held::GatedIfSetIs) && unlabelled
}

/// The answer to `req`, given the default queue of its namespace, as the
/// AdmissionReview body sent back (a pod of a LeaderWorkerSet is answered
/// as one whose set is not found).
pub fn respond(
    req: &AdmissionRequest<DynamicObject>,
    default_queue: Option<&str>,
) -> Result<Vec<u8>, WebhookError> {
    encode(answer(req, default_queue, None))
}

fn answer(
    req: &AdmissionRequest<DynamicObject>,
    default_queue: Option<&str>,
    set: Option<&DynamicObject>,
) -> AdmissionResponse {
    let resp = AdmissionResponse::from(req);
    let decision = decide_with(req, default_queue, set);
    if let Decision::Deny(why) = decision {
        return resp.deny(why);
    }
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

#[cfg(test)]
mod third_party_tests;
