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

/// The emulated kubelet boots every instance the double runs for the cluster.
pub struct FakeMachines(pub Arc<GcpProvider>);

#[async_trait::async_trait]
impl Machines for FakeMachines {
    async fn machines(&self) -> Vec<Machine> {
        self.0
            .list(CLUSTER)
            .await
            .unwrap_or_default()
            .into_iter()
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
    /// The kubelet and scheduler stand-in (runs until dropped).
    pub _emulator: Emulator,
}

/// Builds the world; pods run `run_for`, the pool holds at most `max_gpus`.
pub async fn start(run_for: Duration, max_gpus: u32, server_args: &[&str]) -> World {
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
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1s"}
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
    let emulator = Emulator::start_running_for(
        client.clone(),
        vec![Arc::new(FakeMachines(cloud.clone()))],
        Some(run_for),
    );
    World {
        fake,
        server,
        client,
        cloud,
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
