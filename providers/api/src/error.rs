//! Typed provider errors and their bounded categories.

use std::fmt;
use std::time::Duration;

use muster_planner::{CapacityType, OfferingKey};

/// What went wrong in a cloud call. The variant steers the controller:
/// insufficient capacity marks the offering and re-plans the whole gang; a
/// capacity type the account does not permit marks every offering of it;
/// quota surfaces on the pool; transient errors retry; permanent ones stop and
/// report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The cloud has no capacity for this offering now.
    #[error("insufficient capacity for {offering}: {message}")]
    InsufficientCapacity {
        /// The offering that could not be had.
        offering: OfferingKey,
        /// The cloud's words.
        message: String,
    },
    /// An account or project quota stops the launch.
    #[error("quota exceeded: {message}")]
    QuotaExceeded {
        /// The cloud's words.
        message: String,
    },
    /// The thing asked about does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// A passing failure (throttling, 5xx, timeouts): try again.
    #[error("transient error: {message}")]
    Transient {
        /// The cloud's words.
        message: String,
        /// When to try again, if the cloud said.
        retry_after: Option<Duration>,
    },
    /// The account does not let this capacity type be launched until its
    /// operator does a one-time step (EC2: the spot service-linked role
    /// `AWSServiceRoleForEC2Spot` is missing and muster may not create it).
    /// Every offering of that capacity type fails alike until then; the
    /// message says what to do.
    #[error("{capacity_type} launches not permitted: {message}")]
    CapacityTypeNotPermitted {
        /// The capacity type the account refuses.
        capacity_type: CapacityType,
        /// The cloud's words and the step that fixes it.
        message: String,
    },
    /// A failure that repeating will not fix (bad parameters, permissions).
    #[error("permanent error: {message}")]
    Permanent {
        /// The cloud's words.
        message: String,
    },
}

impl ProviderError {
    /// The bounded category.
    pub fn category(&self) -> ErrorCategory {
        match self {
            ProviderError::InsufficientCapacity { .. } => ErrorCategory::InsufficientCapacity,
            ProviderError::QuotaExceeded { .. } => ErrorCategory::QuotaExceeded,
            ProviderError::NotFound { .. } => ErrorCategory::NotFound,
            ProviderError::Transient { .. } => ErrorCategory::Transient,
            ProviderError::CapacityTypeNotPermitted { .. } => {
                ErrorCategory::CapacityTypeNotPermitted
            }
            ProviderError::Permanent { .. } => ErrorCategory::Permanent,
        }
    }

    /// True when the same call may succeed later.
    pub fn retryable(&self) -> bool {
        matches!(self, ProviderError::Transient { .. })
    }
}

/// Bounded error categories: metric labels and Event reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorCategory {
    /// See [`ProviderError::InsufficientCapacity`].
    InsufficientCapacity,
    /// See [`ProviderError::QuotaExceeded`].
    QuotaExceeded,
    /// See [`ProviderError::NotFound`].
    NotFound,
    /// See [`ProviderError::Transient`].
    Transient,
    /// See [`ProviderError::CapacityTypeNotPermitted`].
    CapacityTypeNotPermitted,
    /// See [`ProviderError::Permanent`].
    Permanent,
}

impl ErrorCategory {
    /// Every category, for pre-registering metric series.
    pub const ALL: [ErrorCategory; 6] = [
        ErrorCategory::InsufficientCapacity,
        ErrorCategory::QuotaExceeded,
        ErrorCategory::NotFound,
        ErrorCategory::Transient,
        ErrorCategory::CapacityTypeNotPermitted,
        ErrorCategory::Permanent,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::InsufficientCapacity => "InsufficientCapacity",
            ErrorCategory::QuotaExceeded => "QuotaExceeded",
            ErrorCategory::NotFound => "NotFound",
            ErrorCategory::Transient => "Transient",
            ErrorCategory::CapacityTypeNotPermitted => "CapacityTypeNotPermitted",
            ErrorCategory::Permanent => "Permanent",
        }
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{CapacityType, Provider};

    #[test]
    fn categories_and_messages() {
        let offering = OfferingKey {
            provider: Provider::Aws,
            zone: "us-east-1a".into(),
            instance_type: "p4d.24xlarge".into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        };
        let e = ProviderError::InsufficientCapacity {
            offering,
            message: "InsufficientInstanceCapacity".into(),
        };
        assert_eq!(e.category(), ErrorCategory::InsufficientCapacity);
        assert!(!e.retryable());
        assert_eq!(
            e.to_string(),
            "insufficient capacity for p4d.24xlarge/us-east-1a/spot: InsufficientInstanceCapacity"
        );
        let t = ProviderError::Transient {
            message: "RequestLimitExceeded".into(),
            retry_after: None,
        };
        assert!(t.retryable());
        let labels: Vec<&str> = ErrorCategory::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(labels.len(), 6);
        assert!(
            labels
                .iter()
                .all(|l| l.chars().all(|c| c.is_ascii_alphabetic()))
        );
    }
}
