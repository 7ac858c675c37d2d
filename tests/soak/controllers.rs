//! Real `muster controller` processes: started with the soak's flags, each
//! under an identity of its own (named in every request's User-Agent), its
//! stderr kept in a file, SIGKILLed and restarted by the soak.

use std::process::{Child, Command, Stdio};

/// How the controllers run.
#[derive(Debug, Clone)]
pub struct Flags {
    /// API server URL.
    pub kube_url: String,
    /// Flags that point the controller at the cloud.
    pub cloud: Vec<String>,
    /// Environment the cloud needs (credentials, region).
    pub env: Vec<(String, String)>,
    /// Cluster name.
    pub cluster: String,
    /// With leader election (lease, renew deadline, retry period, API
    /// timeout, in whole seconds for the first three); `None`: one replica.
    pub election: Option<(u64, u64, u64, u64)>,
    /// More flags.
    pub extra: Vec<String>,
    /// The binary every process runs (see [`pin_binary`]).
    pub binary: std::path::PathBuf,
}

/// Copies the `muster` binary cargo built for this test into `dir` and
/// returns the copy's path: every controller of a run starts from it, so a
/// rebuild of the target directory during a long run (with other
/// features) cannot change the binary under the soak.
pub fn pin_binary(dir: &std::path::Path) -> std::path::PathBuf {
    let to = dir.join("muster");
    std::fs::copy(env!("CARGO_BIN_EXE_muster"), &to).expect("copy of the muster binary");
    to
}

/// Copies the previous release's `muster` binary into `dir` (as
/// `muster-previous`) and returns the copy's path: `MUSTER_PREVIOUS_BIN`
/// when set (`scripts/test` sets it), else what `scripts/previous-build`
/// builds (the revision of `tests/data/previous-release`).
pub fn previous_binary(dir: &std::path::Path) -> std::path::PathBuf {
    let from = match std::env::var("MUSTER_PREVIOUS_BIN") {
        Ok(p) if !p.is_empty() => std::path::PathBuf::from(p),
        _ => {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/previous-build");
            let out = Command::new(script)
                .stderr(Stdio::inherit())
                .output()
                .expect("scripts/previous-build runs");
            assert!(
                out.status.success(),
                "scripts/previous-build failed: {}",
                out.status
            );
            std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
    };
    let to = dir.join("muster-previous");
    std::fs::copy(&from, &to)
        .unwrap_or_else(|e| panic!("copy of the previous muster {}: {e}", from.display()));
    to
}

/// One running process; its log (stdout and stderr) in `DIR/IDENTITY.log`.
pub struct Controller {
    /// Identity (unique per process).
    pub identity: String,
    /// Port of its metrics listener (plain HTTP: `/readyz`, `/metrics`).
    pub port: u16,
    child: Child,
}

impl Flags {
    /// One replica (no leader election) against `cloud`, on the API server
    /// at `kube_url`.
    /// The binary is copied into `dir` ([`pin_binary`]).
    pub fn for_cloud(
        kube_url: &str,
        (cloud, env): (Vec<String>, Vec<(String, String)>),
        dir: &std::path::Path,
    ) -> Flags {
        Flags {
            kube_url: kube_url.to_string(),
            cloud,
            env,
            cluster: super::world::CLUSTER.to_string(),
            election: None,
            extra: Vec::new(),
            binary: pin_binary(dir),
        }
    }
}

impl Controller {
    /// Starts a controller under `identity`.
    pub fn start(flags: &Flags, identity: &str, dir: &std::path::Path) -> Controller {
        // the previous release does not log the port it binds: it is given
        // one picked free (the current binary binds port 0 and logs it)
        let picked = (flags.binary.file_name() == Some(std::ffi::OsStr::new("muster-previous")))
            .then(|| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("port")
                    .port()
            });
        let metrics_addr = format!("127.0.0.1:{}", picked.unwrap_or(0));
        let log = dir.join(format!("{identity}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut cmd = Command::new(&flags.binary);
        cmd.args([
            "controller",
            "--kube-url",
            &flags.kube_url,
            "--identity",
            identity,
            "--cluster-name",
            &flags.cluster,
            "--metrics-addr",
            &metrics_addr,
            "--log-format",
            "json",
            "--debounce",
            "50ms",
            "--tick",
            "1s",
            "--orphan-gc-period",
            "2s",
            "--orphan-grace",
            "3s",
            "--interruption-poll",
            "2s",
        ]);
        match flags.election {
            None => {
                cmd.arg("--no-leader-election");
            }
            Some((lease, renew, retry, timeout)) => {
                cmd.args([
                    "--lease-duration",
                    &format!("{lease}s"),
                    "--lease-renew-deadline",
                    &format!("{renew}s"),
                    "--lease-retry-period",
                    &format!("{retry}s"),
                    "--api-timeout",
                    &format!("{timeout}ms"),
                ]);
            }
        }
        cmd.args(&flags.cloud);
        cmd.args(&flags.extra);
        cmd.envs(flags.env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("muster controller starts");
        let port = picked.unwrap_or_else(|| {
            crate::support::logged_addr(&log, "serving metrics", &mut child)
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .expect("a port")
        });
        Controller {
            identity: identity.to_string(),
            port,
            child,
        }
    }

    /// Waits until `/readyz` answers 200, as the Deployment's readiness
    /// probe does before a rolling update goes on; panics after `secs`.
    pub async fn ready(&self, secs: u64) {
        let addr = format!("127.0.0.1:{}", self.port);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let ok = tokio::task::spawn_blocking({
                let addr = addr.clone();
                move || {
                    crate::support::plain_get(&addr, "/readyz").is_some_and(|(code, _)| code == 200)
                }
            })
            .await
            .unwrap_or(false);
            if ok {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} not ready after {secs} s",
                self.identity
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM, as the kubelet stops a pod, then waits for the process to
    /// exit for up to `grace` (the pod's `terminationGracePeriodSeconds`),
    /// SIGKILL after it; returns whether it exited by itself, successfully.
    pub fn stop(mut self, grace: std::time::Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    /// SIGKILL, and reap.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.identity.clone()
    }

    /// Whether it exited on its own (it should never).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Panics any process logged, as `(identity, line)`.
pub fn panics(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        if e.path().extension().is_none_or(|x| x != "log") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("panicked")) {
            out.push((
                e.file_name()
                    .to_string_lossy()
                    .trim_end_matches(".log")
                    .to_string(),
                line.chars().take(300).collect(),
            ));
        }
    }
    out
}
