//! EC2 error codes → the provider trait's typed errors.
//!
//! | EC2 code | error |
//! |---|---|
//! | `InsufficientInstanceCapacity`, `InsufficientCapacity`, `InsufficientHostCapacity`, `MaxSpotInstanceCountExceeded`, `SpotMaxPriceTooLow`, `UnfulfillableCapacity`, `InsufficientCapacityOnHost`, `ReservationCapacityExceeded` (a launch into a capacity reservation with no instance left) | `InsufficientCapacity { offering }` |
//! | `VcpuLimitExceeded`, `InstanceLimitExceeded`, `InsufficientFreeAddressesInSubnet`, `MaxSpotFleetRequestCountExceeded` | `QuotaExceeded` |
//! | `RequestLimitExceeded`, `Throttling`, `ThrottlingException`, `ServiceUnavailable`, `InternalError`, `Unavailable`, any 5xx | `Transient` |
//! | `AuthFailure.ServiceLinkedRoleCreationNotPermitted` (a spot launch on an account without `AWSServiceRoleForEC2Spot`, by a role that may not create it) | `CapacityTypeNotPermitted { Spot }`, with the step that fixes it |
//! | `InvalidPlacementGroup.Unknown` (a launch into a group deleted since it was made), `InvalidPlacementGroup.InUse` (a group deleted while instances still leave it) | `Transient`: the next try makes the group again, or deletes it once empty |
//! | `InvalidInstanceID.NotFound`, `InvalidAMIID.NotFound`, `InvalidSubnetID.NotFound`, `InvalidGroup.NotFound`; EKS `ResourceNotFoundException`, SSM `ParameterNotFound` | `NotFound` |
//! | anything else (`UnauthorizedOperation`, `InvalidParameterValue`, …) | `Permanent`, with the AWS message |

use muster_planner::{CapacityType, OfferingKey};
use muster_provider_api::ProviderError;

/// What an operator does once per account so that spot launches work.
pub const SPOT_ROLE_STEP: &str = "The account has no AWSServiceRoleForEC2Spot service-linked role and muster's role may not create it: run `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com` once in this account (or allow muster's role iam:CreateServiceLinkedRole for spot.amazonaws.com, as docs/aws-iam-policy.json does); until then muster launches no spot instances and plans on-demand";

/// What EC2 answered: its error code (if any), message and HTTP status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failure {
    /// The EC2 error code, e.g. `InsufficientInstanceCapacity`.
    pub code: Option<String>,
    /// The EC2 message.
    pub message: String,
    /// HTTP status, when a response came back.
    pub status: Option<u16>,
}

/// Maps a failure to a typed error; `offering` is what a launch asked for.
pub fn classify(f: &Failure, offering: Option<&OfferingKey>) -> ProviderError {
    let code = f.code.as_deref().unwrap_or("");
    let message = if code.is_empty() {
        f.message.clone()
    } else {
        format!("{code}: {}", f.message)
    };
    match code {
        "InsufficientInstanceCapacity"
        | "InsufficientCapacity"
        | "InsufficientHostCapacity"
        | "InsufficientCapacityOnHost"
        | "MaxSpotInstanceCountExceeded"
        | "SpotMaxPriceTooLow"
        | "UnfulfillableCapacity"
        | "ReservationCapacityExceeded" => match offering {
            Some(o) => ProviderError::InsufficientCapacity {
                offering: o.clone(),
                message,
            },
            None => ProviderError::Transient {
                message,
                retry_after: None,
            },
        },
        "VcpuLimitExceeded"
        | "InstanceLimitExceeded"
        | "InsufficientFreeAddressesInSubnet"
        | "MaxSpotFleetRequestCountExceeded" => ProviderError::QuotaExceeded { message },
        "RequestLimitExceeded"
        | "Throttling"
        | "ThrottlingException"
        | "ServiceUnavailable"
        | "InternalError"
        | "Unavailable"
        | "InvalidPlacementGroup.Unknown"
        | "InvalidPlacementGroup.InUse" => ProviderError::Transient {
            message,
            retry_after: None,
        },
        // EC2 creates the spot service-linked role on the first spot launch
        // of an account when the caller may (`iam:CreateServiceLinkedRole`);
        // otherwise every spot launch fails with this code until someone
        // creates it (EC2 User Guide, "Service-linked role for Spot Instance
        // requests")
        "AuthFailure.ServiceLinkedRoleCreationNotPermitted" => {
            ProviderError::CapacityTypeNotPermitted {
                capacity_type: CapacityType::Spot,
                message: format!("{message}. {SPOT_ROLE_STEP}"),
            }
        }
        c if c.ends_with(".NotFound") => ProviderError::NotFound { what: message },
        // EKS DescribeCluster, SSM GetParameter
        "ResourceNotFoundException" | "ParameterNotFound" => {
            ProviderError::NotFound { what: message }
        }
        _ if f.status.is_some_and(|s| s >= 500) || (code.is_empty() && f.status.is_none()) => {
            // 5xx, or no answer at all (connection, timeout)
            ProviderError::Transient {
                message,
                retry_after: None,
            }
        }
        _ => ProviderError::Permanent { message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{CapacityType, Provider};
    use muster_provider_api::ErrorCategory;

    #[test]
    fn codes_map_to_categories() {
        let key = OfferingKey {
            provider: Provider::Aws,
            zone: "us-east-1a".into(),
            instance_type: "p4d.24xlarge".into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        };
        let f = |code: Option<&str>, status: Option<u16>| Failure {
            code: code.map(String::from),
            message: "words".into(),
            status,
        };
        use ErrorCategory::*;
        let cases = [
            (
                f(Some("InsufficientInstanceCapacity"), Some(500)),
                InsufficientCapacity,
            ),
            (
                f(Some("InsufficientCapacity"), Some(400)),
                InsufficientCapacity,
            ),
            (
                f(Some("MaxSpotInstanceCountExceeded"), Some(400)),
                InsufficientCapacity,
            ),
            (
                f(Some("SpotMaxPriceTooLow"), Some(400)),
                InsufficientCapacity,
            ),
            (
                f(Some("UnfulfillableCapacity"), Some(400)),
                InsufficientCapacity,
            ),
            (
                f(Some("ReservationCapacityExceeded"), Some(400)),
                InsufficientCapacity,
            ),
            (
                f(Some("InvalidCapacityReservationId.NotFound"), Some(400)),
                NotFound,
            ),
            (f(Some("VcpuLimitExceeded"), Some(400)), QuotaExceeded),
            (f(Some("InstanceLimitExceeded"), Some(400)), QuotaExceeded),
            (f(Some("RequestLimitExceeded"), Some(503)), Transient),
            (f(Some("InternalError"), Some(500)), Transient),
            (f(None, Some(502)), Transient),
            (f(None, None), Transient),
            (f(Some("InvalidInstanceID.NotFound"), Some(400)), NotFound),
            (f(Some("UnauthorizedOperation"), Some(403)), Permanent),
            (
                f(
                    Some("AuthFailure.ServiceLinkedRoleCreationNotPermitted"),
                    Some(403),
                ),
                CapacityTypeNotPermitted,
            ),
            (f(Some("InvalidParameterValue"), Some(400)), Permanent),
        ];
        for (failure, want) in cases {
            let e = classify(&failure, Some(&key));
            assert_eq!(e.category(), want, "{failure:?}");
        }
        // capacity errors name the offering and keep the AWS words
        match classify(
            &f(Some("InsufficientInstanceCapacity"), Some(500)),
            Some(&key),
        ) {
            ProviderError::InsufficientCapacity { offering, message } => {
                assert_eq!(offering, key);
                assert!(message.contains("InsufficientInstanceCapacity: words"));
            }
            e => panic!("{e:?}"),
        }
        match classify(&f(Some("UnauthorizedOperation"), Some(403)), None) {
            ProviderError::Permanent { message } => {
                assert_eq!(message, "UnauthorizedOperation: words")
            }
            e => panic!("{e:?}"),
        }
    }
}
