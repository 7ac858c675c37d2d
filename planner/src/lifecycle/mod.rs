//! Pure state machines the drivers share: the life of a PoolNode
//! ([`pool_node`]) and of a gang once admitted ([`gang`]). The controller
//! and the simulator observe facts, call these functions, and carry out the
//! step returned; the planner never reads a clock, and neither do these.

pub mod gang;
pub mod pool_node;
