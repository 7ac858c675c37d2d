//! The chart's Deployment, run: the args and env `helm template` renders are
//! handed to the real `muster controller` binary (only addresses, the API
//! server URL and the mounted Secret's folder are replaced), which starts
//! against the API test server, takes the leader Lease and becomes Ready. Its
//! webhook then answers AdmissionReview v1 bodies over HTTPS with the
//! certificate Helm generated, verified against the caBundle of the rendered
//! MutatingWebhookConfiguration under the Service's DNS name. A chart value
//! the binary does not understand fails here.

mod helm;
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use base64::Engine;
use helm::{find, objects, template};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde_json::{Value as Json, json};
use support::{ApiServer, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    parse(&out)
}

fn parse(resp: &str) -> Option<(u16, String)> {
    let code = resp.split_whitespace().nth(1)?.parse().ok()?;
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

/// Accepts any server certificate: for the secure metrics listener, whose
/// certificate is made at start (what it checks is the bearer token).
#[derive(Debug)]
struct AnyCertificate;

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The webhook as the API server calls it: HTTPS to `addr`, the server
/// verified as `server_name` against `ca`.
struct Https {
    addr: String,
    server_name: String,
    tls: Arc<rustls::ClientConfig>,
}

impl Https {
    fn new(addr: String, server_name: String, ca_pem: &[u8]) -> Https {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        muster::controller::install_crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(c.expect("CA PEM")).expect("CA certificate");
        }
        let mut tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Https {
            addr,
            server_name,
            tls: Arc::new(tls),
        }
    }

    /// A client of a server whose certificate is not checked (the secure
    /// metrics listener's, made at start).
    fn unverified(addr: String) -> Https {
        muster::controller::install_crypto_provider();
        let mut tls = rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate))
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Https {
            addr,
            server_name: "localhost".to_string(),
            tls: Arc::new(tls),
        }
    }

    async fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.server_name,
            body.len()
        );
        let mut all = head.into_bytes();
        all.extend_from_slice(body);
        self.send(&all).await
    }

    /// Sends `request` (head and body) as it is.
    async fn raw(&self, request: &str) -> (u16, String) {
        self.send(request.as_bytes()).await
    }

    async fn send(&self, bytes: &[u8]) -> (u16, String) {
        let tcp = tokio::net::TcpStream::connect(&self.addr)
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from(self.server_name.clone()).expect("name");
        let mut tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .expect("TLS handshake");
        tls.write_all(bytes).await.expect("write");
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out).await;
        parse(&String::from_utf8_lossy(&out)).expect("HTTP answer")
    }

    /// Posts an AdmissionReview; the answer's response and its decoded patch.
    async fn review(&self, path: &str, body: &Json) -> (Json, Option<Json>) {
        let (code, text) = self
            .request("POST", path, body.to_string().as_bytes())
            .await;
        assert_eq!(code, 200, "{text}");
        let out: Json = serde_json::from_str(&text).expect("AdmissionReview JSON");
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(out["kind"], "AdmissionReview");
        let resp = out["response"].clone();
        assert_eq!(resp["uid"], body["request"]["uid"]);
        let patch = resp["patch"].as_str().map(|p| {
            assert_eq!(resp["patchType"], "JSONPatch");
            let raw = base64::engine::general_purpose::STANDARD
                .decode(p)
                .expect("base64");
            serde_json::from_slice(&raw).expect("JSON patch")
        });
        (resp, patch)
    }
}

/// An AdmissionReview (admission.k8s.io/v1) for the creation of `object`.
fn review(uid: &str, gvr: (&str, &str, &str, &str), ns: &str, object: Json, dry_run: bool) -> Json {
    let (group, version, kind, resource) = gvr;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:team-a:ci", "uid": "7d2c", "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl-create"}
        }
    })
}

fn job(ns: &str, labels: Json) -> Json {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "train-", "namespace": ns, "labels": labels},
        "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                 "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}
    })
}

const JOB: (&str, &str, &str, &str) = ("batch", "v1", "Job", "jobs");

/// A token of ServiceAccount `monitoring/prometheus`, from the API server's
/// TokenRequest (`POST .../serviceaccounts/prometheus/token`).
async fn scraper_token(client: &kube::Client) -> String {
    support::ensure_namespace(client, "monitoring", json!({})).await;
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "monitoring");
    let sa = serde_json::from_value(json!({"metadata": {"name": "prometheus"}})).expect("sa");
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("ServiceAccount");
    let req = http::Request::post("/api/v1/namespaces/monitoring/serviceaccounts/prometheus/token")
        .header("Content-Type", "application/json")
        .body(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
                .to_string()
                .into_bytes(),
        )
        .expect("request");
    let answer: Json = client.request(req).await.expect("TokenRequest");
    answer["status"]["token"]
        .as_str()
        .expect("token")
        .to_string()
}

/// With `--metrics-secure`: `/metrics` over HTTPS answers 401 without a
/// token, 403 to a token not allowed `get /metrics`, and the metrics once
/// the rendered `<release>-metrics-reader` ClusterRole is bound to it; on
/// the webhook's listener and on the dedicated one (whose certificate,
/// made at start, is not checked: the token is).
async fn secure_metrics(
    client: &kube::Client,
    objs: &[serde_norway::Value],
    https: &Https,
    dedicated: Option<&str>,
) {
    let get = |token: Option<String>| {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        format!("GET /metrics HTTP/1.1\r\nHost: muster\r\n{auth}Connection: close\r\n\r\n")
    };
    assert_eq!(https.raw(&get(None)).await.0, 401);
    let token = scraper_token(client).await;
    let (code, text) = https.raw(&get(Some(token.clone()))).await;
    assert_eq!(code, 403, "{text}");
    assert!(
        text.contains("system:serviceaccount:monitoring:prometheus"),
        "{text}"
    );
    let reader = objs
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-metrics-reader"))
        })
        .expect("the metrics-reader ClusterRole is rendered");
    let name = reader["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    support::create_object(
        client,
        "clusterroles",
        None,
        serde_json::to_value(reader).expect("json"),
    )
    .await;
    support::create_object(
        client,
        "clusterrolebindings",
        None,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-reads-muster"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]}),
    )
    .await;
    // a refusal is kept ten seconds
    let text = eventually(30, "the bound scraper reads the metrics", || {
        let req = get(Some(token.clone()));
        async move {
            let (code, text) = https.raw(&req).await;
            (code == 200).then_some(text)
        }
    })
    .await;
    assert!(text.contains("muster_leader 1"), "{text}");
    let addr = dedicated.expect("the https-metrics port is mapped");
    let insecure = Https::unverified(addr.to_string());
    assert_eq!(insecure.raw(&get(None)).await.0, 401);
    assert_eq!(insecure.raw(&get(Some(token))).await.0, 200);
}

/// Runs the rendered Deployment of `values` and checks it end to end.
async fn run_rendered(values: Option<&str>, set: &[&str], node_class: Option<Json>) {
    // the certificate is Helm's here whatever the values say (the
    // controller-managed one: tests/webhook_certs.rs)
    let mut set = set.to_vec();
    set.push("webhook.certs=helm");
    let objs = objects(&template(values, &set).expect("renders"));
    let container = helm::rendered::container(&objs).clone();
    let webhook_addr = format!("127.0.0.1:{}", helm::rendered::free_port());
    // the API test server calls the rendered webhooks, its Service reached here
    let cfg = find(&objs, "MutatingWebhookConfiguration").clone();
    let svc = &cfg["webhooks"][0]["clientConfig"]["service"];
    let service = format!(
        "{}/{}={webhook_addr}",
        svc["namespace"].as_str().expect("service namespace"),
        svc["name"].as_str().expect("service name")
    );
    let server = ApiServer::start_with(&["--webhook-service", &service]);
    let client = server.client();
    support::install_crds(&client).await;
    for (name, labels) in [
        ("default", json!({})),
        ("muster-system", json!({})),
        ("team-a", json!({"muster.dev/default-queue": "team-a"})),
        ("team-b", json!({})),
    ] {
        support::ensure_namespace(&client, name, labels).await;
    }

    let tag = values.unwrap_or("default").replace('/', "-");
    let child = helm::rendered::start(&objs, &server.url, &webhook_addr, &tag);
    let (metrics_addr, child_dir) = (child.metrics_addr.clone(), child.dir.clone());

    // the probes as the kubelet runs them
    let probe = |p: &str| {
        container[p]["httpGet"]["path"]
            .as_str()
            .expect("probe path")
            .to_string()
    };
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "metrics");
    let ready = probe("readinessProbe");
    eventually(30, "readiness probe 200", || {
        let (addr, path) = (metrics_addr.clone(), ready.clone());
        async move { http_get(&addr, &path).filter(|(c, _)| *c == 200) }
    })
    .await;
    assert_eq!(
        http_get(&metrics_addr, &probe("livenessProbe")).map(|r| r.0),
        Some(200)
    );
    eventually(30, "the leader Lease taken", || {
        let client = client.clone();
        async move {
            let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
                Api::namespaced(client, "muster-system");
            leases
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|l| {
                    l.spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.as_ref())
                        .is_some()
                })
        }
    })
    .await;
    let secure = helm::rendered::container(&objs)["args"]
        .as_sequence()
        .is_some_and(|a| a.iter().any(|x| x == "--metrics-secure"));
    if secure {
        // /metrics is not on the probes' plain port
        assert_eq!(http_get(&metrics_addr, "/metrics").map(|r| r.0), Some(404));
    } else {
        assert!(
            http_get(&metrics_addr, "/metrics")
                .is_some_and(|(c, m)| c == 200 && m.contains("muster_leader"))
        );
    }

    // a NodeClass the binary resolves through the cloud endpoint the chart set
    if let Some(spec) = node_class {
        support::create(
            &client,
            "NodeClass",
            "nodeclasses",
            None,
            json!({"metadata": {"name": "chart-class"}, "spec": spec}),
        )
        .await;
        eventually(60, "the NodeClass Ready", || {
            let client = client.clone();
            async move { support::waits::nodeclass_ready_status(&client, "chart-class").await }
        })
        .await;
    }

    // the webhook, called as the API server would from the rendered configuration
    let hook = &cfg["webhooks"][0]["clientConfig"];
    let ca = base64::engine::general_purpose::STANDARD
        .decode(hook["caBundle"].as_str().expect("caBundle"))
        .expect("caBundle base64");
    let svc = &hook["service"];
    let name = format!(
        "{}.{}.svc",
        svc["name"].as_str().expect("svc"),
        svc["namespace"].as_str().expect("ns")
    );
    let path = svc["path"].as_str().expect("path").to_string();
    let https = Https::new(webhook_addr.clone(), name, &ca);

    let suspend = json!([{"op": "add", "path": "/spec/suspend", "value": true}]);
    // labelled: suspended, in a dry run as well
    for dry_run in [false, true] {
        let body = review(
            "a1",
            JOB,
            "team-b",
            job("team-b", json!({"muster.dev/queue": "team-b"})),
            dry_run,
        );
        let (resp, patch) = https.review(&path, &body).await;
        assert_eq!(resp["allowed"], true);
        assert_eq!(patch.as_ref(), Some(&suspend), "dry run {dry_run}");
    }
    // unlabelled in a namespace without a default queue: untouched
    let (resp, patch) = https
        .review(
            &path,
            &review(
                "a2",
                JOB,
                "default",
                job("default", json!({"app": "x"})),
                false,
            ),
        )
        .await;
    assert_eq!(resp["allowed"], true);
    assert_eq!(patch, None);
    // unlabelled in a namespace whose label names a default queue: queued and suspended
    let (resp, patch) = https
        .review(
            &path,
            &review(
                "a3",
                JOB,
                "team-a",
                job("team-a", json!({"app": "x"})),
                false,
            ),
        )
        .await;
    assert_eq!(resp["allowed"], true);
    assert_eq!(
        patch,
        Some(json!([
            {"op": "add", "path": "/metadata/labels/muster.dev~1queue", "value": "team-a"},
            {"op": "add", "path": "/spec/suspend", "value": true}
        ]))
    );
    // another kind: untouched
    let pod_obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-b", "labels": {"muster.dev/queue": "team-b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let (resp, patch) = https
        .review(
            &path,
            &review("a4", ("", "v1", "Pod", "pods"), "team-b", pod_obj, false),
        )
        .await;
    assert_eq!(resp["allowed"], true);
    assert_eq!(patch, None);
    // malformed: refused, so failurePolicy Fail refuses the Job
    let (code, _) = https
        .request(
            "POST",
            &path,
            b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\":",
        )
        .await;
    assert_eq!(code, 400);
    // the same stack serves the probes over HTTPS, and the metrics: to
    // anyone, or (secure) to a token the API server authorizes
    if secure {
        secure_metrics(&client, &objs, &https, child.secure_metrics_addr.as_deref()).await;
    } else {
        let (code, metrics) = https.request("GET", "/metrics", b"").await;
        assert_eq!(code, 200);
        assert!(metrics.trim_end().ends_with("# EOF"));
    }
    assert_eq!(https.request("GET", "/readyz", b"").await.0, 200);

    // Job creations through the API test server, which calls the rendered
    // webhooks (tests/kube_api/admission.py)
    let as_json: Json = serde_json::to_value(&cfg).expect("configuration as JSON");
    support::create_object(&client, "mutatingwebhookconfigurations", None, as_json).await;
    let jobs = |ns: &str| Api::<Job>::namespaced(server.client(), ns);
    let stored = |ns: &str| Api::<Job>::namespaced(client.clone(), ns);
    let create = |ns: &'static str, name: &'static str, labels: Json| {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}
        }))
        .expect("job");
        let api = jobs(ns);
        async move { api.create(&PostParams::default(), &job).await }
    };
    create("team-b", "labelled", json!({"muster.dev/queue": "team-b"}))
        .await
        .expect("labelled Job admitted");
    let job = stored("team-b").get("labelled").await.expect("stored");
    assert_eq!(
        job.spec.and_then(|s| s.suspend),
        Some(true),
        "stored suspended"
    );
    create("default", "plain", json!({"app": "x"}))
        .await
        .expect("plain Job admitted");
    let job = stored("default").get("plain").await.expect("stored");
    assert_ne!(
        job.spec.and_then(|s| s.suspend),
        Some(true),
        "an unlabelled Job is left alone"
    );
    create("team-a", "defaulted", json!({"app": "x"}))
        .await
        .expect("defaulted Job admitted");
    let job = stored("team-a").get("defaulted").await.expect("stored");
    assert_eq!(
        job.metadata
            .labels
            .unwrap_or_default()
            .get("muster.dev/queue")
            .map(String::as_str),
        Some("team-a")
    );
    assert_eq!(job.spec.and_then(|s| s.suspend), Some(true));
    // the webhook gone: a labelled Job is refused, anything else still passes
    drop(child);
    let refused = create(
        "team-b",
        "labelled-2",
        json!({"muster.dev/queue": "team-b"}),
    )
    .await;
    match refused {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 500, "{s:?}"),
        other => panic!("a labelled Job was not refused without the webhook: {other:?}"),
    }
    assert!(
        stored("team-b")
            .get_opt("labelled-2")
            .await
            .expect("get")
            .is_none()
    );
    create("default", "plain-2", json!({"app": "x"}))
        .await
        .expect("an unlabelled Job needs no webhook");
    let _ = std::fs::remove_dir_all(&child_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_default_deployment_runs_and_serves_the_webhook() {
    run_rendered(None, &[], None).await;
}

/// The AWS values against moto: the chart's endpoint and interruption-queue
/// values reach EC2 and SQS, and a NodeClass resolves through them.
#[cfg(feature = "aws-test-support")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_aws_deployment_runs_against_moto() {
    let moto = muster_provider_aws::moto::Moto::start();
    let clients = moto.clients().await;
    let queue = clients
        .sqs
        .create_queue()
        .queue_name("muster-interruptions")
        .send()
        .await
        .expect("SQS queue");
    let url = queue.queue_url().expect("queue URL").to_string();
    let spec = moto.node_class_spec().await;
    let endpoint = format!("aws.endpoint={}", moto.endpoint);
    let queue = format!("aws.interruptionQueue={url}");
    run_rendered(Some("ci/aws-values.yaml"), &[&endpoint, &queue], Some(spec)).await;
}

#[cfg(feature = "gcp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_gcp_deployment_runs_and_serves_the_webhook() {
    let endpoint = format!(
        "gcp.endpoint=http://127.0.0.1:{}",
        helm::rendered::free_port()
    );
    run_rendered(Some("ci/gcp-values.yaml"), &[&endpoint], None).await;
}

/// The rendered MutatingWebhookConfiguration in the API test server, its
/// webhook unavailable (no Service answers): what it still blocks is only
/// what muster manages. A labelled Job, or an unlabelled one in a namespace
/// with a default queue, is refused (fail closed); a Job a JobSet or a
/// TrainJob controls and any Job in `kube-system` are created, because the
/// hooks' `matchConditions` and `namespaceSelector` never send them.
#[tokio::test]
async fn an_unavailable_webhook_blocks_only_what_muster_manages() {
    let rendered = template(
        None,
        &[
            "clusterName=test",
            "webhook.defaultQueueLabel=muster.dev/default-queue",
            "workloadKinds={job,jobset,trainjob}",
        ],
    )
    .expect("renders");
    let objs = objects(&rendered);
    let cfg: Json =
        serde_json::to_value(find(&objs, "MutatingWebhookConfiguration")).expect("JSON");
    let server = ApiServer::start();
    let client = server.client();
    let hooks: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(client.clone());
    hooks
        .create(
            &PostParams::default(),
            &serde_json::from_value(cfg).expect("configuration"),
        )
        .await
        .expect("the rendered configuration is accepted");
    for (name, labels) in [
        ("team-a", json!({"muster.dev/default-queue": "team-a"})),
        ("kube-system", json!({})),
    ] {
        support::ensure_namespace(&client, name, labels).await;
    }
    let job = |name: &str, labels: Json, owner: Option<&str>| -> Job {
        let mut meta = json!({"name": name, "labels": labels});
        if let Some(kind) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": "x/v1", "kind": kind, "name": "o",
                                              "uid": format!("uid-{name}"), "controller": true}]);
        }
        serde_json::from_value(json!({"metadata": meta, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}))
        .expect("job")
    };
    let create = |ns: &str, j: Job| {
        let api = Api::<Job>::namespaced(client.clone(), ns);
        async move { api.create(&PostParams::default(), &j).await }
    };
    let queued = json!({"muster.dev/queue": "team-a"});
    let refused = |r: &Result<Job, kube::Error>| matches!(r, Err(kube::Error::Api(e)) if e.code == 500 && e.message.contains("failed calling webhook"));
    let r = create("team-a", job("labelled", queued.clone(), None)).await;
    assert!(refused(&r), "a labelled Job fails closed: {r:?}");
    let r = create("team-a", job("defaulted", json!({}), None)).await;
    assert!(refused(&r), "so does one the default queue takes: {r:?}");
    let r = create("team-a", job("cron", json!({}), Some("CronJob"))).await;
    assert!(
        refused(&r),
        "a CronJob's Job joins the default queue: {r:?}"
    );
    for (name, owner) in [("jobset-child", "JobSet"), ("trainjob-child", "TrainJob")] {
        let r = create("team-a", job(name, queued.clone(), Some(owner))).await;
        assert!(r.is_ok(), "{owner}'s Job is never sent: {r:?}");
    }
    let r = create("kube-system", job("system", queued, None)).await;
    assert!(r.is_ok(), "kube-system is never sent: {r:?}");
}
