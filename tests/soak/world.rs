//! The soak's world: a cloud (its state outlives every controller), the
//! API test server, one NodeClass, a pool of one-GPU machines that
//! consolidates empty nodes after a second, a queue whose quota holds fewer
//! GPUs than the pool and a low-priority queue of the same cohort that owns
//! none and borrows the first one's (which the first reclaims by
//! preempting its gangs, whole), and the emulated kubelet that runs pods
//! for a while (and boots a Node for every instance of a cloud whose
//! machines are not Nodes already).
//!
//! The cloud is behind [`SoakCloud`]: the Compute test double
//! (`super::gcp`), the simulated cloud of `--cloud sim` (`super::sim`) and
//! moto (`super::aws`).

use std::sync::Arc;
use std::time::Duration;

use muster_provider_api::{CloudProvider, Instance, label_key, tags};
use serde_json::{Value, json};

use crate::support::emulator::{Emulator, Machines};
use crate::support::{ApiServer, create, install_crds};

/// The cluster name instances are labelled with.
pub const CLUSTER: &str = "soak-cluster";
/// The namespace of the workload.
pub const NAMESPACE: &str = "soak";
/// The NodeClass every cloud's machines are launched for.
pub const NODE_CLASS: &str = "soak-class";
/// GPUs the queue's quota holds (its gangs wait, or preempt, beyond it).
pub const QUOTA_GPUS: u32 = 24;
/// The queue of most gangs.
pub const QUEUE: &str = "team-a";
/// The low-priority queue: it borrows the other's unused quota, which the
/// other reclaims by preempting its gangs.
pub const LOW_QUEUE: &str = "team-b";
/// The cohort of the two queues.
pub const COHORT: &str = "soak";

/// The files of muster's five CRDs in a directory of earlier ones.
pub const MUSTER_CRDS: [&str; 5] = ["gang", "gpupool", "gpuqueue", "nodeclass", "poolnode"];

/// What the soak needs of a cloud.
#[async_trait::async_trait]
pub trait SoakCloud: Send + Sync + 'static {
    /// Its name in the summary: `gcp`, `sim`, `aws`.
    fn name(&self) -> &'static str;
    /// The NodeClass spec.
    fn node_class(&self) -> Value;
    /// The pool's `requirements` (one one-GPU instance type).
    fn requirements(&self) -> Value;
    /// Controller flags and environment that point it at this cloud.
    fn controller(&self) -> (Vec<String>, Vec<(String, String)>);
    /// The cloud as the test reads it (instances of the cluster now).
    fn provider(&self) -> Arc<dyn CloudProvider>;
    /// The machines the emulated kubelet boots a Node for; `None` when the
    /// cloud's machines are Nodes already.
    fn machines(&self) -> Option<Arc<dyn Machines>>;
    /// Launch calls the cloud received (or machines it created) so far.
    fn launches(&self) -> usize;
    /// Terminate calls the cloud received (or machines it deleted) so far.
    fn terminations(&self) -> usize;
    /// Every instance the cloud ever created, terminated ones included:
    /// `(instance, PoolNode)`, one entry per creation (an instance name
    /// created twice appears twice).
    async fn created(&self) -> Vec<(String, String)>;
    /// Reclaims one running instance (the `pick`-th, modulo), as a cloud
    /// interrupts a spot machine, when this cloud does; returns its name.
    async fn interrupt(&self, _pick: u64) -> Option<String> {
        None
    }
}

/// The PoolNode an instance was launched for.
pub fn pool_node_of(i: &Instance) -> String {
    i.tags
        .get(&label_key(tags::POOL_NODE))
        .or_else(|| i.tags.get(tags::POOL_NODE))
        .cloned()
        .or(i.pool_node.clone())
        .unwrap_or_default()
}

/// Everything but the controllers.
pub struct World<C: SoakCloud> {
    /// The cloud.
    pub cloud: Arc<C>,
    /// The API test server.
    pub server: ApiServer,
    /// A client exempt from chaos.
    pub client: kube::Client,
    /// The kubelet and scheduler stand-in (runs until dropped).
    pub _emulator: Emulator,
}

/// How the world is set up.
#[derive(Debug, Clone)]
pub struct Setup {
    /// How long pods run (unless their Job says otherwise).
    pub run_for: Duration,
    /// The pool's GPU limit.
    pub max_gpus: u32,
    /// The queue's GPU quota; none when `None`.
    pub quota_gpus: Option<u32>,
    /// How long a gang's machines may take to become Ready.
    pub provisioning_timeout: String,
    /// The muster CRDs installed first: today's, or those an earlier
    /// release stored its objects under (a directory of `tests/data`).
    pub crds: Crds,
}

/// Which muster CRDs the world starts with.
#[derive(Debug, Clone, Default)]
pub enum Crds {
    /// This build's.
    #[default]
    Current,
    /// The five CRDs of the earlier release whose files are in this
    /// directory (relative to the repository).
    Previous(String),
}

/// Builds the world on the API server started with `server_args`; `cloud`
/// makes the cloud from the server's client.
pub async fn start<C, F, Fut>(setup: &Setup, server_args: &[&str], cloud: F) -> World<C>
where
    C: SoakCloud,
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = C>,
{
    let server = ApiServer::start_with(server_args);
    let client = server.client();
    match &setup.crds {
        Crds::Current => install_crds(&client).await,
        Crds::Previous(dir) => {
            crate::support::workload_crds::install_from(&client, dir, &MUSTER_CRDS).await;
        }
    }
    let cloud = Arc::new(cloud(client.clone()).await);
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": NODE_CLASS}, "spec": cloud.node_class()}),
    )
    .await;
    create(
        &client,
        "GPUPool",
        "gpupools",
        None,
        json!({
            "metadata": {"name": "gpu"},
            "spec": {
                "nodeClassRef": {"name": NODE_CLASS},
                "requirements": cloud.requirements(),
                "limits": {"maxGPUs": setup.max_gpus},
                // nodes empty a second go, none kept warm: the soak drains
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1s", "keepWarm": {"window": "0s"}},
                "provisioningTimeout": setup.provisioning_timeout
            }
        }),
    )
    .await;
    let mut queue = json!({
        "pools": ["gpu"],
        "namespaceSelector": {},
        "preemption": {"withinQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    });
    if let Some(gpus) = setup.quota_gpus {
        queue["cohort"] = json!(COHORT);
        queue["resources"] = json!([{"name": "nvidia.com/gpu", "nominal": gpus.to_string()}]);
        // the low-priority queue owns nothing: its gangs run on what it
        // borrows from the cohort, which the other queue reclaims
        let low = json!({
            "pools": ["gpu"],
            "namespaceSelector": {},
            "cohort": COHORT,
            "resources": [{"name": "nvidia.com/gpu", "nominal": "0"}]
        });
        create(
            &client,
            "GPUQueue",
            "gpuqueues",
            None,
            json!({"metadata": {"name": LOW_QUEUE}, "spec": low}),
        )
        .await;
    }
    create(
        &client,
        "GPUQueue",
        "gpuqueues",
        None,
        json!({"metadata": {"name": QUEUE}, "spec": queue}),
    )
    .await;
    let emulator = Emulator::start_running_for(
        client.clone(),
        cloud.machines().into_iter().collect(),
        Some(setup.run_for),
    );
    World {
        cloud,
        server,
        client,
        _emulator: emulator,
    }
}
