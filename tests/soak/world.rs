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

/// What becomes of a machine the double runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Its kubelet registers a Node that turns Ready.
    Boots,
    /// It never registers a Node (a machine that never joins).
    NeverRegisters,
    /// Its kubelet registers a Node that stays `Ready=False`
    /// (`KubeletNotReady`: the network plugin never starts).
    NeverReady,
}

/// The emulated kubelet boots every instance the double runs for the
/// cluster, but while faults are on ([`FakeMachines::fail_from`]) each new
/// instance draws its [`Fate`] from a generator seeded by the caller: one
/// in four never registers a Node, one in four registers one that never
/// turns Ready.
pub struct FakeMachines {
    cloud: Arc<GcpProvider>,
    /// The draws while faults are on; `None` when every new instance boots.
    faults: std::sync::Mutex<Option<super::Rng>>,
    fates: std::sync::Mutex<std::collections::BTreeMap<String, Fate>>,
}

impl FakeMachines {
    /// Every instance boots until [`FakeMachines::fail_from`].
    pub fn new(cloud: Arc<GcpProvider>) -> FakeMachines {
        FakeMachines {
            cloud,
            faults: Default::default(),
            fates: Default::default(),
        }
    }

    /// From now on, each new instance draws its fate from `seed`'s
    /// generator (in the order the instances are first seen).
    pub fn fail_from(&self, seed: u64) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = Some(super::Rng::new(seed));
    }

    /// From now on, every new instance boots (the fates drawn stay).
    pub fn stop_failing(&self) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The provider ids of the instances that drew `fate`.
    pub fn with_fate(&self, fate: Fate) -> std::collections::BTreeSet<String> {
        self.fates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, f)| **f == fate)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Instances that never registered.
    pub fn hidden(&self) -> usize {
        self.with_fate(Fate::NeverRegisters).len()
    }

    /// Instances whose Node never turned Ready.
    pub fn never_ready(&self) -> usize {
        self.with_fate(Fate::NeverReady).len()
    }
}

#[async_trait::async_trait]
impl Machines for FakeMachines {
    async fn machines(&self) -> Vec<Machine> {
        let instances = self.cloud.list(CLUSTER).await.unwrap_or_default();
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let mut fates = self.fates.lock().unwrap_or_else(|e| e.into_inner());
        instances
            .into_iter()
            .filter_map(|i| {
                let fate = *fates.entry(i.provider_id.clone()).or_insert_with(|| {
                    match faults.as_mut().map(|r| r.below(8)) {
                        Some(0 | 1) => Fate::NeverRegisters,
                        Some(2 | 3) => Fate::NeverReady,
                        _ => Fate::Boots,
                    }
                });
                if fate == Fate::NeverRegisters {
                    return None;
                }
                let gpus = u32::from(i.offering.instance_type == MACHINE);
                let pool = i
                    .tags
                    .get(&label_key(tags::POOL))
                    .cloned()
                    .unwrap_or_default();
                let mut m = machine(i, pool, gpus);
                m.never_ready = fate == Fate::NeverReady;
                Some(m)
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
