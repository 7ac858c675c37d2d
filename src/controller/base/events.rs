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
        if let Err(e) = self.recorder.publish(&ev, &reference).await {
            tracing::warn!(reason, error = %e, "could not publish event");
        }
    }
}
