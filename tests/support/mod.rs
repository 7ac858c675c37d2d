//! Test support: the Kubernetes API test server (`tests/kube_api/apiserver.py`)
//! started and stopped per test, a kube client for it, and CRD installation.
#![allow(dead_code)]

pub mod emulator;
pub mod fake_cloud;
pub mod prometheus;
pub mod rbac;
pub mod stub_planner;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

/// A running API test server; killed on drop.
pub struct ApiServer {
    child: Child,
    _stdin: Option<ChildStdin>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// How long it took to be ready.
    pub started_in: Duration,
}

impl ApiServer {
    /// Starts a fresh server on a free port.
    pub fn start() -> ApiServer {
        ApiServer::start_with(&[])
    }

    /// Starts a fresh server with extra command-line options.
    pub fn start_with(extra: &[&str]) -> ApiServer {
        let t0 = Instant::now();
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
        }
    }

    /// A client for it.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().expect("url"));
        kube::Client::try_from(config).expect("client")
    }

    /// A client whose requests the server's audit log attributes to `who`
    /// (header `x-audit-as`).
    pub fn client_as(&self, who: &str) -> kube::Client {
        let mut config = kube::Config::new(self.url.parse().expect("url"));
        config.headers.push((
            http::HeaderName::from_static("x-audit-as"),
            http::HeaderValue::from_str(who).expect("header value"),
        ));
        kube::Client::try_from(config).expect("client")
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Installs the five muster CRDs exactly as `muster-crds` generates them
/// (names, plurals, scopes and subresources must match what the controller
/// asks for; the test server does not validate schemas).
pub async fn install_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in muster_crds::crds() {
        api.create(&PostParams::default(), &c)
            .await
            .expect("create CRD");
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
