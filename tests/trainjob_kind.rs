//! Kubeflow Trainer's TrainJob end to end, as `tests/third_party_kinds.rs`
//! runs the other third-party kinds: its CRDs (and the JobSet's, which the
//! Trainer builds its pods through) installed in the API test server with
//! the Trainer's stand-in (`tests/kube_api/kubeflow_controllers.py`), the
//! controller in-process with the kind enabled, a fake cloud and the
//! kubelet/scheduler emulator: admitted, run and completed; evicted and
//! re-admitted; refused on a Trainer before v2.2; sized from the JobSet the
//! Trainer builds, which is never a gang of its own; not served without its
//! runtimes' CRDs.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::controller::workloads::WorkloadKind;
use serde_json::{Value, json};
use support::fake_cloud::FakeCloud;
use support::in_process::Running;
use support::objects::gpu_toleration;
use support::third_party::*;
use support::waits::{
    assert_no_invalid_writes, gang_phase, wait_for_gang_phase, wait_for_poolnode_gone,
};
use support::{ApiServer, ar, eventually};

// ---------------------------------------------------------------- TrainJob

/// The `WorkloadKindsServed=False` condition of queue `team-a`, once set.
async fn kinds_not_served(client: &kube::Client) -> Value {
    eventually(20, "the queue's WorkloadKindsServed condition", || {
        let client = client.clone();
        async move {
            let q = Api::<DynamicObject>::all_with(client, &ar("GPUQueue", "gpuqueues"))
                .get("team-a")
                .await
                .ok()?;
            q.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "WorkloadKindsServed" && c["status"] == "False")
                .cloned()
        }
    })
    .await
}

async fn torch_runtime(client: &kube::Client) {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime"),
        "clustertrainingruntimes",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed"},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
            {"name": "launcher", "template": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [cpu_container("launcher")]}}}}},
            {"name": "node", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "node", "image": "img", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}}],
                    "tolerations": [gpu_toleration()]}}}}}
        ]}}}
    }))
    .expect("runtime");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("runtime");
}

fn trainjob(name: &str) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": true,
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}}
    })
}

/// The TrainJob CRDs and the JobSet's, which the Trainer builds its
/// TrainJobs' pods through.
const TRAINJOB_CRDS: &[&str] = &[
    "trainjob",
    "clustertrainingruntime",
    "trainingruntime",
    "jobset",
];

#[tokio::test]
async fn trainjob_admitted_runs_and_completes() {
    let (server, client) = world(TRAINJOB_CRDS).await;
    torch_runtime(&client).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, Some(Duration::from_secs(3)));
    let _ctl = start(&server, &cloud, WorkloadKind::TrainJob);
    let jobs = api(
        &client,
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainJob",
        "trainjobs",
    );
    submit(&jobs, trainjob("llm")).await;
    let pods = wait_running(&client, "jobset.sigs.k8s.io/jobset-name=llm", 3, 40).await;
    assert_placement(&pods, "-node-");
    let job = jobs.get("llm").await.expect("trainjob");
    let patches = job.data["spec"]["runtimePatches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        patches
            .iter()
            .any(|p| p["manager"] == "muster.dev/controller"),
        "{patches:?}"
    );
    wait_for_gang_phase(&client, NS, "trainjob-llm", &["Finished"], 30).await;
    assert_no_invalid_writes();
}

#[tokio::test]
async fn trainjob_evicted_and_readmitted() {
    let (server, client) = world(TRAINJOB_CRDS).await;
    torch_runtime(&client).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::TrainJob);
    let jobs = api(
        &client,
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainJob",
        "trainjobs",
    );
    submit(&jobs, trainjob("vit")).await;
    wait_running(&client, "jobset.sigs.k8s.io/jobset-name=vit", 3, 40).await;
    let launches = cloud.launch_calls().len();
    let pn = terminate_a_machine(&client, &cloud).await;
    eventually(20, "the TrainJob suspended", || {
        let jobs = jobs.clone();
        async move { (jobs.get("vit").await.ok()?.data["spec"]["suspend"] == true).then_some(()) }
    })
    .await;
    wait_for_poolnode_gone(&client, &pn, 30).await;
    let after = wait_running(&client, "jobset.sigs.k8s.io/jobset-name=vit", 3, 60).await;
    assert!(cloud.launch_calls().len() > launches, "a new machine");
    assert_placement(&after, "-node-");
    wait_for_gang_phase(&client, NS, "trainjob-vit", &["Running"], 20).await;
    assert_rbac_allows_controller(&server, WorkloadKind::TrainJob);
    assert_no_invalid_writes();
}

/// The controller with `kinds` enabled.
fn start_kinds(server: &ApiServer, cloud: &Arc<FakeCloud>, kinds: &[WorkloadKind]) -> Running {
    let mut config = support::in_process::config("c1");
    config.workload_kinds = kinds.iter().copied().collect();
    config.interruption_poll = Duration::from_millis(200);
    support::in_process::spawn(&server.client_as("controller"), cloud, planner(), config)
}

fn trainjobs(client: &kube::Client) -> Api<DynamicObject> {
    api(
        client,
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainJob",
        "trainjobs",
    )
}

/// A ClusterTrainingRuntime `name` of an 8-GPU `node` job and an 8-GPU
/// `launcher` (the MPI launcher run as a node), its JobSet template
/// labelled `labels`.
async fn mpi_runtime(client: &kube::Client, name: &str, labels: Value) {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime"),
        "clustertrainingruntimes",
    );
    let node = |n: &str| json!({"restartPolicy": "Never", "containers": [gpu_container(n)], "tolerations": [gpu_toleration()]});
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": {"numNodes": 1, "mpi": {"runLauncherAsNode": true}},
            "template": {"metadata": {"labels": labels}, "spec": {"replicatedJobs": [
                {"name": "launcher", "template": {"spec": {"template": {"spec": node("gpu-launcher")}}}},
                {"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": node("gpu-node")}}}}
            ]}}}
    }))
    .expect("runtime");
    Api::<DynamicObject>::all_with(client.clone(), &ar)
        .create(&PostParams::default(), &obj)
        .await
        .expect("runtime");
}

/// The (name, count) of gang `name`'s pod sets, once it exists.
async fn gang_pod_sets(client: &kube::Client, name: &str) -> Vec<(String, i64)> {
    eventually(20, &format!("gang {name}"), || {
        let client = client.clone();
        async move {
            let g = Api::<DynamicObject>::namespaced_with(client, NS, &ar("Gang", "gangs"))
                .get(name)
                .await
                .ok()?;
            g.data["spec"]["podSets"].as_array().map(|sets| {
                sets.iter()
                    .map(|s| {
                        (
                            s["name"].as_str().unwrap_or_default().to_string(),
                            s["count"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
        }
    })
    .await
}

/// An MPI TrainJob that runs its launcher as a node: 3 nodes are 1
/// launcher and 2 `node` pods in the JobSet the Trainer builds, so the
/// gang asks for 3 pods (3 machines), not 4, and its 3 pods run.
#[tokio::test]
async fn trainjob_pod_sets_are_those_of_its_jobset() {
    let (server, client) = world(TRAINJOB_CRDS).await;
    mpi_runtime(&client, "mpi", json!({})).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::TrainJob);
    let mut job = trainjob("mpi");
    job["spec"] =
        json!({"runtimeRef": {"name": "mpi"}, "suspend": true, "trainer": {"numNodes": 3}});
    submit(&trainjobs(&client), job).await;
    let sets = gang_pod_sets(&client, "trainjob-mpi").await;
    assert_eq!(sets, [("launcher".to_string(), 1), ("node".to_string(), 2)]);
    let pods = wait_running(&client, "jobset.sigs.k8s.io/jobset-name=mpi", 3, 40).await;
    assert_placement(&pods, "-");
    assert_no_invalid_writes();
}

/// A TrainJob whose runtime labels the JobSet with a queue, with the
/// JobSet kind enabled too: the JobSet the Trainer builds is the
/// TrainJob's, never a gang of its own.
#[tokio::test]
async fn a_trainjobs_jobset_is_never_a_gang_of_its_own() {
    let (server, client) = world(TRAINJOB_CRDS).await;
    mpi_runtime(&client, "queued", json!({"muster.dev/queue": "team-a"})).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start_kinds(
        &server,
        &cloud,
        &[WorkloadKind::TrainJob, WorkloadKind::JobSet],
    );
    let mut job = trainjob("twice");
    job["spec"] =
        json!({"runtimeRef": {"name": "queued"}, "suspend": true, "trainer": {"numNodes": 2}});
    submit(&trainjobs(&client), job).await;
    wait_running(&client, "jobset.sigs.k8s.io/jobset-name=twice", 2, 40).await;
    wait_for_gang_phase(&client, NS, "trainjob-twice", &["Running"], 20).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        gang_phase(&client, NS, "jobset-twice").await.is_none(),
        "the Trainer's JobSet became a gang"
    );
    let written: Vec<_> = server
        .audited("controller")
        .into_iter()
        .filter(|(v, g, _, _)| g == "jobset.x-k8s.io" && v != "get" && v != "list" && v != "watch")
        .collect();
    assert!(
        written.is_empty(),
        "muster wrote the Trainer's JobSet: {written:?}"
    );
    assert_no_invalid_writes();
}

/// A Kubeflow Trainer v2.1 (`spec.podTemplateOverrides`, no
/// `spec.runtimePatches`) or v2.0 (`spec.podSpecOverrides`): muster's pin
/// would be pruned and the TrainJob would run unpinned, so the kind is not
/// run, the queue says which version, and no TrainJob is written.
#[tokio::test]
async fn trainjob_on_a_trainer_before_v2_2_is_refused_and_reported() {
    for (crd, version) in [
        ("trainer-versions/trainjob-v2.1", "v2.1"),
        ("trainer-versions/trainjob-v2.0", "v2.0"),
    ] {
        let (server, client) =
            world(&[crd, "clustertrainingruntime", "trainingruntime", "jobset"]).await;
        torch_runtime(&client).await;
        let cloud = FakeCloud::new(Some(client.clone()));
        let _emu = emulate(&client, &cloud, None);
        let _ctl = start(&server, &cloud, WorkloadKind::TrainJob);
        submit(&trainjobs(&client), trainjob("old")).await;
        let cond = kinds_not_served(&client).await;
        assert_eq!(cond["reason"], "UnsupportedVersion", "{cond}");
        let message = cond["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("Kubeflow Trainer {version} API")),
            "{message}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            gang_phase(&client, NS, "trainjob-old").await.is_none(),
            "{version}: no gang"
        );
        let asked: Vec<_> = server
            .audited("controller")
            .into_iter()
            .filter(|(v, g, _, _)| g == "trainer.kubeflow.org" && v != "get")
            .collect();
        assert!(asked.is_empty(), "{version}: {asked:?}");
        assert_rbac_allows_controller(&server, WorkloadKind::TrainJob);
    }
}

// ---------------------------------------------------------------- a kind not fully served

/// TrainJob enabled with its own CRD installed but not its training
/// runtimes': the kind is not served (its adapter could not size a single
/// TrainJob), the queue says so, and nothing of it is watched.
#[tokio::test]
async fn trainjob_kind_without_its_runtime_crds_is_skipped_and_reported() {
    let (server, client) = world(&["trainjob"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::TrainJob);
    let jobs = api(
        &client,
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainJob",
        "trainjobs",
    );
    submit(&jobs, trainjob("orphan")).await;
    let cond = kinds_not_served(&client).await;
    let message = cond["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("clustertrainingruntimes.trainer.kubeflow.org"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        gang_phase(&client, NS, "trainjob-orphan").await.is_none(),
        "no gang"
    );
    let asked: Vec<_> = server
        .audited("controller")
        .into_iter()
        .filter(|(v, g, _, _)| g == "trainer.kubeflow.org" && v != "get")
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
}
