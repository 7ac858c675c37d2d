//! What every step of a cycle works with: the long-lived context ([`Ctx`]:
//! client, configuration, dependencies, caches, Events, offering cache,
//! housekeeping clocks) and the cloud providers of one cycle
//! ([`CycleProviders`], every NodeClass's resolved once per cycle).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use kube::ResourceExt;
use muster_provider_api::CloudProvider;

use super::act::{self, ActError};
use super::cloud_work::CloudWork;
use super::events::Events;
use super::objects::Kind;
use super::observe::Caches;
use super::providers::{OfferingCache, ProviderSetupError};
use super::translate::Observed;
use super::{ControllerConfig, Deps};

/// Everything a cycle needs.
pub struct Ctx {
    /// The API client.
    pub client: kube::Client,
    /// Configuration.
    pub config: Arc<ControllerConfig>,
    /// Providers, planner, metrics.
    pub deps: Deps,
    /// Watch caches.
    pub caches: Caches,
    /// Event publisher.
    pub events: Events,
    /// Listed offerings and unavailable marks.
    pub offerings: Arc<OfferingCache>,
    /// Cloud calls running off the planning path.
    pub cloud: CloudWork,
    /// Pod evictions in flight (drains).
    pub evicting: Arc<act::apply::remove::InFlight>,
    /// When periodic housekeeping last ran.
    pub last: std::sync::Mutex<Housekeeping>,
    /// When each NodeClass was last resolved.
    pub resolved: act::reconcile::class_status::Resolved,
    /// Jobs this process started lately (UID → when), so a watch cache that
    /// shows the Job started but not yet its Gang admitted is not taken for
    /// a Job running without admission.
    pub started: act::reconcile::workloads::Started,
    /// The enabled workload kinds the API server serves.
    pub workload_kinds: std::collections::BTreeSet<crate::controller::workloads::WorkloadKind>,
    /// Enabled workload kinds whose CRD is not served (skipped; reported on
    /// every GPUQueue's `WorkloadKindsServed` condition).
    pub missing_workload_kinds: Vec<crate::controller::workloads::WorkloadKind>,
    /// The last GPU utilisation read from Prometheus (idle detection).
    pub gpu_usage: super::gpu_usage::Cache,
}

/// When each periodic housekeeping step last ran.
#[derive(Debug, Default)]
pub struct Housekeeping {
    /// Orphan collection.
    pub orphans: Option<Instant>,
    /// Interruption polling.
    pub interruptions: Option<Instant>,
}

impl Ctx {
    /// True (and noted) when `step` last ran at least `period` ago.
    pub(crate) fn due(
        &self,
        period: std::time::Duration,
        step: fn(&mut Housekeeping) -> &mut Option<Instant>,
    ) -> bool {
        let mut h = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let slot = step(&mut h);
        if slot.is_some_and(|t| t.elapsed() < period) {
            return false;
        }
        *slot = Some(Instant::now());
        true
    }
}

impl Ctx {
    /// A context.
    pub fn new(
        client: kube::Client,
        config: Arc<ControllerConfig>,
        deps: Deps,
        caches: Caches,
    ) -> Ctx {
        let events = Events::new(client.clone(), &config.identity);
        let workload_kinds = config.workload_kinds.clone();
        let cloud = CloudWork::new(config.cloud_concurrency, caches.changes.clone());
        Ctx {
            client,
            config,
            deps,
            caches,
            events,
            offerings: Arc::default(),
            cloud,
            evicting: Arc::default(),
            last: std::sync::Mutex::default(),
            resolved: Default::default(),
            started: Default::default(),
            workload_kinds,
            missing_workload_kinds: Vec::new(),
            gpu_usage: Default::default(),
        }
    }

    pub(crate) fn observed(&self) -> Observed {
        Observed {
            jobs: self.caches.jobs(),
            pods: self.caches.pods(),
            nodes: self.caches.nodes(),
            namespaces: self.caches.namespaces(),
            pdbs: self.caches.pdbs(),
            objects: Kind::ALL
                .into_iter()
                .map(|k| (k, self.caches.objects(k)))
                .collect(),
            kinds: self.workload_kinds.clone(),
            workloads: self
                .workload_kinds
                .iter()
                .filter(|k| k.custom().is_some())
                .map(|&k| (k, self.caches.workloads(k)))
                .collect(),
            related: self.caches.related(),
        }
    }
}

/// The cloud provider of every NodeClass, resolved once at the start of a
/// cycle from the NodeClasses observed then; every step of the cycle looks
/// its provider up here.
#[derive(Default)]
pub struct CycleProviders(BTreeMap<String, Result<Arc<dyn CloudProvider>, ProviderSetupError>>);

impl CycleProviders {
    /// Builds (or takes from the factory's cache) the provider of every
    /// observed NodeClass.
    pub async fn resolve(ctx: &Ctx, observed: &Observed) -> CycleProviders {
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
    pub fn get(&self, node_class: &str) -> Result<Arc<dyn CloudProvider>, ActError> {
        match self.0.get(node_class) {
            Some(Ok(p)) => Ok(p.clone()),
            Some(Err(e)) => Err(ActError::Setup(e.clone())),
            None => Err(ActError::Missing(format!("NodeClass {node_class}"))),
        }
    }

    /// The provider of a NodeClass, or why it has none; `None` for a
    /// NodeClass not observed when the cycle began.
    pub fn setup(
        &self,
        node_class: &str,
    ) -> Option<Result<&Arc<dyn CloudProvider>, &ProviderSetupError>> {
        self.0.get(node_class).map(Result::as_ref)
    }

    /// Every NodeClass that has a provider (those without one are skipped:
    /// their status already says why).
    pub fn ready(&self) -> impl Iterator<Item = (&str, &Arc<dyn CloudProvider>)> {
        self.0
            .iter()
            .filter_map(|(n, p)| p.as_ref().ok().map(|p| (n.as_str(), p)))
    }
}
