//! The soak in Karpenter's delegate mode (`--cloud karpenter`): the API
//! test server's Karpenter stand-in launches, registers and terminates
//! the machines muster asks for as NodeClaims (one-GPU `g5.xlarge`), moto
//! serves muster's AWS catalog, and Karpenter's kubelets register the
//! Nodes (the emulated kubelet boots none).
//!
//! A watch from the start keeps every NodeClaim ever created (name, uid,
//! PoolNode label: a claim deleted and created again under the same name
//! is two creations) and counts the deleted ones: the launches and
//! terminations the kill windows and the double-launch check read.
//! Interruptions are Karpenter's: an instance's interruption message
//! (`/karpenter-test/interruption`) makes Karpenter delete its NodeClaim.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube_runtime::watcher;
use muster::controller::cloud::karpenter::KarpenterClaims;
use muster_provider_api::{CloudProvider, tags};
use muster_provider_aws::moto::Moto;
use serde_json::{Value, json};

use super::world::{NODE_CLASS, SoakCloud};
use crate::support::emulator::Machines;
use crate::support::karpenter::{ec2nodeclass, hook, nodeclaims, start_standin};

/// The one instance type (1 A10G GPU).
pub const MACHINE: &str = "g5.xlarge";
/// The EC2NodeClass the delegated NodeClass names.
const EC2_NODE_CLASS: &str = "soak-gpu";

/// Creations seen: `(NodeClaim name, uid, PoolNode label)`.
type Ledger = Arc<Mutex<BTreeSet<(String, String, String)>>>;

/// The delegated cloud as the test reads it, moto behind its catalog, and
/// the watch keeping the ledger.
pub struct Karpenter {
    moto: Moto,
    client: kube::Client,
    provider: Arc<KarpenterClaims>,
    ledger: Ledger,
    deleted: Arc<AtomicUsize>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for Karpenter {
    fn drop(&mut self) {
        self.watch.abort();
    }
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
        let ledger: Ledger = Arc::default();
        let deleted = Arc::new(AtomicUsize::new(0));
        let (l, d) = (ledger.clone(), deleted.clone());
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &nodeclaims());
        let watch = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = stream.next().await {
                let nc = match ev {
                    Ok(watcher::Event::Apply(nc) | watcher::Event::InitApply(nc)) => nc,
                    Ok(watcher::Event::Delete(_)) => {
                        d.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    _ => continue,
                };
                let pool_node = nc
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(tags::POOL_NODE))
                    .cloned()
                    .unwrap_or_default();
                l.lock().unwrap_or_else(|e| e.into_inner()).insert((
                    nc.metadata.name.clone().unwrap_or_default(),
                    nc.metadata.uid.clone().unwrap_or_default(),
                    pool_node,
                ));
            }
        });
        Karpenter {
            moto,
            client,
            provider,
            ledger,
            deleted,
            watch,
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
        (
            vec![
                "--cloud".into(),
                "karpenter".into(),
                "--aws-endpoint".into(),
                self.moto.endpoint.clone(),
            ],
            [
                ("AWS_ACCESS_KEY_ID", "testing"),
                ("AWS_SECRET_ACCESS_KEY", "testing"),
                ("AWS_REGION", "us-east-1"),
                ("AWS_EC2_METADATA_DISABLED", "true"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        )
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
        self.deleted.load(Ordering::Relaxed)
    }

    async fn created(&self) -> Vec<(String, String)> {
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, _, pn)| (name.clone(), pn.clone()))
            .collect()
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
