//! Workload kinds beyond the Job, end to end: the real `kube::Client`
//! against the API test server with the kind's CRD and its controller's
//! stand-in (JobSet: `tests/kube_api/jobset_controller.py`), the controller
//! in-process with the real planner, a fake cloud, and the kubelet /
//! kube-scheduler emulator.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use muster::controller::workloads::WorkloadKind;
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::in_process::Running;
use support::objects::{self, gpu_node, job, start_world};
use support::waits::{
    self, assert_no_invalid_writes, gang_phase, patch_pool, patch_queue, poolnode_node_names,
    running_pods, wait_for_gang_gone, wait_for_gang_phase,
};
use support::{ApiServer, ar, eventually};

const NS: &str = "team-a";

fn jobset_ar() -> kube::core::ApiResource {
    WorkloadKind::JobSet
        .custom()
        .expect("a custom kind")
        .api_resource()
}

/// A server with muster's CRDs (and the JobSet CRD when `jobset`), the
/// default NodeClass, pool of 8-GPU nodes (tainted as GPUPools are by
/// default) and queue `team-a`.
async fn world(jobset: bool) -> (ApiServer, kube::Client) {
    let (server, client) = start_world(&[]).await;
    if jobset {
        support::workload_crds::install(&client, &["jobset"]).await;
    }
    (server, client)
}

fn start(
    server: &ApiServer,
    cloud: &Arc<FakeCloud>,
    kinds: &[WorkloadKind],
    configure: impl FnOnce(&mut muster::controller::ControllerConfig),
) -> Running {
    let mut config = support::in_process::config("c1");
    config.workload_kinds = kinds.iter().copied().collect();
    configure(&mut config);
    support::in_process::spawn(
        &server.client_as("controller"),
        cloud,
        support::in_process::dumping_planner(),
        config,
    )
}

/// A Node of the cluster's own: CPUs only, no pool.
async fn cpu_node(client: &kube::Client, name: &str) {
    objects::cpu_node(name)
        .label("kubernetes.io/hostname", name)
        .create(client)
        .await;
}

async fn jobset(client: &kube::Client, name: &str) -> DynamicObject {
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &jobset_ar())
        .get(name)
        .await
        .expect("JobSet")
}

/// Running pods by the replicated job of JobSet `name` → node names.
async fn running_by_set(client: &kube::Client, name: &str) -> BTreeMap<String, Vec<String>> {
    let pods = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("jobset.sigs.k8s.io/jobset-name={name}")))
        .await
        .expect("pods")
        .items;
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in pods {
        if p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
            continue;
        }
        let set = p
            .labels()
            .get("jobset.sigs.k8s.io/replicatedjob-name")
            .cloned()
            .unwrap_or_default();
        let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
        out.entry(set).or_default().push(node);
    }
    out
}

/// Waits up to `secs` for JobSet `name`'s driver and `workers` workers to
/// run; returns their nodes by replicated job.
async fn wait_for_driver_and_workers(
    client: &kube::Client,
    name: &str,
    workers: usize,
    secs: u64,
) -> BTreeMap<String, Vec<String>> {
    let what = format!("the driver and {workers} workers of {name} running");
    eventually(secs, &what, || async move {
        let r = running_by_set(client, name).await;
        (r.get("driver").map(Vec::len) == Some(1)
            && r.get("workers").map(Vec::len) == Some(workers))
        .then_some(r)
    })
    .await
}

/// The headline multi-pod-set gang: a JobSet of one CPU driver and four
/// 8-GPU workers is one gang, admitted onto one launch set of four GPU
/// nodes; the driver, whose requests name no GPU, runs on the cluster's CPU
/// node and never on a GPU node; the JobSet completes and so does its Gang.
#[tokio::test]
async fn jobset_driver_and_gpu_workers_admitted_onto_one_launch_set_then_complete() {
    let (server, client) = world(true).await;
    cpu_node(&client, "cpu-0").await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let emu = Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as Arc<dyn support::emulator::Machines>],
        Some(Duration::from_secs(3)),
    );
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    objects::jobset("train")
        .queue("team-a")
        .create(&client)
        .await;
    let g = eventually(10, "the JobSet's Gang", || {
        let client = client.clone();
        async move { waits::gang(&client, NS, "jobset-train").await }
    })
    .await;
    let sets: Vec<(String, i64)> = g.data["spec"]["podSets"]
        .as_array()
        .expect("pod sets")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["count"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        sets,
        [("driver".to_string(), 1), ("workers".to_string(), 4)]
    );
    assert_eq!(g.owner_references()[0].kind, "JobSet");
    let running = wait_for_driver_and_workers(&client, "train", 4, 40).await;
    // one launch set: four GPU nodes, all written before the first launch
    let launches = cloud.launch_calls();
    assert_eq!(launches.len(), 4, "{launches:?}");
    assert_eq!(launches[0].poolnodes_seen, Some(4));
    let gpu_nodes: BTreeSet<String> = poolnode_node_names(&client).await;
    assert_eq!(gpu_nodes.len(), 4);
    assert_eq!(
        running["driver"],
        ["cpu-0"],
        "the driver runs on the CPU node"
    );
    let workers: BTreeSet<String> = running["workers"].iter().cloned().collect();
    assert_eq!(workers, gpu_nodes, "one worker per launched GPU node");
    // pinned by node selector per pod set: the JobSet's affinity is immutable
    let js = jobset(&client, "train").await;
    let selector = |i: usize| {
        js.data["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]["nodeSelector"]
            .clone()
    };
    assert_eq!(
        selector(0)["pod-set.muster.dev/driver"],
        "team-a.jobset-train"
    );
    assert!(selector(0).get("pod-set.muster.dev/workers").is_none());
    assert_eq!(
        selector(1)["pod-set.muster.dev/workers"],
        "team-a.jobset-train"
    );
    // the JobSet was unsuspended only once the launch set was Ready
    let unsuspended_with = eventually(10, "the emulator to see the workers start", || {
        let seen = emu.seen.lock().expect("seen").clone();
        async move {
            seen.unsuspended_with_ready_nodes
                .get("train-workers-0")
                .copied()
        }
    })
    .await;
    assert_eq!(unsuspended_with, 4);
    // every pod succeeds: the JobSet completes, and its gang finishes
    eventually(30, "the JobSet Completed and its Gang Finished", || {
        let client = client.clone();
        async move {
            let js = jobset(&client, "train").await;
            let done = js.data["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Completed" && c["status"] == "True")
            });
            (done && gang_phase(&client, NS, "jobset-train").await.as_deref() == Some("Finished"))
                .then_some(())
        }
    })
    .await;
}

/// Admitted, then evicted (its pods never become ready in time): the JobSet
/// is suspended (its controller suspends the child Jobs, whose pods go) and
/// then its templates restored; once pods can run it is admitted again and
/// runs.
#[tokio::test]
async fn jobset_evicted_whole_then_readmitted() {
    let (server, client) = world(true).await;
    cpu_node(&client, "cpu-0").await;
    gpu_node("gpu-0").create(&client).await;
    gpu_node("gpu-1").create(&client).await;
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "1s"})).await;
    let cloud = FakeCloud::new(None);
    // no kubelet or scheduler yet: the pods never run, and the gang is
    // evicted; the backoff leaves time to see the stop finished before the
    // gang is admitted again (with API chaos, writes are retried a cycle on)
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |c| {
            c.policy.requeue_backoff_base = muster_planner::Dur::secs(6);
        },
    );
    objects::jobset("again")
        .queue("team-a")
        .workers(2)
        .create(&client)
        .await;
    eventually(20, "the JobSet unsuspended", || {
        let client = client.clone();
        async move { (jobset(&client, "again").await.data["spec"]["suspend"] == false).then_some(()) }
    })
    .await;
    eventually(20, "the gang evicted", || {
        let client = client.clone();
        async move {
            let g = waits::gang(&client, NS, "jobset-again").await;
            if std::env::var("MUSTER_TEST_DUMP").is_ok() {
                eprintln!(
                    "GANG {}",
                    g.as_ref()
                        .map(|g| g.data["status"].to_string())
                        .unwrap_or_default()
                );
            }
            (g?.data["status"]["phase"] == "Evicted").then_some(())
        }
    })
    .await;
    let js = eventually(10, "the stop finished", || {
        let client = client.clone();
        async move {
            let js = jobset(&client, "again").await;
            let a = js.annotations();
            (js.data["spec"]["suspend"] == true
                && !a.contains_key("muster.dev/stopping")
                && !a.contains_key("muster.dev/admitted-nodes"))
            .then_some(js)
        }
    })
    .await;
    assert!(
        js.data["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
            .get("nodeSelector")
            .is_none(),
        "the submitted template is back"
    );
    assert!(
        !js.annotations()
            .contains_key("muster.dev/original-template")
    );
    // pin (update), start (patch), stop (patch), restore (update): the
    // templates changed only while the JobSet was suspended
    let verbs: Vec<String> = server
        .audited("controller")
        .into_iter()
        .filter(|(v, g, r, _)| {
            g == "jobset.x-k8s.io" && r == "jobsets" && (v == "patch" || v == "update")
        })
        .map(|(v, ..)| v)
        .collect();
    if std::env::var("MUSTER_API_CHAOS").is_ok_and(|c| !c.is_empty()) {
        // Under API chaos the audit log also holds the requests the server
        // failed (it logs each request as it arrives), and the controller
        // retried: the four writes appear in this order among them.
        let mut want = ["update", "patch", "patch", "update"]
            .into_iter()
            .peekable();
        for v in &verbs {
            if want.peek() == Some(&v.as_str()) {
                want.next();
            }
        }
        assert!(want.peek().is_none(), "{verbs:?}");
    } else {
        assert_eq!(verbs[..3], ["update", "patch", "patch"], "{verbs:?}");
        // then the restore (an update, retried from the object read anew
        // when the JobSet controller's status write made it conflict); the
        // re-admission may already have followed it (update, then patch)
        assert_eq!(
            verbs.get(3).map(String::as_str),
            Some("update"),
            "{verbs:?}"
        );
    }
    // the child Jobs were suspended by the JobSet controller
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("jobset.sigs.k8s.io/jobset-name=again"))
        .await
        .expect("jobs")
        .items;
    assert_eq!(jobs.len(), 3);
    assert!(
        jobs.iter()
            .all(|j| j.spec.as_ref().and_then(|s| s.suspend) == Some(true))
    );
    // pods can run now: admitted again after the backoff, and running
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "60s"})).await;
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    wait_for_driver_and_workers(&client, "again", 2, 40).await;
    let g = waits::gang(&client, NS, "jobset-again")
        .await
        .expect("gang");
    assert!(g.data["status"]["evictions"].as_i64().unwrap_or(0) >= 1);
}

/// With the JobSet CRD absent, the kind is skipped with a condition on the
/// queue (and one log line), no request for it is retried, and Jobs are
/// still served.
#[tokio::test]
async fn jobset_kind_without_its_crd_is_skipped_and_reported() {
    let (server, client) = world(false).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    job("small").queue("team-a").create(&client).await;
    eventually(20, "the Job admitted and the queue's condition", || {
        let client = client.clone();
        async move {
            let q = Api::<DynamicObject>::all_with(client.clone(), &ar("GPUQueue", "gpuqueues"))
                .get("team-a")
                .await
                .ok()?;
            let cond = q.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "WorkloadKindsServed")?
                .clone();
            let running = gang_phase(&client, NS, "small").await.as_deref() == Some("Running");
            (running && cond["status"] == "False" && cond["reason"] == "CRDNotInstalled")
                .then_some(cond)
        }
    })
    .await;
    // no watch of the missing kind was started: no request for it at all after discovery
    let asked: Vec<_> = server
        .audited("controller")
        .into_iter()
        .filter(|(v, g, _, _)| g == "jobset.x-k8s.io" && v != "get")
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
}

/// The queue's `WorkloadKindsServed` condition once it reads `reason`.
async fn kinds_condition(client: &kube::Client, reason: &'static str) -> serde_json::Value {
    eventually(20, "the queue's WorkloadKindsServed condition", || {
        let client = client.clone();
        async move {
            let q = Api::<DynamicObject>::all_with(client.clone(), &ar("GPUQueue", "gpuqueues"))
                .get("team-a")
                .await
                .ok()?;
            q.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "WorkloadKindsServed" && c["reason"] == reason)
                .cloned()
        }
    })
    .await
}

/// A JobSet CRD that serves only an older version than the one muster
/// reads (`v1alpha1`, not `v1alpha2`) is not "not installed": the queue
/// says which version is served and which muster reads, and no watch of
/// the kind starts. Before, discovery of `jobset.x-k8s.io/v1alpha2` alone
/// said `CRDNotInstalled`, pointing the operator at a CRD that is there.
#[tokio::test]
async fn jobset_crd_serving_only_another_version_is_reported_as_such() {
    let (server, client) = world(false).await;
    support::workload_crds::install_versions(&client, "jobset", &[("v1alpha1", true)]).await;
    let cloud = FakeCloud::new(None);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    let cond = kinds_condition(&client, "UnsupportedVersion").await;
    assert_eq!(cond["status"], "False");
    let msg = cond["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("jobsets.jobset.x-k8s.io only in version v1alpha1")
            && msg.contains("muster reads jobset.x-k8s.io/v1alpha2"),
        "{msg}"
    );
    let asked: Vec<_> = server
        .audited("controller")
        .into_iter()
        .filter(|(v, g, _, _)| g == "jobset.x-k8s.io" && v != "get")
        .collect();
    assert!(asked.is_empty(), "no watch: {asked:?}");
}

/// A JobSet CRD serving two versions (an older one beside muster's, which
/// is the storage version): a JobSet submitted in the older version is
/// read, pinned and run by muster through its own.
#[tokio::test]
async fn jobset_submitted_in_another_served_version_runs() {
    let (server, client) = world(false).await;
    support::workload_crds::install_versions(
        &client,
        "jobset",
        &[("v1alpha1", false), ("v1alpha2", true)],
    )
    .await;
    gpu_node("gpu-0").create(&client).await;
    gpu_node("gpu-1").create(&client).await;
    cpu_node(&client, "cpu-0").await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    let mut body = objects::jobset("older").queue("team-a").workers(2).build();
    body["apiVersion"] = json!("jobset.x-k8s.io/v1alpha1");
    let older = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha1", "JobSet"),
        "jobsets",
    );
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &older)
        .create(
            &PostParams::default(),
            &serde_json::from_value(body).expect("object"),
        )
        .await
        .expect("submit in v1alpha1");
    wait_for_driver_and_workers(&client, "older", 2, 40).await;
    assert!(waits::gang(&client, NS, "jobset-older").await.is_some());
}

/// JobSet's own mutating webhook as JobSet's release installs it
/// (kubernetes-sigs/jobset `config/components/webhook/manifests.yaml`:
/// `mjobset.kb.io` on CREATE and UPDATE of `jobsets`, failurePolicy Fail,
/// behind Service `jobset-webhook-service`), here with no endpoint: the
/// JobSet controller's Deployment is down.
fn jobset_webhook_down() -> serde_json::Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "jobset-mutating-webhook-configuration"},
        "webhooks": [{
            "name": "mjobset.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {"service": {"namespace": "jobset-system", "name": "jobset-webhook-service",
                "path": "/mutate-jobset-x-k8s-io-v1alpha2-jobset"}},
            "rules": [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"],
                "operations": ["CREATE", "UPDATE"], "resources": ["jobsets"]}]
        }]
    })
}

/// With JobSet's own webhook unreachable, every write to a JobSet fails
/// ("failed calling webhook"): the admitted JobSet stays suspended, its
/// pods never start (no partial gang), and the JobSet carries a Warning
/// Event `WorkloadWriteFailed` with the API server's answer; once the
/// webhook answers again the gang starts whole. Before, the failure was
/// only a log line of the controller's.
#[tokio::test]
async fn jobset_whose_own_webhook_is_down_waits_with_an_event_then_runs() {
    let (server, client) = world(true).await;
    cpu_node(&client, "cpu-0").await;
    gpu_node("gpu-0").create(&client).await;
    gpu_node("gpu-1").create(&client).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    objects::jobset("hooked")
        .queue("team-a")
        .workers(2)
        .create(&client)
        .await;
    let hooks = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ),
        "mutatingwebhookconfigurations",
    );
    let hooks = Api::<DynamicObject>::all_with(client.clone(), &hooks);
    hooks
        .create(
            &PostParams::default(),
            &serde_json::from_value(jobset_webhook_down()).expect("config"),
        )
        .await
        .expect("the JobSet webhook");
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    let ev = eventually(30, "the WorkloadWriteFailed Event on the JobSet", || {
        let client = client.clone();
        async move {
            waits::events_of(&client, "WorkloadWriteFailed")
                .await
                .into_iter()
                .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("hooked"))
        }
    })
    .await;
    let note = ev.note.unwrap_or_default();
    assert!(
        note.contains("failed calling webhook") && note.contains("mjobset.kb.io"),
        "{note}"
    );
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        jobset(&client, "hooked").await.data["spec"]["suspend"],
        true
    );
    assert!(
        running_by_set(&client, "hooked").await.is_empty(),
        "no pod runs"
    );
    hooks
        .delete("jobset-mutating-webhook-configuration", &Default::default())
        .await
        .expect("the webhook back");
    wait_for_driver_and_workers(&client, "hooked", 2, 40).await;
}

/// A JobSet whose workers wait for its driver to complete (`dependsOn`
/// with status Complete, as Kubeflow Trainer's runtimes order their
/// initializers before the trainer nodes), under a pods-ready timeout
/// shorter than the driver runs: the gang is Running once the driver runs
/// (the workers cannot exist yet), and completes without an eviction.
/// Before, the gang waited for all three pods at once, and the timeout
/// evicted it while its driver was still running, every time. Then one
/// with `startupPolicy: InOrder` (its workers created once the driver is
/// ready) runs and completes the same way.
#[tokio::test]
async fn jobset_whose_workers_depend_on_its_driver_runs_through_a_short_pods_ready_timeout() {
    let (server, client) = world(true).await;
    cpu_node(&client, "cpu-0").await;
    gpu_node("gpu-0").create(&client).await;
    gpu_node("gpu-1").create(&client).await;
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "2s"})).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as Arc<dyn support::emulator::Machines>],
        Some(Duration::from_secs(4)),
    );
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    let mut body = objects::jobset("staged").queue("team-a").workers(2).build();
    body["spec"]["replicatedJobs"][1]["dependsOn"] =
        json!([{"name": "driver", "status": "Complete"}]);
    support::create_object(&client, "jobsets", Some(NS), body).await;
    wait_for_gang_phase(&client, NS, "jobset-staged", &["Running"], 20).await;
    assert!(
        !running_by_set(&client, "staged")
            .await
            .contains_key("workers"),
        "Running while only the driver could run"
    );
    let workers = eventually(30, "the workers running after the driver completed", || {
        let client = client.clone();
        async move {
            let r = running_by_set(&client, "staged").await;
            r.get("workers").filter(|w| w.len() == 2).cloned()
        }
    })
    .await;
    assert_eq!(workers.len(), 2);
    for name in ["staged", "ordered"] {
        if name == "ordered" {
            let mut body = objects::jobset(name).queue("team-a").workers(2).build();
            body["spec"]["startupPolicy"] = json!({"startupPolicyOrder": "InOrder"});
            support::create_object(&client, "jobsets", Some(NS), body).await;
        }
        let gang = format!("jobset-{name}");
        wait_for_gang_phase(&client, NS, &gang, &["Finished"], 40).await;
        let g = waits::gang(&client, NS, &gang).await.expect("gang");
        assert_eq!(
            g.data["status"]["evictions"].as_i64().unwrap_or(0),
            0,
            "{name}: {}",
            g.data["status"]
        );
    }
    let ordered = jobset(&client, "ordered").await;
    assert!(
        ordered.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "StartupPolicyCompleted")),
        "the JobSet controller went through the order: {}",
        ordered.data["status"]
    );
}

/// A pod of group `group` (of `size`), held by muster's scheduling gate as
/// the admission webhook leaves it.
async fn submit_pod(client: &kube::Client, name: &str, group: &str, size: u32) {
    submit_pod_with(client, name, group, size, json!({})).await;
}

/// [`submit_pod`], with `spec` fields added to the pod's.
async fn submit_pod_with(
    client: &kube::Client,
    name: &str,
    group: &str,
    size: u32,
    spec: serde_json::Value,
) {
    let mut pod = json!({
        "metadata": {"name": name, "namespace": NS,
            "labels": {"muster.dev/queue": "team-a", "muster.dev/pod-group": group},
            "annotations": {"muster.dev/pod-group-size": size.to_string()}},
        "spec": {"restartPolicy": "Never", "schedulingGates": [{"name": "muster.dev/admission"}],
            "containers": [{"name": "w", "image": "trainer",
                "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "8", "memory": "64Gi"}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    });
    if let (Some(into), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        into.extend(extra.clone());
    }
    let pod: Pod = serde_json::from_value(pod).expect("pod");
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("submit pod");
}

/// The group's pods: name → (node, phase, still gated).
async fn group_pods(
    client: &kube::Client,
    group: &str,
) -> BTreeMap<String, (String, String, bool)> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("muster.dev/pod-group={group}")))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let spec = p.spec.clone().unwrap_or_default();
            (
                p.name_any(),
                (
                    spec.node_name.unwrap_or_default(),
                    p.status.and_then(|s| s.phase).unwrap_or_default(),
                    spec.scheduling_gates.is_some_and(|g| !g.is_empty()),
                ),
            )
        })
        .collect()
}

/// A pod group waits gated until all its pods exist, then is admitted onto
/// one launch set and released together; when its pods succeed its gang
/// finishes; once its pods are deleted, so is its gang.
#[tokio::test]
async fn pod_group_held_until_whole_then_released_together_then_completes() {
    let (server, client) = world(false).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as Arc<dyn support::emulator::Machines>],
        Some(Duration::from_secs(3)),
    );
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::PodGroup],
        |_| {},
    );
    submit_pod(&client, "w-0", "ring", 2).await;
    // one of two: no gang, no launch, the pod stays gated
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(waits::gang(&client, NS, "podgroup-ring").await.is_none());
    assert!(cloud.launch_calls().is_empty());
    assert!(group_pods(&client, "ring").await["w-0"].2, "still gated");
    submit_pod(&client, "w-1", "ring", 2).await;
    let pods = eventually(40, "both pods running, released together", || {
        let client = client.clone();
        async move {
            let pods = group_pods(&client, "ring").await;
            (pods.len() == 2
                && pods
                    .values()
                    .all(|(_, phase, gated)| phase == "Running" && !gated))
            .then_some(pods)
        }
    })
    .await;
    let nodes: BTreeSet<String> = pods.values().map(|(n, ..)| n.clone()).collect();
    let launched: BTreeSet<String> = poolnode_node_names(&client).await;
    assert_eq!(nodes, launched, "one launch set of two nodes, one pod each");
    assert_eq!(cloud.launch_calls()[0].poolnodes_seen, Some(2));
    let g = waits::gang(&client, NS, "podgroup-ring")
        .await
        .expect("gang");
    assert_eq!(g.data["spec"]["podSets"][0]["count"], 2);
    wait_for_gang_phase(&client, NS, "podgroup-ring", &["Finished"], 30).await;
    // kept while its pods are; the pods deleted, the gang (which has no
    // owner for the garbage collector to follow) is deleted too
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(waits::gang(&client, NS, "podgroup-ring").await.is_some());
    let pod_api = Api::<Pod>::namespaced(client.clone(), NS);
    for name in ["w-0", "w-1"] {
        pod_api
            .delete(name, &kube::api::DeleteParams::default())
            .await
            .expect("delete pod");
    }
    wait_for_gang_gone(&client, NS, "podgroup-ring", 20).await;
}

/// A pod group's required node affinity is the planner's: of two free GPU
/// nodes, the group is placed on the one its affinity allows. Before, the
/// planner never saw a gated pod's affinity, pinned the group to the first
/// node, and the pod stayed Pending there for good.
#[tokio::test]
async fn pod_group_runs_on_the_node_its_required_node_affinity_allows() {
    let (server, client) = world(false).await;
    gpu_node("gpu-a").create(&client).await;
    gpu_node("gpu-b")
        .label("topology.kubernetes.io/zone", "us-central1-b")
        .create(&client)
        .await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::PodGroup],
        |_| {},
    );
    let zone_b = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-central1-b"]}]}]}}});
    submit_pod_with(&client, "z-0", "zonal", 1, json!({"affinity": zone_b})).await;
    let pods = eventually(30, "the pod running", || {
        let client = client.clone();
        async move {
            let pods = group_pods(&client, "zonal").await;
            pods.values()
                .all(|(_, phase, gated)| phase == "Running" && !gated)
                .then_some(pods)
        }
    })
    .await;
    assert_eq!(pods["z-0"].0, "gpu-b");
    let g = waits::gang(&client, NS, "podgroup-zonal")
        .await
        .expect("gang");
    assert_eq!(
        g.data["spec"]["podSets"][0]["affinity"]["requiredNodeSelectorTerms"][0]["matchExpressions"]
            [0]["values"],
        json!(["us-central1-b"])
    );
    assert!(cloud.launch_calls().is_empty(), "no launch");
}

/// Admitted and released, then evicted (its pods never run in time): a
/// released pod cannot be gated again, so the group's pods are deleted;
/// recreated (gated, as their owner or the user submits them again) they
/// are queued, admitted again and run.
#[tokio::test]
async fn pod_group_evicted_by_deleting_its_pods_then_readmitted() {
    let (server, client) = world(false).await;
    gpu_node("gpu-0").create(&client).await;
    gpu_node("gpu-1").create(&client).await;
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "1s"})).await;
    let cloud = FakeCloud::new(None);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::PodGroup],
        |c| {
            c.policy.requeue_backoff_base = muster_planner::Dur::secs(2);
        },
    );
    submit_pod(&client, "w-0", "ring", 2).await;
    submit_pod(&client, "w-1", "ring", 2).await;
    eventually(20, "released", || {
        let client = client.clone();
        async move {
            let pods = group_pods(&client, "ring").await;
            (pods.len() == 2 && pods.values().all(|(_, _, gated)| !gated)).then_some(())
        }
    })
    .await;
    let pod = Api::<Pod>::namespaced(client.clone(), NS)
        .get("w-0")
        .await
        .expect("pod");
    let selector = pod.spec.and_then(|s| s.node_selector).unwrap_or_default();
    assert_eq!(
        selector.get("muster.dev/gang").map(String::as_str),
        Some("team-a.podgroup-ring")
    );
    eventually(20, "evicted and its pods deleted", || {
        let client = client.clone();
        async move {
            let evicted =
                gang_phase(&client, NS, "podgroup-ring").await.as_deref() == Some("Evicted");
            (evicted && group_pods(&client, "ring").await.is_empty()).then_some(())
        }
    })
    .await;
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "60s"})).await;
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    submit_pod(&client, "w-0", "ring", 2).await;
    submit_pod(&client, "w-1", "ring", 2).await;
    eventually(40, "running again", || {
        let client = client.clone();
        async move {
            let pods = group_pods(&client, "ring").await;
            (pods.len() == 2 && pods.values().all(|(_, phase, _)| phase == "Running")).then_some(())
        }
    })
    .await;
    let g = waits::gang(&client, NS, "podgroup-ring")
        .await
        .expect("gang");
    assert!(g.data["status"]["evictions"].as_i64().unwrap_or(0) >= 1);
    assert_no_invalid_writes();
}

/// An elastic Job (`muster.dev/min-count`) admitted at its least count where
/// only that many fit: its `parallelism` is lowered to the pods admitted
/// while it is suspended (the submitted value recorded), it runs them, and
/// its gang counts as running with them.
#[tokio::test]
async fn elastic_job_admitted_at_min_count_runs_that_many() {
    let (server, client) = world(false).await;
    gpu_node("gpu-0").create(&client).await;
    gpu_node("gpu-1").create(&client).await;
    // the pool sells only 1-GPU machines: no launch can hold an 8-GPU pod
    patch_pool(
        &client,
        "a100",
        json!({"requirements": {"instanceTypes": ["fake-1gpu"]}}),
    )
    .await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, &[WorkloadKind::Job], |_| {});
    job("elastic")
        .queue("team-a")
        .annotation("muster.dev/min-count", "2")
        .pods(4)
        .gpus(8)
        .create(&client)
        .await;
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), NS);
    wait_for_gang_phase(&client, NS, "elastic", &["Running"], 30).await;
    let j = jobs.get("elastic").await.expect("job");
    let spec = j.spec.clone().expect("spec");
    assert_eq!((spec.parallelism, spec.completions), (Some(2), Some(4)));
    assert_eq!(
        j.annotations()
            .get("muster.dev/original-parallelism")
            .map(String::as_str),
        Some("4")
    );
    let running = running_pods(&client, NS, "job-name=elastic").await.len();
    assert_eq!(running, 2);
    assert!(cloud.launch_calls().is_empty());
}

/// The other side of the headline: a driver whose requests name a GPU (and
/// that tolerates the GPU taint, as GPU pods do) is placed on a GPU node —
/// here a fifth one of the launch set, the workers filling the other four.
#[tokio::test]
async fn jobset_driver_that_requests_a_gpu_runs_on_a_gpu_node() {
    let (server, client) = world(true).await;
    cpu_node(&client, "cpu-0").await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    objects::jobset("gpudriver")
        .queue("team-a")
        .gpu_driver()
        .create(&client)
        .await;
    let running = wait_for_driver_and_workers(&client, "gpudriver", 4, 40).await;
    let gpu_nodes: BTreeSet<String> = poolnode_node_names(&client).await;
    assert!(
        gpu_nodes.contains(&running["driver"][0]),
        "the driver on a GPU node: {running:?}, {gpu_nodes:?}"
    );
    assert_ne!(running["driver"][0], "cpu-0");
}

/// A JobSet whose worker template carries a pod field newer than muster's
/// Kubernetes types (`hostnameOverride`, Kubernetes 1.34) is pinned and
/// runs with the field kept: the pin changes only the node selector and
/// tolerations in the JSON read from the server. Before, the template was
/// written back from its typed copy without the field, and the JobSet
/// webhook's `ValidateUpdate` refused the change of an immutable field.
#[tokio::test]
async fn jobset_pod_field_newer_than_muster_s_types_survives_the_pin() {
    let (server, client) = world(true).await;
    cpu_node(&client, "cpu-0").await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(
        &server,
        &cloud,
        &[WorkloadKind::Job, WorkloadKind::JobSet],
        |_| {},
    );
    let mut body = objects::jobset("newer").queue("team-a").workers(1).build();
    let pod = "/spec/replicatedJobs/1/template/spec/template/spec";
    body.pointer_mut(pod)
        .and_then(serde_json::Value::as_object_mut)
        .expect("worker pod spec")
        .insert("hostnameOverride".into(), json!("worker"));
    support::create_object(&client, "jobsets", Some(objects::TEAM_A), body).await;
    wait_for_driver_and_workers(&client, "newer", 1, 40).await;
    let js = jobset(&client, "newer").await;
    let spec = js.data.pointer(pod).expect("worker pod spec");
    assert_eq!(spec["hostnameOverride"], "worker", "{spec}");
    assert!(spec["nodeSelector"].is_object(), "pinned: {spec}");
    assert_no_invalid_writes();
}
