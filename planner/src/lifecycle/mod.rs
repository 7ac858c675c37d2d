//! Pure state machines the drivers share: the life of a PoolNode
//! ([`pool_node`]), of a gang once admitted ([`gang`]), what a gang's
//! record becomes after a plan ([`record`]), of a gang's
//! workload object under the API server's rules, whatever its kind ([`workload`]), and of a node its
//! cloud interrupts ([`interruption`]). The controller
//! and the simulator observe facts, call these functions, and carry out the
//! step returned; the planner never reads a clock, and neither do these.

pub mod gang;
pub mod interruption;
pub mod pool_node;
pub mod record;
pub mod workload;
