//! Builders of the objects the tests start from and submit, in the style of
//! Kueue's test wrappers (`MakeWorkload(..).Queue(..).Obj()`): each starts
//! from the object most tests want, a test names only what differs, e.g.
//! `job("train").queue("team-a").gpus(8).pods(4)`; `build()` gives the
//! object, `create(&client)` writes it to the API test server.
//!
//! The defaults: a GCP NodeClass, a pool `a100` of `fake-8gpu` on-demand
//! machines, a queue `team-a` over that pool selecting namespace `team-a`,
//! suspended Jobs (as the admission webhook leaves them) whose pods tolerate
//! the GPU taint (as GKE's and EKS's ExtendedResourceToleration admission
//! makes them), Ready Nodes in zone `us-central1-a`, and pods and
//! PodDisruptionBudgets of no workload's in namespace `team-a`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{ApiServer, create};

/// The namespace, queue and Job namespace most tests use.
pub const TEAM_A: &str = "team-a";

/// The toleration of the GPU taint GPU pods carry (GKE's and EKS's
/// ExtendedResourceToleration admission adds it; the real planner requires
/// it of the template).
pub fn gpu_toleration() -> Value {
    json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
}

/// A server with muster's CRDs and the default NodeClass, pool and queue
/// (see [`default_objects`]); `extra` are the server's options.
pub async fn start_world(extra: &[&str]) -> (ApiServer, kube::Client) {
    let server = ApiServer::start_with(extra);
    // the test's own requests are exempt from the chaos mode; the controller's are not
    let client = server.client();
    super::install_crds(&client).await;
    default_objects(&client).await;
    (server, client)
}

/// NodeClass `gcp-default`, pool `a100` of 8-GPU machines and queue
/// `team-a`, each as its builder makes it by default.
pub async fn default_objects(client: &kube::Client) {
    nodeclass("gcp-default").create(client).await;
    pool("a100").create(client).await;
    queue(TEAM_A).create(client).await;
}

// ---------------------------------------------------------------- NodeClass

/// A GCP NodeClass (project `test-project`, region `us-central1`).
pub fn nodeclass(name: &str) -> NodeClassBuilder {
    NodeClassBuilder {
        name: name.to_string(),
    }
}

/// See [`nodeclass`].
pub struct NodeClassBuilder {
    name: String,
}

impl NodeClassBuilder {
    /// The manifest.
    pub fn build(&self) -> Value {
        json!({
            "metadata": {"name": self.name},
            "spec": {"gcp": {"project": "test-project", "region": "us-central1",
                             "image": "projects/x/global/images/family/y"}}
        })
    }

    /// Creates it.
    pub async fn create(&self, client: &kube::Client) {
        create(client, "NodeClass", "nodeclasses", None, self.build()).await;
    }
}

// ---------------------------------------------------------------- GPUPool

/// A GPUPool of NodeClass `gcp-default` that may buy `fake-8gpu` on-demand.
pub fn pool(name: &str) -> PoolBuilder {
    PoolBuilder {
        name: name.to_string(),
        node_class: "gcp-default".to_string(),
        requirements: Some(json!({"instanceTypes": ["fake-8gpu"], "capacityTypes": ["on-demand"]})),
        extra: BTreeMap::new(),
    }
}

/// See [`pool`].
pub struct PoolBuilder {
    name: String,
    node_class: String,
    requirements: Option<Value>,
    extra: BTreeMap<&'static str, Value>,
}

impl PoolBuilder {
    /// The NodeClass it launches with.
    pub fn node_class(mut self, name: &str) -> Self {
        self.node_class = name.to_string();
        self
    }

    /// No `requirements` at all.
    pub fn no_requirements(mut self) -> Self {
        self.requirements = None;
        self
    }

    /// `spec.limits`.
    pub fn limits(self, limits: Value) -> Self {
        self.spec("limits", limits)
    }

    /// `spec.taints`.
    pub fn taints(self, taints: Value) -> Self {
        self.spec("taints", taints)
    }

    fn spec(mut self, field: &'static str, value: Value) -> Self {
        self.extra.insert(field, value);
        self
    }

    /// The manifest.
    pub fn build(&self) -> Value {
        let mut spec = json!({"nodeClassRef": {"name": self.node_class}});
        if let Some(r) = &self.requirements {
            spec["requirements"] = r.clone();
        }
        for (k, v) in &self.extra {
            spec[*k] = v.clone();
        }
        json!({"metadata": {"name": self.name}, "spec": spec})
    }

    /// Creates it.
    pub async fn create(&self, client: &kube::Client) {
        create(client, "GPUPool", "gpupools", None, self.build()).await;
    }
}

// ---------------------------------------------------------------- GPUQueue

/// A GPUQueue over pool `a100` selecting namespace `team-a`.
pub fn queue(name: &str) -> QueueBuilder {
    QueueBuilder {
        name: name.to_string(),
        spec: json!({"pools": ["a100"],
                     "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": TEAM_A}}}),
    }
}

/// See [`queue`].
pub struct QueueBuilder {
    name: String,
    spec: Value,
}

impl QueueBuilder {
    /// Selects every namespace (an empty selector).
    pub fn any_namespace(mut self) -> Self {
        self.spec["namespaceSelector"] = json!({});
        self
    }

    /// A nominal quota of `gpus` GPUs.
    pub fn nominal_gpus(mut self, gpus: &str) -> Self {
        self.spec["resources"] = json!([{"name": "nvidia.com/gpu", "nominal": gpus}]);
        self
    }

    /// `spec.idlePolicy`.
    pub fn idle_policy(mut self, policy: Value) -> Self {
        self.spec["idlePolicy"] = policy;
        self
    }

    /// The manifest.
    pub fn build(&self) -> Value {
        json!({"metadata": {"name": self.name}, "spec": self.spec})
    }

    /// Creates it.
    pub async fn create(&self, client: &kube::Client) {
        create(client, "GPUQueue", "gpuqueues", None, self.build()).await;
    }
}

// ---------------------------------------------------------------- Job

/// A suspended Job in namespace `team-a` of one pod (container `train`,
/// image `trainer`) asking 1 GPU, 4 CPUs and 16 GiB, tolerating the GPU
/// taint; in no queue until [`JobBuilder::queue`].
pub fn job(name: &str) -> JobBuilder {
    JobBuilder {
        name: name.to_string(),
        namespace: TEAM_A.to_string(),
        queue: None,
        annotations: BTreeMap::new(),
        pods: 1,
        gpus: 1,
        cpu: "4".to_string(),
        memory: "16Gi".to_string(),
        suspend: true,
        tolerations: vec![gpu_toleration()],
        affinity: None,
    }
}

/// See [`job`].
pub struct JobBuilder {
    name: String,
    namespace: String,
    queue: Option<String>,
    annotations: BTreeMap<String, String>,
    pods: i32,
    gpus: u32,
    cpu: String,
    memory: String,
    suspend: bool,
    tolerations: Vec<Value>,
    affinity: Option<Value>,
}

impl JobBuilder {
    /// Its namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespace = ns.to_string();
        self
    }

    /// Queued in `queue` (label `muster.dev/queue`).
    pub fn queue(mut self, queue: &str) -> Self {
        self.queue = Some(queue.to_string());
        self
    }

    /// An annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// `parallelism` and `completions`.
    pub fn pods(mut self, pods: i32) -> Self {
        self.pods = pods;
        self
    }

    /// GPUs each pod asks (its limit).
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.gpus = gpus;
        self
    }

    /// CPU and memory each pod requests.
    pub fn requests(mut self, cpu: &str, memory: &str) -> Self {
        self.cpu = cpu.to_string();
        self.memory = memory.to_string();
        self
    }

    /// Submitted unsuspended (as without muster's admission webhook).
    pub fn unsuspended(mut self) -> Self {
        self.suspend = false;
        self
    }

    /// One more toleration next to the GPU taint's.
    pub fn toleration(mut self, toleration: Value) -> Self {
        self.tolerations.push(toleration);
        self
    }

    /// The pods' required node affinity: these node-selector terms.
    pub fn required_node_affinity(mut self, terms: Value) -> Self {
        self.affinity = Some(json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }}));
        self
    }

    /// The Job.
    pub fn build(&self) -> Job {
        let mut metadata = json!({"name": self.name, "namespace": self.namespace});
        if let Some(q) = &self.queue {
            metadata["labels"] = json!({"muster.dev/queue": q});
        }
        if !self.annotations.is_empty() {
            metadata["annotations"] = json!(self.annotations);
        }
        let mut job = json!({
            "metadata": metadata,
            "spec": {
                "parallelism": self.pods, "completions": self.pods, "suspend": self.suspend,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "train", "image": "trainer",
                    "resources": {"limits": {"nvidia.com/gpu": self.gpus.to_string()},
                                  "requests": {"cpu": self.cpu, "memory": self.memory}}
                }], "tolerations": self.tolerations}}
            }
        });
        if let Some(a) = &self.affinity {
            job["spec"]["template"]["spec"]["affinity"] = a.clone();
        }
        serde_json::from_value(job).expect("job")
    }

    /// Submits it.
    pub async fn create(&self, client: &kube::Client) {
        Api::<Job>::namespaced(client.clone(), &self.namespace)
            .create(&PostParams::default(), &self.build())
            .await
            .expect("submit job");
    }
}

// ---------------------------------------------------------------- JobSet

/// A suspended JobSet (`jobset.x-k8s.io/v1alpha2`) in namespace `team-a` of
/// a CPU `driver` (one Job of one pod asking 2 CPUs and 4 GiB) and 4
/// `workers` (Jobs of one pod asking 8 GPUs, 8 CPUs and 64 GiB, tolerating
/// the GPU taint); in no queue until [`JobSetBuilder::queue`].
pub fn jobset(name: &str) -> JobSetBuilder {
    JobSetBuilder {
        name: name.to_string(),
        queue: None,
        workers: 4,
        gpu_driver: false,
    }
}

/// See [`jobset`].
pub struct JobSetBuilder {
    name: String,
    queue: Option<String>,
    workers: i64,
    gpu_driver: bool,
}

impl JobSetBuilder {
    /// Queued in `queue` (label `muster.dev/queue`).
    pub fn queue(mut self, queue: &str) -> Self {
        self.queue = Some(queue.to_string());
        self
    }

    /// How many worker Jobs.
    pub fn workers(mut self, workers: i64) -> Self {
        self.workers = workers;
        self
    }

    /// The driver asks 1 GPU (and 2 CPUs) and tolerates the GPU taint, as
    /// GPU pods do.
    pub fn gpu_driver(mut self) -> Self {
        self.gpu_driver = true;
        self
    }

    /// The manifest.
    pub fn build(&self) -> Value {
        let rjob = |name: &str, replicas: i64, resources: Value, tolerations: Value| {
            json!({"name": name, "replicas": replicas, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "tolerations": tolerations, "containers": [
                    {"name": name, "image": "trainer", "resources": resources}]}}}}})
        };
        let driver = if self.gpu_driver {
            rjob(
                "driver",
                1,
                json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}),
                json!([gpu_toleration()]),
            )
        } else {
            rjob(
                "driver",
                1,
                json!({"requests": {"cpu": "2", "memory": "4Gi"}}),
                json!([]),
            )
        };
        let workers = rjob(
            "workers",
            self.workers,
            json!({"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "8", "memory": "64Gi"}}),
            json!([gpu_toleration()]),
        );
        let mut metadata = json!({"name": self.name, "namespace": TEAM_A});
        if let Some(q) = &self.queue {
            metadata["labels"] = json!({"muster.dev/queue": q});
        }
        json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": metadata,
            "spec": {"suspend": true, "replicatedJobs": [driver, workers]}
        })
    }

    /// Submits it.
    pub async fn create(&self, client: &kube::Client) {
        super::create_object(client, "jobsets", Some(TEAM_A), self.build()).await;
    }
}

// ---------------------------------------------------------------- Node

/// A Node muster did not launch with 8 GPUs, 32 CPUs and 128 GiB.
pub fn gpu_node(name: &str) -> NodeBuilder {
    NodeBuilder::new(
        name,
        &[("cpu", "32"), ("memory", "128Gi"), ("nvidia.com/gpu", "8")],
    )
}

/// A Node of the cluster's own: 16 CPUs, 64 GiB, 110 pods, no GPU.
pub fn cpu_node(name: &str) -> NodeBuilder {
    NodeBuilder::new(name, &[("cpu", "16"), ("memory", "64Gi"), ("pods", "110")])
}

/// See [`gpu_node`] and [`cpu_node`]; created Ready with its allocatable.
pub struct NodeBuilder {
    name: String,
    labels: BTreeMap<String, String>,
    allocatable: BTreeMap<String, String>,
}

impl NodeBuilder {
    fn new(name: &str, allocatable: &[(&str, &str)]) -> Self {
        NodeBuilder {
            name: name.to_string(),
            labels: BTreeMap::from([(
                "topology.kubernetes.io/zone".to_string(),
                "us-central1-a".to_string(),
            )]),
            allocatable: allocatable
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Its allocatable GPUs.
    pub fn gpus(self, gpus: u32) -> Self {
        self.allocatable("nvidia.com/gpu", &gpus.to_string())
    }

    /// An allocatable resource.
    pub fn allocatable(mut self, resource: &str, quantity: &str) -> Self {
        self.allocatable
            .insert(resource.to_string(), quantity.to_string());
        self
    }

    /// A label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// The Node as created (its status is written after).
    pub fn build(&self) -> Node {
        serde_json::from_value(json!({"metadata": {"name": self.name, "labels": self.labels}}))
            .expect("node")
    }

    /// Creates it and writes its status: Ready, with its allocatable.
    pub async fn create(&self, client: &kube::Client) {
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .create(&PostParams::default(), &self.build())
            .await
            .expect("node");
        nodes
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": self.allocatable,
                }})),
            )
            .await
            .expect("node status");
    }
}

// ---------------------------------------------------------------- Pod

/// A pod of no workload's in namespace `team-a` (container `c`, image `x`),
/// bound to no node until [`PodBuilder::on_node`].
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        name: name.to_string(),
        node: None,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
    }
}

/// See [`pod`].
pub struct PodBuilder {
    name: String,
    node: Option<String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

impl PodBuilder {
    /// Bound to `node` (`spec.nodeName`), as if scheduled there.
    pub fn on_node(mut self, node: &str) -> Self {
        self.node = Some(node.to_string());
        self
    }

    /// A label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// An annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// The pod as created (its status is written after).
    pub fn build(&self) -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "x"}]});
        if let Some(node) = &self.node {
            spec["nodeName"] = json!(node);
        }
        serde_json::from_value(json!({
            "metadata": {"name": self.name, "namespace": TEAM_A,
                         "labels": self.labels, "annotations": self.annotations},
            "spec": spec,
        }))
        .expect("pod")
    }

    /// Creates it and writes its status: Running and Ready.
    pub async fn create_running(&self, client: &kube::Client) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), TEAM_A);
        pods.create(&PostParams::default(), &self.build())
            .await
            .expect("create pod");
        pods.patch_status(
            &self.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .expect("pod status");
    }
}

// ---------------------------------------------------------------- PodDisruptionBudget

/// A PodDisruptionBudget in namespace `team-a`; it selects nothing until
/// [`PdbBuilder::selecting`] and sets no `minAvailable` until
/// [`PdbBuilder::min_available`].
pub fn pdb(name: &str) -> PdbBuilder {
    PdbBuilder {
        name: name.to_string(),
        min_available: None,
        match_labels: BTreeMap::new(),
    }
}

/// See [`pdb`].
pub struct PdbBuilder {
    name: String,
    min_available: Option<i32>,
    match_labels: BTreeMap<String, String>,
}

impl PdbBuilder {
    /// `spec.minAvailable`: pods that must stay available.
    pub fn min_available(mut self, pods: i32) -> Self {
        self.min_available = Some(pods);
        self
    }

    /// Selects pods labelled `key=value` (`spec.selector.matchLabels`).
    pub fn selecting(mut self, key: &str, value: &str) -> Self {
        self.match_labels.insert(key.to_string(), value.to_string());
        self
    }

    /// The budget.
    pub fn build(&self) -> PodDisruptionBudget {
        let mut spec = json!({"selector": {"matchLabels": self.match_labels}});
        if let Some(n) = self.min_available {
            spec["minAvailable"] = json!(n);
        }
        serde_json::from_value(json!({
            "metadata": {"name": self.name, "namespace": TEAM_A},
            "spec": spec,
        }))
        .expect("pdb")
    }

    /// Creates it.
    pub async fn create(&self, client: &kube::Client) {
        Api::<PodDisruptionBudget>::namespaced(client.clone(), TEAM_A)
            .create(&PostParams::default(), &self.build())
            .await
            .expect("create pdb");
    }
}
