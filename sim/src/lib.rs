//! # muster-sim: the simulator behind `muster simulate`
//!
//! A discrete-event simulator with virtual time that runs the real muster
//! planner ([`policies::muster`]) and models of the usual stacks
//! ([`baselines`]) against the same simulated cluster and cloud
//! (`muster-provider-sim`), on the same workload (a trace or the built-in
//! generator) and seed, and reports cost, utilization, waits, partial gangs
//! and fairness side by side.
//!
//! Layout: [`events`] and [`clock`] (virtual time), [`cluster`], [`binder`]
//! and [`world`] (mechanics shared by all policies), [`engine`] (the event
//! loop), [`workload`], [`scenario`], [`policies`], [`baselines`],
//! [`metrics`], [`lower_bound`], [`runner`] and [`report`].

pub mod baselines;
pub mod binder;
pub mod clock;
pub mod cluster;
pub mod engine;
pub mod events;
pub mod lower_bound;
pub mod matrix;
pub mod metrics;
pub mod policies;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod workload;
pub mod world;

pub use runner::{PolicyKind, PolicyRun, Prepared, RunConfig, RunError, prepare, run_policy};
pub use scenario::Scenario;
