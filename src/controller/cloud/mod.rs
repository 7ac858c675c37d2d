//! The clouds: the provider of each NodeClass (`providers`: the factory
//! seam and the offering cache; `clouds`: the factory of the real and
//! simulated clouds), cloud calls run off the planning path with bounded
//! concurrency (`work`), and the simulated cloud of `--cloud sim` (`sim`).
//! Imports only the plumbing below it.

pub mod clouds;
pub mod providers;
pub mod sim;
pub mod work;
