//! GKE's nodes as the emulated kubelets boot them: the Nodes the Compute
//! and GKE fake says GKE would register (`GET /fake/gke/nodes`, the
//! instances of the cluster's node pools' groups that GKE's CSR approver
//! approves, with the labels and taints its bootstrap and node annotator
//! give them); a node no longer listed is a machine gone, whose Node is
//! removed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use muster_planner::{Taint, TaintEffect};
use serde_json::Value;

use super::emulator::{Machine, Machines};

/// One Node of `/fake/gke/nodes` as a machine.
pub fn machine(node: &Value) -> Machine {
    let labels: BTreeMap<String, String> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    let taints = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| Taint {
            key: t["key"].as_str().unwrap_or_default().into(),
            value: t["value"].as_str().unwrap_or_default().into(),
            effect: match t["effect"].as_str() {
                Some("NoExecute") => TaintEffect::NoExecute,
                Some("PreferNoSchedule") => TaintEffect::PreferNoSchedule,
                _ => TaintEffect::NoSchedule,
            },
        })
        .collect();
    let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
    Machine {
        name: node["metadata"]["name"].as_str().unwrap_or_default().into(),
        provider_id: node["spec"]["providerID"]
            .as_str()
            .unwrap_or_default()
            .into(),
        instance_type: label("node.kubernetes.io/instance-type"),
        zone: label("topology.kubernetes.io/zone"),
        gpus: node["status"]["capacity"]["nvidia.com/gpu"]
            .as_str()
            .and_then(|g| g.parse().ok())
            .unwrap_or(0),
        arch: labels
            .get(muster_planner::labels::ARCH)
            .cloned()
            .unwrap_or_else(|| muster_planner::labels::AMD64.to_string()),
        labels,
        taints,
        terminated: false,
        never_ready: false,
    }
}

/// The machines of a fake's GKE cluster; `list` answers `/fake/gke/nodes`.
pub struct GkeNodes {
    list: Arc<dyn Fn() -> String + Send + Sync>,
    seen: Mutex<BTreeMap<String, Machine>>,
}

impl GkeNodes {
    /// Machines read through `list` (a blocking call to the fake).
    pub fn new(list: impl Fn() -> String + Send + Sync + 'static) -> GkeNodes {
        GkeNodes {
            list: Arc::new(list),
            seen: Mutex::default(),
        }
    }
}

#[async_trait::async_trait]
impl Machines for GkeNodes {
    async fn machines(&self) -> Vec<Machine> {
        let list = self.list.clone();
        let listed = tokio::task::spawn_blocking(move || list())
            .await
            .unwrap_or_default();
        let v: Value = serde_json::from_str(&listed).unwrap_or_default();
        let now: Vec<Machine> = v["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(machine)
            .collect();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        for m in seen.values_mut() {
            m.terminated = !now.iter().any(|n| n.name == m.name);
        }
        for m in now {
            seen.insert(m.name.clone(), m);
        }
        seen.values().cloned().collect()
    }
}
