//! The third-party workload kinds end to end: PyTorchJob, RayCluster,
//! RayJob and LeaderWorkerSet (TrainJob: `tests/trainjob_kind.rs`), each with its CRD installed in the
//! API test server and the server's stand-in for its controller
//! (`tests/kube_api/kubeflow_controllers.py`, `ray_controllers.py`,
//! `lws_controller.py`), the controller in-process with only that kind
//! enabled, a fake cloud and the kubelet/scheduler emulator.
//!
//! For every kind: admitted → runs → completes (or, for the kinds that never
//! finish, is deleted) and the gang ends; and admitted → evicted (its GPU
//! machine terminated outside muster) → stopped as a whole → re-admitted on
//! new capacity → runs again. The CPU pod sets (a PyTorchJob master, a
//! TrainJob launcher, a Ray head and submitter) run on the cluster's CPU
//! node, the GPU ones on the nodes muster launched.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use muster::controller;
use muster::controller::workloads::WorkloadKind;
use serde_json::{Value, json};
use support::fake_cloud::FakeCloud;
use support::objects::{cpu_node, gpu_toleration, start_world};
use support::third_party::*;
use support::waits::{
    assert_no_invalid_writes, wait_for_gang_gone, wait_for_gang_phase, wait_for_poolnode_gone,
};
use support::{ApiServer, eventually};

// ---------------------------------------------------------------- PyTorchJob

fn pytorchjob(name: &str) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure",
                       "template": {"spec": {"containers": [cpu_container("pytorch")]}}},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure",
                       "template": {"spec": {"containers": [gpu_container("pytorch")], "tolerations": [gpu_toleration()]}}}
        }}
    })
}

#[tokio::test]
async fn pytorchjob_admitted_runs_and_completes() {
    let (server, client) = world(&["pytorchjob"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, Some(Duration::from_secs(3)));
    let _ctl = start(&server, &cloud, WorkloadKind::PyTorchJob);
    let jobs = api(&client, "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs");
    submit(&jobs, pytorchjob("bert")).await;
    let pods = wait_running(&client, "training.kubeflow.org/job-name=bert", 3, 40).await;
    assert_placement(&pods, "-worker-");
    let job = jobs.get("bert").await.expect("job");
    assert_eq!(job.data["spec"]["runPolicy"]["suspend"], false);
    assert!(job.annotations().contains_key("muster.dev/admitted-nodes"));
    // the master's success completes the job, and the gang finishes
    wait_for_gang_phase(&client, NS, "pytorchjob-bert", &["Finished"], 30).await;
    let job = jobs.get("bert").await.expect("job");
    let done = job.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        done.iter()
            .any(|c| c["type"] == "Succeeded" && c["status"] == "True"),
        "{done:?}"
    );
    assert_no_invalid_writes();
}

#[tokio::test]
async fn pytorchjob_evicted_and_readmitted() {
    let (server, client) = world(&["pytorchjob"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::PyTorchJob);
    let jobs = api(&client, "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs");
    submit(&jobs, pytorchjob("gpt")).await;
    let before = wait_running(&client, "training.kubeflow.org/job-name=gpt", 3, 40).await;
    let launches = cloud.launch_calls().len();
    let pn = terminate_a_machine(&client, &cloud).await;
    // stopped as a whole: suspended, every pod deleted by the operator
    eventually(20, "the PyTorchJob suspended", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("gpt").await.ok()?;
            (j.data["spec"]["runPolicy"]["suspend"] == true).then_some(())
        }
    })
    .await;
    wait_for_poolnode_gone(&client, &pn, 30).await;
    // re-admitted on new capacity
    let after = wait_running(&client, "training.kubeflow.org/job-name=gpt", 3, 60).await;
    assert!(cloud.launch_calls().len() > launches, "a new machine");
    assert_placement(&after, "-worker-");
    let old: BTreeSet<&String> = before
        .iter()
        .map(|(_, n)| n)
        .filter(|n| *n != "cpu-0")
        .collect();
    assert!(
        after.iter().any(|(_, n)| n != "cpu-0" && !old.contains(n)),
        "{before:?} → {after:?}"
    );
    wait_for_gang_phase(&client, NS, "pytorchjob-gpt", &["Running"], 20).await;
    assert_rbac_allows_controller(&server, WorkloadKind::PyTorchJob);
    assert_no_invalid_writes();
}

// ---------------------------------------------------------------- RayJob and RayCluster

fn ray_cluster_spec() -> Value {
    json!({
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [cpu_container("ray-head")]}}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2, "rayStartParams": {},
            "template": {"spec": {"containers": [gpu_container("ray-worker")], "tolerations": [gpu_toleration()]}}}]
    })
}

fn rayjob(name: &str) -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"entrypoint": "python train.py", "suspend": true, "shutdownAfterJobFinishes": true,
                 "rayClusterSpec": ray_cluster_spec()}
    })
}

async fn rayjob_cluster(jobs: &Api<DynamicObject>, name: &str) -> String {
    eventually(30, "the RayJob's cluster", || {
        let jobs = jobs.clone();
        async move {
            jobs.get(name).await.ok()?.data["status"]["rayClusterName"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(String::from)
        }
    })
    .await
}

#[tokio::test]
async fn rayjob_admitted_runs_and_completes() {
    let (server, client) = world(&["rayjob", "raycluster"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, Some(Duration::from_secs(3)));
    let _ctl = start(&server, &cloud, WorkloadKind::RayJob);
    let jobs = api(&client, "ray.io", "v1", "RayJob", "rayjobs");
    submit(&jobs, rayjob("tune")).await;
    let cluster = rayjob_cluster(&jobs, "tune").await;
    let pods = wait_running(&client, &format!("ray.io/cluster={cluster}"), 3, 40).await;
    assert_placement(&pods, "-gpu-worker-");
    // every pod of the job, the submitter's too, carries the gang's label
    let labelled = wait_running(&client, "muster.dev/workload=rayjob-tune", 4, 20).await;
    assert_placement(&labelled, "-gpu-worker-");
    // the submitter succeeds: the job completes, the cluster is shut down, the gang finishes
    wait_for_gang_phase(&client, NS, "rayjob-tune", &["Finished"], 40).await;
    let job = jobs.get("tune").await.expect("rayjob");
    assert_eq!(job.data["status"]["jobDeploymentStatus"], "Complete");
    assert_no_invalid_writes();
}

/// The gang's pod sets: name → (count, CPU requests of one pod).
async fn gang_shape(client: &kube::Client, gang: &str) -> Vec<(String, i64, String)> {
    let g = eventually(30, "the gang", || {
        let client = client.clone();
        let gang = gang.to_string();
        async move { support::waits::gang(&client, NS, &gang).await }
    })
    .await;
    g.data["spec"]["podSets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["count"].as_i64().unwrap_or(0),
                p["requests"]["cpu"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// The RayJob submission modes KubeRay runs with `suspend` honoured, each
/// run end to end (KubeRay `ray-operator/controllers/ray/rayjob_controller.go`):
/// in HTTPMode KubeRay submits through the dashboard, so no submitter pod
/// exists and the gang has none; in SidecarMode the submitter is a
/// container of the head pod, so the gang's head asks for it too (500m
/// CPU more) and there is no submitter pod set. Both run on the nodes
/// admitted, every pod labelled with the gang.
#[tokio::test]
async fn rayjob_in_http_and_sidecar_modes_run_with_their_own_pod_sets() {
    let (server, client) = world(&["rayjob", "raycluster"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::RayJob);
    let jobs = api(&client, "ray.io", "v1", "RayJob", "rayjobs");
    let millis = |q: &str| {
        q.strip_suffix('m')
            .map_or_else(|| q.parse::<i64>().map(|c| c * 1000), str::parse)
            .unwrap_or(-1)
    };
    let mut head_cpu = BTreeMap::new();
    for (name, mode) in [("by-http", "HTTPMode"), ("by-sidecar", "SidecarMode")] {
        let mut job = rayjob(name);
        job["spec"]["submissionMode"] = json!(mode);
        submit(&jobs, job).await;
        let cluster = rayjob_cluster(&jobs, name).await;
        let pods = wait_running(&client, &format!("ray.io/cluster={cluster}"), 3, 40).await;
        assert_placement(&pods, "-gpu-worker-");
        let shape = gang_shape(&client, &format!("rayjob-{name}")).await;
        let names: Vec<&str> = shape.iter().map(|(n, ..)| n.as_str()).collect();
        assert_eq!(names, ["head", "gpu"], "{mode}: no submitter pod set");
        let head = &shape[0];
        match mode {
            "SidecarMode" => {
                let head_pod = Api::<Pod>::namespaced(client.clone(), NS)
                    .list(
                        &ListParams::default()
                            .labels(&format!("ray.io/cluster={cluster},ray.io/node-type=head")),
                    )
                    .await
                    .expect("pods")
                    .items
                    .remove(0);
                let containers: Vec<String> = head_pod
                    .spec
                    .map(|s| s.containers.into_iter().map(|c| c.name).collect())
                    .unwrap_or_default();
                assert!(
                    containers.iter().any(|c| c == "ray-job-submitter"),
                    "{containers:?}"
                );
            }
            _ => {
                let submitters =
                    Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), NS)
                        .list(&Default::default())
                        .await
                        .expect("jobs")
                        .items
                        .into_iter()
                        .filter(|j| j.metadata.name.as_deref() == Some(name))
                        .count();
                assert_eq!(submitters, 0, "HTTPMode makes no submitter Job");
            }
        }
        head_cpu.insert(mode, millis(&head.2));
        wait_for_gang_phase(&client, NS, &format!("rayjob-{name}"), &["Running"], 30).await;
    }
    assert_eq!(
        head_cpu["SidecarMode"],
        head_cpu["HTTPMode"] + 500,
        "the sidecar submitter's 500m on the head: {head_cpu:?}"
    );
    assert_no_invalid_writes();
}

#[tokio::test]
async fn rayjob_evicted_and_readmitted() {
    let (server, client) = world(&["rayjob", "raycluster"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::RayJob);
    let jobs = api(&client, "ray.io", "v1", "RayJob", "rayjobs");
    submit(&jobs, rayjob("serve")).await;
    let first = rayjob_cluster(&jobs, "serve").await;
    wait_running(&client, &format!("ray.io/cluster={first}"), 3, 40).await;
    let launches = cloud.launch_calls().len();
    let pn = terminate_a_machine(&client, &cloud).await;
    // KubeRay deletes the cluster of a suspended job; a new one comes with the re-admission
    eventually(30, "the RayJob Suspended", || {
        let jobs = jobs.clone();
        let first = first.clone();
        async move {
            let j = jobs.get("serve").await.ok()?;
            (j.data["status"]["jobDeploymentStatus"] == "Suspended"
                || j.data["status"]["rayClusterName"] != first.as_str())
            .then_some(())
        }
    })
    .await;
    wait_for_poolnode_gone(&client, &pn, 30).await;
    let second = eventually(60, "a new cluster", || {
        let jobs = jobs.clone();
        let first = first.clone();
        async move {
            let n = jobs.get("serve").await.ok()?.data["status"]["rayClusterName"]
                .as_str()?
                .to_string();
            (!n.is_empty() && n != first).then_some(n)
        }
    })
    .await;
    let after = wait_running(&client, &format!("ray.io/cluster={second}"), 3, 60).await;
    assert_placement(&after, "-gpu-worker-");
    assert!(cloud.launch_calls().len() > launches, "a new machine");
    wait_for_gang_phase(&client, NS, "rayjob-serve", &["Running"], 20).await;
    assert_rbac_allows_controller(&server, WorkloadKind::RayJob);
    assert_no_invalid_writes();
}

/// KubeRay honours a RayJob's `spec.suspend` only when it reports the job
/// Suspended (`rayjob_controller.go`): while the job is Suspending — its
/// RayCluster's deletion held here by a finalizer of the test's, so the
/// cluster still exists — muster writes nothing to it (no restore, no pin
/// to new capacity, no unsuspend), and goes on once KubeRay reports it
/// Suspended.
#[tokio::test]
async fn rayjob_evicted_is_left_alone_until_kuberay_reports_it_suspended() {
    let (server, client) = world(&["rayjob", "raycluster"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::RayJob);
    let jobs = api(&client, "ray.io", "v1", "RayJob", "rayjobs");
    let clusters = api(&client, "ray.io", "v1", "RayCluster", "rayclusters");
    submit(&jobs, rayjob("hold")).await;
    let first = rayjob_cluster(&jobs, "hold").await;
    wait_running(&client, &format!("ray.io/cluster={first}"), 3, 40).await;
    let hold = |finalizers: Value| Patch::Merge(json!({"metadata": {"finalizers": finalizers}}));
    clusters
        .patch(
            &first,
            &PatchParams::default(),
            &hold(json!(["test.muster.dev/hold"])),
        )
        .await
        .expect("finalizer");
    let pinned =
        jobs.get("hold").await.expect("rayjob").annotations()["muster.dev/admitted-nodes"].clone();
    terminate_a_machine(&client, &cloud).await;
    eventually(30, "the RayJob Suspending", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("hold").await.ok()?;
            (j.data["status"]["jobDeploymentStatus"] == "Suspending").then_some(())
        }
    })
    .await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let j = jobs.get("hold").await.expect("rayjob");
        assert_eq!(j.data["status"]["jobDeploymentStatus"], "Suspending");
        assert_eq!(j.data["spec"]["suspend"], true);
        assert_eq!(
            j.annotations().get("muster.dev/admitted-nodes"),
            Some(&pinned),
            "neither restored nor pinned anew while KubeRay still deletes the cluster"
        );
    }
    // the cluster goes: Suspended, restored, admitted again on new capacity
    clusters
        .patch(&first, &PatchParams::default(), &hold(Value::Null))
        .await
        .expect("finalizer removed");
    let second = eventually(60, "a new cluster", || {
        let jobs = jobs.clone();
        let first = first.clone();
        async move {
            let n = jobs.get("hold").await.ok()?.data["status"]["rayClusterName"]
                .as_str()?
                .to_string();
            (!n.is_empty() && n != first).then_some(n)
        }
    })
    .await;
    wait_running(&client, &format!("ray.io/cluster={second}"), 3, 60).await;
    assert_no_invalid_writes();
}

fn raycluster(name: &str) -> Value {
    let mut spec = ray_cluster_spec();
    spec["suspend"] = json!(true);
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": spec
    })
}

#[tokio::test]
async fn raycluster_admitted_runs_and_ends_when_deleted() {
    let (server, client) = world(&["raycluster"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    // Ray pods restart forever: they never succeed, whatever the run time
    let _emu = emulate(&client, &cloud, Some(Duration::from_secs(1)));
    let _ctl = start(&server, &cloud, WorkloadKind::RayCluster);
    let clusters = api(&client, "ray.io", "v1", "RayCluster", "rayclusters");
    submit(&clusters, raycluster("lab")).await;
    let pods = wait_running(&client, "ray.io/cluster=lab", 3, 40).await;
    assert_placement(&pods, "-gpu-worker-");
    wait_for_gang_phase(&client, NS, "raycluster-lab", &["Running"], 20).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        running(&client, "ray.io/cluster=lab").await.len(),
        3,
        "still running"
    );
    clusters
        .delete("lab", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for_gang_gone(&client, NS, "raycluster-lab", 20).await;
    assert_no_invalid_writes();
}

#[tokio::test]
async fn raycluster_evicted_and_readmitted() {
    let (server, client) = world(&["raycluster"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::RayCluster);
    let clusters = api(&client, "ray.io", "v1", "RayCluster", "rayclusters");
    submit(&clusters, raycluster("notebook")).await;
    wait_running(&client, "ray.io/cluster=notebook", 3, 40).await;
    let launches = cloud.launch_calls().len();
    let pn = terminate_a_machine(&client, &cloud).await;
    eventually(20, "the RayCluster suspended", || {
        let clusters = clusters.clone();
        async move {
            (clusters.get("notebook").await.ok()?.data["spec"]["suspend"] == true).then_some(())
        }
    })
    .await;
    wait_for_poolnode_gone(&client, &pn, 30).await;
    let after = wait_running(&client, "ray.io/cluster=notebook", 3, 60).await;
    assert_placement(&after, "-gpu-worker-");
    assert!(cloud.launch_calls().len() > launches, "a new machine");
    assert_rbac_allows_controller(&server, WorkloadKind::RayCluster);
    assert_no_invalid_writes();
}

// ---------------------------------------------------------------- LeaderWorkerSet

/// A LeaderWorkerSet as the admission webhook leaves it: muster's
/// scheduling gate on both templates.
fn leaderworkerset(name: &str, replicas: u32) -> Value {
    let gated = |c: Value| {
        json!({"spec": {"containers": [c], "tolerations": [gpu_toleration()],
                                           "schedulingGates": [{"name": "muster.dev/admission"}]}})
    };
    json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 2,
            "leaderTemplate": gated(gpu_container("leader")),
            "workerTemplate": gated(gpu_container("worker"))}}
    })
}

#[tokio::test]
async fn leaderworkerset_groups_admitted_run_and_end_when_deleted() {
    let (server, client) = world(&["leaderworkerset"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, Some(Duration::from_secs(1)));
    let _ctl = start(&server, &cloud, WorkloadKind::LeaderWorkerSet);
    let sets = api(
        &client,
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    );
    submit(&sets, leaderworkerset("llama", 2)).await;
    // each group is its own gang, released whole
    let pods = wait_running(&client, "leaderworkerset.sigs.k8s.io/name=llama", 4, 40).await;
    assert!(pods.iter().all(|(_, n)| n != "cpu-0"), "{pods:?}");
    for g in ["lws-llama-0", "lws-llama-1"] {
        wait_for_gang_phase(&client, NS, g, &["Running"], 20).await;
    }
    sets.delete("llama", &DeleteParams::default())
        .await
        .expect("delete");
    for g in ["lws-llama-0", "lws-llama-1"] {
        wait_for_gang_gone(&client, NS, g, 20).await;
    }
    assert_no_invalid_writes();
}

/// `startupPolicy: LeaderReady`: the LeaderWorkerSet controller creates a
/// group's workers only once its leader is Ready, so a group is never all
/// there while gated. It is admitted on its leader, the leader released, and
/// the workers pinned to the gang's nodes and released as they come.
#[tokio::test]
async fn leaderworkerset_with_leader_ready_startup_starts() {
    let (server, client) = world(&["leaderworkerset"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, Some(Duration::from_secs(1)));
    let _ctl = start(&server, &cloud, WorkloadKind::LeaderWorkerSet);
    let sets = api(
        &client,
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    );
    let mut lws = leaderworkerset("phi", 1);
    lws["spec"]["startupPolicy"] = json!("LeaderReady");
    lws["spec"]["leaderWorkerTemplate"]["size"] = json!(3);
    submit(&sets, lws).await;
    let pods = wait_running(&client, "leaderworkerset.sigs.k8s.io/name=phi", 3, 60).await;
    assert!(pods.iter().all(|(_, n)| n != "cpu-0"), "{pods:?}");
    wait_for_gang_phase(&client, NS, "lws-phi-0", &["Running"], 20).await;
    assert_no_invalid_writes();
}

#[tokio::test]
async fn leaderworkerset_group_evicted_and_readmitted() {
    let (server, client) = world(&["leaderworkerset"]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::LeaderWorkerSet);
    let sets = api(
        &client,
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    );
    submit(&sets, leaderworkerset("mixtral", 1)).await;
    wait_running(&client, "leaderworkerset.sigs.k8s.io/name=mixtral", 2, 40).await;
    let uids = |pods: Vec<Pod>| -> BTreeSet<String> {
        pods.iter().filter_map(|p| p.metadata.uid.clone()).collect()
    };
    let pods_api = Api::<Pod>::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels("leaderworkerset.sigs.k8s.io/name=mixtral");
    let before = uids(pods_api.list(&lp).await.expect("pods").items);
    let launches = cloud.launch_calls().len();
    let pn = terminate_a_machine(&client, &cloud).await;
    wait_for_poolnode_gone(&client, &pn, 30).await;
    // the group's pods are deleted; the LeaderWorkerSet controller recreates
    // them gated, and muster releases them on new capacity
    let after = eventually(60, "the group recreated and running", || {
        let pods_api = pods_api.clone();
        let lp = lp.clone();
        let before = before.clone();
        async move {
            let pods = pods_api.list(&lp).await.ok()?.items;
            let running = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| !before.contains(u)))
                .count();
            (running == 2).then_some(pods.len())
        }
    })
    .await;
    assert!(
        cloud.launch_calls().len() > launches,
        "a new machine: {after:?}"
    );
    wait_for_gang_phase(&client, NS, "lws-mixtral-0", &["Running"], 20).await;
    assert_rbac_allows_controller(&server, WorkloadKind::LeaderWorkerSet);
    assert_no_invalid_writes();
}

/// muster's webhook served in-process over HTTPS as the chart's Service
/// `muster/muster-webhook` (the API test server reaches it through
/// `--webhook-service`), reading LeaderWorkerSets as the controller, and its
/// one pod hook registered as the chart registers `lws-pods.muster.dev`.
/// The webhook of the LeaderWorkerSets themselves is not registered: their
/// templates keep what they are created with.
struct PodHook {
    serving: tokio::task::JoinHandle<()>,
    dir: std::path::PathBuf,
}

impl Drop for PodHook {
    fn drop(&mut self) {
        self.serving.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const HOOK_SERVICE: (&str, &str) = ("muster", "muster-webhook");

/// A listener on a free port of 127.0.0.1, with its address: bound before
/// the API test server is told the address and kept until the hook serves
/// on it, so no other test can take the port in between.
fn hook_listener() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("addr").to_string();
    (listener, addr)
}

async fn serve_lws_pod_hook(
    server: &ApiServer,
    client: &kube::Client,
    listener: std::net::TcpListener,
) -> PodHook {
    use muster::controller::webhook::issue::{dns_names, issue};
    use muster::controller::webhook::rotation::Policy;
    use muster::controller::webhook::tls::FileCert;
    muster::controller::install_crypto_provider();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let (svc_ns, svc) = HOOK_SERVICE;
    let certs = issue(
        None,
        true,
        dns_names(svc, svc_ns),
        "muster-webhook-ca",
        &Policy::default(),
        now,
    )
    .expect("certificate");
    let dir = std::env::temp_dir().join(format!("muster-lws-hook-{}-{now}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&crt, &certs.tls_crt).expect("tls.crt");
    std::fs::write(&key, &certs.tls_key).expect("tls.key");
    let tls = FileCert::new(crt, key)
        .expect("cert")
        .server_config()
        .expect("tls");
    let hook = controller::webhook::Webhook {
        namespaces: None,
        leader_worker_sets: Some(server.client_as("controller")),
        default_queue_label: String::new(),
        queues: None,
    };
    let app = controller::http::App {
        metrics: Arc::new(controller::base::metrics::Metrics::new()),
        webhook: Some(Arc::new(hook)),
        metrics_access: controller::http::MetricsAccess::Open,
    };
    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
    let serving = tokio::spawn(controller::http::serve_tls(listener, Arc::new(tls), app));
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(&certs.ca_crt);
    let cfg = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "muster"},
        "webhooks": [{
            "name": "lws-pods.muster.dev", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
            "clientConfig": {"caBundle": ca,
                "service": {"namespace": svc_ns, "name": svc, "path": "/mutate-workload"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "objectSelector": {"matchExpressions": [
                {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}
        }]
    });
    support::create_object(client, "mutatingwebhookconfigurations", None, cfg).await;
    PodHook { serving, dir }
}

/// Pods as they were created: `name uid` and their scheduling gates.
type CreatedPods = Arc<std::sync::Mutex<Vec<(String, Vec<String>)>>>;

/// Every pod of `selector` as it was created (its first ADDED event), by
/// name and uid, with its scheduling gates then.
fn record_created_pods(client: &kube::Client, selector: &str) -> CreatedPods {
    use futures::StreamExt;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    let wp = kube::api::WatchParams::default().labels(selector);
    let out = seen.clone();
    tokio::spawn(async move {
        let mut uids = BTreeSet::new();
        let mut stream = pods.watch(&wp, "0").await.expect("watch").boxed();
        while let Some(Ok(ev)) = stream.next().await {
            if let kube::api::WatchEvent::Added(p) | kube::api::WatchEvent::Modified(p) = ev {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                if !uids.insert(uid.clone()) {
                    continue;
                }
                let gates = p
                    .spec
                    .and_then(|s| s.scheduling_gates)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|g| g.name)
                    .collect();
                out.lock().expect("lock").push((
                    format!("{} {uid}", p.metadata.name.unwrap_or_default()),
                    gates,
                ));
            }
        }
    });
    seen
}

/// A LeaderWorkerSet whose templates lost muster's gate (a server-side
/// re-apply, a template edit): each pod is gated when it is created, by
/// the pod webhook reading the set, and each group is admitted and runs,
/// evicted and recreated gated again. Before the pod hook the pods came up
/// ungated, muster stopped them, the set recreated them ungated: a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaderworkerset_without_gated_templates_has_every_pod_gated() {
    let (listener, addr) = hook_listener();
    let (svc_ns, svc) = HOOK_SERVICE;
    let (server, client) =
        start_world(&["--webhook-service", &format!("{svc_ns}/{svc}={addr}")]).await;
    support::workload_crds::install(&client, &["leaderworkerset"]).await;
    cpu_node("cpu-0").create(&client).await;
    let _hook = serve_lws_pod_hook(&server, &client, listener).await;
    let created = record_created_pods(&client, "leaderworkerset.sigs.k8s.io/name");
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = emulate(&client, &cloud, None);
    let _ctl = start(&server, &cloud, WorkloadKind::LeaderWorkerSet);
    let sets = api(
        &client,
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    );
    // the templates without the gate; an unmanaged set beside it
    let mut lws = leaderworkerset("gemma", 2);
    for t in ["leaderTemplate", "workerTemplate"] {
        lws["spec"]["leaderWorkerTemplate"][t]["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("schedulingGates");
    }
    submit(&sets, lws.clone()).await;
    let mut other = lws.clone();
    other["metadata"]["name"] = json!("other");
    other["metadata"]["labels"] = json!({"app": "other"});
    other["spec"]["replicas"] = json!(1);
    for t in ["leaderTemplate", "workerTemplate"] {
        other["spec"]["leaderWorkerTemplate"][t]["spec"]["containers"] =
            json!([cpu_container("c")]);
    }
    submit(&sets, other).await;
    let pods = wait_running(&client, "leaderworkerset.sigs.k8s.io/name=gemma", 4, 60).await;
    assert!(pods.iter().all(|(_, n)| n != "cpu-0"), "{pods:?}");
    for g in ["lws-gemma-0", "lws-gemma-1"] {
        wait_for_gang_phase(&client, NS, g, &["Running"], 20).await;
    }
    // the unmanaged set's pods were admitted unchanged and run where they fit
    wait_running(&client, "leaderworkerset.sigs.k8s.io/name=other", 2, 30).await;

    // a group evicted: recreated from the ungated templates, gated again
    let launches = cloud.launch_calls().len();
    let pn = terminate_a_machine(&client, &cloud).await;
    wait_for_poolnode_gone(&client, &pn, 30).await;
    eventually(60, "a new machine and both groups running", || {
        let client = client.clone();
        let more = cloud.launch_calls().len() > launches;
        async move {
            let n = running(&client, "leaderworkerset.sigs.k8s.io/name=gemma")
                .await
                .len();
            (more && n == 4).then_some(())
        }
    })
    .await;
    for g in ["lws-gemma-0", "lws-gemma-1"] {
        wait_for_gang_phase(&client, NS, g, &["Running"], 20).await;
    }
    let created = created.lock().expect("lock").clone();
    let gemma: Vec<_> = created
        .iter()
        .filter(|(p, _)| p.starts_with("gemma-"))
        .collect();
    assert!(
        gemma.len() > 4,
        "the evicted group was recreated: {created:?}"
    );
    assert!(
        gemma
            .iter()
            .all(|(_, g)| g.iter().any(|g| g == "muster.dev/admission")),
        "every pod of the managed set created gated: {created:?}"
    );
    assert!(
        created
            .iter()
            .filter(|(p, _)| p.starts_with("other-"))
            .all(|(_, g)| g.is_empty()),
        "the unmanaged set's pods admitted unchanged: {created:?}"
    );
    assert_rbac_allows_controller(&server, WorkloadKind::LeaderWorkerSet);
    assert_no_invalid_writes();
}
