//! Validation and observability: a malformed GPUPool gets `Valid=False` and
//! a Warning Event while the others serve (8), a NodeClass whose selector
//! matches nothing is not Ready; a real Prometheus scrapes the controller's
//! metrics after scenario (2); the RBAC manifest has no wildcard and allows
//! every request the controller makes in scenario (2).
//!
//! Each runs the real `kube::Client` over HTTP against the API test server
//! and the controller in-process on a fake cloud.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams};
use muster::controller;
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{TEAM_A as NS, job, pool, start_world};
use support::scenario::{scenario_gang_of_four, scenario_gang_of_four_with, start, stub};
use support::waits::wait_for_running_pods;
use support::{ar, eventually};

// ---------------------------------------------------------------- invalid objects

#[tokio::test]
async fn s8_malformed_pool_gets_condition_and_event_others_served() {
    let (server, client) = start_world(&[]).await;
    // the schema allows any decimal; the planner's prices end below 10^12 dollars
    pool("broken")
        .no_requirements()
        .limits(json!({"maxPricePerHour": "5000000000000"}))
        .create(&client)
        .await;
    pool("orphan")
        .no_requirements()
        .node_class("missing")
        .create(&client)
        .await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("ok").queue("team-a").gpus(8).create(&client).await;
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &ar("GPUPool", "gpupools"));
    let cond = eventually(20, "Valid=False on the broken pool", || {
        let pools = pools.clone();
        async move {
            let p = pools.get("broken").await.ok()?;
            let c = p.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid")?
                .clone();
            (c["status"] == "False").then_some(c)
        }
    })
    .await;
    assert_eq!(cond["reason"], "InvalidSpec");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("limits")),
        "{cond}"
    );
    let c = eventually(10, "Valid=False on the orphan pool", || {
        let pools = pools.clone();
        async move {
            let p = pools.get("orphan").await.ok()?;
            p.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid")
                .cloned()
        }
    })
    .await;
    assert_eq!(c["reason"], "InvalidReference");
    // the good pool is Valid and serves the job
    wait_for_running_pods(&client, NS, "job-name=ok", 1, 20).await;
    let good = pools.get("a100").await.expect("a100");
    assert_eq!(good.data["status"]["conditions"][0]["status"], "True");
    // a Warning Event names the broken pool
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let ev = eventually(10, "an Event on the broken pool", || {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken"))
        }
    })
    .await;
    assert_eq!(ev.reason.as_deref(), Some("InvalidSpec"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
}

/// A NodeClass whose selector matches nothing gets `Ready=False` naming the
/// selector, and a Warning Event.
#[tokio::test]
async fn nodeclass_whose_selector_matches_nothing_is_not_ready() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    cloud.unresolvable("subnetSelectorTerms[0] (tag team=none)");
    let _ctl = start(&server, &cloud, stub());
    let cond = support::nodeclass_not_ready(&client, "gcp-default").await;
    assert_eq!(cond["reason"], "NotResolved");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("subnetSelectorTerms[0] (tag team=none) matched nothing")),
        "{cond}"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    eventually(10, "a NotResolved Event", || {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("NotResolved"))
        }
    })
    .await;
}

// ---------------------------------------------------------------- metrics and RBAC over scenario (2)

/// A real Prometheus scrapes the controller's `/metrics` after scenario (2)
/// and finds the launches, the running gang and the pool's GPUs.
#[tokio::test]
async fn s2_metrics_scraped_by_prometheus() {
    if std::env::var("MUSTER_SKIP_PROMETHEUS").as_deref() == Ok("1") {
        eprintln!("MUSTER_SKIP_PROMETHEUS=1: skipped");
        return;
    }
    let done = scenario_gang_of_four(stub()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind metrics");
    let target = listener.local_addr().expect("metrics address");
    let serving = tokio::spawn(controller::http::serve_metrics(
        listener,
        done.ctl.metrics.clone(),
        controller::http::MetricsAccess::Open,
    ));
    let prom = support::prometheus::Prometheus::start(target);
    let expected = [
        (
            r#"muster_launches_total{pool="a100",capacity_type="on-demand",result="Launched"}"#,
            4.0,
        ),
        (r#"sum(muster_gangs{phase="Running"})"#, 1.0),
        (r#"muster_pool_gpus{pool="a100"}"#, 32.0),
        (r#"muster_pool_allocated_gpus{pool="a100"}"#, 32.0),
        (r#"muster_pool_busy_gpus{pool="a100"}"#, 32.0),
        (r#"muster_pool_cost_dollars_per_hour{pool="a100"}"#, 40.0),
        (
            r#"muster_admission_wait_seconds_count{queue="team-a"}"#,
            1.0,
        ),
        ("muster_leader", 1.0),
    ];
    let prom = Arc::new(prom);
    eventually(90, "Prometheus has the expected series", || {
        let prom = prom.clone();
        async move {
            let got: Vec<Option<f64>> = expected.iter().map(|(q, _)| prom.value(q)).collect();
            let ok = expected
                .iter()
                .zip(&got)
                .all(|((_, want), got)| *got == Some(*want));
            if !ok {
                eprintln!("prometheus: {got:?}");
            }
            ok.then_some(())
        }
    })
    .await;
    let cycles = prom
        .value("muster_planner_duration_seconds_count")
        .expect("planner duration scraped");
    assert!(cycles >= 1.0, "{cycles}");
    serving.abort();
}

/// The RBAC manifest names no wildcard.
#[test]
fn rbac_has_no_wildcards() {
    let rules = support::rbac::rules();
    assert!(rules.len() >= 5, "{rules:?}");
    for r in &rules {
        for field in [&r.api_groups, &r.resources, &r.verbs] {
            assert!(
                field.iter().all(|v| !v.contains('*')),
                "wildcard in a rule of {}: {r:?}",
                r.from
            );
            assert!(
                !field.is_empty(),
                "empty list in a rule of {}: {r:?}",
                r.from
            );
        }
    }
}

/// Every request the controller makes during scenario (2) is allowed by
/// `deploy/rbac.yaml` (the API test server's audit log lists them).
#[tokio::test]
async fn rbac_allows_every_request_of_scenario_2() {
    let log = std::env::temp_dir().join(format!("muster-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let log_arg = log.to_str().expect("utf-8 temp path").to_string();
    let done = scenario_gang_of_four_with(stub(), &["--audit-log", &log_arg]).await;
    drop(done);
    let text = std::fs::read_to_string(&log).expect("audit log");
    let _ = std::fs::remove_file(&log);
    let rules = support::rbac::rules();
    let mut used = vec![false; rules.len()];
    let mut denied = BTreeSet::new();
    let mut seen = 0;
    for line in text.lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("audit line");
        if e["client"] != "controller" {
            continue;
        }
        seen += 1;
        let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
        let resource = match s("subresource").as_str() {
            "" => s("resource"),
            sub => format!("{}/{sub}", s("resource")),
        };
        let (verb, group, ns) = (s("verb"), s("apiGroup"), s("namespace"));
        let mut allowed = false;
        for (i, r) in rules.iter().enumerate() {
            if r.allows(&verb, &group, &resource, &ns, &s("name")) {
                used[i] = true;
                allowed = true;
            }
        }
        if !allowed {
            denied.insert(format!("{verb} {group}/{resource} in {ns:?}"));
        }
    }
    assert!(seen > 20, "the audit log saw {seen} controller requests");
    assert!(denied.is_empty(), "requests RBAC would deny: {denied:#?}");
    for (r, used) in rules.iter().zip(&used) {
        if !used {
            eprintln!("rule not used by scenario (2): {} {r:?}", r.from);
        }
    }
}

/// Tenancy: the webhook refuses a Job whose GPUQueue does not admit its
/// namespace, naming both, and admits (suspends) one whose queue does. The
/// queue `team-a` selects only namespace `team-a`; `team-b` exists.
#[tokio::test]
async fn the_webhook_refuses_a_job_whose_queue_does_not_admit_its_namespace() {
    let (server, _client) = start_world(&[]).await;
    let hook = controller::webhook::Webhook {
        namespaces: None,
        leader_worker_sets: None,
        default_queue_label: String::new(),
        queues: Some(server.client_as("controller")),
    };
    let review = |ns: &str| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "operation": "CREATE", "namespace": ns, "name": "train",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
            "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "userInfo": {"username": "alice"}, "dryRun": false,
            "object": {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "train", "namespace": ns, "labels": {"muster.dev/queue": "team-a"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}}})
        .to_string()
    };
    let answer =
        |body: Vec<u8>| -> serde_json::Value { serde_json::from_slice(&body).expect("json") };
    let out = answer(
        hook.review(review("team-b").as_bytes())
            .await
            .expect("answer"),
    );
    assert_eq!(out["response"]["allowed"], false, "{out}");
    let message = out["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("GPUQueue team-a does not admit namespace team-b"),
        "{message}"
    );
    let out = answer(
        hook.review(review("team-a").as_bytes())
            .await
            .expect("answer"),
    );
    assert_eq!(out["response"]["allowed"], true, "{out}");
    assert!(out["response"]["patch"].is_string(), "suspended: {out}");
    server.assert_rbac_allows_controller();
}
