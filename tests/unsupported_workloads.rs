//! What muster cannot run as a gang, submitted past the admission webhook
//! (which refuses it at creation): a RayJob in InteractiveMode (KubeRay
//! ignores `spec.suspend` while such a job waits for its id), a RayCluster
//! with the Ray autoscaler (pods beyond the admitted gang, an autoscaler
//! container on the head), a JobSet with `muster.dev/min-count` (its
//! webhook keeps replicas and parallelism immutable, so it could not start
//! smaller). Each is reported on the object — a Warning Event
//! `UnsupportedWorkload` whose message names the field — gets no Gang, and
//! is never unsuspended. The API test server runs the kinds' controller
//! stand-ins (`tests/kube_api/ray_controllers.py`, `jobset_controller.py`),
//! the controller runs in-process with the real planner on a fake cloud.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use muster::controller::workloads::WorkloadKind;
use serde_json::{Value, json};
use support::fake_cloud::FakeCloud;
use support::in_process::Running;
use support::objects::start_world;
use support::waits::{events_of, gang_phase};
use support::{ApiServer, eventually};

const NS: &str = "team-a";

fn start(server: &ApiServer, cloud: &Arc<FakeCloud>, kind: WorkloadKind) -> Running {
    let mut config = support::in_process::config("c1");
    config.workload_kinds = BTreeSet::from([kind]);
    support::in_process::spawn(
        &server.client_as("controller"),
        cloud,
        muster::controller::real_planner(),
        config,
    )
}

/// Submits `body` of `kind` (its CRD installed from `crd`) with only that
/// kind enabled, and checks it is reported naming `field`, gets no Gang
/// named `gang` and stays suspended at `flag`.
async fn reported_and_not_queued(
    kind: WorkloadKind,
    crd: &str,
    body: Value,
    gang: &str,
    field: &str,
) {
    let (server, client) = start_world(&[]).await;
    support::workload_crds::install(&client, &[crd]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _ctl = start(&server, &cloud, kind);
    let ar = kind.custom().expect("a custom kind").api_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let name = body["metadata"]["name"].as_str().expect("name").to_string();
    let obj: DynamicObject = serde_json::from_value(body).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("submit");
    let event = eventually(20, "an UnsupportedWorkload Event", || {
        let client = client.clone();
        let name = name.clone();
        async move {
            events_of(&client, "UnsupportedWorkload")
                .await
                .into_iter()
                .find(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                })
        }
    })
    .await;
    let message = event.note.unwrap_or_default();
    assert!(
        message.starts_with("muster: ") && message.contains(field),
        "{message}"
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(gang_phase(&client, NS, gang).await, None, "no Gang");
    let now = api.get(&name).await.expect("object");
    assert_eq!(now.data["spec"]["suspend"], true, "still suspended");
    assert!(cloud.launch_calls().is_empty(), "nothing launched");
}

fn ray_cluster_spec() -> Value {
    json!({
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "img", "resources": {"requests": {"cpu": "1"}}}]}}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 4,
            "rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-worker", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}]
    })
}

#[tokio::test]
async fn rayjob_in_interactive_mode_is_reported_and_not_queued() {
    let body = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "notebook", "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"suspend": true, "shutdownAfterJobFinishes": true, "submissionMode": "InteractiveMode",
                 "rayClusterSpec": ray_cluster_spec()}
    });
    reported_and_not_queued(
        WorkloadKind::RayJob,
        "rayjob",
        body,
        "rayjob-notebook",
        "spec.submissionMode",
    )
    .await;
}

#[tokio::test]
async fn autoscaling_raycluster_is_reported_and_not_queued() {
    let mut spec = ray_cluster_spec();
    spec["suspend"] = json!(true);
    spec["enableInTreeAutoscaling"] = json!(true);
    let body = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "elastic", "namespace": NS, "labels": {"muster.dev/queue": "team-a"}},
        "spec": spec
    });
    reported_and_not_queued(
        WorkloadKind::RayCluster,
        "raycluster",
        body,
        "raycluster-elastic",
        "enableInTreeAutoscaling",
    )
    .await;
}

#[tokio::test]
async fn jobset_with_a_min_count_is_reported_and_not_queued() {
    let body = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "shrink", "namespace": NS, "labels": {"muster.dev/queue": "team-a"},
                     "annotations": {"muster.dev/min-count": "2"}},
        "spec": {"suspend": true, "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
            "parallelism": 4, "completions": 4, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "w", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}]}
    });
    reported_and_not_queued(
        WorkloadKind::JobSet,
        "jobset",
        body,
        "jobset-shrink",
        "muster.dev/min-count",
    )
    .await;
}
