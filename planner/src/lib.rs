//! # muster-planner: the pure core
//!
//! Every decision muster makes is taken here, by [`plan`]: a function of a
//! [`Snapshot`], a [`Policy`] and a time. No I/O, no clock, no randomness, no
//! Kubernetes or cloud types; same input, same output. The Kubernetes
//! controller and the simulator are two drivers of this one function.
//!
//! Not fitting is never an error: a gang that cannot be placed waits, with a
//! [`plan::WaitReason`] and a sentence saying why.

mod admission;
pub mod apply;
mod by_index;
mod capacity_end;
mod carry;
mod consolidation;
pub mod cover;
mod cycle;
mod decided;
pub mod fixtures;
mod freed_room;
mod handover;
mod hole;
pub mod idle;
pub mod incremental;
mod index;
pub mod labels;
mod launch_domain;
pub mod lifecycle;
pub mod model;
pub mod naming;
mod order;
pub mod orphans;
mod placement;
pub mod plan;
mod preemption;
mod prints;
mod provisioning;
pub mod quantity;
mod quota;
mod reasons;
mod replay;
pub mod resources;
mod scale_to_zero;
pub mod snapshot;
pub mod spot;
pub mod synthetic;
mod takes;
pub mod time;
mod time_facts;
pub mod usage;
mod warm;

pub use incremental::{Planner, Replanner};
pub use model::*;
pub use plan::Plan;
pub use quantity::{Quantity, QuantityError};
pub use resources::Resources;
pub use snapshot::{Arrival, PlanInput, Policy, Snapshot};
pub use time::{Dur, Time};

/// Plans one cycle: admissions, launches, releases, preemptions, removals,
/// and why every other gang waits.
///
/// Pure and deterministic: the same snapshot (in any list order), policy and
/// time give the same plan. Never panics on any snapshot; what does not fit
/// waits with a reason. See [`plan`](crate::plan) for how a driver applies
/// the result.
pub fn plan(snapshot: &Snapshot, policy: &Policy, now: Time) -> Plan {
    cycle::run(snapshot, policy, now)
}
