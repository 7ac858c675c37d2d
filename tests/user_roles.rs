//! The chart's roles for people, against the API test server's RBAC
//! authorizer (`--authorize`: kube-apiserver's RBAC rules, see
//! tests/kube_api/README.md): a platform engineer bound to
//! `<release>-platform` manages GPUQueues and reads every Gang; a team
//! member bound to `<release>-team` in its namespace reads its own Gangs,
//! and neither another team's nor the queues' definitions can be changed
//! by it. Which queue a namespace may use is the webhook's check
//! (`scenarios_validation_observability`).

mod helm;
mod support;

use helm::{objects, template};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;
use support::{ApiServer, ar};

/// A client of `server` as user `who` in `groups` (the test server's
/// identity headers: tests/kube_api/README.md).
fn client_as(server: &ApiServer, who: &str, groups: &str) -> kube::Client {
    muster::controller::install_crypto_provider();
    let mut config = kube::Config::new(server.url.parse().expect("url"));
    for (k, v) in [("x-audit-as", who), ("x-audit-groups", groups)] {
        config.headers.push((
            http::HeaderName::from_static(k),
            http::HeaderValue::from_str(v).expect("header value"),
        ));
    }
    kube::Client::try_from(config).expect("client")
}

fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> String {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 => s.message,
        other => panic!("want 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test]
async fn platform_and_team_roles_allow_what_each_does_and_nothing_else() {
    let server = ApiServer::start_with(&["--authorize"]);
    let admin = server.client();
    support::install_crds(&admin).await;
    for ns in ["team-a", "team-b"] {
        support::ensure_namespace(&admin, ns, json!({})).await;
    }
    // the chart's roles, bound as docs/rbac.md says
    let rendered = objects(&template(None, &[]).expect("renders"));
    let mut names = Vec::new();
    for role in rendered.iter().filter(|o| {
        o["kind"] == "ClusterRole"
            && o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-platform") || n.ends_with("-team"))
    }) {
        names.push(role["metadata"]["name"].as_str().expect("name").to_string());
        support::create_object(
            &admin,
            "clusterroles",
            None,
            serde_json::to_value(role).expect("json"),
        )
        .await;
    }
    names.sort();
    assert_eq!(names, ["muster-platform", "muster-team"]);
    let binding = |kind: &str,
                   ns: Option<&str>,
                   name: &str,
                   role: &str,
                   subject: serde_json::Value| {
        let mut meta = json!({"name": name});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]})
    };
    support::create_object(
        &admin,
        "clusterrolebindings",
        None,
        binding(
            "ClusterRoleBinding",
            None,
            "platform",
            "muster-platform",
            json!({"kind": "Group", "name": "platform-team", "apiGroup": "rbac.authorization.k8s.io"}),
        ),
    )
    .await;
    support::create_object(
        &admin,
        "rolebindings",
        Some("team-a"),
        binding(
            "RoleBinding",
            Some("team-a"),
            "team",
            "muster-team",
            json!({"kind": "Group", "name": "team-a", "apiGroup": "rbac.authorization.k8s.io"}),
        ),
    )
    .await;

    let pat = client_as(&server, "pat", "platform-team");
    let alice = client_as(&server, "alice", "team-a");
    let queues =
        |c: &kube::Client| Api::<DynamicObject>::all_with(c.clone(), &ar("GPUQueue", "gpuqueues"));
    let gangs = |c: &kube::Client, ns: &str| {
        Api::<DynamicObject>::namespaced_with(c.clone(), ns, &ar("Gang", "gangs"))
    };
    let queue = support::objects::queue("team-a").build();
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "muster.dev/v1alpha1", "kind": "GPUQueue",
        "metadata": queue["metadata"], "spec": queue["spec"]
    }))
    .expect("queue");

    // the platform team defines queues and reads every team's gangs
    queues(&pat)
        .create(&PostParams::default(), &queue)
        .await
        .expect("the platform team creates a GPUQueue");
    for ns in ["team-a", "team-b"] {
        gangs(&pat, ns)
            .list(&ListParams::default())
            .await
            .expect("the platform team reads gangs");
    }
    // a team reads its own gangs, not another team's, and cannot change queues
    gangs(&alice, "team-a")
        .list(&ListParams::default())
        .await
        .expect("team-a reads its gangs");
    let msg = forbidden(gangs(&alice, "team-b").list(&ListParams::default()).await);
    assert!(
        msg.contains("User \"alice\" cannot list resource \"gangs\" in API group \"muster.dev\" in the namespace \"team-b\""),
        "{msg}"
    );
    let msg = forbidden(
        queues(&alice)
            .patch(
                "team-a",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"weight": 9}})),
            )
            .await,
    );
    assert!(msg.contains("cannot patch resource \"gpuqueues\""), "{msg}");
    // nobody but the controller writes what it decided
    let msg = forbidden(
        gangs(&pat, "team-a")
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"apiVersion": "muster.dev/v1alpha1", "kind": "Gang",
                    "metadata": {"name": "forged", "namespace": "team-a"}, "spec": {}}),
                )
                .expect("gang"),
            )
            .await,
    );
    assert!(msg.contains("cannot create resource \"gangs\""), "{msg}");
}
