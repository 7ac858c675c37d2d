//! One entry point per fuzz target: the bytes go through the same functions
//! the binary calls on that input, and on to what it does next with a
//! successful parse. Shared by the stable driver (`tests/fuzz_inputs.rs`,
//! proptest) and the `cargo fuzz` targets (`fuzz/`), so both exercise the
//! same code. An entry returns normally for every input; a panic is a bug.
//!
//! The AWS EventBridge reader and the GCP error mapping are compiled here
//! from their provider sources, which know no cloud SDK, so the fuzz
//! targets build without the SDKs.

use muster_planner::{CapacityType, OfferingKey, Provider};
use serde_json::Value;

#[allow(dead_code)]
#[path = "../../providers/aws/src/events.rs"]
mod aws_events;

#[allow(dead_code)]
#[path = "../../providers/gcp/src/errors.rs"]
mod gcp_errors;

/// The input as the binary reads a file: UTF-8, invalid sequences replaced.
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// `muster plan -f`: parse the document, plan it, print the plan as JSON and YAML.
pub fn snapshot_yaml(data: &[u8]) {
    let Ok(input) = muster::plan_input::parse(&text(data)) else {
        return;
    };
    let plan = muster_planner::plan(&input.snapshot, &input.policy, input.now);
    let json = serde_json::to_string(&plan).expect("a plan serializes as JSON");
    let back: muster_planner::plan::Plan =
        serde_json::from_str(&json).expect("a serialized plan reads back");
    assert_eq!(back, plan, "a plan survives a JSON round trip");
    serde_norway::to_string(&plan).expect("a plan serializes as YAML");
}

/// `muster simulate --scenario`: parse and validate, then derive the cloud
/// behaviour, pools and queues as the runner does.
pub fn scenario_yaml(data: &[u8]) {
    let Ok(s) = muster_sim::Scenario::parse(&text(data), "fuzz.yaml") else {
        return;
    };
    let _ = s.cloud.behaviour();
    let pools = s.pools_for(&[Provider::Aws, Provider::Gcp]);
    let teams = muster_sim::workload::generator::team_names(3);
    let _ = s.queues_for(&teams, &pools);
}

/// A trace CSV (`workload.trace`): every job read has a positive GPU share.
pub fn trace_csv(data: &[u8]) {
    let Ok(jobs) = muster_sim::workload::trace::parse_trace(&text(data)) else {
        return;
    };
    assert!(!jobs.is_empty(), "a parsed trace has jobs");
    for j in &jobs {
        let _ = j.total_gpu_millis();
        let _ = j.gpu_seconds();
    }
}

/// An offerings CSV (`cloud.offerings`), with both region filters.
pub fn offerings_csv(data: &[u8]) {
    use muster_provider_sim::{RegionFilter, parse_offerings};
    let t = text(data);
    if let Ok(offerings) = parse_offerings(&t, &RegionFilter::default()) {
        for o in &offerings {
            let _ = o.key();
        }
    }
    let _ = parse_offerings(&t, &RegionFilter::Only(vec!["us-east-1".into()]));
}

/// One SQS message body of the AWS interruption queue.
pub fn eventbridge(data: &[u8]) {
    let _ = aws_events::parse(&text(data));
}

/// A GCP zone operation read back after an insert or delete, and an HTTP
/// error body: either maps to a typed error with a bounded category.
pub fn gcp_operation(data: &[u8]) {
    let key = OfferingKey {
        provider: Provider::Gcp,
        zone: "us-central1-a".into(),
        instance_type: "a2-highgpu-1g".into(),
        capacity_type: CapacityType::OnDemand,
        reservation: None,
    };
    if let Ok(op) = serde_json::from_slice::<Value>(data) {
        for offering in [Some(&key), None] {
            if let Some(e) = gcp_errors::operation_error(&op, offering) {
                assert!(!e.category().as_str().is_empty());
            }
        }
    }
    let (reason, message) = gcp_errors::error_body(data);
    let e = gcp_errors::classify(
        Some(400),
        reason.as_deref().unwrap_or(""),
        message.as_deref().unwrap_or(""),
        Some(&key),
    );
    assert!(!e.category().as_str().is_empty());
}

/// A body POSTed to the admission webhook: read, then answered with and
/// without a default queue; every answer is an AdmissionReview.
#[cfg(feature = "controller")]
pub fn admission_review(data: &[u8]) {
    use muster::controller::webhook::{needs_default_queue, read_review, respond};
    let req = match read_review(data) {
        Err(_) => return,
        Ok(Err(answer)) => {
            check_review(&answer);
            return;
        }
        Ok(Ok(req)) => req,
    };
    let _ = needs_default_queue(&req);
    for q in [None, Some("team-a"), Some("")] {
        let answer = respond(&req, q).expect("an answer encodes");
        check_review(&answer);
    }
}

#[cfg(feature = "controller")]
fn check_review(answer: &[u8]) {
    let v: Value = serde_json::from_slice(answer).expect("the answer is JSON");
    assert_eq!(v["kind"], "AdmissionReview", "{v}");
    assert!(v["response"].is_object(), "{v}");
}

/// Every custom resource, as the controller reads it (JSON from the API
/// server) and as a user writes it (YAML): a value read survives a round trip.
pub fn crds(data: &[u8]) {
    use muster_crds::{Gang, GpuPool, GpuQueue, NodeClass, PoolNode};
    fn one<T>(data: &[u8])
    where
        T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
    {
        if let Ok(v) = serde_json::from_slice::<T>(data) {
            let json = serde_json::to_vec(&v).expect("a resource serializes");
            let back: T = serde_json::from_slice(&json).expect("a serialized resource reads back");
            assert_eq!(back, v, "a resource survives a JSON round trip");
        }
        if let Ok(v) = serde_norway::from_str::<T>(&String::from_utf8_lossy(data)) {
            let _ = serde_json::to_vec(&v).expect("a resource serializes");
        }
    }
    one::<Gang>(data);
    one::<GpuPool>(data);
    one::<GpuQueue>(data);
    one::<NodeClass>(data);
    one::<PoolNode>(data);
}
