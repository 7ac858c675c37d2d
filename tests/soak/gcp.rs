//! The soak on GCP: the Compute test double
//! (`providers/gcp/tests/compute_fake.py`, a separate process), one-GPU
//! `g2-standard-4` machines (one L4), and the emulated kubelet booting a
//! Node for every instance the double runs for the cluster.

use std::sync::Arc;

use muster_provider_api::{CloudProvider, label_key, tags};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::{Value, json};

use super::world::{CLUSTER, NODE_CLASS, SoakCloud};
use crate::support::cloud_e2e::machine;
use crate::support::emulator::{Machine, Machines};

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

/// The Compute double and the provider the test reads it with.
pub struct Gcp {
    /// The double.
    pub fake: ComputeFake,
    /// The provider of the NodeClass, as the test reads the cloud.
    pub provider: Arc<GcpProvider>,
    /// What the emulated kubelet boots.
    pub machines: Arc<FakeMachines>,
}

impl Gcp {
    /// Starts the double.
    pub async fn start(_client: kube::Client) -> Gcp {
        let fake = ComputeFake::start();
        let provider = Arc::new(
            GcpProvider::new(NODE_CLASS, &node_class(), &fake.options())
                .await
                .expect("provider"),
        );
        let machines = Arc::new(FakeMachines::new(provider.clone()));
        Gcp {
            fake,
            provider,
            machines,
        }
    }

    fn calls(&self, what: &str) -> usize {
        self.fake.calls()[what].as_u64().unwrap_or(0) as usize
    }
}

#[async_trait::async_trait]
impl SoakCloud for Gcp {
    fn name(&self) -> &'static str {
        "gcp"
    }

    fn node_class(&self) -> Value {
        node_class()
    }

    fn requirements(&self) -> Value {
        json!({"instanceTypes": [MACHINE], "capacityTypes": ["on-demand"]})
    }

    fn controller(&self) -> (Vec<String>, Vec<(String, String)>) {
        (
            vec![
                "--gcp-endpoint".into(),
                self.fake.endpoint.clone(),
                "--gcp-anonymous".into(),
            ],
            Vec::new(),
        )
    }

    fn provider(&self) -> Arc<dyn CloudProvider> {
        self.provider.clone()
    }

    fn machines(&self) -> Option<Arc<dyn Machines>> {
        Some(self.machines.clone())
    }

    fn launches(&self) -> Option<usize> {
        Some(self.calls("POST projects/zones/instances"))
    }

    fn terminations(&self) -> Option<usize> {
        Some(self.calls("DELETE projects/zones/instances"))
    }

    async fn created(&self) -> Vec<(String, String)> {
        created(&self.fake)
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
