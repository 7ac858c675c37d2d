//! Acting: small, idempotent steps, each safe to repeat after a crash.
//! [`reconcile`] holds what runs every cycle per object from what is
//! observed; [`apply`] the appliers of a plan's items. Every step reads one
//! cycle's observation and writes with patches whose result does not depend
//! on how often they run.

use kube::api::{Api, DynamicObject, Patch, PatchParams};

use crate::controller::base::conditions::ConditionType;

use crate::controller::base::objects::{Condition, ConditionStatus, FIELD_MANAGER, Kind, KindExt};

/// Why one write failed, in bounded categories.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ActError {
    /// The API server refused or could not be reached.
    #[error("{action}: {source}")]
    Api {
        /// What was being done (bounded: "create PoolNode", "pin Job" …).
        action: &'static str,
        /// The error.
        source: kube::Error,
    },
    /// The cloud call failed.
    #[error("{0}")]
    Provider(#[from] muster_provider_api::ProviderError),
    /// No provider for the pool's NodeClass.
    #[error("{0}")]
    Setup(#[from] crate::controller::ProviderSetupError),
    /// An object the step needs is missing from the caches.
    #[error("missing {0}")]
    Missing(String),
    /// A PoolNode of this name exists for another launch (another
    /// idempotency key): it is not taken for this one.
    #[error("PoolNode {0} exists with another idempotency key")]
    NameTaken(String),
}

impl ActError {
    /// Wraps a kube error with the action it interrupted (a 422 Invalid is
    /// also counted: see [`invalid_writes`]).
    pub fn api(action: &'static str) -> impl FnOnce(kube::Error) -> ActError {
        move |source| {
            if matches!(&source, kube::Error::Api(s) if s.code == 422) {
                INVALID_WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(action, error = %source, "write refused as invalid");
            }
            ActError::Api { action, source }
        }
    }
}

impl ActError {
    /// True for a 409 Conflict: the object changed since it was read.
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, ActError::Api { source: kube::Error::Api(s), .. } if s.code == 409)
    }
}

static INVALID_WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many writes of this process the API server refused as invalid (422:
/// a Job rule, a CRD's schema or CEL rule): zero when every write the
/// controller makes is one a real server accepts. Tests assert it.
pub fn invalid_writes() -> u64 {
    INVALID_WRITES.load(std::sync::atomic::Ordering::Relaxed)
}

/// True for a 404 from the API server.
/// A Kubernetes API error met by a provider whose machines are API
/// objects (the simulated cloud's Nodes, the delegate mode's NodeClaims),
/// as a provider error: 429/5xx and transport failures are transient, the
/// rest permanent. `what` names what was read or written.
pub(crate) fn provider_error(what: &str, e: kube::Error) -> muster_provider_api::ProviderError {
    use muster_provider_api::ProviderError;
    match &e {
        kube::Error::Api(s) if is_transient(&e) => ProviderError::Transient {
            message: format!("{what}: {}", s.message),
            retry_after: None,
        },
        kube::Error::Api(s) => ProviderError::Permanent {
            message: format!("{what}: {} ({})", s.message, s.reason),
        },
        _ => ProviderError::Transient {
            message: format!("{what}: {e}"),
            retry_after: None,
        },
    }
}

/// Whether an API call may succeed if tried again: the server was busy
/// (429) or failed (5xx), or the connection failed before an answer came
/// (`HyperError`, `Service`: refused, reset, timed out) or while reading
/// one (`ReadEvents`). A request that could not be built, an answer that
/// could not be read as JSON, or a configuration, TLS or auth failure fails
/// the same way on every try.
pub(crate) fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True for a 409 AlreadyExists from the API server.
pub(crate) fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// The dynamic API of a muster kind (namespaced Gangs need `namespace`).
pub fn api(client: &kube::Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = kind.api_resource();
    match (kind.namespaced(), namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// Patch parameters of every controller write.
pub(crate) fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

/// Merge-patches the status subresource of a muster object.
pub(crate) async fn patch_status(
    client: &kube::Client,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    status: serde_json::Value,
) -> Result<(), ActError> {
    api(client, kind, namespace)
        .patch_status(
            name,
            &params(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await
        .map(|_| ())
        .map_err(ActError::api("patch status"))
}

/// The label value naming a gang on nodes and in node selectors:
/// `namespace.name` (namespaces contain no dots, so it reads back).
pub(crate) fn gang_label_value(gang: &str) -> String {
    let v = gang.replacen('/', ".", 1);
    if v.len() <= 63 {
        v
    } else {
        // label values are at most 63 characters: keep a readable prefix and a stable hash
        let h = v.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
        format!("{}-{h:016x}", &v[..46].trim_end_matches(['.', '-', '_']))
    }
}

/// The object's `status.conditions` (none when absent or unreadable).
pub(crate) fn conditions(obj: &DynamicObject) -> Vec<Condition> {
    obj.data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default()
}

/// The object's `status.conditions` with `cond` in place of any condition
/// of its type; `None` when a condition of that type already says the same
/// (status, reason, message), so nothing needs writing.
pub(crate) fn with_condition(obj: &DynamicObject, cond: Condition) -> Option<Vec<Condition>> {
    with_condition_in(conditions(obj), cond)
}

/// `conds` with `cond` in place of any condition of its type; `None` when
/// a condition of that type already says the same.
pub(crate) fn with_condition_in(conds: Vec<Condition>, cond: Condition) -> Option<Vec<Condition>> {
    let same = conds.iter().any(|c| {
        c.type_ == cond.type_
            && c.status == cond.status
            && c.reason == cond.reason
            && c.message == cond.message
    });
    if same {
        return None;
    }
    let mut next: Vec<_> = conds
        .into_iter()
        .filter(|c| c.type_ != cond.type_)
        .collect();
    next.push(cond);
    Some(next)
}

/// A condition (`metav1.Condition` shape, the CRDs' type) of `type_` that
/// holds when `ok`, with a bounded `reason`, stamped `now`.
pub(crate) fn condition(
    type_: ConditionType,
    ok: bool,
    reason: &str,
    message: String,
    now: muster_planner::Time,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.as_str().to_string(),
        status: if ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        last_transition_time: crate::controller::base::time::to_kube(now),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
    }
}

/// The merge patch of a status subresource that turns the typed status
/// `before` into `after` (fields that went away are nulled); `None` when
/// nothing changes.
pub(crate) fn status_patch<T: serde::Serialize>(
    before: &T,
    after: &T,
) -> Option<serde_json::Value> {
    let b = serde_json::to_value(before).ok()?;
    let a = serde_json::to_value(after).ok()?;
    let patch = merge_patch(&b, &a);
    patch
        .as_object()
        .is_some_and(|o| !o.is_empty())
        .then_some(patch)
}

/// The JSON merge patch (RFC 7386) from `before` to `after`.
pub(crate) fn merge_patch(
    before: &serde_json::Value,
    after: &serde_json::Value,
) -> serde_json::Value {
    use serde_json::Value;
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in a {
                match b.get(k) {
                    Some(old) if old == v => {}
                    Some(old) => {
                        out.insert(k.clone(), merge_patch(old, v));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in b.keys() {
                if !a.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        _ => after.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_busy_or_failed_server_or_a_lost_connection_is_transient() {
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("m", "Reason")
                    .with_code(code)
                    .boxed(),
            )
        };
        for (code, want) in [
            (429, true),
            (500, true),
            (503, true),
            (404, false),
            (409, false),
            (422, false),
        ] {
            assert_eq!(is_transient(&api(code)), want, "{code}");
        }
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(is_transient(&kube::Error::ReadEvents(io)));
        assert!(is_transient(&kube::Error::Service("timed out".into())));
        let bad_json = serde_json::from_str::<u32>("{").expect_err("not JSON");
        assert!(!is_transient(&kube::Error::SerdeError(bad_json)));
        assert!(!is_transient(&kube::Error::TlsRequired));
    }

    #[test]
    fn refused_invalid_writes_are_counted() {
        let before = invalid_writes();
        let invalid = kube::Error::Api(
            kube::core::Status::failure("spec.template: field is immutable", "Invalid")
                .with_code(422)
                .boxed(),
        );
        let _ = ActError::api("pin Job")(invalid);
        let conflict = kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(409)
                .boxed(),
        );
        let _ = ActError::api("pin Job")(conflict);
        assert_eq!(invalid_writes(), before + 1);
    }
}
