//! Cloud providers as the controller uses them: one `CloudProvider` per
//! NodeClass (built by a [`ProviderFactory`]), the offerings each pool may
//! buy (listed from the cloud, reused for a while), and the offerings a
//! recent insufficient-capacity error made unavailable (the snapshot carries
//! them as `Offering::unavailable_until`; the planner decides what to do).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use muster_planner::lifecycle::pool_node::Unavailable;
use muster_planner::{CapacityType, Offering, OfferingKey, Provider, Time};
use muster_provider_api::CloudProvider;

pub use crate::controller::base::errors::ProviderSetupError;

/// Builds the provider of a NodeClass from its name and `spec` (JSON).
/// Implementations may cache: the controller asks on every cycle.
#[async_trait::async_trait]
pub trait ProviderFactory: Send + Sync {
    /// The provider for this NodeClass.
    async fn provider(
        &self,
        node_class: &str,
        spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError>;
}

/// Offerings per pool with the time they were listed, and the
/// insufficient-capacity marks.
#[derive(Default)]
pub(crate) struct OfferingCache {
    listed: Mutex<BTreeMap<String, (Instant, Vec<Offering>)>>,
    failed: Mutex<std::collections::BTreeSet<String>>,
    unavailable: Mutex<BTreeMap<OfferingKey, Time>>,
    /// Capacity types the account refused, per provider: until when, and
    /// the launch error's message (the step that fixes it).
    refused: Mutex<BTreeMap<(Provider, CapacityType), (Time, String)>>,
}

impl OfferingCache {
    /// The pool's offerings if listed within `ttl`.
    pub fn fresh(&self, pool: &str, ttl: std::time::Duration) -> Option<Vec<Offering>> {
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed
            .get(pool)
            .filter(|(at, _)| at.elapsed() < ttl)
            .map(|(_, o)| o.clone())
    }

    /// The pool's last listed offerings, however old; `None` before its
    /// first listing.
    pub(crate) fn listed(&self, pool: &str) -> Option<Vec<Offering>> {
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed.get(pool).map(|(_, o)| o.clone())
    }

    /// Records that listing the pool's offerings failed.
    pub(crate) fn failed(&self, pool: &str) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        failed.insert(pool.to_string());
    }

    /// True once a listing of the pool finished, listed or failed.
    pub(crate) fn attempted(&self, pool: &str) -> bool {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        failed.contains(pool) || self.listed(pool).is_some()
    }

    /// Records a listing.
    pub(crate) fn store(&self, pool: &str, offerings: Vec<Offering>) {
        let mut listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed.insert(pool.to_string(), (Instant::now(), offerings));
    }

    /// Marks an offering, or every offering of a provider's capacity type,
    /// unavailable until `until`; `why` is the launch error's message.
    pub(crate) fn mark_unavailable(&self, what: Unavailable, until: Time, why: &str) {
        match what {
            Unavailable::Offering(key) => {
                let mut u = self.unavailable.lock().unwrap_or_else(|e| e.into_inner());
                u.insert(key, until);
            }
            Unavailable::CapacityType(provider, capacity_type) => {
                let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
                r.insert((provider, capacity_type), (until, why.to_string()));
            }
        }
    }

    /// When the offering becomes available again, if it or its capacity
    /// type is marked and the mark has not passed (the later of both).
    pub fn unavailable_until(&self, key: &OfferingKey, now: Time) -> Option<Time> {
        let one = {
            let u = self.unavailable.lock().unwrap_or_else(|e| e.into_inner());
            u.get(key).copied().filter(|t| *t > now)
        };
        let all = {
            let r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            r.get(&(key.provider, key.capacity_type))
                .map(|(t, _)| *t)
                .filter(|t| *t > now)
        };
        one.max(all)
    }

    /// The capacity types of `provider` the account refuses now (the mark
    /// has not passed), each with until when and the launch error's message.
    pub(crate) fn refused(
        &self,
        provider: Provider,
        now: Time,
    ) -> Vec<(CapacityType, Time, String)> {
        let r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        r.iter()
            .filter(|((p, _), (t, _))| *p == provider && *t > now)
            .map(|((_, c), (t, m))| (*c, *t, m.clone()))
            .collect()
    }
}

/// Lists the offerings of `pool` from its NodeClass's provider, each named
/// with that NodeClass where the provider left it empty: the one listing a
/// cycle (in the background, [`crate::controller::cloud::work`]) and
/// `muster explain` (inline) both make.
pub(crate) async fn list_offerings(
    provider: &dyn CloudProvider,
    pool: &muster_planner::Pool,
) -> Result<Vec<muster_planner::Offering>, muster_provider_api::ProviderError> {
    let mut list = provider.offerings(&pool.requirements).await?;
    for o in &mut list {
        if o.node_class.is_empty() {
            o.node_class = pool.node_class.clone();
        }
    }
    Ok(list)
}
