//! Flex-start (Dynamic Workload Scheduler) on GKE, as data: a NodeClass's
//! terms, the resize request that grants a launch's machines together, and
//! what a request's state means for one of them. Pure: no calls.
//!
//! Compute grants flex-start capacity to a managed instance group through a
//! resize request (`instanceGroupManagerResizeRequests`): the VMs it names
//! are created all at once when capacity is found, or not at all
//! (<https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig>).
//! Its `name` is an RFC 1035 label of 1–63 characters; `instances` (named
//! VMs) cannot be used with `resizeBy`; `requestedRunDuration` is between
//! 10 minutes and seven days, after which the VMs are deleted; its `state`
//! is `CREATING`, `ACCEPTED` (queued until capacity is found), `SUCCEEDED`,
//! `FAILED` (any VM created meanwhile is rolled back) or `CANCELLED`
//! (InstanceGroupManagerResizeRequest,
//! <https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagerResizeRequests>).

use std::collections::BTreeMap;

use muster_crds::nodeclass::GcpNodeClass;
use muster_planner::{Dur, FlexStart};
use muster_provider_api::{Grant, GrantMember, LaunchRequest, label_key, tags};
use serde_json::{Value, json};

use crate::names::instance_name;
use crate::offerings::FlexStartTerms;

/// Compute's bounds of `requestedRunDuration`, in seconds.
const MIN_RUN_SECS: u64 = 10 * 60;
const MAX_RUN_SECS: u64 = 7 * 24 * 3600;

/// A NodeClass's `spec.gcp.flexStart` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlexStartError {
    /// A duration field does not parse.
    #[error("spec.gcp.flexStart.{field}: {value:?} is not a duration such as 24h")]
    BadDuration {
        /// `maxRunDuration` or `expectedWait`.
        field: &'static str,
        /// What was written.
        value: String,
    },
    /// The run is outside Compute's bounds.
    #[error("spec.gcp.flexStart.maxRunDuration: {0} s is outside 10m..168h")]
    RunOutOfBounds(u64),
}

fn secs(field: &'static str, d: &muster_crds::common::Duration) -> Result<u64, FlexStartError> {
    d.to_std()
        .map(|d| d.as_secs())
        .map_err(|_| FlexStartError::BadDuration {
            field,
            value: d.as_str().to_string(),
        })
}

/// The NodeClass's flex-start terms, when it opts in and has a GKE
/// cluster (flex-start machines are bought through node pools only).
pub fn terms(class: &GcpNodeClass) -> Result<Option<FlexStartTerms>, FlexStartError> {
    let (Some(_), Some(f)) = (&class.cluster, &class.flex_start) else {
        return Ok(None);
    };
    let run = secs("maxRunDuration", &f.max_run_duration)?;
    if !(MIN_RUN_SECS..=MAX_RUN_SECS).contains(&run) {
        return Err(FlexStartError::RunOutOfBounds(run));
    }
    Ok(Some(FlexStartTerms {
        promise: FlexStart {
            expected_wait: Dur::secs(secs("expectedWait", &f.expected_wait)?),
            max_run: Dur::secs(run),
        },
        discount_percent: f.discount_percent,
    }))
}

/// How long granted machines run, in seconds: the NodeClass's
/// `maxRunDuration`, or seven days when it cannot be read.
pub fn run_secs(class: &GcpNodeClass) -> u64 {
    terms(class)
        .ok()
        .flatten()
        .map_or(MAX_RUN_SECS, |t| t.promise.max_run.as_secs())
}

/// The grant a flex-start launch is bought in: the request's own, or for
/// one that names none (a consolidation replacement) a grant of that
/// machine alone, named after its idempotency key.
pub fn grant_of(req: &LaunchRequest) -> Grant {
    req.grant.clone().unwrap_or_else(|| Grant {
        name: format!("{}-grant", req.idempotency_key),
        members: vec![GrantMember {
            name: req.name.clone(),
            idempotency_key: req.idempotency_key.clone(),
        }],
    })
}

/// The body of `instanceGroupManagerResizeRequests.insert` for `grant`:
/// every member by its instance name, each with the per-instance metadata
/// that names its PoolNode (and the gang), and the run duration.
pub fn resize_request_body(grant: &Grant, gang: Option<&str>, run_secs: u64) -> Value {
    let instances: Vec<Value> = grant
        .members
        .iter()
        .map(|m| {
            let mut meta = BTreeMap::new();
            meta.insert(label_key(tags::POOL_NODE), m.name.clone());
            if let Some(g) = gang {
                meta.insert(label_key(tags::GANG), g.to_string());
            }
            json!({
                "name": instance_name(&m.idempotency_key),
                "preservedState": {"metadata": meta},
            })
        })
        .collect();
    json!({
        "name": grant.name,
        "description": "muster: the machines of one gang launch, granted together",
        "instances": instances,
        "requestedRunDuration": {"seconds": run_secs},
    })
}

/// Where a resize request stands, as `get` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestState {
    /// Being created, or queued until capacity is found.
    Waiting,
    /// Granted: its VMs are the group's.
    Succeeded,
    /// Not granted: the error's code and message.
    Failed(String, String),
    /// Cancelled before it was granted.
    Cancelled,
}

/// The state of a resize request resource.
pub fn request_state(v: &Value) -> RequestState {
    match v["state"].as_str().unwrap_or_default() {
        "SUCCEEDED" => RequestState::Succeeded,
        "CANCELLED" => RequestState::Cancelled,
        "FAILED" => {
            let e = &v["status"]["error"]["errors"][0];
            let code = e["code"].as_str().unwrap_or("RESIZE_REQUEST_FAILED");
            let message = e["message"].as_str().unwrap_or(code);
            RequestState::Failed(code.to_string(), message.to_string())
        }
        _ => RequestState::Waiting,
    }
}

/// True when the resize request resource names instance `name`.
pub fn names_instance(v: &Value, name: &str) -> bool {
    v["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i["name"].as_str() == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(run: &str) -> GcpNodeClass {
        serde_json::from_value(json!({
            "project": "my-project", "region": "us-central1",
            "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
            "flexStart": {"maxRunDuration": run, "expectedWait": "30m", "discountPercent": 40},
        }))
        .expect("class")
    }

    #[test]
    fn terms_come_from_the_node_class_within_computes_run_bounds() {
        let t = terms(&class("24h")).expect("valid").expect("opted in");
        assert_eq!(t.promise.max_run, Dur::hours(24));
        assert_eq!(t.promise.expected_wait, Dur::mins(30));
        assert_eq!(t.discount_percent, 40);
        assert_eq!(run_secs(&class("24h")), 86_400);
        assert_eq!(
            terms(&class("200h")),
            Err(FlexStartError::RunOutOfBounds(720_000))
        );
        assert!(terms(&class("5m")).is_err());
        let mut plain = class("24h");
        plain.cluster = None;
        assert_eq!(terms(&plain), Ok(None));
    }

    #[test]
    fn the_body_names_every_member_with_its_metadata_and_the_run() {
        let grant = Grant {
            name: "muster-0123-1-grant".into(),
            members: vec![
                GrantMember {
                    name: "j-0".into(),
                    idempotency_key: "muster-ab-1-0".into(),
                },
                GrantMember {
                    name: "j-1".into(),
                    idempotency_key: "muster-ab-1-1".into(),
                },
            ],
        };
        let body = resize_request_body(&grant, Some("a/j"), 3600);
        assert_eq!(body["name"], "muster-0123-1-grant");
        assert!(body.get("resizeBy").is_none());
        assert_eq!(body["requestedRunDuration"]["seconds"], 3600);
        assert_eq!(body["instances"][1]["name"], instance_name("muster-ab-1-1"));
        assert_eq!(
            body["instances"][1]["preservedState"]["metadata"]["muster-poolnode"],
            "j-1"
        );
        assert!(names_instance(&body, &instance_name("muster-ab-1-0")));
        assert_eq!(
            request_state(&json!({"state": "FAILED", "status": {"error": {"errors": [
                {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no capacity"}]}}})),
            RequestState::Failed("ZONE_RESOURCE_POOL_EXHAUSTED".into(), "no capacity".into())
        );
        assert_eq!(
            request_state(&json!({"state": "ACCEPTED"})),
            RequestState::Waiting
        );
    }
}
