//! A test-only stand-in for kubelet and kube-scheduler (like KWOK): registers
//! a Node for every launched fake instance (first NotReady with no GPUs, then
//! Ready with the offering's GPUs; a machine marked [`Machine::never_ready`]
//! stays `Ready=False`, reason `KubeletNotReady`, as a kubelet whose network
//! plugin never starts reports) under a name that is not the PoolNode's
//! (see [`node_name`]), binds pending pods without scheduling gates to nodes
//! through `pods/binding`, honouring node selectors, required node affinity,
//! taints and GPU capacity, and marks bound pods Running and Ready; when
//! started with a run time, pods succeed after it. The Job controller (pods
//! of running Jobs, counts, completion) and the kubelet's end of graceful
//! deletion run inside the API test server. Also records, at the moment it
//! first sees each Job started, how many muster-launched nodes were Ready.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use muster_planner::Taint;
use serde_json::json;

use super::fake_cloud::FakeCloud;

/// Annotation of a pod (from its template): how long, in milliseconds, its
/// container runs before it succeeds, instead of the emulator's `run_for`.
pub const RUN_FOR_ANNOTATION: &str = "emulator.muster.dev/run-for-ms";

/// A machine the emulated kubelet registers a Node for.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Node name.
    pub name: String,
    /// Kubernetes provider id.
    pub provider_id: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// GPUs the device plugin reports once Ready.
    pub gpus: u32,
    /// The kubelet's CPU architecture (`kubernetes.io/arch`, Go's name of
    /// the binary the machine's image runs: `amd64`, `arm64`).
    pub arch: String,
    /// Labels the kubelet registers with (`--node-labels`).
    pub labels: BTreeMap<String, String>,
    /// Taints the kubelet registers with.
    pub taints: Vec<Taint>,
    /// The machine is gone: its Node goes too.
    pub terminated: bool,
    /// The kubelet registers the Node but never turns it Ready: its runtime
    /// network never comes up (no CNI configuration), so the kubelet keeps
    /// reporting `Ready=False` with reason `KubeletNotReady` and the runtime's
    /// error as message (kubelet `pkg/kubelet/nodestatus/setters.go`,
    /// `ReadyCondition`; the message from `pkg/kubelet/kubelet.go`,
    /// `updateRuntimeUp`), and no device plugin registers its GPUs.
    pub never_ready: bool,
}

/// The `Ready` condition's reason while the kubelet is not ready
/// (`KubeletNotReady` in `pkg/kubelet/nodestatus/setters.go`).
pub const KUBELET_NOT_READY: &str = "KubeletNotReady";

/// What a kubelet on containerd reports while no CNI plugin is configured.
const NETWORK_NOT_READY: &str = "container runtime network not ready: NetworkReady=false \
     reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

/// Where the emulator learns which machines exist (a fake cloud, or a local
/// cloud API server such as moto).
#[async_trait::async_trait]
pub trait Machines: Send + Sync {
    /// Every machine, running or terminated.
    async fn machines(&self) -> Vec<Machine>;
}

#[async_trait::async_trait]
impl Machines for FakeCloud {
    async fn machines(&self) -> Vec<Machine> {
        self.instances()
            .into_iter()
            // planted instances (orphans) never boot a kubelet
            .filter(|fi| !fi.request.idempotency_key.starts_with("planted-"))
            .map(|fi| Machine {
                // the fake cloud's machines boot as EKS hosts: their Node
                // names never equal their PoolNodes'
                name: private_dns_name(&fi.instance.provider_id, &fi.instance.offering.zone),
                provider_id: fi.instance.provider_id.clone(),
                instance_type: fi.instance.offering.instance_type.clone(),
                zone: fi.instance.offering.zone.clone(),
                gpus: self
                    .offering(&fi.instance.offering.instance_type)
                    .map(|o| o.gpu_count)
                    .unwrap_or(0),
                arch: self
                    .offering(&fi.instance.offering.instance_type)
                    .and_then(|o| o.labels.get(muster_planner::labels::ARCH).cloned())
                    .unwrap_or_else(|| muster_planner::labels::AMD64.to_string()),
                labels: fi.request.labels.clone(),
                taints: fi.request.taints.clone(),
                terminated: fi.instance.state == muster_provider_api::InstanceState::Terminated,
                never_ready: false,
            })
            .collect()
    }
}

/// What the emulator saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Job name → Ready muster nodes when the Job was first seen unsuspended.
    pub unsuspended_with_ready_nodes: BTreeMap<String, usize>,
    /// Pod `namespace/name` → when the emulator started running it.
    pub started: BTreeMap<String, std::time::Instant>,
    /// Job names the emulator completed.
    pub completed: BTreeSet<String>,
}

/// The running emulator; stops on drop.
pub struct Emulator {
    task: tokio::task::JoinHandle<()>,
    /// Observations.
    pub seen: Arc<Mutex<Seen>>,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Emulator {
    /// Starts emulating for these clouds.
    pub fn start(client: kube::Client, clouds: Vec<Arc<FakeCloud>>) -> Emulator {
        Emulator::start_with(
            client,
            clouds.into_iter().map(|c| c as Arc<dyn Machines>).collect(),
        )
    }

    /// Starts emulating for any source of machines; pods run until deleted.
    pub fn start_with(client: kube::Client, clouds: Vec<Arc<dyn Machines>>) -> Emulator {
        Emulator::start_running_for(client, clouds, None)
    }

    /// Starts emulating; with `run_for`, every pod succeeds that long after
    /// it started running, and a Job whose pods all succeeded completes.
    pub fn start_running_for(
        client: kube::Client,
        clouds: Vec<Arc<dyn Machines>>,
        run_for: Option<Duration>,
    ) -> Emulator {
        Emulator::spawn(client, clouds, run_for, DevicePlugin::Runs)
    }

    /// Starts emulating clusters whose NVIDIA device plugin never runs on
    /// the machines (it does not tolerate their taints, or the driver is
    /// missing): their Nodes turn Ready but never report `nvidia.com/gpu`.
    pub fn start_without_device_plugin(
        client: kube::Client,
        clouds: Vec<Arc<FakeCloud>>,
    ) -> Emulator {
        Emulator::spawn(
            client,
            clouds.into_iter().map(|c| c as Arc<dyn Machines>).collect(),
            None,
            DevicePlugin::Never,
        )
    }

    fn spawn(
        client: kube::Client,
        clouds: Vec<Arc<dyn Machines>>,
        run_for: Option<Duration>,
        plugin: DevicePlugin,
    ) -> Emulator {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let mut result = tick(&client, &clouds, &s, plugin).await;
                if let (Ok(()), Some(run_for)) = (&result, run_for) {
                    result = complete(&client, &s, run_for).await;
                }
                if let Err(e) = result {
                    eprintln!("emulator: {e}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Emulator { task, seen }
    }
}

fn gpus(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i64 {
    q.and_then(|q| q.0.parse::<i64>().ok()).unwrap_or(0)
}

fn pod_gpus(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.resources.as_ref())
                .map(|r| {
                    let req = r.requests.as_ref().and_then(|m| m.get("nvidia.com/gpu"));
                    let lim = r.limits.as_ref().and_then(|m| m.get("nvidia.com/gpu"));
                    gpus(req.or(lim))
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The name a kubelet registers for a machine, as the clouds name Nodes:
/// AWS machines take EKS's private-DNS names (`ip-10-0-1-23.ec2.internal`,
/// here derived from the provider id), GCE machines their instance name (the
/// last part of `gce://PROJECT/ZONE/INSTANCE`, e.g. `muster-<key>`); a name
/// that already is a private-DNS name (the fake cloud's) is kept. Only
/// `spec.providerID` links a Node to its PoolNode.
pub fn node_name(m: &Machine) -> String {
    if m.name.ends_with(".internal") {
        return m.name.clone();
    }
    if m.provider_id.starts_with("aws://") {
        return private_dns_name(&m.provider_id, &m.zone);
    }
    match m.provider_id.strip_prefix("gce://") {
        Some(rest) => rest.rsplit('/').next().unwrap_or(&m.name).to_string(),
        None => m.name.clone(),
    }
}

/// An EKS-style private-DNS host name, stable for a provider id:
/// `ec2.internal` in us-east-1, `REGION.compute.internal` elsewhere.
fn private_dns_name(provider_id: &str, zone: &str) -> String {
    let h = provider_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let [a, b, c, ..] = h.to_le_bytes();
    let region = zone
        .trim_end_matches(|c: char| c.is_ascii_lowercase())
        .trim_end_matches('-');
    let domain = match region {
        "us-east-1" | "" => "ec2.internal".to_string(),
        region => format!("{region}.compute.internal"),
    };
    format!("ip-10-{}-{}-{}.{domain}", a % 64, b, c.max(1))
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the device plugin advertises a Ready machine's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DevicePlugin {
    /// The Node reports its offering's GPUs once Ready.
    Runs,
    /// The Node turns Ready with no `nvidia.com/gpu` at all (the extended
    /// resource exists only once a device plugin registers it).
    Never,
}

async fn tick(
    client: &kube::Client,
    clouds: &[Arc<dyn Machines>],
    seen: &Arc<Mutex<Seen>>,
    plugin: DevicePlugin,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let jobs: Api<Job> = Api::all(client.clone());
    let pp = PatchParams::default();
    // kubelet: register, then become Ready with GPUs
    let node_list = nodes.list(&ListParams::default()).await?.items;
    let by_pid: BTreeMap<String, Node> = node_list
        .iter()
        .filter_map(|n| Some((n.spec.as_ref()?.provider_id.clone()?, n.clone())))
        .collect();
    for cloud in clouds {
        for m in cloud.machines().await {
            let pid = m.provider_id.clone();
            let gpu_count = m.gpus;
            match (by_pid.get(&pid), m.terminated) {
                // the cloud's node lifecycle controller deletes the Node of an
                // instance that no longer exists (kubernetes/cloud-provider,
                // controllers/nodelifecycle/node_lifecycle_controller.go,
                // MonitorNodes: InstanceExistsByProviderID false → delete);
                // a kubelet whose Node was deleted does not register again
                (Some(n), true) => {
                    nodes
                        .delete(&n.name_any(), &DeleteParams::default())
                        .await?;
                }
                (None, true) => {}
                (None, false) => {
                    let name = node_name(&m);
                    // the kubelet's own os and arch, then `--node-labels`
                    // over them (kubernetes/kubernetes
                    // pkg/kubelet/kubelet_node_status.go, `initialNode`)
                    let mut labels = BTreeMap::from([
                        ("kubernetes.io/os".to_string(), "linux".to_string()),
                        ("kubernetes.io/arch".to_string(), m.arch.clone()),
                    ]);
                    labels.extend(m.labels.clone());
                    labels.insert("topology.kubernetes.io/zone".into(), m.zone.clone());
                    labels.insert(
                        "node.kubernetes.io/instance-type".into(),
                        m.instance_type.clone(),
                    );
                    labels.insert("kubernetes.io/hostname".into(), name.clone());
                    let taints: Vec<_> = m
                        .taints
                        .iter()
                        .map(|t| json!({"key": t.key, "value": t.value, "effect": format!("{:?}", t.effect)}))
                        .collect();
                    let node: Node = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": labels},
                        "spec": {"providerID": pid, "taints": taints},
                    }))
                    .expect("node");
                    nodes.create(&PostParams::default(), &node).await?;
                    let mut not_ready = json!({"type": "Ready", "status": "False"});
                    if m.never_ready {
                        not_ready["reason"] = json!(KUBELET_NOT_READY);
                        not_ready["message"] = json!(NETWORK_NOT_READY);
                    }
                    nodes
                        .patch_status(&name, &pp, &Patch::Merge(json!({"status": {
                            "conditions": [not_ready],
                            "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "0"},
                        }})))
                        .await?;
                }
                (Some(n), _) => {
                    if !ready(n) && !m.never_ready {
                        let mut resources = json!({"cpu": "96", "memory": "1Ti"});
                        if plugin == DevicePlugin::Runs {
                            resources["nvidia.com/gpu"] = json!(gpu_count.to_string());
                        }
                        // the kubelet stamps when Ready turned True
                        let since = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            k8s_openapi::jiff::Timestamp::now(),
                        );
                        nodes
                            .patch_status(&n.name_any(), &pp, &Patch::Merge(json!({"status": {
                                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}],
                                "capacity": resources.clone(),
                                // a merge patch keeps the NotReady Node's zero unless nulled
                                "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": resources.get("nvidia.com/gpu")},
                            }})))
                            .await?;
                    }
                }
            }
        }
    }
    // what the Job controller (in the API server) started: remember how many
    // muster nodes were Ready when each Job first ran
    let node_list = nodes.list(&ListParams::default()).await?.items;
    for job in jobs.list(&ListParams::default()).await?.items {
        let started = job.status.as_ref().and_then(|s| s.start_time.as_ref());
        let suspended = job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false);
        let name = job.name_any();
        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
        if started.is_some() && !suspended && !s.unsuspended_with_ready_nodes.contains_key(&name) {
            let ready_nodes = node_list
                .iter()
                .filter(|n| n.labels().contains_key("muster.dev/poolnode"))
                .filter(|n| ready(n))
                .count();
            s.unsuspended_with_ready_nodes
                .insert(name.clone(), ready_nodes);
        }
        let complete = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            });
        if complete {
            s.completed.insert(name);
        }
    }
    // kube-scheduler: bind pending, ungated pods through pods/binding;
    // kubelet: run bound pods (Running and Ready)
    let pod_list = pods.list(&ListParams::default()).await?.items;
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for p in &pod_list {
        let terminal = matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if let (Some(n), false) = (p.spec.as_ref().and_then(|s| s.node_name.clone()), terminal) {
            *used.entry(n).or_default() += pod_gpus(p);
        }
    }
    for p in &pod_list {
        let Some(spec) = p.spec.as_ref() else {
            continue;
        };
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let ns = p.namespace().unwrap_or_default();
        let papi: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let node = match &spec.node_name {
            Some(node) => Some(node.clone()),
            None if spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty()) =>
            {
                None
            }
            None => {
                let need = pod_gpus(p);
                let fits = node_list.iter().find(|n| {
                    let alloc = gpus(
                        n.status
                            .as_ref()
                            .and_then(|s| s.allocatable.as_ref())
                            .and_then(|a| a.get("nvidia.com/gpu")),
                    );
                    ready(n)
                        && alloc - used.get(&n.name_any()).copied().unwrap_or(0) >= need
                        && schedulable(p, n)
                });
                match fits {
                    Some(n) => {
                        *used.entry(n.name_any()).or_default() += need;
                        let binding = json!({
                            "apiVersion": "v1", "kind": "Binding",
                            "metadata": {"name": p.name_any(), "namespace": ns},
                            "target": {"apiVersion": "v1", "kind": "Node", "name": n.name_any()},
                        });
                        match papi
                            .create_subresource::<_, serde_json::Value>(
                                "binding",
                                &p.name_any(),
                                &PostParams::default(),
                                &binding,
                            )
                            .await
                        {
                            Ok(_) => Some(n.name_any()),
                            // bound meanwhile, or gone
                            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => None,
                            Err(e) => return Err(e),
                        }
                    }
                    None => None,
                }
            }
        };
        let pending = matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            None | Some("Pending")
        );
        if node.is_some() && pending {
            seen.lock()
                .unwrap_or_else(|e| e.into_inner())
                .started
                .insert(format!("{ns}/{}", p.name_any()), std::time::Instant::now());
            papi.patch_status(
                &p.name_any(),
                &pp,
                &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "ContainersReady", "status": "True"},
                    {"type": "Ready", "status": "True"},
                ]}})),
            )
            .await?;
        }
    }
    Ok(())
}

/// Pods that ran for `run_for` (or their [`RUN_FOR_ANNOTATION`]) succeed (the
/// kubelet's part); the Job controller in the API server counts them and
/// completes their Jobs. A pod whose restartPolicy is Always (the default:
/// Ray heads and workers, LeaderWorkerSet groups) never succeeds, as the
/// kubelet restarts its containers (the pod lifecycle of kubernetes.io/docs, Pod phase).
async fn complete(
    client: &kube::Client,
    seen: &Arc<Mutex<Seen>>,
    run_for: Duration,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::all(client.clone());
    let pp = PatchParams::default();
    for p in pods.list(&ListParams::default()).await?.items {
        let ns = p.namespace().unwrap_or_default();
        let restarts_forever = p
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .is_none_or(|r| r == "Always");
        if p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running")
            || p.metadata.deletion_timestamp.is_some()
            || restarts_forever
        {
            continue;
        }
        let started = seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .started
            .get(&format!("{ns}/{}", p.name_any()))
            .copied();
        let run_for = p
            .annotations()
            .get(RUN_FOR_ANNOTATION)
            .and_then(|ms| ms.parse().ok())
            .map_or(run_for, Duration::from_millis);
        if started.is_some_and(|t| t.elapsed() >= run_for) {
            Api::<Pod>::namespaced(client.clone(), &ns)
                .patch_status(
                    &p.name_any(),
                    &pp,
                    &Patch::Merge(json!({"status": {"phase": "Succeeded", "conditions": [
                        {"type": "PodScheduled", "status": "True"},
                        {"type": "Initialized", "status": "True"},
                        {"type": "ContainersReady", "status": "False", "reason": "PodCompleted"},
                        {"type": "Ready", "status": "False", "reason": "PodCompleted"},
                    ]}})),
                )
                .await?;
        }
    }
    Ok(())
}

/// Node selector, required node affinity (matchFields on metadata.name,
/// matchExpressions In/Exists on labels) and NoSchedule/NoExecute taints.
pub fn schedulable(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let labels = node.labels();
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(req) = required {
        let name = node.name_any();
        let term_ok = |t: &k8s_openapi::api::core::v1::NodeSelectorTerm| {
            let fields = t.match_fields.iter().flatten().all(|r| {
                r.key == "metadata.name"
                    && r.operator == "In"
                    && r.values.iter().flatten().any(|v| v == &name)
            });
            let exprs = t
                .match_expressions
                .iter()
                .flatten()
                .all(|r| match r.operator.as_str() {
                    "In" => labels
                        .get(&r.key)
                        .is_some_and(|v| r.values.iter().flatten().any(|x| x == v)),
                    "Exists" => labels.contains_key(&r.key),
                    _ => false,
                });
            fields && exprs
        };
        if !req.node_selector_terms.iter().any(term_ok) {
            return false;
        }
    }
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| {
            tolerations.iter().any(|tol| {
                let key_ok = tol.key.as_deref() == Some(t.key.as_str())
                    || (tol.key.is_none() && tol.operator.as_deref() == Some("Exists"));
                let value_ok = tol.operator.as_deref() == Some("Exists") || tol.value == t.value;
                let effect_ok =
                    tol.effect.is_none() || tol.effect.as_deref() == Some(t.effect.as_str());
                key_ok && value_ok && effect_ok
            })
        })
}
