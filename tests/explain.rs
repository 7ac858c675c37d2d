//! `muster explain` against the API test server: the cluster read once,
//! translated and planned as the controller does, for a gang blocked by
//! quota, by a pool limit, by capacity errors, and one that fits once a
//! running gang ends; and the binary found by kubectl as the plugin
//! `kubectl-muster`.

mod support;

use std::process::Command;

use kube::api::{Api, Patch, PatchParams};
use muster::controller::base::time;
use muster::controller::explain;
use muster_planner::Time;
use serde_json::json;
use support::fake_cloud::{FakeCloud, FakeFactory};
use support::objects::{gpu_node, nodeclass, pool, queue};
use support::{ApiServer, create};

const NS: &str = "default";

/// A NodeClass, a pool `a100` of 8 × A100 machines ($10/h) with `limits`,
/// and a queue `team-a` with a nominal quota of `quota` GPUs.
async fn world(limits: serde_json::Value, quota: &str) -> (ApiServer, kube::Client) {
    let server = ApiServer::start();
    let client = server.client();
    support::install_crds(&client).await;
    nodeclass("nc").create(&client).await;
    pool("a100")
        .node_class("nc")
        .limits(limits)
        .create(&client)
        .await;
    queue("team-a")
        .any_namespace()
        .nominal_gpus(quota)
        .create(&client)
        .await;
    (server, client)
}

/// A queued gang of `pods` pods with 8 GPUs each.
async fn gang(client: &kube::Client, name: &str, pods: i32, expected: Option<&str>) {
    let mut spec = json!({
        "queue": "team-a",
        "podSets": [{"name": "main", "count": pods, "requests": {"nvidia.com/gpu": "8", "cpu": "4"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}]
    });
    if let Some(d) = expected {
        spec["expectedDuration"] = json!(d);
    }
    create(
        client,
        "Gang",
        "gangs",
        Some(NS),
        json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}),
    )
    .await;
}

/// Gang `name` runs on `node` since ten minutes ago.
async fn running(client: &kube::Client, name: &str, node: &str, now: Time) {
    let since = time::format(Time(now.0 - 600));
    let api = Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        NS,
        &support::ar("Gang", "gangs"),
    );
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "assignments": [{"podSet": "main", "index": 0, "node": node}],
            "reservedNodes": [node],
            "admittedAt": since, "startedAt": since,
        }})),
    )
    .await
    .expect("gang status");
}

async fn explained(
    client: &kube::Client,
    cloud: &std::sync::Arc<FakeCloud>,
    gang: &str,
) -> explain::Explanation {
    let now = time::now();
    let observed = muster::controller::observe::once::once(client)
        .await
        .expect("observe");
    let (tr, notes) = explain::snapshot(&observed, &FakeFactory(cloud.clone()), now).await;
    assert!(notes.is_empty(), "{notes:?}");
    explain::explain(&tr, &Default::default(), now, &format!("{NS}/{gang}"))
        .expect("gang explained")
}

#[tokio::test]
async fn a_gang_over_its_queues_quota_says_so_and_when_it_starts() {
    let (_server, client) = world(json!({}), "8").await;
    let cloud = FakeCloud::new(None);
    gpu_node("n1").create(&client).await;
    gang(&client, "r", 1, Some("1h")).await;
    running(&client, "r", "n1", time::now()).await;
    gang(&client, "q", 1, None).await;
    let e = explained(&client, &cloud, "q").await;
    assert_eq!(e.decision, "wait", "{e:#?}");
    assert_eq!(e.reason.as_deref(), Some("QuotaExhausted"), "{e:#?}");
    assert_eq!(e.state, "Queued", "{e:#?}");
    assert_eq!(e.position, Some(1), "{e:#?}");
    assert!(
        e.unblock
            .iter()
            .any(|u| u.contains("queue team-a uses 8 nvidia.com/gpu against a nominal quota of 8")),
        "{e:#?}"
    );
    // r ends 50 minutes from now; then q fits on n1
    assert_eq!(e.starts_after.as_deref(), Some("default/r"), "{e:#?}");
    assert!(e.start_estimate.is_some());
    assert!(e.launches.is_empty());
}

#[tokio::test]
async fn a_gang_held_back_by_a_pool_limit_names_the_limit() {
    let (_server, client) = world(json!({"maxNodes": 1}), "64").await;
    let cloud = FakeCloud::new(None);
    gang(&client, "big", 2, None).await;
    let e = explained(&client, &cloud, "big").await;
    assert_eq!(e.decision, "wait", "{e:#?}");
    assert_eq!(e.reason.as_deref(), Some("PoolLimit"), "{e:#?}");
    assert!(
        e.unblock
            .iter()
            .any(|u| u.contains("pool a100 has 0 of maxNodes 1")),
        "{e:#?}"
    );
}

#[tokio::test]
async fn a_gang_blocked_by_capacity_errors_names_the_offering() {
    let (_server, client) = world(json!({}), "64").await;
    let cloud = FakeCloud::new(None);
    cloud.unavailable("fake-8gpu", Time(time::now().0 + 300));
    gang(&client, "g", 1, None).await;
    let e = explained(&client, &cloud, "g").await;
    assert_eq!(e.decision, "wait", "{e:#?}");
    assert_eq!(e.reason.as_deref(), Some("NoOffering"), "{e:#?}");
    assert!(
        e.unblock
            .iter()
            .any(|u| u.contains("fake-8gpu/us-central1-a/on-demand had a capacity error")),
        "{e:#?}"
    );
}

#[tokio::test]
async fn a_gang_that_can_launch_shows_the_offerings_and_prices() {
    let (_server, client) = world(json!({}), "64").await;
    let cloud = FakeCloud::new(None);
    gang(&client, "g", 2, None).await;
    let e = explained(&client, &cloud, "g").await;
    assert_eq!(e.decision, "launch", "{e:#?}");
    assert_eq!(e.launches.len(), 2, "{e:#?}");
    assert!(
        e.launches
            .iter()
            .all(|l| l.offering == "fake-8gpu/us-central1-a/on-demand"
                && (l.price_per_hour - 10.0).abs() < 1e-9)
    );
}

#[tokio::test]
async fn a_gang_that_fits_once_a_running_gang_ends() {
    // the pool may not grow: the waiting gang fits only on n1, after r
    let (_server, client) = world(json!({"maxNodes": 0}), "64").await;
    let cloud = FakeCloud::new(None);
    gpu_node("n1").create(&client).await;
    gang(&client, "r", 1, Some("2h")).await;
    let now = time::now();
    running(&client, "r", "n1", now).await;
    gang(&client, "next", 1, None).await;
    let e = explained(&client, &cloud, "next").await;
    assert_eq!(e.decision, "wait", "{e:#?}");
    assert_eq!(e.starts_after.as_deref(), Some("default/r"), "{e:#?}");
    // started 10 minutes ago, expected to run 2 hours
    let at = e
        .start_estimate
        .as_deref()
        .and_then(time::parse)
        .expect("estimate");
    assert!(
        (at.0 - (now.0 - 600 + 7200)).abs() <= 5,
        "{at:?} vs {now:?}"
    );
}

/// kubectl finds the binary as the plugin `kubectl-muster` (a link named so
/// on the PATH) and runs its subcommands.
#[tokio::test]
async fn kubectl_runs_the_plugin() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("kubectl not installed; skipped");
        return;
    }
    let (server, client) = world(json!({}), "16").await;
    let dir = std::env::temp_dir().join(format!("muster-plugin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_muster"), dir.join("kubectl-muster"))
        .expect("link");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let list = Command::new("kubectl")
        .args(["plugin", "list", "--name-only"])
        .env("PATH", &path)
        .output()
        .expect("kubectl");
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("kubectl-muster"),
        "{list:?}"
    );
    let out = Command::new("kubectl")
        .args(["muster", "queues", "--kube-url", &server.url, "-o", "json"])
        .env("PATH", &path)
        .output()
        .expect("kubectl muster");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v[0]["queue"], "team-a", "{v}");
    assert_eq!(v[0]["gpuQuota"], "16", "{v}");
    // no offerings can be listed for the NodeClass here (its cloud is not
    // built in, or has no credentials): nothing can be bought for the gang,
    // and a note says why
    gang(&client, "g", 1, None).await;
    let out = Command::new("kubectl")
        .args([
            "muster",
            "explain",
            "g",
            "-n",
            NS,
            "--kube-url",
            &server.url,
            "-o",
            "yaml",
        ])
        .env("PATH", &path)
        .output()
        .expect("kubectl muster explain -o yaml");
    assert!(out.status.success(), "{out:?}");
    let y: serde_json::Value = serde_norway::from_slice(&out.stdout).expect("yaml");
    assert_eq!(y["gang"], "default/g", "{y}");
    assert_eq!(y["queue"], "team-a", "{y}");
    assert_eq!(y["decision"], "wait", "{y}");
    assert_eq!(y["reason"], "Unsatisfiable", "{y}");
    assert!(
        y["notes"][0]
            .as_str()
            // without the NodeClass's cloud built in: "no offerings listed";
            // with it (and no credentials here): "offerings could not be listed"
            .is_some_and(|n| n.starts_with("pool a100: ") && n.contains("offerings")),
        "{y}"
    );
    let out = Command::new("kubectl")
        .args(["muster", "explain", "g", "--kube-url", &server.url])
        .env("PATH", &path)
        .output()
        .expect("kubectl muster explain");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Waits:    Unsatisfiable: "), "{text}");
    assert!(text.contains("Note:     pool a100: "), "{text}");
    let out = Command::new("kubectl")
        .args(["muster", "explain", "nothing", "--kube-url", &server.url])
        .env("PATH", &path)
        .output()
        .expect("kubectl muster explain");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no gang default/nothing"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
