//! # muster-planner: the pure core
//!
//! Every decision muster makes is taken here, by [`plan`]: a function of a
//! [`Snapshot`], a [`Policy`] and a time. No I/O, no clock, no randomness, no
//! Kubernetes or cloud types; same input, same output. The Kubernetes
//! controller and the simulator are two drivers of this one function.
//!
//! Not fitting is never an error: a gang that cannot be placed waits, with a
//! [`plan::WaitReason`] and a sentence saying why.

pub mod model;
pub mod plan;
pub mod quantity;
pub mod resources;
pub mod snapshot;
pub mod time;

pub use model::*;
pub use plan::Plan;
pub use quantity::{Quantity, QuantityError};
pub use resources::Resources;
pub use snapshot::{PlanInput, Policy, Snapshot};
pub use time::{Dur, Time};

/// Plans one cycle: admissions, launches, releases, preemptions, removals,
/// and why every other gang waits.
pub fn plan(snapshot: &Snapshot, policy: &Policy, now: Time) -> Plan {
    let _ = (snapshot, policy, now);
    Plan::default()
}
