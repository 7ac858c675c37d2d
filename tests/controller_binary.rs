//! The real `muster controller` binary against the API test server: it
//! starts, syncs, serves /healthz, /readyz and /metrics, creates the Gang of
//! a labelled Job and suspends it.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use support::waits::wait_for_job_suspended;
use support::{ApiServer, eventually};

fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `muster controller` against `server` without leader election, logging
/// JSON to `log`, with the flags `extra`, killed on drop; and the address it
/// serves metrics on (it binds `127.0.0.1:0` and logs the port it got).
fn controller(server: &ApiServer, extra: &[&str], log: &std::path::Path) -> (Kill, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args([
            "controller",
            "--kube-url",
            &server.url,
            "--cluster-name",
            "test-cluster",
            "--no-leader-election",
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .args(extra)
        .stdout(std::fs::File::create(log).expect("log file"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("muster controller starts");
    let addr = support::logged_addr(log, "serving metrics", &mut child);
    (Kill(child), addr)
}

#[tokio::test]
async fn binary_runs_against_the_test_server() {
    let server = ApiServer::start();
    let client = server.client();
    support::install_crds(&client).await;
    let log = std::env::temp_dir().join(format!("muster-binary-{}.log", std::process::id()));
    let (_child, addr) = controller(&server, &["--debounce", "50ms"], &log);
    let ready = eventually(20, "/readyz 200", || {
        let addr = addr.clone();
        async move { get(&addr, "/readyz").filter(|(c, _)| *c == 200) }
    })
    .await;
    assert_eq!(ready.1, "ok\n");
    assert_eq!(get(&addr, "/healthz").map(|r| r.0), Some(200));
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j", "namespace": "default", "labels": {"muster.dev/queue": "q"}},
        "spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}
    }))
    .expect("job");
    Api::<Job>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &job)
        .await
        .expect("job");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("muster.dev", "v1alpha1", "Gang"),
        "gangs",
    );
    let gangs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    eventually(10, "the Gang", || {
        let gangs = gangs.clone();
        async move { gangs.get_opt("j").await.ok()? }
    })
    .await;
    wait_for_job_suspended(&client, "default", "j", 10).await;
    let (code, metrics) = get(&addr, "/metrics").expect("metrics");
    assert_eq!(code, 200);
    assert!(metrics.contains("muster_leader 1"), "{metrics}");
    assert!(
        metrics.contains("muster_planning_cycles_total"),
        "{metrics}"
    );
    assert!(
        metrics.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF"
    );
    let _ = std::fs::remove_file(&log);
}

/// Without a cluster name (absent or blank) the binary exits with code 2
/// before it connects, naming the flag, its environment variable and the
/// chart value: a default shared by clusters would let one's orphan
/// collection terminate another's instances.
#[test]
fn a_missing_cluster_name_is_refused() {
    for (args, env) in [
        (&[][..], None),
        (&["--cluster-name", " "][..], None),
        (&[][..], Some("")),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_muster"));
        cmd.args(["controller", "--kube-url", "http://127.0.0.1:9"])
            .args(args)
            .env_remove("MUSTER_CLUSTER_NAME");
        if let Some(v) = env {
            cmd.env("MUSTER_CLUSTER_NAME", v);
        }
        let out = cmd.output().expect("run muster");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        for named in ["--cluster-name", "MUSTER_CLUSTER_NAME", "clusterName"] {
            assert!(stderr.contains(named), "{args:?} {env:?}: {stderr}");
        }
    }
    // a name no GCP label or exact EC2 tag filter can hold
    for bad in ["prod*", "Prod", "-prod", "prod.eu", &"a".repeat(64)] {
        let out = Command::new(env!("CARGO_BIN_EXE_muster"))
            .args([
                "controller",
                "--kube-url",
                "http://127.0.0.1:9",
                &format!("--cluster-name={bad}"),
            ])
            .output()
            .expect("run muster");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains(&format!("--cluster-name {bad:?}")),
            "{bad}: {stderr}"
        );
    }
}

/// Bad flags stop the binary before it connects, with a message naming the
/// flag.
#[test]
fn bad_periods_and_lease_timings_are_refused() {
    let cases = [
        (vec!["--interruption-poll", "0s"], "--interruption-poll"),
        (vec!["--orphan-gc-period", "0s"], "--orphan-gc-period"),
        (vec!["--tick", "0s"], "--tick"),
        (
            vec!["--lease-duration", "5s", "--lease-retry-period", "5s"],
            "--lease-retry-period",
        ),
        (vec!["--orphan-grace", "soon"], "--orphan-grace"),
        // client-go's rules: lease > renew deadline > 1.2 × retry period
        (
            vec!["--lease-renew-deadline", "15s"],
            "--lease-renew-deadline",
        ),
        (vec!["--lease-retry-period", "9s"], "--lease-retry-period"),
        // a request must end within lease duration − renew deadline
        (vec!["--api-timeout", "5s"], "--api-timeout"),
    ];
    for (args, flag) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_muster"))
            .args(["controller", "--kube-url", "http://127.0.0.1:9"])
            .args(["--cluster-name", "test-cluster"])
            .args(&args)
            .output()
            .expect("run muster");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

/// Started before the CRDs are installed, the controller says once which
/// CRDs are missing and the command that installs them, repeats nothing
/// while it waits, prints no `Debug` dump of the API's answer, and starts
/// once the CRDs are there.
#[tokio::test]
async fn missing_crds_are_named_once_with_the_install_command() {
    let server = ApiServer::start();
    let client = server.client();
    let log = std::env::temp_dir().join(format!("muster-nocrds-{}.log", std::process::id()));
    let (_child, addr) = controller(&server, &[], &log);
    // several discovery retries fit in this wait
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let text = std::fs::read_to_string(&log).expect("log");
    let messages: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["fields"]["message"].as_str().map(str::to_string))
        .collect();
    let missing: Vec<&String> = messages
        .iter()
        .filter(|m| m.contains("custom resources"))
        .collect();
    assert_eq!(missing.len(), 1, "said once: {messages:#?}");
    for crd in [
        "nodeclasses.muster.dev",
        "gpupools.muster.dev",
        "gpuqueues.muster.dev",
        "gangs.muster.dev",
        "poolnodes.muster.dev",
    ] {
        assert!(missing[0].contains(crd), "{crd}: {}", missing[0]);
    }
    assert!(
        missing[0].contains("`muster crds | kubectl apply -f -`"),
        "{}",
        missing[0]
    );
    assert!(
        !text.contains("ErrorResponse") && !text.contains("Status {"),
        "no Debug dump: {text}"
    );
    assert_ne!(get(&addr, "/readyz").map(|r| r.0), Some(200));
    support::install_crds(&client).await;
    eventually(45, "/readyz 200 once the CRDs are installed", || {
        let addr = addr.clone();
        async move { get(&addr, "/readyz").filter(|(c, _)| *c == 200) }
    })
    .await;
    let _ = std::fs::remove_file(&log);
}
