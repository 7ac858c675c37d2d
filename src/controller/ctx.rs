//! What every step of a cycle works with: a handful of long-lived handles
//! ([`Ctx`]: the API client, configuration, dependencies, watch caches,
//! Events, and the cloud's offering cache with its off-path calls), and the cloud providers of
//! one cycle ([`CycleProviders`], every NodeClass's resolved once per
//! cycle). What a step remembers between cycles is the step's own, not
//! the context's.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use muster_provider_api::CloudProvider;

use crate::controller::base::api::ActError;
use crate::controller::base::events::Events;
use crate::controller::base::objects::Kind;
use crate::controller::cloud::Cloud;
use crate::controller::cloud::providers::ProviderSetupError;
use crate::controller::observe::{Caches, Observed};
use crate::controller::{ControllerConfig, Deps};

/// The handles every step of a cycle is given.
pub(crate) struct Ctx {
    /// The API client (deadline and write fence, see
    /// [`crate::controller::base::client`]).
    pub(crate) client: kube::Client,
    /// Configuration.
    pub(crate) config: Arc<ControllerConfig>,
    /// Providers, planner, metrics.
    pub(crate) deps: Deps,
    /// Watch caches.
    pub(crate) caches: Caches,
    /// Event publisher.
    pub(crate) events: Events,
    /// Listed offerings, unavailable marks, and cloud calls running off
    /// the planning path.
    pub(crate) cloud: Cloud,
}

impl Ctx {
    /// A context.
    pub(crate) fn new(
        client: kube::Client,
        config: Arc<ControllerConfig>,
        deps: Deps,
        caches: Caches,
    ) -> Ctx {
        let events = Events::new(client.clone(), &config.identity);
        let cloud = Cloud::new(config.cloud_concurrency, caches.changes.clone());
        Ctx {
            client,
            config,
            deps,
            caches,
            events,
            cloud,
        }
    }
}

/// The cloud provider of every NodeClass, resolved once at the start of a
/// cycle from the NodeClasses observed then; every step of the cycle looks
/// its provider up here.
#[derive(Default)]
pub(crate) struct CycleProviders(
    BTreeMap<String, Result<Arc<dyn CloudProvider>, ProviderSetupError>>,
);

impl CycleProviders {
    /// Builds (or takes from the factory's cache) the provider of every
    /// observed NodeClass.
    pub(crate) async fn resolve(ctx: &Ctx, observed: &Observed) -> CycleProviders {
        let mut out = BTreeMap::new();
        for nc in observed.of(Kind::NodeClass) {
            let name = nc.name_any();
            let spec = nc.data.get("spec").cloned().unwrap_or_default();
            let p = ctx.deps.providers.provider(&name, &spec).await;
            if let Err(e) = &p {
                tracing::debug!(node_class = %name, error = %e, "no provider");
            }
            out.insert(name, p);
        }
        CycleProviders(out)
    }

    /// The provider of a NodeClass.
    pub(crate) fn get(&self, node_class: &str) -> Result<Arc<dyn CloudProvider>, ActError> {
        match self.0.get(node_class) {
            Some(Ok(p)) => Ok(p.clone()),
            Some(Err(e)) => Err(ActError::Setup(e.clone())),
            None => Err(ActError::Missing(format!("NodeClass {node_class}"))),
        }
    }

    /// The provider of a NodeClass, or why it has none; `None` for a
    /// NodeClass not observed when the cycle began.
    pub(crate) fn setup(
        &self,
        node_class: &str,
    ) -> Option<Result<&Arc<dyn CloudProvider>, &ProviderSetupError>> {
        self.0.get(node_class).map(Result::as_ref)
    }

    /// Every NodeClass that has a provider (those without one are skipped:
    /// their status already says why).
    pub(crate) fn ready(&self) -> impl Iterator<Item = (&str, &Arc<dyn CloudProvider>)> {
        self.0
            .iter()
            .filter_map(|(n, p)| p.as_ref().ok().map(|p| (n.as_str(), p)))
    }
}
