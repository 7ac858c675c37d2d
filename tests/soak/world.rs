//! The soak's world: the Compute test double (its state outlives every
//! controller), the API test server, one GCP NodeClass, a pool of 1-GPU
//! L4 machines that consolidates empty nodes after a second, one queue, and
//! the emulated kubelet that boots a Node for every instance and runs pods
//! for a while.

use std::sync::Arc;
use std::time::Duration;

use muster_provider_api::{CloudProvider, label_key, tags};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::{Value, json};

use crate::support::cloud_e2e::machine;
use crate::support::emulator::{Emulator, Machine, Machines};
use crate::support::{ApiServer, create, install_crds};

/// The cluster name instances are labelled with.
pub const CLUSTER: &str = "soak-cluster";
/// The namespace of the workload.
pub const NAMESPACE: &str = "soak";
/// The one machine type (1 L4 GPU).
pub const MACHINE: &str = "g2-standard-4";

/// The NodeClass spec.
pub fn node_class() -> Value {
    json!({"gcp": {
        "project": "soak-project",
        "region": "us-central1",
        "zones": ["us-central1-a"],
        "image": "projects/cos-cloud/global/images/family/cos-stable"
    }})
}

/// The emulated kubelet boots every instance the double runs for the
/// cluster, but those `hidden` names: while `hiding` is on, one new instance
/// in four never registers a Node (a machine that never joins).
pub struct FakeMachines {
    cloud: Arc<GcpProvider>,
    /// Whether new instances may be hidden now.
    pub hiding: Arc<std::sync::atomic::AtomicBool>,
    hidden: std::sync::Mutex<std::collections::BTreeMap<String, bool>>,
}

impl FakeMachines {
    /// Every instance boots until `hiding` is set.
    pub fn new(cloud: Arc<GcpProvider>) -> FakeMachines {
        FakeMachines {
            cloud,
            hiding: Arc::default(),
            hidden: Default::default(),
        }
    }

    /// Instances that never registered.
    pub fn hidden(&self) -> usize {
        self.hidden
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|h| **h)
            .count()
    }
}

#[async_trait::async_trait]
impl Machines for FakeMachines {
    async fn machines(&self) -> Vec<Machine> {
        let hiding = self.hiding.load(std::sync::atomic::Ordering::Relaxed);
        let instances = self.cloud.list(CLUSTER).await.unwrap_or_default();
        let mut hidden = self.hidden.lock().unwrap_or_else(|e| e.into_inner());
        instances
            .into_iter()
            .filter(|i| {
                let n = hidden.len();
                !*hidden
                    .entry(i.provider_id.clone())
                    .or_insert_with(|| hiding && n % 4 == 3)
            })
            .map(|i| {
                let gpus = u32::from(i.offering.instance_type == MACHINE);
                let pool = i
                    .tags
                    .get(&label_key(tags::POOL))
                    .cloned()
                    .unwrap_or_default();
                machine(i, pool, gpus)
            })
            .collect()
    }
}

/// Everything but the controllers.
pub struct World {
    /// The Compute double.
    pub fake: ComputeFake,
    /// The API test server.
    pub server: ApiServer,
    /// A client exempt from chaos.
    pub client: kube::Client,
    /// The cloud as the test reads it.
    pub cloud: Arc<GcpProvider>,
    /// What the emulated kubelet boots.
    pub machines: Arc<FakeMachines>,
    /// The kubelet and scheduler stand-in (runs until dropped).
    pub _emulator: Emulator,
}

/// Builds the world; pods run `run_for`, the pool holds at most `max_gpus`
/// and gives a gang's machines `provisioning_timeout` to become Ready.
pub async fn start(
    run_for: Duration,
    max_gpus: u32,
    provisioning_timeout: &str,
    server_args: &[&str],
) -> World {
    let fake = ComputeFake::start();
    let server = ApiServer::start_with(server_args);
    let client = server.client();
    install_crds(&client).await;
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": "gcp-default"}, "spec": node_class()}),
    )
    .await;
    create(
        &client,
        "GPUPool",
        "gpupools",
        None,
        json!({
            "metadata": {"name": "l4"},
            "spec": {
                "nodeClassRef": {"name": "gcp-default"},
                "requirements": {"instanceTypes": [MACHINE], "capacityTypes": ["on-demand"]},
                "limits": {"maxGPUs": max_gpus},
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1s"},
                "provisioningTimeout": provisioning_timeout
            }
        }),
    )
    .await;
    create(
        &client,
        "GPUQueue",
        "gpuqueues",
        None,
        json!({
            "metadata": {"name": "team-a"},
            "spec": {"pools": ["l4"], "namespaceSelector": {}}
        }),
    )
    .await;
    let cloud = Arc::new(
        GcpProvider::new("gcp-default", &node_class(), &fake.options())
            .await
            .expect("provider"),
    );
    let machines = Arc::new(FakeMachines::new(cloud.clone()));
    let emulator = Emulator::start_running_for(
        client.clone(),
        vec![machines.clone() as Arc<dyn Machines>],
        Some(run_for),
    );
    World {
        fake,
        server,
        client,
        cloud,
        machines,
        _emulator: emulator,
    }
}

/// Every instance the double ever created: `(name, PoolNode label)`.
pub fn created(fake: &ComputeFake) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(&fake.control("GET", "created")).unwrap_or_default();
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_string(),
                        c["labels"][label_key(tags::POOL_NODE)]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
