//! The domain model the planner reasons about: offerings, nodes, gangs,
//! queues and pools. Plain data, no behaviour beyond small helpers; the
//! decisions live in the planning modules.

pub mod gang;
pub mod idle;
pub mod node;
pub mod offering;
pub mod pool;
pub mod price;
pub mod queue;
pub mod scheduling;

pub use gang::{Assignment, Gang, GangId, GangPhase, NetworkTopology, PodSet, Topology};
pub use idle::{GangUtilization, IdleAction, IdlePolicy, UtilSample};
pub use node::{Node, NodePhase, OtherPod};
pub use offering::{
    CapacityReservation, CapacityType, FlexStart, GpuModel, Offering, OfferingKey, Provider,
    ReservationKind,
};
pub use pool::{ConsolidationPolicy, Disruption, KeepWarm, Pool, PoolLimits, PoolRequirements};
pub use price::Price;
pub use queue::{PreemptionPolicy, Queue, QueueingStrategy, Quota, QuotaResource, ReclaimPolicy};
pub use scheduling::{
    NodeAffinity, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, Taint,
    TaintEffect, Toleration, TolerationOperator,
};

/// The bits a float is hashed by, equal for values `==` calls equal (`0.0`
/// and `-0.0`).
pub(crate) fn float_bits(x: f64) -> u64 {
    if x == 0.0 { 0 } else { x.to_bits() }
}
