//! The library half of the `muster` binary: the Kubernetes controller (the
//! kube-rs shell around the planner), so integration tests can drive it
//! in-process. The command-line front end lives in the binary (`main.rs`).

#[cfg(feature = "controller")]
pub mod controller;

pub mod plan_input;
