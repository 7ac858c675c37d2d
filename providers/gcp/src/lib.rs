//! Google Compute Engine for muster: the pure parts of the GCP provider.
//!
//! - [`names`]: the deterministic, valid GCE instance name derived from a
//!   PoolNode's idempotency key, and the provider id the GCE cloud provider
//!   writes on Nodes (`gce://<project>/<zone>/<name>`).
//! - [`errors`]: the mapping of Compute API errors (HTTP status, error
//!   reason) to the bounded [`muster_provider_api::ProviderError`] categories.
//! - [`preemptions`]: each preempted instance reported once across polls.
//! - [`prices`]: the built-in, dated on-demand and spot price table for GPU
//!   machine types; unknown prices are `None`, never zero.
//! - [`insert`]: the `instances.insert` body for one launch: deterministic
//!   name, labels, spot or standard scheduling, attached GPUs, disk, network.
//! - [`instance`]: a Compute instance read back as a provider
//!   [`muster_provider_api::Instance`], and spot preemptions detected from it.
//! - [`offerings`]: `machineTypes.list` / `acceleratorTypes.list` answers of
//!   one zone turned into planner offerings, spot and on-demand.
//! - [`reservations`]: the Compute Engine reservations a NodeClass selects,
//!   offered as `reserved` capacity, and a launch's reservation affinity.
//! - [`flex_start`]: a NodeClass's flex-start terms and the resize request
//!   that grants a launch's machines together (the calls are in
//!   `resize_requests`).
//! - [`gke`]: the instance template a GKE node pool runs (node pool →
//!   instance groups → template); [`template`]: a GKE node's insert body
//!   from it; [`kube_env`]: muster's labels and taints in GKE's kubelet flags.

pub mod compute;
pub mod errors;
#[cfg(feature = "test-support")]
pub mod fake;
pub mod flex_start;
pub mod gke;
mod gke_nodes;
pub mod insert;
pub mod instance;
pub mod names;
pub mod node_pools;
pub mod offerings;
pub mod preemptions;
pub mod prices;
pub mod provider;
pub mod reservations;
mod resize_requests;

pub use compute::GcpOptions;
pub use provider::GcpProvider;
