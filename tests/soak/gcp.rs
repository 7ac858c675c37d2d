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
/// cluster (and removes the Node of one stopped), but while faults are on
/// ([`FakeMachines::fail_from`]) each new instance draws its [`Fate`] from
/// a generator seeded by the caller: one in four never registers a Node,
/// one in four registers one that never turns Ready.
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
                let stopped = i.state == InstanceState::Terminated;
                let pool = i
                    .tags
                    .get(&label_key(tags::POOL))
                    .cloned()
                    .unwrap_or_default();
                let mut m = machine(i, pool, gpus);
                m.terminated = stopped;
                m.never_ready = fate == Fate::NeverReady;
                Some(m)
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
