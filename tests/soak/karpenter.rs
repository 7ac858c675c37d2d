//! The soak in Karpenter's delegate mode (`--cloud karpenter`): the API
//! test server's Karpenter stand-in launches, registers and terminates
//! the machines muster asks for as NodeClaims (one-GPU `g5.xlarge`), moto
//! serves muster's AWS catalog, and Karpenter's kubelets register the
//! Nodes (the emulated kubelet boots none).
//!
//! A ledger (`super::ledger`) keeps every NodeClaim ever created and counts
//! the deleted ones: the launches and terminations the kill windows and the
//! double-launch check read.
//! Interruptions are Karpenter's: an instance's interruption message
//! (`/karpenter-test/interruption`) makes Karpenter delete its NodeClaim.

use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube_runtime::watcher;
use muster::controller::cloud::karpenter::KarpenterClaims;
use muster_provider_api::CloudProvider;
use muster_provider_aws::moto::Moto;
use serde_json::{Value, json};

use super::ledger::Ledger;
use super::world::{NODE_CLASS, SoakCloud};
use crate::support::emulator::Machines;
use crate::support::karpenter::{ec2nodeclass, hook, nodeclaims, start_standin};

/// The one instance type (1 A10G GPU).
pub const MACHINE: &str = "g5.xlarge";
/// The EC2NodeClass the delegated NodeClass names.
const EC2_NODE_CLASS: &str = "soak-gpu";

/// The delegated cloud as the test reads it, moto behind its catalog, and
/// the ledger of the NodeClaims created.
pub struct Karpenter {
    moto: Moto,
    client: kube::Client,
    provider: Arc<KarpenterClaims>,
    ledger: Ledger,
}

fn spec() -> Value {
    json!({"karpenter": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                         "name": EC2_NODE_CLASS, "region": "us-east-1"}})
}

impl Karpenter {
    /// Starts moto, the Karpenter stand-in (its CRDs and the EC2NodeClass)
    /// and the ledger's watch.
    pub async fn start(client: kube::Client) -> Karpenter {
        let moto = Moto::start();
        start_standin(&client, ec2nodeclass(EC2_NODE_CLASS)).await;
        hook(
            &client,
            "PUT",
            "settings",
            json!({"minDrainSeconds": 0, "gcPeriodSeconds": 1, "disruptionPeriodSeconds": 0.5}),
        )
        .await;
        let provider = Arc::new(
            KarpenterClaims::new(client.clone(), NODE_CLASS, &spec(), moto.options())
                .await
                .expect("delegated cloud"),
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &nodeclaims());
        Karpenter {
            moto,
            client,
            provider,
            ledger: Ledger::watch(api, watcher::Config::default()),
        }
    }
}

#[async_trait::async_trait]
impl SoakCloud for Karpenter {
    fn name(&self) -> &'static str {
        "karpenter"
    }

    fn node_class(&self) -> Value {
        spec()
    }

    fn requirements(&self) -> Value {
        json!({"instanceTypes": [MACHINE], "capacityTypes": ["on-demand"]})
    }

    fn controller(&self) -> (Vec<String>, Vec<(String, String)>) {
        super::aws::on_moto("karpenter", &self.moto)
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

    /// An interruption message for the `pick`-th running instance: Karpenter
    /// deletes its NodeClaim (and drains and terminates it).
    async fn interrupt(&self, pick: u64) -> Option<String> {
        let instances = hook(&self.client, "GET", "instances", Value::Null).await;
        let running: Vec<String> = instances["items"]
            .as_array()?
            .iter()
            .filter(|i| i["state"] == "running" && i["node"].is_string())
            .filter_map(|i| i["id"].as_str().map(str::to_string))
            .collect();
        if running.is_empty() {
            return None;
        }
        let id = running[(pick % running.len() as u64) as usize].clone();
        hook(
            &self.client,
            "POST",
            "interruption",
            json!({"instanceID": id, "kind": "ScheduledChange"}),
        )
        .await;
        Some(id)
    }
}
