//! Test support: the Kubernetes API test server (`tests/kube_api/apiserver.py`)
//! started and stopped per test, a kube client for it, and CRD installation.
#![allow(dead_code)]

pub mod cloud_e2e;
pub mod emulator;
pub mod fake_cloud;
pub mod gke;
pub mod in_process;
pub mod karpenter;
pub mod listen;
pub mod objects;
pub mod prometheus;
pub mod rbac;
pub mod scenario;
pub mod stub_planner;
pub mod third_party;
pub mod waits;
pub mod workload_crds;

pub use listen::logged_addr;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};

/// A running API test server; killed on drop.
pub struct ApiServer {
    child: Child,
    _stdin: Option<ChildStdin>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// How long it took to be ready.
    pub started_in: Duration,
    /// The server's audit log (one JSON object per request).
    pub audit_log: std::path::PathBuf,
}

/// One write of an audit log at level `Request`.
pub struct AuditedWrite {
    /// `resource[/subresource]`.
    pub resource: String,
    /// The object written.
    pub name: String,
    /// The request's body.
    pub body: serde_json::Value,
}

/// `resource[/subresource]` of an audit line.
fn audited_resource(e: &serde_json::Value) -> String {
    let resource = e["resource"].as_str().unwrap_or_default();
    match e["subresource"].as_str().unwrap_or_default() {
        "" => resource.to_string(),
        sub => format!("{resource}/{sub}"),
    }
}

impl ApiServer {
    /// Starts a fresh server on a free port.
    pub fn start() -> ApiServer {
        ApiServer::start_with(&[])
    }

    /// Starts a fresh server with extra command-line options. The
    /// environment adds options the command line does not set:
    /// `MUSTER_API_CHAOS` (rate of injected 409/429/500 answers and cut
    /// watches, e.g. `0.05`), `MUSTER_API_CHAOS_SEED` (default 1) and
    /// `MUSTER_API_WATCH_WINDOW` (seconds of watch history and longest
    /// watch, default 10; `none` for unlimited); `MUSTER_API_LOG_ERRORS=1`
    /// prints every error answer but 404 on stderr; `MUSTER_AUDIT_DIR`
    /// (see `Drop`) sets `--audit-level Request`.
    pub fn start_with(extra: &[&str]) -> ApiServer {
        let t0 = Instant::now();
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let audit_log = std::env::temp_dir().join(format!(
            "muster-audit-{}-{}.jsonl",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&audit_log);
        let extra_has_log = extra.contains(&"--audit-log");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kube_api/apiserver.py");
        let mut child = Command::new("python3")
            .args([
                script,
                "--port",
                "0",
                "--exit-on-stdin-eof",
                "--bookmark-secs",
                "0.5",
            ])
            .args(extra)
            .args(env_options(extra))
            .args(if extra_has_log {
                vec![]
            } else {
                vec!["--audit-log".to_string(), audit_log.display().to_string()]
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the API test server");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("server prints its address");
        let url = line
            .trim()
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        let stdin = child.stdin.take();
        ApiServer {
            child,
            _stdin: stdin,
            url,
            started_in: t0.elapsed(),
            audit_log,
        }
    }

    /// The audit log's lines of `who` (see [`ApiServer::client_as`]) so far.
    fn audit_lines(&self, who: &str) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.audit_log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["client"] == who)
            .collect()
    }

    /// Requests of `who` so far, as
    /// `(verb, apiGroup, resource[/subresource], namespace)`.
    pub fn audited(&self, who: &str) -> Vec<(String, String, String, String)> {
        self.audited_named(who)
            .into_iter()
            .map(|(verb, group, resource, ns, _)| (verb, group, resource, ns))
            .collect()
    }

    /// The requests of `who` so far, as in [`ApiServer::audited`], each with
    /// the object it names (`""` for none): (verb, group, resource, namespace, name).
    pub fn audited_named(&self, who: &str) -> Vec<(String, String, String, String, String)> {
        self.audit_lines(who)
            .iter()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                (
                    s("verb"),
                    s("apiGroup"),
                    audited_resource(e),
                    s("namespace"),
                    s("name"),
                )
            })
            .collect()
    }

    /// The writes of `who` so far whose body the log holds (a server
    /// started with `--audit-level Request`), in order.
    pub fn audited_writes(&self, who: &str) -> Vec<AuditedWrite> {
        self.audit_lines(who)
            .into_iter()
            .filter(|e| !e["requestObject"].is_null())
            .map(|e| AuditedWrite {
                resource: audited_resource(&e),
                name: e["name"].as_str().unwrap_or_default().to_string(),
                body: e["requestObject"].clone(),
            })
            .collect()
    }

    /// Panics naming every request of the controller so far that
    /// `deploy/rbac.yaml` would deny.
    pub fn assert_rbac_allows_controller(&self) {
        self.assert_rbac_allows_controller_by(&rbac::rules());
    }

    /// Panics naming every request of the controller so far that `rules`
    /// would deny.
    pub fn assert_rbac_allows_controller_by(&self, rules: &[rbac::Rule]) {
        let requests = self.audited_named("controller");
        assert!(!requests.is_empty(), "no controller request was audited");
        let denied: std::collections::BTreeSet<String> = requests
            .iter()
            .filter(|(verb, group, resource, ns, name)| {
                !rules
                    .iter()
                    .any(|r| r.allows(verb, group, resource, ns, name))
            })
            .map(|(verb, group, resource, ns, name)| {
                format!("{verb} {group}/{resource} {name:?} in {ns:?}")
            })
            .collect();
        assert!(denied.is_empty(), "requests RBAC would deny: {denied:#?}");
    }

    /// A client for the test's own setup, assertions and stand-ins (the
    /// emulator): the chaos mode leaves it alone (header
    /// `x-muster-chaos: off`), so a test stays deterministic where it must.
    pub fn client(&self) -> kube::Client {
        muster::controller::install_crypto_provider();
        let mut config = kube::Config::new(self.url.parse().expect("url"));
        config.headers.push((
            http::HeaderName::from_static("x-muster-chaos"),
            http::HeaderValue::from_static("off"),
        ));
        kube::Client::try_from(config).expect("client")
    }

    /// A client whose requests the server's audit log attributes to `who`
    /// (header `x-audit-as`), and which a server started with `--authorize`
    /// authorizes as that user (tests/kube_api/README.md); the chaos mode,
    /// when on, hits it: the client to hand to the code under test.
    pub fn client_as(&self, who: &str) -> kube::Client {
        muster::controller::install_crypto_provider();
        let mut config = kube::Config::new(self.url.parse().expect("url"));
        config.headers.push((
            http::HeaderName::from_static("x-audit-as"),
            http::HeaderValue::from_str(who).expect("header value"),
        ));
        kube::Client::try_from(config).expect("client")
    }
}

impl Drop for ApiServer {
    /// Kills the server and deletes its audit log. With `MUSTER_AUDIT_DIR`
    /// set, a copy of the log is kept first, as
    /// `$MUSTER_AUDIT_DIR/<test>.jsonl`: `<test>` is the name libtest gives
    /// the test's thread, `::` written `__` (`scripts/audit-writes` reads
    /// these copies). A test that passes its own `--audit-log` keeps none.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = std::env::var_os("MUSTER_AUDIT_DIR") {
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("unnamed").replace("::", "__");
            let kept = std::path::Path::new(&dir).join(format!("{test}.jsonl"));
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::copy(&self.audit_log, kept);
        }
        let _ = std::fs::remove_file(&self.audit_log);
    }
}

/// Server options from the environment that `extra` does not set.
fn env_options(extra: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |flag: &str, var: &str, default: Option<&str>| {
        if extra.contains(&flag) {
            return;
        }
        let value = std::env::var(var).ok().or(default.map(str::to_string));
        if let Some(v) = value.filter(|v| !v.is_empty() && v != "none") {
            out.push(flag.to_string());
            out.push(v);
        }
    };
    add("--chaos", "MUSTER_API_CHAOS", None);
    add("--chaos-seed", "MUSTER_API_CHAOS_SEED", Some("1"));
    add("--watch-window", "MUSTER_API_WATCH_WINDOW", Some("10"));
    // a log kept for MUSTER_AUDIT_DIR (see `Drop`) names what each create
    // makes: only level Request logs the body, where a create's name is
    if std::env::var_os("MUSTER_AUDIT_DIR").is_some() && !extra.contains(&"--audit-level") {
        out.extend(["--audit-level".to_string(), "Request".to_string()]);
    }
    if std::env::var("MUSTER_API_LOG_ERRORS").is_ok_and(|v| v == "1") {
        out.push("--log-errors".to_string());
    }
    // The namespaces the tests write to exist from the start, as the chart
    // and the cluster's users would have made them (the server refuses a
    // create in a namespace that does not exist, as NamespaceLifecycle does).
    for ns in FIXTURE_NAMESPACES {
        out.extend(["--namespace".to_string(), ns.to_string()]);
    }
    out
}

/// Makes Namespace `name` exist with `labels` (merged into a fixture or
/// system namespace that already exists).
pub async fn ensure_namespace(client: &kube::Client, name: &str, labels: serde_json::Value) {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels}}))
            .expect("namespace");
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let patch = serde_json::json!({"metadata": {"labels": labels}});
            api.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .expect("namespace labels");
        }
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

/// The namespaces every test server starts with, besides the system ones
/// (`default`, `kube-system`, `kube-public`, `kube-node-lease`).
pub const FIXTURE_NAMESPACES: &[&str] = &["muster-system", "team-a", "team-b", "web", "soak"];

/// Runs `op` until it returns something other than a transient API error
/// (429, 500, or a 409 Conflict), at most 20 times: test setup that must
/// survive the chaos mode.
pub async fn retry_transient<T, F, Fut>(mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut tries = 0;
    loop {
        match op().await {
            Err(kube::Error::Api(e))
                if tries < 20
                    && (e.code == 429
                        || e.code == 500
                        || (e.code == 409 && e.reason == "Conflict")) =>
            {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// The resource of a muster kind.
pub fn ar(kind: &str, plural: &str) -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("muster.dev", "v1alpha1", kind),
        plural,
    )
}

/// Creates a muster object (namespaced when `ns` is given).
pub async fn create(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
    body: serde_json::Value,
) {
    let ar = ar(kind, plural);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let mut obj: DynamicObject = serde_json::from_value(body).expect("object");
    obj.types = Some(kube::core::TypeMeta {
        api_version: "muster.dev/v1alpha1".into(),
        kind: kind.into(),
    });
    let pp = PostParams::default();
    retry_transient(|| api.create(&pp, &obj))
        .await
        .expect("create");
}

/// Creates any object from its manifest (`apiVersion`, `kind`, metadata),
/// `plural` naming its resource; namespaced when `ns` is given.
pub async fn create_object(
    client: &kube::Client,
    plural: &str,
    ns: Option<&str>,
    body: serde_json::Value,
) {
    let api_version = body["apiVersion"].as_str().expect("apiVersion").to_string();
    let kind = body["kind"].as_str().expect("kind").to_string();
    let (group, version) = api_version
        .split_once('/')
        .unwrap_or(("", api_version.as_str()));
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, &kind),
        plural,
    );
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let obj: DynamicObject = serde_json::from_value(body).expect("object");
    let pp = PostParams::default();
    retry_transient(|| api.create(&pp, &obj))
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

/// Waits up to 30 s for `Ready=False` on a NodeClass; returns the condition.
pub async fn nodeclass_not_ready(client: &kube::Client, name: &str) -> serde_json::Value {
    eventually(30, "Ready=False on the NodeClass", || {
        let client = client.clone();
        let name = name.to_string();
        async move {
            let nc = Api::<DynamicObject>::all_with(client, &ar("NodeClass", "nodeclasses"))
                .get(&name)
                .await
                .ok()?;
            nc.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready" && c["status"] == "False")
                .cloned()
        }
    })
    .await
}

/// Installs the five muster CRDs exactly as `muster-crds` generates them;
/// the test server enforces their schemas and CEL rules on every write.
pub async fn install_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in muster_crds::crds() {
        let pp = PostParams::default();
        retry_transient(|| api.create(&pp, &c))
            .await
            .expect("create CRD");
    }
}

/// A plain HTTP/1.1 GET of `path` on `addr` (`127.0.0.1:PORT`): the status
/// code and body, or `None` when nothing answers within 2 s.
pub fn plain_get(addr: &str, path: &str) -> Option<(u16, String)> {
    plain_request(addr, "GET", path, None)
}

/// A plain HTTP/1.1 request with an optional JSON body: the status code and
/// body, or `None` when nothing answers within 2 s.
pub fn plain_request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.get(9..12)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((code, body))
}

/// `muster crds | kubectl apply --server-side -f -` over CRDs an earlier
/// release installed: each CRD replaced by today's, the stored objects
/// untouched.
pub async fn apply_current_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for mut crd in muster_crds::crds() {
        let name = crd.metadata.name.clone().expect("CRD name");
        let stored = retry_transient(|| api.get(&name))
            .await
            .expect("stored CRD");
        crd.metadata.resource_version = stored.metadata.resource_version;
        let pp = PostParams::default();
        retry_transient(|| api.replace(&name, &pp, &crd))
            .await
            .expect("apply today's CRD");
    }
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
