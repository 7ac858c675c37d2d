//! # muster-provider-api: the seam between muster and a cloud
//!
//! One [`CloudProvider`] is built per `NodeClass` (the controller turns the
//! NodeClass into the provider's own configuration), so every call here is
//! already scoped to a region, a network and an image. Providers list
//! [`Offering`]s, launch exactly one machine per call from the offering the
//! planner chose, and report interruptions. Errors are typed
//! ([`ProviderError`]) and fall into a bounded set of [`ErrorCategory`]s that
//! become metric labels and Event reasons.
//!
//! This crate knows the planner's domain types and nothing of any cloud SDK,
//! Kubernetes or async runtime.

#[cfg(feature = "test-support")]
pub mod conformance;
mod error;
mod instance;
mod owned;
pub mod price_list;
mod resolution;
mod timestamps;

pub use error::{ErrorCategory, ProviderError};
pub use instance::{
    Grant, GrantMember, Instance, InstanceState, Interruption, InterruptionKind, LaunchRequest,
    label_key, tags,
};
pub use owned::owned_instances;
pub use resolution::{
    Resolution, ResolvedImage, ResolvedSecurityGroup, ResolvedSubnet, SubnetUsability,
};
pub use timestamps::parse_rfc3339;

use muster_planner::{Offering, PoolRequirements, Provider};

/// A cloud, as muster uses it. Every method is idempotent and safe to call
/// again after a crash.
#[async_trait::async_trait]
pub trait CloudProvider: Send + Sync {
    /// Which cloud this is.
    fn provider(&self) -> Provider;

    /// Resolves the NodeClass's selectors (subnets, security groups, image,
    /// zones) against the cloud. A selector that matches nothing is
    /// [`ProviderError::NotFound`] naming the selector.
    async fn resolve(&self) -> Result<Resolution, ProviderError>;

    /// Every offering (type × zone × capacity type, with price and
    /// availability) that satisfies the pool's requirements. Unknown prices
    /// are `None`, never zero.
    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError>;

    /// Launches one machine. Calling again with the same
    /// [`LaunchRequest::idempotency_key`] returns the same instance and never
    /// launches a second one.
    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError>;

    /// The instance with this provider id; [`ProviderError::NotFound`] when it
    /// does not exist (any more).
    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError>;

    /// Terminates an instance. An instance that is already gone is success.
    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError>;

    /// Instances tagged as owned by `cluster`, in any state but terminated.
    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError>;

    /// Interruption notices that arrived since the last call (spot
    /// interruptions, rebalance hints, preemptions, state changes). A notice
    /// is returned once.
    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError>;

    /// The placement groups launches for `cluster` made
    /// ([`LaunchRequest::placement_group`]), by the planner's names. Clouds
    /// without such groups have none.
    async fn placement_groups(&self, cluster: &str) -> Result<Vec<String>, ProviderError> {
        let _ = cluster;
        Ok(Vec::new())
    }

    /// Deletes the groups of machines this provider made that have held no
    /// machine for as long as their NodeClass allows (GKE node pools); the
    /// names deleted. Clouds without such groups have none.
    async fn delete_empty_groups(&self) -> Result<Vec<String>, ProviderError> {
        Ok(Vec::new())
    }

    /// Deletes the placement group `name` of `cluster`. One already gone is
    /// success; one that still holds instances is [`ProviderError::Transient`].
    async fn delete_placement_group(&self, cluster: &str, name: &str) -> Result<(), ProviderError> {
        let _ = (cluster, name);
        Ok(())
    }
}
