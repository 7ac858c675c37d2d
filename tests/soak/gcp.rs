//! The soak on GCP: the Compute test double
//! (`providers/gcp/tests/compute_fake.py`, a separate process), one-GPU
//! `g2-standard-4` machines (one L4), on demand or also Spot VMs, and the
//! emulated kubelet booting a Node for every instance the double runs for
//! the cluster (and removing it once the instance stopped).
//!
//! With Spot VMs, the soak reclaims some: the double stops a Spot VM as GCE
//! does when it preempts one (status `TERMINATED`, `lastStopTimestamp`
//! set; `POST /fake/preempt`), which the controller reads as a preemption
//! notice on its next `instances.list` and answers by draining the node and
//! evicting its gang whole.

use std::sync::Arc;

use muster_planner::CapacityType;
use muster_provider_api::{CloudProvider, InstanceState, label_key, tags};
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
                let stopped = i.state == InstanceState::Terminated;
                let pool = i
                    .tags
                    .get(&label_key(tags::POOL))
                    .cloned()
                    .unwrap_or_default();
                let mut m = machine(i, pool, gpus);
                m.terminated = stopped;
                m
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
    /// Whether the pool may launch Spot VMs (which the soak reclaims).
    pub spot: bool,
}

impl Gcp {
    /// Starts the double; the pool launches on-demand machines only.
    pub async fn start(client: kube::Client) -> Gcp {
        Gcp::start_with(client, false).await
    }

    /// Starts the double; the pool launches Spot VMs too.
    pub async fn start_with_spot(client: kube::Client) -> Gcp {
        Gcp::start_with(client, true).await
    }

    async fn start_with(_client: kube::Client, spot: bool) -> Gcp {
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
            spot,
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
        let capacity = if self.spot {
            json!(["spot", "on-demand"])
        } else {
            json!(["on-demand"])
        };
        json!({"instanceTypes": [MACHINE], "capacityTypes": capacity})
    }

    fn controller(&self) -> (Vec<String>, Vec<(String, String)>) {
        let mut args = vec![
            "--gcp-endpoint".into(),
            self.fake.endpoint.clone(),
            "--gcp-anonymous".into(),
        ];
        if self.spot {
            // a preempted offering is planned again after 10 s, not 3 min,
            // so Spot VMs keep being launched (and reclaimed)
            args.extend(["--unavailable-offering-ttl".into(), "10s".into()]);
        }
        (args, Vec::new())
    }

    async fn interrupt(&self, pick: u64) -> Option<String> {
        if !self.spot {
            return None;
        }
        let mut running: Vec<String> = self
            .provider
            .list(CLUSTER)
            .await
            .ok()?
            .into_iter()
            .filter(|i| {
                i.offering.capacity_type == CapacityType::Spot && i.state == InstanceState::Running
            })
            .filter_map(|i| i.provider_id.rsplit('/').next().map(str::to_string))
            .collect();
        running.sort();
        if running.is_empty() {
            return None;
        }
        let name = running.swap_remove((pick % running.len() as u64) as usize);
        self.fake.control("POST", &format!("preempt?name={name}"));
        Some(name)
    }

    fn provider(&self) -> Arc<dyn CloudProvider> {
        self.provider.clone()
    }

    fn machines(&self) -> Option<Arc<dyn Machines>> {
        Some(self.machines.clone())
    }

    fn launches(&self) -> usize {
        self.calls("POST projects/zones/instances")
    }

    fn terminations(&self) -> usize {
        self.calls("DELETE projects/zones/instances")
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
