//! Compute API errors mapped to [`ProviderError`] categories.
//!
//! Compute reports failures two ways: an HTTP error status with a body
//! `{"error": {"code": 403, "message": ..., "errors": [{"reason": ...}]}}`, or
//! a zone operation that ends `DONE` with `error.errors[].code` set (for
//! example `ZONE_RESOURCE_POOL_EXHAUSTED`). Both reduce to an optional HTTP
//! status, a reason or code string and a message, which [`classify`] maps.

use muster_planner::OfferingKey;
use muster_provider_api::ProviderError;
use serde_json::Value;

/// Operation error codes and HTTP reasons that mean "no capacity for this
/// machine type in this zone now" (stockouts).
const STOCKOUT_CODES: [&str; 4] = [
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "RESOURCE_POOL_EXHAUSTED",
    "STOCKOUT",
];

/// Codes and reasons that mean a project or region quota stops the launch.
const QUOTA_CODES: [&str; 4] = [
    "QUOTA_EXCEEDED",
    "quotaExceeded",
    "GPUS_ALL_REGIONS",
    "NVIDIA_GPUS",
];

/// The code Compute gives a launch its reservation cannot take (full, missing,
/// not `READY`, another shape): the message tells which.
const RESERVATION_CODE: &str = "CONDITION_NOT_MET";

/// Words of Compute's message when a named reservation has no room left
/// ("Specified reservation 'NAME' does not have available resources for the
/// request."), as Cluster Autoscaler's GCE provider matches it
/// (kubernetes/autoscaler `cluster-autoscaler/cloudprovider/gce/autoscaling_gce_client.go`,
/// `isReservationCapacityExceeded`).
const RESERVATION_FULL: &str = "does not have available resources";

/// Words of Compute's message when a named reservation does not exist
/// ("Specified reservation 'NAME' does not exist."; `isReservationNotFound`).
const RESERVATION_MISSING: &str = "does not exist";

/// Reasons of throttling answers.
const THROTTLE_CODES: [&str; 3] = [
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "RATE_LIMIT_EXCEEDED",
];

/// Maps one Compute failure to a typed error. `status` is the HTTP status
/// when the failure came as an HTTP answer (`None` for an operation error),
/// `code` the error reason or operation error code, `message` the API's
/// words, `offering` what the launch asked for (named in capacity errors).
pub fn classify(
    status: Option<u16>,
    code: &str,
    message: &str,
    offering: Option<&OfferingKey>,
) -> ProviderError {
    let message = if message.is_empty() {
        code.to_string()
    } else {
        message.to_string()
    };
    if STOCKOUT_CODES.contains(&code) {
        if let Some(offering) = offering {
            return ProviderError::InsufficientCapacity {
                offering: offering.clone(),
                message,
            };
        }
        return ProviderError::Transient {
            message,
            retry_after: None,
        };
    }
    if code == RESERVATION_CODE && message.contains(RESERVATION_FULL) {
        // the reservation's machines are taken: the offering has no capacity now
        if let Some(offering) = offering {
            return ProviderError::InsufficientCapacity {
                offering: offering.clone(),
                message,
            };
        }
    }
    if code == RESERVATION_CODE && message.contains(RESERVATION_MISSING) {
        return ProviderError::NotFound { what: message };
    }
    if QUOTA_CODES.iter().any(|q| code.contains(q)) {
        return ProviderError::QuotaExceeded { message };
    }
    if THROTTLE_CODES.contains(&code) || status == Some(429) {
        return ProviderError::Transient {
            message,
            retry_after: None,
        };
    }
    match status {
        Some(404) => ProviderError::NotFound { what: message },
        Some(s) if s >= 500 => ProviderError::Transient {
            message,
            retry_after: None,
        },
        _ => ProviderError::Permanent { message },
    }
}

/// The reason and message of an HTTP error body
/// (`{"error": {"message": ..., "errors": [{"reason": ...}]}}`), each `None`
/// when the body does not carry it.
pub fn error_body(payload: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(body) = serde_json::from_slice::<Value>(payload) else {
        return (None, None);
    };
    let reason = body["error"]["errors"][0]["reason"]
        .as_str()
        .map(String::from);
    let message = body["error"]["message"].as_str().map(String::from);
    (reason, message)
}

/// The error of a finished operation, if it failed.
pub fn operation_error(op: &Value, offering: Option<&OfferingKey>) -> Option<ProviderError> {
    let e = &op["error"]["errors"][0];
    let code = e["code"].as_str()?;
    let message = e["message"].as_str().unwrap_or(code);
    Some(classify(None, code, message, offering))
}

#[cfg(test)]
mod tests {
    use muster_planner::{CapacityType, Provider};
    use muster_provider_api::ErrorCategory;

    use super::*;

    fn a100() -> OfferingKey {
        OfferingKey {
            provider: Provider::Gcp,
            zone: "us-central1-a".into(),
            instance_type: "a2-highgpu-8g".into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        }
    }

    #[test]
    fn failures_map_to_their_categories() {
        let cases: [(Option<u16>, &str, ErrorCategory); 11] = [
            (
                None,
                "ZONE_RESOURCE_POOL_EXHAUSTED",
                ErrorCategory::InsufficientCapacity,
            ),
            (
                None,
                "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                ErrorCategory::InsufficientCapacity,
            ),
            (None, "QUOTA_EXCEEDED", ErrorCategory::QuotaExceeded),
            (Some(403), "quotaExceeded", ErrorCategory::QuotaExceeded),
            (
                Some(403),
                "QUOTA_EXCEEDED: NVIDIA_A100_GPUS",
                ErrorCategory::QuotaExceeded,
            ),
            (Some(429), "rateLimitExceeded", ErrorCategory::Transient),
            (Some(403), "rateLimitExceeded", ErrorCategory::Transient),
            (Some(503), "backendError", ErrorCategory::Transient),
            (Some(500), "", ErrorCategory::Transient),
            (Some(400), "invalid", ErrorCategory::Permanent),
            (Some(404), "notFound", ErrorCategory::NotFound),
        ];
        for (status, code, want) in cases {
            let got = classify(status, code, "the API said so", Some(&a100()));
            assert_eq!(got.category(), want, "{status:?} {code}");
        }
    }

    #[test]
    fn a_full_reservation_is_the_offerings_capacity_and_other_reservation_errors_are_not() {
        let full = classify(
            None,
            "CONDITION_NOT_MET",
            "Specified reservation 'a100-resv' does not have available resources for the request.",
            Some(&a100()),
        );
        assert_eq!(full.category(), ErrorCategory::InsufficientCapacity);
        let missing = classify(
            None,
            "CONDITION_NOT_MET",
            "Specified reservation 'gone' does not exist.",
            Some(&a100()),
        );
        assert_eq!(missing.category(), ErrorCategory::NotFound);
        let other_shape = classify(
            None,
            "CONDITION_NOT_MET",
            "No available resources in specified reservations 'a100-resv'",
            Some(&a100()),
        );
        assert_eq!(other_shape.category(), ErrorCategory::Permanent);
    }

    #[test]
    fn stockout_names_zone_and_type_and_keeps_the_message() {
        let err = classify(
            None,
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "zone out of a2",
            Some(&a100()),
        );
        let text = err.to_string();
        assert!(text.contains("us-central1-a"), "{text}");
        assert!(text.contains("a2-highgpu-8g"), "{text}");
        assert!(text.contains("zone out of a2"), "{text}");
    }

    #[test]
    fn permanent_errors_carry_the_api_message_or_the_code() {
        let err = classify(
            Some(400),
            "invalid",
            "Invalid value for field 'resource.name'",
            None,
        );
        assert!(err.to_string().contains("resource.name"));
        let err = classify(Some(400), "invalid", "", None);
        assert!(err.to_string().contains("invalid"));
    }
}
