//! The controller run in-process against the API test server, on a fake
//! cloud: what the scenario tests start and stop.

use std::sync::Arc;
use std::time::Duration;

use muster::controller::base::metrics::Metrics;
use muster::controller::{self, ControllerConfig, Deps, PlanFn};

use super::fake_cloud::{FakeCloud, FakeFactory};

/// A controller running in-process; aborted (like a killed process) on drop.
pub struct Running {
    /// The controller's task.
    pub task: tokio::task::JoinHandle<()>,
    /// Its metrics registry.
    pub metrics: Arc<Metrics>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The configuration the tests start from: short debounce and tick, no
/// leader election.
pub fn config(identity: &str) -> ControllerConfig {
    let mut config = ControllerConfig::new("test-cluster", identity);
    config.debounce = Duration::from_millis(50);
    config.tick = Duration::from_millis(500);
    config
}

/// The real planner, printing each cycle's snapshot and plan on stderr when
/// `MUSTER_TEST_DUMP` is set.
pub fn dumping_planner() -> PlanFn {
    Arc::new(
        |s: &muster_planner::Snapshot, p: &muster_planner::Policy, t| {
            let plan = muster_planner::plan(s, p, t);
            if std::env::var("MUSTER_TEST_DUMP").is_ok() {
                eprintln!(
                    "SNAPSHOT {}\nPLAN {}",
                    serde_json::to_string(s).unwrap_or_default(),
                    serde_json::to_string(&plan).unwrap_or_default()
                );
            }
            plan
        },
    )
}

/// Starts the controller with `config` on `cloud`, deciding with `planner`.
pub fn spawn(
    client: &kube::Client,
    cloud: &Arc<FakeCloud>,
    planner: PlanFn,
    config: ControllerConfig,
) -> Running {
    spawn_with(
        client,
        Arc::new(FakeFactory(cloud.clone())),
        planner,
        config,
    )
}

/// Starts the controller with `config` on the clouds `providers` hands
/// out, deciding with `planner`.
pub fn spawn_with(
    client: &kube::Client,
    providers: Arc<dyn controller::ProviderFactory>,
    planner: PlanFn,
    config: ControllerConfig,
) -> Running {
    // `MUSTER_TEST_LOG=muster=debug` shows the controller's log
    if let Ok(filter) = std::env::var("MUSTER_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    let metrics = Arc::new(Metrics::new());
    let deps = Deps {
        providers,
        planner,
        metrics: metrics.clone(),
    };
    let client = client.clone();
    let task = tokio::spawn(async move {
        let _ = controller::run(client, config, deps, futures::future::pending()).await;
    });
    Running { task, metrics }
}
