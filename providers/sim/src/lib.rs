//! # muster-provider-sim: a simulated cloud
//!
//! Offerings with prices (a built-in AWS/GCP GPU catalog, or a CSV file),
//! boot-time distributions per instance family, insufficient-capacity errors
//! (a probability, a time schedule or a capacity limit per offering pattern)
//! spot interruptions at a per-offering hourly rate, capacity reservations
//! and Capacity Blocks, and racks and blocks of a network — all
//! deterministic from a seed, with a hand-written PRNG.
//!
//! [`SimCloud`] is the synchronous model the simulator drives with virtual
//! time; [`SimProvider`] wraps it behind the async
//! [`muster_provider_api::CloudProvider`] trait so the controller can run
//! with no cloud.

pub mod behaviour;
pub mod catalog;
pub mod cloud;
pub mod csv_rows;
pub mod offerings_csv;
pub mod provider;
pub mod reservations;
pub mod rng;

pub use behaviour::{BootRange, CloudBehaviour, OfferingRule, Window};
pub use catalog::builtin_offerings;
pub use cloud::{BootPlan, LaunchError, SimCloud};
pub use offerings_csv::{OfferingsError, RegionFilter, parse_offerings};
pub use provider::SimProvider;
pub use reservations::{CAPACITY_BLOCK_RECLAIM, NetworkLayout, Reservation};
pub use rng::Rng;
