//! What the third-party kinds' end-to-end tests share (`tests/third_party_kinds.rs`,
//! `tests/trainjob_kind.rs`): the API server with the kinds' CRDs, the
//! controller with one kind enabled, the emulator, and checks of placement
//! and RBAC.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::controller::workloads::WorkloadKind;
use muster::controller::{self, PlanFn};
use serde_json::{Value, json};

use super::emulator::{Emulator, Machines};
use super::fake_cloud::FakeCloud;
use super::in_process::Running;
use super::objects::{cpu_node, start_world};
use super::waits::{node_of, running_pods, wait_for_poolnode_phase};
use super::{ApiServer, eventually};

pub const NS: &str = "team-a";

pub fn planner() -> PlanFn {
    controller::real_planner()
}

pub fn gpu_container(name: &str) -> Value {
    json!({"name": name, "image": "img", "resources": {
        "limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "4", "memory": "16Gi"}}})
}

pub fn cpu_container(name: &str) -> Value {
    json!({"name": name, "image": "img", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}})
}

/// API server with muster's CRDs and `crds` of the workload kinds, the
/// default NodeClass, pool of 8×A100 machines and queue, and a CPU node
/// (16 CPUs, no taint) that existed before muster.
pub async fn world(crds: &[&str]) -> (ApiServer, kube::Client) {
    let (server, client) = start_world(&[]).await;
    super::workload_crds::install(&client, crds).await;
    cpu_node("cpu-0").create(&client).await;
    (server, client)
}

/// The controller with only `kind` enabled, interruptions read often.
pub fn start(server: &ApiServer, cloud: &Arc<FakeCloud>, kind: WorkloadKind) -> Running {
    let mut config = super::in_process::config("c1");
    config.workload_kinds = BTreeSet::from([kind]);
    config.interruption_poll = Duration::from_millis(200);
    super::in_process::spawn(&server.client_as("controller"), cloud, planner(), config)
}

pub fn emulate(
    client: &kube::Client,
    cloud: &Arc<FakeCloud>,
    run_for: Option<Duration>,
) -> Emulator {
    Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as Arc<dyn Machines>],
        run_for,
    )
}

pub fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), NS, &ar)
}

pub async fn submit(api: &Api<DynamicObject>, body: Value) {
    let obj: DynamicObject = serde_json::from_value(body).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("submit");
}

/// Running pods matching `selector`, with their nodes.
pub async fn running(client: &kube::Client, selector: &str) -> Vec<(String, String)> {
    running_pods(client, NS, selector)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p.name_any(), node_of(&p).unwrap_or_default().to_string()))
        .collect()
}

pub async fn wait_running(
    client: &kube::Client,
    selector: &str,
    n: usize,
    secs: u64,
) -> Vec<(String, String)> {
    eventually(secs, &format!("{n} running pods of {selector}"), || {
        let client = client.clone();
        async move {
            let pods = running(&client, selector).await;
            (pods.len() == n).then_some(pods)
        }
    })
    .await
}

/// The name and provider id of a Ready PoolNode.
pub async fn a_ready_machine(client: &kube::Client) -> (String, String) {
    let pn = wait_for_poolnode_phase(client, "Ready", 20).await;
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("a Ready PoolNode's providerID");
    (pn.name_any(), pid.to_string())
}

/// Every request the controller made is allowed by `deploy/rbac.yaml` with
/// the rules the chart adds for `kind` (`WorkloadKind::access`, which
/// `tests/chart.rs` holds the chart to).
pub fn assert_rbac_allows_controller(server: &ApiServer, kind: WorkloadKind) {
    let mut rules = super::rbac::rules();
    for a in kind.access() {
        rules.push(super::rbac::Rule {
            api_groups: vec![a.group.to_string()],
            resources: a.resources.iter().map(|r| r.to_string()).collect(),
            verbs: a.verbs.iter().map(|v| v.to_string()).collect(),
            resource_names: vec![],
            namespace: None,
            from: format!("workload kind {}", kind.as_str()),
        });
    }
    server.assert_rbac_allows_controller_by(&rules);
}

/// The GPU pods (named with `gpu`) run on muster's machines, the CPU ones
/// on the CPU node.
pub fn assert_placement(pods: &[(String, String)], gpu: &str) {
    for (pod, node) in pods {
        assert_eq!(node == "cpu-0", !pod.contains(gpu), "pod {pod} on {node}");
    }
}

/// Terminates the machine of one of the gang's GPU pods outside muster;
/// the PoolNode's name, to wait for it gone (with [`wait_for_poolnode_gone`]) once
/// the stop was seen: the stop and the re-admission can both come before
/// the PoolNode's finalizer is removed.
pub async fn terminate_a_machine(client: &kube::Client, cloud: &Arc<FakeCloud>) -> String {
    let (pn, pid) = a_ready_machine(client).await;
    cloud.interrupt(&pid, muster_provider_api::InterruptionKind::Terminated);
    pn
}
