//! The soak on the simulated cloud (`--cloud sim`): its machines are Node
//! objects the controller's simulated cloud creates (named after the
//! idempotency key) and deletes. The built-in catalog's one-GPU
//! `g2-standard-4`, booting for a second.
//!
//! A watch from the start keeps every Node the cloud ever created (name,
//! uid, PoolNode label: a Node deleted and created again under the same
//! name is two creations) and counts the deleted ones: the cloud's launches
//! and terminations. (The simulated cloud writes with the controller's
//! plain client, whose requests carry no process identity in the audit
//! log, so the kill windows read them here.)

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube_runtime::watcher;
use muster::controller::cloud::sim::SimNodes;
use muster_provider_api::{CloudProvider, tags};
use serde_json::{Value, json};

use super::world::{NODE_CLASS, SoakCloud};
use crate::support::emulator::Machines;

/// The one machine type (1 L4 GPU) of the built-in catalog.
pub const MACHINE: &str = "g2-standard-4";

/// Creations seen: `(Node name, uid, PoolNode label)`.
type Ledger = Arc<Mutex<BTreeSet<(String, String, String)>>>;
/// Deletions seen.
type Deleted = Arc<std::sync::atomic::AtomicUsize>;

/// The simulated cloud as the test reads it, and the watch keeping its
/// ledger of created Nodes.
pub struct Sim {
    provider: Arc<SimNodes>,
    ledger: Ledger,
    deleted: Deleted,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// The NodeClass spec.
pub fn node_class() -> Value {
    json!({"sim": {"region": "us-central1", "bootSeconds": 1}})
}

impl Sim {
    /// Starts the ledger's watch; the provider reads Nodes with `client`.
    pub async fn start(client: kube::Client) -> Sim {
        let provider =
            Arc::new(SimNodes::new(client.clone(), NODE_CLASS, &node_class()).expect("sim cloud"));
        let ledger: Ledger = Arc::default();
        let deleted: Deleted = Arc::default();
        let (l, d) = (ledger.clone(), deleted.clone());
        let nodes: Api<Node> = Api::all(client);
        let cfg =
            watcher::Config::default().labels(&format!("muster.dev/sim-nodeclass={NODE_CLASS}"));
        let watch = tokio::spawn(async move {
            let mut stream = watcher(nodes, cfg).boxed();
            while let Some(ev) = stream.next().await {
                let n = match ev {
                    Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => n,
                    Ok(watcher::Event::Delete(_)) => {
                        d.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    _ => continue,
                };
                let pool_node = n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(tags::POOL_NODE))
                    .cloned()
                    .unwrap_or_default();
                l.lock().unwrap_or_else(|e| e.into_inner()).insert((
                    n.metadata.name.clone().unwrap_or_default(),
                    n.metadata.uid.clone().unwrap_or_default(),
                    pool_node,
                ));
            }
        });
        Sim {
            provider,
            ledger,
            deleted,
            watch,
        }
    }
}

#[async_trait::async_trait]
impl SoakCloud for Sim {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn node_class(&self) -> Value {
        node_class()
    }

    fn requirements(&self) -> Value {
        json!({"instanceTypes": [MACHINE], "capacityTypes": ["on-demand"]})
    }

    fn controller(&self) -> (Vec<String>, Vec<(String, String)>) {
        (vec!["--cloud".into(), "sim".into()], Vec::new())
    }

    fn provider(&self) -> Arc<dyn CloudProvider> {
        self.provider.clone()
    }

    fn machines(&self) -> Option<Arc<dyn Machines>> {
        None
    }

    fn launches(&self) -> usize {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn terminations(&self) -> usize {
        self.deleted.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn created(&self) -> Vec<(String, String)> {
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, _, pn)| (name.clone(), pn.clone()))
            .collect()
    }
}
