//! What the clouds' end-to-end tests share: a world with one NodeClass, a
//! pool of 8-GPU machines and a queue; the controller in-process with the
//! built-in providers; a two-pod Job; and the checks that it ran on two
//! launched nodes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use muster::controller::base::metrics::Metrics;
use muster::controller::cloud::clouds::{CloudOptions, Clouds};
use muster::controller::{self, ControllerConfig, Deps};
use serde_json::json;

use super::{ApiServer, ar, create, eventually};

/// The cluster name instances are tagged with.
pub const CLUSTER: &str = "test-cluster";

/// CRDs, NodeClass `name` with `spec`, pool `gpu` of `instance_type`
/// on-demand machines, queue `team-a` open to every namespace.
pub async fn world(
    client: &kube::Client,
    name: &str,
    spec: serde_json::Value,
    instance_type: &str,
) {
    super::install_crds(client).await;
    create(
        client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": name}, "spec": spec}),
    )
    .await;
    create(client, "GPUPool", "gpupools", None, json!({
        "metadata": {"name": "gpu"},
        "spec": {"nodeClassRef": {"name": name},
                 "requirements": {"instanceTypes": [instance_type], "capacityTypes": ["on-demand"]}}
    }))
    .await;
    create(
        client,
        "GPUQueue",
        "gpuqueues",
        None,
        json!({
            "metadata": {"name": "team-a"},
            "spec": {"pools": ["gpu"], "namespaceSelector": {}}
        }),
    )
    .await;
}

/// Runs the controller with the built-in providers until the handle is aborted.
pub fn start(server: &ApiServer, options: CloudOptions) -> tokio::task::JoinHandle<()> {
    start_with(server, options, |_| {})
}

/// [`start`], with the test's changes to the configuration.
pub fn start_with(
    server: &ApiServer,
    options: CloudOptions,
    tweak: impl FnOnce(&mut ControllerConfig),
) -> tokio::task::JoinHandle<()> {
    let mut config = ControllerConfig::new(CLUSTER, "c1");
    config.debounce = Duration::from_millis(50);
    config.tick = Duration::from_millis(500);
    tweak(&mut config);
    let deps = Deps {
        providers: Arc::new(Clouds::new(options)),
        planner: controller::real_planner(),
        metrics: Arc::new(Metrics::new()),
    };
    let client = server.client_as("controller");
    tokio::spawn(async move {
        let _ = controller::run(client, config, deps, futures::future::pending()).await;
    })
}

/// Submits a two-pod, 8-GPU-per-pod Job and waits until both pods run;
/// returns the PoolNodes (both Ready, one pod on each).
pub async fn run_gang(client: &kube::Client) -> Vec<DynamicObject> {
    run_gang_with(client, json!({})).await
}

/// A two-pod Job `name` in `team-a`, queued there and created suspended,
/// whose pods each ask for `gpus` GPUs, `cpu` and `memory`, tolerate the
/// GPU taint and select `kubernetes.io/arch: amd64` (as a Job of an x86-64
/// image does: its machines' architecture must be known before they
/// exist); `annotations` on the Job.
pub fn gang_job(
    name: &str,
    gpus: &str,
    cpu: &str,
    memory: &str,
    annotations: serde_json::Value,
) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a", "labels": {"muster.dev/queue": "team-a"},
                     "annotations": annotations},
        "spec": {"parallelism": 2, "completions": 2, "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "trainer",
                "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"cpu": cpu, "memory": memory}}
            }], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"kubernetes.io/arch": "amd64"}}}}
    }))
    .expect("job")
}

/// Submits `job` to `team-a`.
pub async fn submit(client: &kube::Client, job: &Job) {
    Api::<Job>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), job)
        .await
        .expect("submit");
}

/// Waits up to `secs` until both pods of Job `name` in `team-a` run.
pub async fn both_running(client: &kube::Client, name: &str, secs: u64) -> Vec<Pod> {
    let selector = format!("job-name={name}");
    eventually(secs, "both pods running", || {
        let client = client.clone();
        let selector = selector.clone();
        async move {
            let pods: Vec<Pod> = Api::<Pod>::namespaced(client, "team-a")
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .collect();
            (pods.len() == 2).then_some(pods)
        }
    })
    .await
}

/// [`run_gang`] with these annotations on the Job.
pub async fn run_gang_with(
    client: &kube::Client,
    annotations: serde_json::Value,
) -> Vec<DynamicObject> {
    submit(client, &gang_job("big", "8", "8", "64Gi", annotations)).await;
    let pods = both_running(client, "big", 90).await;
    let pns = Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .list(&ListParams::default())
        .await
        .expect("poolnodes")
        .items;
    assert_eq!(pns.len(), 2);
    for pn in &pns {
        assert_eq!(pn.data["status"]["phase"], "Ready", "{pn:?}");
    }
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    // Nodes are named as the cloud names them, not after their PoolNode:
    // the PoolNode's status records which Node registered for it
    let names: BTreeSet<String> = pns
        .iter()
        .filter_map(|p| p.data["status"]["nodeName"].as_str().map(str::to_string))
        .collect();
    assert_eq!(nodes, names, "one pod on each launched node");
    pns
}

/// The machine the emulated kubelet boots for a cloud instance: the pool
/// labels and GPU taint its bootstrap registers, and `gpus` GPUs; the
/// emulator names its Node as the cloud names the host
/// (`emulator::node_name`), so only `spec.providerID` links it to its PoolNode.
pub fn machine(
    i: muster_provider_api::Instance,
    pool: String,
    gpus: u32,
) -> super::emulator::Machine {
    use muster_provider_api::tags;
    let name = i.pool_node.clone().unwrap_or_default();
    super::emulator::Machine {
        labels: [
            (tags::POOL.to_string(), pool),
            (tags::POOL_NODE.to_string(), name.clone()),
        ]
        .into(),
        name,
        provider_id: i.provider_id,
        // the types these tests launch (p4d, g5, g2) are x86-64, and their
        // providers boot x86-64 images on them
        arch: muster_planner::labels::AMD64.to_string(),
        instance_type: i.offering.instance_type.clone(),
        zone: i.offering.zone,
        gpus,
        taints: muster_planner::model::pool::default_taints(),
        terminated: false,
        never_ready: false,
    }
}

/// Waits for `Ready=False` on a NodeClass and returns its message.
pub async fn not_ready_message(client: &kube::Client, name: &str) -> String {
    let cond = super::nodeclass_not_ready(client, name).await;
    cond["message"].as_str().unwrap_or_default().to_string()
}

/// The instances a cloud runs for `cluster`, as machines that boot a
/// kubelet: each with its pool from the instance's `tags::POOL` tag (as the
/// AWS provider writes it) and `gpus(instance type)` GPUs; an instance
/// shutting down or terminated is a machine gone, whose Node is removed.
pub struct TaggedMachines {
    pub provider: Arc<dyn muster_provider_api::CloudProvider>,
    pub cluster: String,
    pub gpus: fn(&str) -> u32,
}

#[async_trait::async_trait]
impl super::emulator::Machines for TaggedMachines {
    async fn machines(&self) -> Vec<super::emulator::Machine> {
        use muster_provider_api::{InstanceState, tags};
        self.provider
            .list(&self.cluster)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|i| {
                let gone = matches!(
                    i.state,
                    InstanceState::ShuttingDown | InstanceState::Terminated
                );
                let pool = i.tags.get(tags::POOL).cloned().unwrap_or_default();
                let gpus = (self.gpus)(&i.offering.instance_type);
                let mut m = machine(i, pool, gpus);
                m.terminated = gone;
                m
            })
            .collect()
    }
}
