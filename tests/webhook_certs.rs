//! Controller-managed webhook certificates (the chart's default,
//! `webhook.certs=controller`), end to end: the rendered Deployment's args
//! start the real `muster controller` binary against the API test server,
//! with the rendered MutatingWebhookConfiguration (no caBundle) applied.
//! Checked: the leader creates the kubernetes.io/tls Secret and patches its
//! CA into every webhook; the replica is Ready only then; a labelled Job
//! created through the API server comes back suspended (the server calls the
//! webhook over HTTPS and verifies it against the patched bundle); a
//! restarted controller serves the Secret it finds instead of issuing
//! again; a serving certificate near its end is renewed under the same CA;
//! a CA near its end is replaced, the old CA kept in the bundle; every
//! request the controller made is one the chart's RBAC allows, names
//! included.

mod helm;
mod support;

use std::time::Duration;

use base64::Engine;
use helm::{find, objects, template};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use muster::controller::webhook::issue::{dns_names, issue};
use muster::controller::webhook::rotation::{Material, Policy, Verdict, decide};
use serde_json::json;
use support::{ApiServer, eventually};

const NS: &str = "muster-system";
const SECRET: &str = "muster-webhook-tls";
const CONFIG: &str = "muster";
const SERVICE: &str = "muster-webhook";
const DAY: i64 = 24 * 3600;

fn http_get(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_whitespace().nth(1)?.parse().ok()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

fn entry(s: &Secret, key: &str) -> Vec<u8> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

/// The Secret once every webhook's caBundle is its `ca.crt`.
async fn settled(client: &kube::Client, what: &str) -> Secret {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    eventually(60, what, || {
        let (secrets, configs) = (secrets.clone(), configs.clone());
        async move {
            let s = secrets.get_opt(SECRET).await.ok()??;
            let ca = entry(&s, "ca.crt");
            let cfg = configs.get(CONFIG).await.ok()?;
            let hooks = cfg.webhooks.unwrap_or_default();
            let patched = !hooks.is_empty()
                && hooks
                    .iter()
                    .all(|h| h.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&ca));
            patched.then_some(s)
        }
    })
    .await
}

/// The verdict on a Secret now (the controller's own decision function).
fn verdict(s: &Secret) -> Verdict {
    let (ca, ca_key, crt, key) = (
        entry(s, "ca.crt"),
        entry(s, "ca.key"),
        entry(s, "tls.crt"),
        entry(s, "tls.key"),
    );
    let m = Material {
        ca_crt: Some(&ca),
        ca_key: Some(&ca_key),
        tls_crt: Some(&crt),
        tls_key: Some(&key),
    };
    decide(
        Some(&m),
        &format!("{SERVICE}.{NS}.svc"),
        &Policy::default(),
        now(),
    )
}

/// Waits until the API server can call the webhook with the certificate the
/// caBundle names: a dry-run create of a labelled Job goes through the
/// webhook without storing anything. Right after the Secret and the caBundle
/// are written, a call can still fail verification (seen once in a few
/// dozen runs); which side lags is not established.
async fn webhook_serving(client: &kube::Client) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "probe", "namespace": "team-a", "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "trainer"}]}}}
    }))
    .expect("job");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(30, "the webhook serving the issued certificate", || {
        let api = Api::<Job>::namespaced(client.clone(), "team-a");
        let (job, dry) = (job.clone(), dry.clone());
        async move { api.create(&dry, &job).await.ok().map(|_| ()) }
    })
    .await;
}

/// Creates a labelled Job through the API server, which calls the webhook;
/// it must come back suspended.
async fn labelled_job_is_suspended(client: &kube::Client, name: &str) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a", "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "trainer"}]}}}
    }))
    .expect("job");
    let created = Api::<Job>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("{name}: the API server refused the labelled Job: {e}"));
    assert_eq!(
        created.spec.and_then(|s| s.suspend),
        Some(true),
        "{name}: suspended by the webhook"
    );
}

/// Replaces the Secret's material with `material`, as an operator (or a
/// clock) would leave it.
async fn seed(client: &kube::Client, m: &muster::controller::webhook::issue::Issued) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut s = secrets.get(SECRET).await.expect("Secret");
    let data = s.data.get_or_insert_default();
    for (k, v) in [
        ("ca.crt", &m.ca_crt),
        ("ca.key", &m.ca_key),
        ("tls.crt", &m.tls_crt),
        ("tls.key", &m.tls_key),
    ] {
        data.insert(
            k.to_string(),
            k8s_openapi::ByteString(v.as_bytes().to_vec()),
        );
    }
    secrets
        .replace(SECRET, &PostParams::default(), &s)
        .await
        .expect("seeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_issues_serves_keeps_and_renews_the_webhook_certificate() {
    let objs = objects(&template(None, &[]).expect("renders"));
    assert!(
        !objs.iter().any(|o| o["kind"] == "Secret"),
        "no Secret rendered: the controller writes it"
    );
    let cfg = find(&objs, "MutatingWebhookConfiguration").clone();
    assert!(cfg["webhooks"][0]["clientConfig"]["caBundle"].is_null());
    assert_eq!(cfg["metadata"]["name"], CONFIG);
    let webhook_addr = format!("127.0.0.1:{}", helm::rendered::free_port());
    let server = ApiServer::start_with(&[
        "--webhook-service",
        &format!("{NS}/{SERVICE}={webhook_addr}"),
    ]);
    let client = server.client();
    support::install_crds(&client).await;
    for name in [NS, "team-a"] {
        support::ensure_namespace(&client, name, json!({})).await;
    }
    let as_json = serde_json::to_value(&cfg).expect("configuration");
    support::create_object(
        &client,
        "mutatingwebhookconfigurations",
        None,
        as_json.clone(),
    )
    .await;

    // issued, patched, Ready, serving
    let controller = helm::rendered::start(&objs, &server.url, &webhook_addr, "certs-1");
    let first = settled(&client, "the Secret issued and the caBundle patched").await;
    assert_eq!(first.type_.as_deref(), Some("kubernetes.io/tls"));
    assert!(matches!(verdict(&first), Verdict::Keep { .. }));
    let metrics = controller.metrics_addr.clone();
    eventually(30, "the controller Ready", || {
        let addr = metrics.clone();
        async move { (http_get(&addr, "/readyz") == Some(200)).then_some(()) }
    })
    .await;
    webhook_serving(&client).await;
    labelled_job_is_suspended(&client, "first").await;

    // a restart serves the Secret it finds: nothing issued again
    drop(controller);
    let controller = helm::rendered::start(&objs, &server.url, &webhook_addr, "certs-2");
    let metrics = controller.metrics_addr.clone();
    eventually(30, "the restarted controller Ready", || {
        let addr = metrics.clone();
        async move { (http_get(&addr, "/readyz") == Some(200)).then_some(()) }
    })
    .await;
    labelled_job_is_suspended(&client, "after-restart").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = settled(&client, "the Secret after the restart").await;
    assert_eq!(
        again.metadata.resource_version, first.metadata.resource_version,
        "the restarted controller wrote the Secret"
    );

    // the rendered configuration applied again (a re-install, a GitOps
    // sync) drops the caBundle: the watch puts it back at once, long before
    // the twelve-hour recheck, and nothing is issued
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let live = configs.get(CONFIG).await.expect("configuration");
    let mut reapplied: MutatingWebhookConfiguration =
        serde_json::from_value(as_json.clone()).expect("rendered configuration");
    reapplied.metadata.resource_version = live.metadata.resource_version.clone();
    configs
        .replace(CONFIG, &PostParams::default(), &reapplied)
        .await
        .expect("configuration re-applied");
    let mended = settled(&client, "the caBundle patched again after a re-apply").await;
    assert_eq!(
        mended.metadata.resource_version, first.metadata.resource_version,
        "a re-applied configuration made the controller write the Secret"
    );

    // a serving certificate past two thirds of its life: renewed, CA kept
    let short = Policy {
        ca_validity: 3650 * DAY,
        cert_validity: 3 * DAY,
        lookahead: 0,
    };
    let names = dns_names(SERVICE, NS);
    let stale = issue(
        None,
        true,
        names.clone(),
        "seeded-ca",
        &short,
        now() - 2 * DAY - 3600,
    )
    .expect("seeded certificate");
    seed(&client, &stale).await;
    let renewed = eventually(60, "the serving certificate renewed", || {
        let client = client.clone();
        let stale = stale.tls_crt.clone();
        async move {
            let s = settled(&client, "renewed").await;
            (entry(&s, "tls.crt") != stale.as_bytes()).then_some(s)
        }
    })
    .await;
    assert_eq!(
        entry(&renewed, "ca.crt"),
        stale.ca_crt.as_bytes(),
        "CA kept"
    );
    assert!(matches!(verdict(&renewed), Verdict::Keep { .. }));
    labelled_job_is_suspended(&client, "after-renewal").await;

    // a CA near its end: a new CA, the old one still in the bundle
    let short_ca = Policy {
        ca_validity: 3 * DAY,
        cert_validity: 3 * DAY,
        lookahead: 0,
    };
    let old_ca = issue(
        None,
        true,
        names,
        "old-ca",
        &short_ca,
        now() - 2 * DAY - 3600,
    )
    .expect("seeded CA");
    seed(&client, &old_ca).await;
    let rotated = eventually(60, "the CA replaced", || {
        let client = client.clone();
        let old = old_ca.ca_key.clone();
        async move {
            let s = settled(&client, "rotated").await;
            (entry(&s, "ca.key") != old.as_bytes()).then_some(s)
        }
    })
    .await;
    let bundle = String::from_utf8(entry(&rotated, "ca.crt")).expect("PEM");
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2);
    assert!(
        bundle.ends_with(&old_ca.ca_crt),
        "the previous CA kept behind the new one"
    );
    assert!(matches!(verdict(&rotated), Verdict::Keep { .. }));
    labelled_job_is_suspended(&client, "after-ca-rotation").await;
    let cfg = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(CONFIG)
        .await
        .expect("configuration");
    let b64 = base64::engine::general_purpose::STANDARD.encode(bundle.as_bytes());
    let stored = serde_json::to_value(&cfg).expect("json");
    assert_eq!(stored["webhooks"][0]["clientConfig"]["caBundle"], b64);

    // every request of the controller (its User-Agent names muster) is one
    // the chart's RBAC allows, resourceNames included
    let rules = support::rbac::rules();
    let log = std::fs::read_to_string(&server.audit_log).expect("audit log");
    let mut denied = std::collections::BTreeSet::new();
    let mut secrets = 0;
    for line in log.lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("audit line");
        if !e["userAgent"].as_str().unwrap_or("").starts_with("muster") {
            continue;
        }
        let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
        let resource = match s("subresource").as_str() {
            "" => s("resource"),
            sub => format!("{}/{sub}", s("resource")),
        };
        let (verb, group, ns, name) = (s("verb"), s("apiGroup"), s("namespace"), s("name"));
        secrets += usize::from(resource == "secrets");
        if !rules
            .iter()
            .any(|r| r.allows(&verb, &group, &resource, &ns, &name))
        {
            denied.insert(format!("{verb} {group}/{resource} {name:?} in {ns:?}"));
        }
    }
    assert!(
        secrets > 0,
        "no Secret request of the controller was audited"
    );
    assert!(denied.is_empty(), "requests RBAC would deny: {denied:#?}");
    drop(controller);
}
