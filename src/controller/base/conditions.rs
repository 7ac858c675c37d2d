//! The condition types muster writes on its objects, as one bounded enum:
//! a condition is written through [`crate::controller::base::api::condition`]
//! with one of these, never a string literal. Reasons are bounded too
//! ([`crate::controller::base::reasons`]).

/// A condition type of a muster object's `status.conditions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ConditionType {
    /// NodeClass, GPUPool, GPUQueue: usable (NodeClass: its selectors
    /// resolved; pool: offerings listed).
    Ready,
    /// GPUQueue: admits gangs (not stopped).
    Active,
    /// Gang, GPUPool, GPUQueue, NodeClass: the object could be read.
    Valid,
    /// PoolNode: its cloud interrupts the machine.
    Interrupted,
    /// PoolNode: its node's GPUs became allocatable.
    Initialized,
    /// Gang: its GPUs stayed idle past its queue's window.
    GpusIdle,
    /// GPUQueue: every enabled workload kind's CRD is served.
    WorkloadKindsServed,
    /// NodeClass: its cloud account permits every capacity type (False
    /// while a launch found one refused, e.g. spot without EC2's spot
    /// service-linked role).
    CapacityTypesPermitted,
    /// NodeClass: every subnet its selectors resolved can take a launch
    /// (False while some have no free address).
    SubnetsUsable,
}

impl ConditionType {
    /// Every condition type, for tests.
    #[cfg(test)]
    pub const ALL: [ConditionType; 9] = [
        ConditionType::Ready,
        ConditionType::Active,
        ConditionType::Valid,
        ConditionType::Interrupted,
        ConditionType::Initialized,
        ConditionType::GpusIdle,
        ConditionType::WorkloadKindsServed,
        ConditionType::CapacityTypesPermitted,
        ConditionType::SubnetsUsable,
    ];

    /// The type as written in `status.conditions[].type`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Active => "Active",
            ConditionType::Valid => "Valid",
            ConditionType::Interrupted => "Interrupted",
            ConditionType::Initialized => "Initialized",
            ConditionType::GpusIdle => "GPUsIdle",
            ConditionType::WorkloadKindsServed => "WorkloadKindsServed",
            ConditionType::CapacityTypesPermitted => "CapacityTypesPermitted",
            ConditionType::SubnetsUsable => "SubnetsUsable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConditionType;

    #[test]
    fn condition_types_are_distinct_camel_case_names() {
        let names: std::collections::BTreeSet<&str> =
            ConditionType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(names.len(), ConditionType::ALL.len());
        for n in names {
            assert!(
                n.chars().next().is_some_and(|c| c.is_ascii_uppercase()),
                "{n}"
            );
            assert!(n.chars().all(|c| c.is_ascii_alphanumeric()), "{n}");
        }
    }
}
