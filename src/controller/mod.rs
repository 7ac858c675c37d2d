//! The Kubernetes controller: a driver of the planner.
//!
//! It observes the cluster (reflectors, [`observe`]), translates its caches
//! into a planner [`Snapshot`](muster_planner::Snapshot) ([`translate`], the
//! only module that knows both kube objects and planner types), calls the
//! planner in a debounced singleton loop ([`planning_loop`]) while it holds
//! the leader Lease ([`leader`]), and carries the plan out with idempotent
//! writes and cloud calls ([`act`]): intent (`PoolNode`) before action. It
//! never takes a decision of its own; whatever it cannot do shows in the next
//! snapshot and is planned again.

pub mod base;
pub mod cloud;
pub(crate) mod ctx;
pub(crate) mod cycle;
pub mod explain;
pub mod http;
pub mod leader;
pub mod metrics_auth;
pub mod observe;
pub(crate) mod steps;
pub mod translate;
pub mod uninstall;
pub mod webhook;
pub mod workloads;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use muster_planner::{Plan, Policy, Snapshot, Time};

pub use cloud::providers::{ProviderFactory, ProviderSetupError};
pub use leader::{LeaseConfig, TimingError};

/// The planning function: [`real_planner`] in production; tests may
/// substitute a scripted planner to exercise the driver alone.
pub type PlanFn = Arc<dyn Fn(&Snapshot, &Policy, Time) -> Plan + Send + Sync>;

/// Makes ring the process's TLS crypto provider. rustls cannot choose by
/// itself when a build enables two providers (the kube client enables ring;
/// a cloud SDK may enable aws-lc-rs), so every process that builds a kube
/// client calls this first. Calling it again is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The real planner: a [`muster_planner::Replanner`] kept for the life of
/// the process, handed each cycle's snapshot. Its plan is the full plan of
/// that snapshot; it takes over the tries of the last plan's fair-share loop
/// that nothing since can have changed (a gang arriving in a long queue
/// costs a fraction of a full plan), and keeps fingerprints of the last
/// snapshot rather than a copy (docs/benchmarks.md has both figures).
pub fn real_planner() -> PlanFn {
    let replanner = std::sync::Mutex::new(muster_planner::Replanner::new());
    Arc::new(move |snapshot: &Snapshot, policy: &Policy, now: Time| {
        // A panic while planning leaves the memory of the last plan behind;
        // the plan after it is still the full plan (the fingerprints decide
        // what is taken over), so a poisoned lock is used as it is.
        let mut r = replanner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        r.plan(snapshot, policy, now).clone()
    })
}

/// Everything the controller is configured with.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Cluster name: instances are tagged with it.
    pub cluster: String,
    /// Namespaces whose Jobs, Pods, PDBs and Gangs are watched; empty is all.
    pub namespaces: Vec<String>,
    /// Quiet time after a change before planning.
    pub debounce: Duration,
    /// Planning happens at least this often.
    pub tick: Duration,
    /// This instance's identity (Lease holder, Event reporting instance).
    pub identity: String,
    /// Leader election; `None` acts as leader at once (single replica, tests).
    pub lease: Option<LeaseConfig>,
    /// Planner policy knobs.
    pub policy: Policy,
    /// How long listed offerings are reused before asking the cloud again.
    pub offerings_ttl: Duration,
    /// How often instances tagged for this cluster are checked for orphans.
    pub orphan_gc_period: Duration,
    /// How old an unaccounted instance must be before it is terminated.
    pub orphan_grace: Duration,
    /// How often each cloud's interruption notices are read.
    pub interruption_poll: Duration,
    /// Deadline of every API request but watches (see [`base::client`]); with
    /// leader election, shorter than lease duration − renew deadline.
    pub api_timeout: Duration,
    /// The workload kinds run as gangs (`--workload-kinds`).
    pub workload_kinds: std::collections::BTreeSet<workloads::WorkloadKind>,
    /// Base URL of the Prometheus API that holds the DCGM exporter's
    /// `DCGM_FI_DEV_GPU_UTIL` (idle detection); none turns it off.
    pub prometheus_url: Option<String>,
    /// How often GPU utilisation is read from Prometheus.
    pub prometheus_interval: Duration,
    /// Resolution of the utilisation read: one sample per series per step.
    pub prometheus_step: Duration,
    /// Most cloud calls at once per NodeClass (launches, terminations,
    /// listings); they run off the planning path ([`cloud_work`]).
    pub cloud_concurrency: usize,
    /// The webhook's certificates, when the controller manages them
    /// ([`webhook::managed`]); `None` when they come from files.
    pub webhook_certs: Option<Arc<webhook::managed::Settings>>,
}

impl ControllerConfig {
    /// Defaults for a cluster name and identity.
    pub fn new(cluster: impl Into<String>, identity: impl Into<String>) -> ControllerConfig {
        ControllerConfig {
            cluster: cluster.into(),
            namespaces: Vec::new(),
            debounce: Duration::from_millis(200),
            tick: Duration::from_secs(30),
            identity: identity.into(),
            lease: None,
            policy: Policy::default(),
            offerings_ttl: Duration::from_secs(300),
            orphan_gc_period: Duration::from_secs(300),
            orphan_grace: Duration::from_secs(600),
            interruption_poll: Duration::from_secs(5),
            api_timeout: Duration::from_secs(4),
            workload_kinds: workloads::WorkloadKind::DEFAULT.into_iter().collect(),
            prometheus_url: None,
            prometheus_interval: Duration::from_secs(60),
            prometheus_step: Duration::from_secs(60),
            cloud_concurrency: 32,
            webhook_certs: None,
        }
    }
}

/// What the controller is given besides configuration.
#[derive(Clone)]
pub struct Deps {
    /// Builds a cloud provider for a NodeClass.
    pub providers: Arc<dyn ProviderFactory>,
    /// The planner.
    pub planner: PlanFn,
    /// Metrics registry and readiness flags.
    pub metrics: Arc<base::metrics::Metrics>,
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A watch cache never synced (its writer went away).
    #[error("watch caches did not sync: {0}")]
    CacheSync(String),
    /// The metrics/health endpoint could not listen.
    #[error("metrics endpoint: {0}")]
    Metrics(#[from] std::io::Error),
    /// The leader-election timing breaks a rule.
    #[error("leader election: {0}")]
    Timing(#[from] TimingError),
}

/// Runs the controller until `shutdown` resolves.
///
/// Writes go through a client that refuses them unless this instance leads
/// ([`base::client`]); the planning loop runs cycles only while leading and
/// cancels the one in flight when leadership is lost. On `shutdown` the
/// loop is stopped first, then the Lease is released, so the next leader
/// takes over at its next try and no write of this instance follows.
pub async fn run(
    client: kube::Client,
    config: ControllerConfig,
    deps: Deps,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ControllerError> {
    if let Some(lease) = &config.lease {
        lease.check(config.api_timeout)?;
    }
    let config = Arc::new(config);
    let leadership = match &config.lease {
        Some(_) => leader::Leadership::elected(deps.metrics.clone()),
        None => leader::Leadership::always(deps.metrics.clone()),
    };
    let options = base::client::Options {
        timeout: config.api_timeout,
        fence: Some(leadership.clone()),
        identity: config.identity.clone(),
        purpose: None,
    };
    let election = config.lease.as_ref().map(|lease| {
        let lease_client = base::client::wrap(
            client.clone(),
            base::client::Options {
                fence: None,
                purpose: Some("leader-election"),
                ..options.clone()
            },
        );
        leader::start(lease_client, lease, &config.identity, leadership.clone())
    });
    let client = base::client::wrap(client, options);
    // every replica serves the webhook's certificate; only the leader writes it
    let _certs = config.webhook_certs.clone().map(|settings| {
        AbortOnDrop(tokio::spawn(webhook::managed::run(
            client.clone(),
            settings,
            leadership.subscribe(),
            deps.metrics.clone(),
        )))
    });
    let mut shutdown = std::pin::pin!(shutdown);
    tokio::select! {
        () = observe::crd_check::wait_until_installed(&client) => {}
        () = &mut shutdown => {
            tracing::info!("shutting down before the CRDs were installed");
            if let Some(election) = election {
                election.stop().await;
            }
            return Ok(());
        }
    }
    let (mut served, missing, mut refused) =
        observe::crd_check::served_workload_kinds(&client, &config.workload_kinds).await;
    refused.extend(observe::crd_check::refused_workload_kinds(&client, &mut served).await);
    let caches = observe::Caches::start(client.clone(), &config, &served)
        .with_missing(missing)
        .with_refused(refused);
    // Every task below dies with this future: aborting `run` is a process kill.
    let _caches_guard = StopOnDrop(Some(caches.clone()));
    let ctx = Arc::new(ctx::Ctx::new(client, config.clone(), deps, caches.clone()));
    let mut loop_task = AbortOnDrop(tokio::spawn(cycle::run(
        ctx.clone(),
        leadership.subscribe(),
    )));
    shutdown.await;
    tracing::info!("shutting down");
    loop_task.stop().await;
    ctx.cloud.work.abort_all();
    if let Some(election) = election {
        election.stop().await;
    }
    Ok(())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Aborts the task and waits until it is gone (its futures dropped).
    async fn stop(&mut self) {
        self.0.abort();
        let _ = (&mut self.0).await;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct StopOnDrop(Option<observe::Caches>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.stop();
        }
    }
}
