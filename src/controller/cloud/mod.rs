//! The clouds: the provider of each NodeClass (`providers`: the factory
//! seam and the offering cache; `clouds`: the factory of the real and
//! simulated clouds), cloud calls run off the planning path with bounded
//! concurrency (`work`), the simulated cloud of `--cloud sim` (`sim`) and
//! Karpenter's delegate mode, NodeClaims for the machines muster chooses
//! (`karpenter`, with the `aws` feature).
//! Imports only the plumbing below it.

pub mod clouds;
#[cfg(feature = "aws")]
pub mod karpenter;
pub(crate) mod providers;
pub mod sim;
pub(crate) mod work;

use std::sync::Arc;

use tokio::sync::Notify;

/// The cloud side of the context: what the providers offer (listed
/// offerings and the marks of those found unavailable) and the provider
/// calls running off the planning path.
pub(crate) struct Cloud {
    /// Listed offerings and unavailable marks.
    pub(crate) offerings: Arc<providers::OfferingCache>,
    /// Cloud calls running off the planning path.
    pub(crate) work: work::CloudWork,
}

impl Cloud {
    /// No offerings listed yet, and at most `per_provider` calls in flight
    /// per provider; a finished call wakes the cycle through `changes`.
    pub fn new(per_provider: usize, changes: Arc<Notify>) -> Cloud {
        Cloud {
            offerings: Arc::default(),
            work: work::CloudWork::new(per_provider, changes),
        }
    }
}
