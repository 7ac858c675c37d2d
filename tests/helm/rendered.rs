//! The chart's rendered Deployment, run as a process: its container's args
//! and env are handed to the real `muster controller` binary, with only the
//! listen addresses (to 127.0.0.1, the metrics ports to port 0, read back
//! from the log; the webhook to a given address), the mounted Secret's folder
//! (to a temporary folder holding the rendered Secret's files) and the API
//! server URL replaced.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use base64::Engine;
use serde_norway::Value;

use super::find;

// `chart` and `docs_names` include `helm` without `support`, so the file is
// included here too; test crates with both get two copies of a few lines
#[allow(clippy::duplicate_mod)]
#[path = "../support/listen.rs"]
mod listen;

/// The running controller; killed on drop.
pub struct Controller {
    child: Child,
    /// `127.0.0.1:PORT` of `/healthz`, `/readyz` (and `/metrics` unless
    /// secure).
    pub metrics_addr: String,
    /// `127.0.0.1:PORT` of `/metrics` over HTTPS (`--metrics-secure`), when
    /// the Deployment names a port `https-metrics`.
    pub secure_metrics_addr: Option<String>,
    /// `127.0.0.1:PORT` of the webhook (HTTPS).
    pub webhook_addr: String,
    /// Where the Secret's files are.
    pub dir: PathBuf,
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free port of 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port()
}

/// The controller container of the rendered Deployment.
pub fn container(objs: &[Value]) -> &Value {
    &find(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

/// Starts the rendered Deployment's controller against `kube_url`, its
/// webhook on `webhook_addr`; `tag` names the temporary folder.
pub fn start(objs: &[Value], kube_url: &str, webhook_addr: &str, tag: &str) -> Controller {
    let pod = &find(objs, "Deployment")["spec"]["template"]["spec"];
    let container = container(objs);
    // the Secret the pod mounts (Helm's or cert-manager's certificate),
    // written where its volume would be; with controller-managed
    // certificates the pod mounts none
    let dir = std::env::temp_dir().join(format!("muster-rendered-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mount = match pod["volumes"][0]["secret"]["secretName"].as_str() {
        Some(name) => {
            let secret = objs
                .iter()
                .find(|o| o["kind"] == "Secret" && o["metadata"]["name"].as_str() == Some(name))
                .expect("the mounted Secret is rendered");
            for (key, data) in secret["data"].as_mapping().expect("data") {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(data.as_str().expect("b64"))
                    .expect("base64");
                std::fs::write(dir.join(key.as_str().expect("key")), raw)
                    .expect("write secret file");
            }
            container["volumeMounts"][0]["mountPath"]
                .as_str()
                .expect("mountPath")
                .to_string()
        }
        None => {
            assert!(
                container["volumeMounts"].is_null(),
                "a volume that is not the Secret"
            );
            String::new()
        }
    };

    let any_port = "127.0.0.1:0".to_string();
    let port_of = |name: &str| -> String {
        container["ports"]
            .as_sequence()
            .expect("ports")
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["containerPort"].as_u64().expect("port").to_string())
            .expect("named port")
    };
    let has_port = |name: &str| {
        container["ports"]
            .as_sequence()
            .is_some_and(|ps| ps.iter().any(|p| p["name"] == name))
    };
    let secure = has_port("https-metrics");
    let mut args: Vec<String> = Vec::new();
    for a in container["args"].as_sequence().expect("args") {
        let a = a.as_str().expect("string arg");
        let mut a = a
            .replace(&format!("0.0.0.0:{}", port_of("metrics")), &any_port)
            .replace(&format!("0.0.0.0:{}", port_of("webhook")), webhook_addr);
        if secure {
            a = a.replace(&format!("0.0.0.0:{}", port_of("https-metrics")), &any_port);
        }
        let a = if mount.is_empty() {
            a
        } else {
            a.replace(&mount, dir.to_str().expect("utf-8"))
        };
        assert!(!a.contains("0.0.0.0"), "unmapped address in {a}");
        args.push(a);
    }
    args.extend(["--kube-url".into(), kube_url.to_string()]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_muster"));
    cmd.args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for e in container["env"].as_sequence().expect("env") {
        let name = e["name"].as_str().expect("env name");
        let value = match (&e["value"], &e["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(v), _) => v.clone(),
            (_, Value::String(p)) if p == "metadata.name" => "muster-7d9f-x2x1".to_string(),
            other => panic!("env {name}: no test value for {other:?}"),
        };
        cmd.env(name, value);
    }
    // no cloud is reached: static credentials, no instance metadata
    for (k, v) in [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ] {
        cmd.env(k, v);
    }
    let log = dir.join("controller.log");
    let mut child = cmd
        .stdout(std::fs::File::create(&log).expect("log file"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("muster controller starts");
    let metrics_addr = listen::logged_addr(&log, "serving metrics and health probes", &mut child);
    let secure_metrics_addr =
        secure.then(|| listen::logged_addr(&log, "serving metrics over HTTPS", &mut child));
    Controller {
        child,
        metrics_addr,
        secure_metrics_addr,
        webhook_addr: webhook_addr.to_string(),
        dir,
    }
}
