//! The bounded errors that layers above report as conditions and Events:
//! here, below all of them, so the reason table (`reasons`) lists every
//! one exhaustively without importing the layers that raise them.

/// Bounded reasons an object could not be translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IssueReason {
    /// `spec` does not have the expected shape or a value does not parse.
    InvalidSpec,
    /// A reference (NodeClass, pool) names nothing that exists or works.
    InvalidReference,
    /// The gang's queue does not select its namespace.
    NamespaceNotAllowed,
}

impl IssueReason {
    /// The reason as a condition/Event reason.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IssueReason::InvalidSpec => "InvalidSpec",
            IssueReason::InvalidReference => "InvalidReference",
            IssueReason::NamespaceNotAllowed => "NamespaceNotAllowed",
        }
    }
}

/// Why a workload cannot become a Gang.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The queue label is empty.
    #[error("label {} is empty", crate::controller::base::objects::QUEUE_LABEL)]
    NoQueue,
    /// An annotation does not parse.
    #[error("annotation {0}: {1}")]
    BadAnnotation(&'static str, String),
    /// A request quantity does not parse.
    #[error("container {0}: {1}")]
    BadRequest(String, String),
    /// The object does not have the shape its kind's API gives it.
    #[error("{0}")]
    BadShape(String),
    /// The object asks for a mode or a field muster cannot run as a gang
    /// (the message names the field and why); the admission webhook
    /// refuses such an object at creation with the same message.
    #[error("{0}")]
    Unsupported(&'static str),
}

impl WorkloadError {
    /// Bounded reason.
    pub fn reason(&self) -> &'static str {
        match self {
            WorkloadError::NoQueue => "NoQueue",
            WorkloadError::BadAnnotation(..) => "InvalidAnnotation",
            WorkloadError::BadRequest(..) => "InvalidRequests",
            WorkloadError::BadShape(..) => "InvalidWorkload",
            WorkloadError::Unsupported(..) => "UnsupportedWorkload",
        }
    }
}

/// Why no provider could be built for a NodeClass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderSetupError {
    /// The NodeClass spec could not be read.
    #[error("invalid NodeClass: {0}")]
    InvalidNodeClass(String),
    /// This binary has no provider for that cloud.
    #[error("no provider for {0} is built into this binary")]
    Unsupported(String),
    /// The cloud is built in but the controller was not told to launch on it.
    #[error("the {0} cloud is not enabled in this controller: start it with --cloud {0}")]
    Disabled(String),
}

impl ProviderSetupError {
    /// Bounded reason (condition reason, Event reason).
    pub fn reason(&self) -> &'static str {
        match self {
            ProviderSetupError::InvalidNodeClass(_) => "InvalidNodeClass",
            ProviderSetupError::Unsupported(_) => "ProviderUnsupported",
            ProviderSetupError::Disabled(_) => "ProviderDisabled",
        }
    }
}
