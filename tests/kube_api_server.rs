//! The Kubernetes API test server's own semantics, checked with the real
//! `kube::Client`: stamping, 404/409 reasons, optimistic concurrency, status
//! subresource, patches (merge, JSON, apply), finalizers and deletion, label
//! selectors, watch resume, CRDs, Leases, pod eviction against
//! PodDisruptionBudgets.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use support::ApiServer;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>()},
        "data": {"k": "v"}
    }))
    .expect("configmap")
}

#[tokio::test]
async fn crud_stamping_and_error_reasons() {
    let server = ApiServer::start();
    eprintln!("API test server ready in {:?}", server.started_in);
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .expect("create");
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv1 = meta.resource_version.clone().expect("rv");
    // AlreadyExists
    let err = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .expect_err("duplicate");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );
    // NotFound → get_opt gives None
    assert!(api.get_opt("missing").await.expect("get_opt").is_none());
    let err = api.get("missing").await.expect_err("404");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 404 && s.reason == "NotFound"));
    // update with the current RV works and bumps RV and generation
    let mut next = created.clone();
    next.data = Some([("k".to_string(), "w".to_string())].into());
    let updated = api
        .replace("a", &PostParams::default(), &next)
        .await
        .expect("replace");
    let rv2 = updated.metadata.resource_version.clone().expect("rv");
    assert_ne!(rv1, rv2);
    assert_eq!(updated.metadata.generation, Some(2));
    assert_eq!(updated.metadata.uid, created.metadata.uid);
    // a stale RV is a 409 Conflict
    let err = api
        .replace("a", &PostParams::default(), &next)
        .await
        .expect_err("stale");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    // merge patch with a stale RV precondition is also a Conflict
    let err = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": rv1}, "data": {"x": "y"}})),
        )
        .await
        .expect_err("stale patch");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 409));
    // JSON patch
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "add", "path": "/data/j", "value": "1"},
                    {"op": "remove", "path": "/data/k"}
                ]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("json patch");
    let data = patched.data.expect("data");
    assert_eq!(data.get("j").map(String::as_str), Some("1"));
    assert!(!data.contains_key("k"));
    // server-side apply needs a field manager and merges maps
    let applied = api
        .patch("a", &PatchParams::apply("test").force(), &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"app": "x"}}, "data": {"applied": "yes"}
        })))
        .await
        .expect("apply");
    let data = applied.data.expect("data");
    assert_eq!(data.get("applied").map(String::as_str), Some("yes"));
    assert_eq!(
        data.get("j").map(String::as_str),
        Some("1"),
        "apply keeps fields it does not name"
    );
    let err = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap"})),
        )
        .await
        .expect_err("apply without manager");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 400));
    // apply creates a missing object
    api.patch(
        "b",
        &PatchParams::apply("test"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}})),
    )
    .await
    .expect("apply creates");
    assert!(api.get_opt("b").await.expect("get").is_some());
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status() {
    use k8s_openapi::api::core::v1::Node;
    let server = ApiServer::start();
    let api: Api<Node> = Api::all(server.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n"},
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
        "status": {"capacity": {"cpu": "4"}}
    }))
    .expect("node");
    let created = api
        .create(&PostParams::default(), &node)
        .await
        .expect("create");
    let cpu = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("cpu"))
            .map(|q| q.0.clone())
    };
    // a Node may be created with its status (the node strategy's
    // PrepareForCreate keeps it; other kinds drop it)
    assert_eq!(
        cpu(&created).as_deref(),
        Some("4"),
        "a Node keeps its status on create"
    );
    // status changes through the main resource are ignored
    let after = api
        .patch(
            "n",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"unschedulable": true}, "status": {"capacity": {"cpu": "8"}}}),
            ),
        )
        .await
        .expect("patch");
    assert_eq!(
        after.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true)
    );
    assert_eq!(cpu(&after).as_deref(), Some("4"), "status kept");
    assert_eq!(
        after.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );
    // spec changes through /status are ignored
    let after = api
        .patch_status(
            "n",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"unschedulable": false}, "status": {"capacity": {"cpu": "8"}}}),
            ),
        )
        .await
        .expect("patch status");
    assert_eq!(
        after.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true)
    );
    let cpu = after
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("cpu"));
    assert_eq!(cpu.map(|q| q.0.as_str()), Some("8"));
    assert_eq!(
        after.metadata.generation,
        Some(2),
        "status change keeps generation"
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_and_owners_cascade() {
    let server = ApiServer::start();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut obj = cm("f", &[]);
    obj.metadata.finalizers = Some(vec!["test/hold".to_string()]);
    let owner = api
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    let mut dep = cm("dep", &[]);
    dep.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "f".into(),
            uid: owner.metadata.uid.clone().expect("uid"),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &dep)
        .await
        .expect("dependent");
    api.delete("f", &DeleteParams::default())
        .await
        .expect("delete");
    let held = api.get("f").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    // finalizers cannot be added while deleting
    let err = api
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold", "test/more"]}})),
        )
        .await
        .expect_err("no new finalizers");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422));
    assert!(
        api.get_opt("dep").await.expect("get").is_some(),
        "dependent stays while owner exists"
    );
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("clear finalizers");
    assert!(
        api.get_opt("f").await.expect("get").is_none(),
        "gone once finalizers are empty"
    );
    assert!(
        api.get_opt("dep").await.expect("get").is_none(),
        "dependents are collected"
    );
}

#[tokio::test]
async fn label_selectors_and_watch_resume() {
    let server = ApiServer::start();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for (n, team) in [("a", "x"), ("b", "y"), ("c", "x")] {
        api.create(&PostParams::default(), &cm(n, &[("team", team)]))
            .await
            .expect("create");
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("team=x"))
                .await
                .expect("list")
        ),
        ["a", "c"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("team notin (x)"))
                .await
                .expect("list")
        ),
        ["b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("!team"))
                .await
                .expect("list")
        )
        .len(),
        0
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .expect("list")
        ),
        ["b"]
    );
    let list = api.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.clone().expect("list rv");
    // changes after the list, then a watch from the list's RV sees exactly them
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    api.create(&PostParams::default(), &cm("d", &[("team", "x")]))
        .await
        .expect("create");
    let stream = api
        .watch(&WatchParams::default().labels("team=x").timeout(2), &rv)
        .await
        .expect("watch");
    let events: Vec<WatchEvent<ConfigMap>> = stream.take(2).try_collect().await.expect("events");
    let seen: Vec<String> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(o) => {
                format!("ADDED {}", o.metadata.name.clone().unwrap_or_default())
            }
            WatchEvent::Deleted(o) => {
                format!("DELETED {}", o.metadata.name.clone().unwrap_or_default())
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(seen, ["DELETED a", "ADDED d"]);
    // a kube-runtime watcher over the same resource syncs without errors
    let (reader, writer) = kube_runtime::reflector::store::<ConfigMap>();
    let stream = kube_runtime::reflector::reflector(
        writer,
        kube_runtime::watcher(api.clone(), Default::default()),
    );
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            ev.expect("no watcher errors");
        }
    });
    tokio::time::timeout(Duration::from_secs(5), reader.wait_until_ready())
        .await
        .expect("synced")
        .expect("ready");
    assert_eq!(reader.state().len(), 3);
    api.create(&PostParams::default(), &cm("e", &[]))
        .await
        .expect("create");
    support::eventually(5, "reflector sees e", || {
        let n = reader.state().len();
        async move { (n == 4).then_some(()) }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn custom_resources_and_leases() {
    let server = ApiServer::start();
    let client = server.client();
    support::install_crds(&client).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("muster.dev", "v1alpha1", "Gang"),
        "gangs",
    );
    let gangs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &ar);
    let mut g = DynamicObject::new("g1", &ar).within("team-a");
    g.data = json!({"spec": {"queue": "q", "podSets": [{"name": "w", "count": 1}]}, "status": {"phase": "Running"}});
    let created = gangs
        .create(&PostParams::default(), &g)
        .await
        .expect("create CR");
    assert!(created.data.get("status").is_none());
    gangs
        .patch_status(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Queued"}})),
        )
        .await
        .expect("status");
    let got = gangs.get("g1").await.expect("get");
    assert_eq!(got.data["status"]["phase"], "Queued");
    assert_eq!(got.data["spec"]["queue"], "q");
    // discovery knows the CRD's resource
    let discovery = kube::Discovery::new(client.clone())
        .filter(&["muster.dev"])
        .run()
        .await
        .expect("discovery");
    assert!(discovery.groups().any(|g| g.name() == "muster.dev"));
    // leases: optimistic concurrency decides between two writers
    let leases: Api<Lease> = Api::namespaced(client.clone(), "muster-system");
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}))
            .expect("lease");
    let l = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
    let mut mine = l.clone();
    mine.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    let mut theirs = l.clone();
    theirs.spec.as_mut().expect("spec").holder_identity = Some("c".into());
    leases
        .replace("l", &PostParams::default(), &mine)
        .await
        .expect("first writer wins");
    assert!(
        leases
            .replace("l", &PostParams::default(), &theirs)
            .await
            .is_err(),
        "second writer conflicts"
    );
}

#[tokio::test]
async fn watch_bookmarks_and_expired_resource_versions() {
    let server = ApiServer::start_with(&["--history", "3"]);
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .expect("create");
    let old_rv = first.metadata.resource_version.clone().expect("rv");
    // bookmarks arrive on an idle watch that allows them
    let list = api.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.expect("rv");
    let stream = api
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default().timeout(3)
            },
            &rv,
        )
        .await
        .expect("watch");
    let events: Vec<WatchEvent<ConfigMap>> = stream.take(1).try_collect().await.expect("events");
    assert!(
        matches!(events[0], WatchEvent::Bookmark(_)),
        "{:?}",
        events[0]
    );
    // once the history has moved on, an old resourceVersion is 410 Expired
    for n in ["b", "c", "d", "e"] {
        api.create(&PostParams::default(), &cm(n, &[]))
            .await
            .expect("create");
    }
    let stream = api
        .watch(&WatchParams::default().timeout(2), &old_rv)
        .await
        .expect("watch");
    let events: Vec<WatchEvent<ConfigMap>> = stream.take(1).try_collect().await.expect("events");
    match &events[0] {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
}

/// POSTs an empty Eviction over a plain HTTP/1.1 connection; returns the
/// status code and the body.
fn raw_post(url: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = std::net::TcpStream::connect(addr).expect("connect");
    let body = r#"{"apiVersion":"policy/v1","kind":"Eviction"}"#;
    write!(
        conn,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("read");
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (code, body)
}

/// A running, Ready pod labelled `app=web`.
fn ready_pod(name: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("pod")
}

#[tokio::test]
async fn eviction_honours_pod_disruption_budgets() {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::EvictParams;
    let server = ApiServer::start();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for name in ["a", "b", "c"] {
        pods.create(&PostParams::default(), &ready_pod(name))
            .await
            .expect("create pod");
        // status is dropped at create: mark the pod Running and Ready
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": ready_pod(name).status})),
        )
        .await
        .expect("ready");
    }
    // without a budget an eviction deletes the pod
    pods.evict("a", &EvictParams::default())
        .await
        .expect("evict unguarded");
    assert!(pods.get_opt("a").await.expect("get").is_none());
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("create pdb");
    // two healthy pods and minAvailable 2: refused with 429 and a DisruptionBudget
    // cause (sent raw: the kube client retries 429 answers on its own)
    let (code, body) = raw_post(&server.url, "/api/v1/namespaces/default/pods/b/eviction");
    assert_eq!(code, 429, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("status json");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert!(
        pods.get_opt("b").await.expect("get").is_some(),
        "not forced"
    );
    // a pod that is not Ready does not count as healthy; under AlwaysAllow it
    // may always go
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})),
    )
    .await
    .expect("always allow");
    pods.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})),
    )
    .await
    .expect("unready");
    pods.evict("c", &EvictParams::default())
        .await
        .expect("unhealthy pod is evictable");
    // the disruption controller's status decides: minAvailable 0 leaves one
    // disruption, and b may go now
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
    )
    .await
    .expect("relax budget");
    let allowed = pdbs
        .get("web")
        .await
        .expect("pdb")
        .status
        .map(|s| s.disruptions_allowed);
    assert_eq!(allowed, Some(1));
    pods.evict("b", &EvictParams::default())
        .await
        .expect("allowed by the budget");
    assert!(pods.get_opt("b").await.expect("get").is_none());
    // an eviction of a missing pod is 404
    let err = pods
        .evict("gone", &EvictParams::default())
        .await
        .expect_err("missing");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 404));
}

/// `limit` and `continue` page through a list in (namespace, name) order,
/// every page reporting the first page's revision.
#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let server = ApiServer::start();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))
                .expect("configmap");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut revision = None;
    loop {
        let mut lp = ListParams::default().limit(2);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.expect("page");
        pages += 1;
        assert!(page.items.len() <= 2);
        let rv = page.metadata.resource_version.clone();
        assert!(
            revision.get_or_insert(rv.clone()) == &rv,
            "one revision for all pages"
        );
        names.extend(
            page.items
                .iter()
                .map(|c| c.metadata.name.clone().unwrap_or_default()),
        );
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]);
    // a malformed token is a 400
    let bad = cms
        .list(&ListParams::default().limit(2).continue_token("not-a-token"))
        .await;
    assert!(matches!(bad, Err(kube::Error::Api(e)) if e.code == 400));
}

/// A kube-runtime reflector stays correct when watches end every second,
/// history older than a second is compacted (410 Gone, so it re-lists) and a
/// fifth of its requests fail or are cut (chaos); the writer, exempt from
/// chaos, never sees an injected error.
#[tokio::test]
async fn reflectors_survive_watch_expiry_and_chaos() {
    use kube_runtime::WatchStreamExt;
    let server = ApiServer::start_with(&["--watch-window", "1", "--chaos", "0.2"]);
    let writer_api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let chaotic: Api<ConfigMap> = Api::namespaced(server.client_as("reflector"), "default");
    let (reader, writer) = kube_runtime::reflector::store::<ConfigMap>();
    let stream = kube_runtime::watcher(chaotic, Default::default())
        .default_backoff()
        .reflect(writer);
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    for i in 0..12 {
        writer_api
            .create(&PostParams::default(), &cm(&format!("r{i}"), &[]))
            .await
            .expect("exempt writes never fail");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    writer_api
        .delete("r0", &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(20, "the reflector's store to match the server", || {
        let reader = reader.clone();
        let writer_api = writer_api.clone();
        async move {
            let mut want: Vec<String> = writer_api
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            let mut have: Vec<String> = reader
                .state()
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            want.sort();
            have.sort();
            (want == have && want.len() == 11).then_some(())
        }
    })
    .await;
    task.abort();
}
