//! Kubernetes Events with bounded reasons, published through kube-runtime's
//! recorder (events.k8s.io/v1, repeated events become a series).

use kube::Resource;
use kube::api::DynamicObject;
use kube_runtime::events::{Event, EventType, Recorder, Reporter};

use crate::controller::base::objects::{Kind, KindExt};

/// Publishes Events on behalf of the controller.
#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
}

impl Events {
    /// A publisher for this controller instance.
    pub fn new(client: kube::Client, instance: &str) -> Events {
        let reporter = Reporter {
            controller: "muster".to_string(),
            instance: Some(instance.to_string()),
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// A Warning on a muster object. Failures to publish are logged only.
    pub async fn warn(&self, kind: Kind, obj: &DynamicObject, reason: &str, note: String) {
        self.publish(kind, obj, EventType::Warning, reason, note)
            .await;
    }

    /// A Normal event on a muster object.
    pub async fn normal(&self, kind: Kind, obj: &DynamicObject, reason: &str, note: String) {
        self.publish(kind, obj, EventType::Normal, reason, note)
            .await;
    }

    async fn publish(
        &self,
        kind: Kind,
        obj: &DynamicObject,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let reference = obj.object_ref(&kind.api_resource());
        self.publish_ref(reference, type_, reason, note).await;
    }

    /// An event on any object reference.
    pub(crate) async fn publish_ref(
        &self,
        reference: k8s_openapi::api::core::v1::ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        if cfg!(debug_assertions) && !crate::controller::base::reasons::known(reason) {
            tracing::error!(
                reason,
                "Event reason missing from src/controller/base/reasons.rs"
            );
        }
        let ev = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        // client-go's broadcaster retries a failed Event write (up to 12
        // tries, `maxTriesPerEvent` in `tools/record/event.go`) on a
        // goroutine of its own; kube-runtime's recorder tries once. An
        // answer of 409/429/5xx or a cut connection is retried here a few
        // times, briefly, so a passing API server hiccup does not lose the
        // one record of a decision; anything else is logged and dropped
        // (Events are best-effort).
        let mut tries = 0;
        loop {
            tries += 1;
            match self.recorder.publish(&ev, &reference).await {
                Ok(()) => return,
                Err(e) if tries < EVENT_TRIES && retriable(&e) => {
                    tokio::time::sleep(EVENT_RETRY_AFTER * tries).await;
                }
                Err(e) => {
                    tracing::warn!(reason, error = %e, tries, "could not publish event");
                    return;
                }
            }
        }
    }
}

/// How many times one Event write is tried.
const EVENT_TRIES: u32 = 4;
/// The wait before the n-th retry is n times this.
const EVENT_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether a failed Event write is worth another try: a transient failure
/// ([`crate::controller::base::api::is_transient`]) or a conflict with a
/// write of the same series; not when the server refused the Event itself.
fn retriable(e: &kube::Error) -> bool {
    crate::controller::base::api::is_transient(e)
        || matches!(e, kube::Error::Api(s) if s.code == 409)
}
