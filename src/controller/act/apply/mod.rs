//! Plan appliers: each carries out one kind of plan item, in the order the
//! planner's driver contract prescribes (`muster_planner::plan`):
//! preemptions ([`preempt`]), releases ([`release`]), launches ([`launch`]:
//! the PoolNodes, before any cloud call), admissions ([`admit`]), removals
//! ([`remove`], whose drains go on every cycle until the node is empty).

pub mod admit;
pub mod launch;
pub mod preempt;
pub mod release;
pub mod remove;
