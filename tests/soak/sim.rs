//! The soak on the simulated cloud (`--cloud sim`): its machines are Node
//! objects the controller's simulated cloud creates (named after the
//! idempotency key) and deletes. The built-in catalog's one-GPU
//! `g2-standard-4`, booting for a second.
//!
//! A ledger (`super::ledger`) keeps every Node the cloud ever created and
//! counts the deleted ones: the cloud's launches and terminations. (The simulated cloud writes with the controller's
//! plain client, whose requests carry no process identity in the audit
//! log, so the kill windows read them here.)

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube_runtime::watcher;
use muster::controller::cloud::sim::SimNodes;
use muster_provider_api::CloudProvider;
use serde_json::{Value, json};

use super::ledger::Ledger;
use super::world::{NODE_CLASS, SoakCloud};
use crate::support::emulator::Machines;

/// The one machine type (1 L4 GPU) of the built-in catalog.
pub const MACHINE: &str = "g2-standard-4";

/// The simulated cloud as the test reads it, and the ledger of the Nodes
/// it created.
pub struct Sim {
    provider: Arc<SimNodes>,
    ledger: Ledger,
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
        let nodes: Api<Node> = Api::all(client);
        let cfg =
            watcher::Config::default().labels(&format!("muster.dev/sim-nodeclass={NODE_CLASS}"));
        Sim {
            provider,
            ledger: Ledger::watch(nodes, cfg),
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
        self.ledger.launches()
    }

    fn terminations(&self) -> usize {
        self.ledger.terminations()
    }

    async fn created(&self) -> Vec<(String, String)> {
        self.ledger.created()
    }
}
