//! Two real `muster controller` processes on one API test server, with the
//! default election timing (lease 15 s, renew deadline 10 s, retry 2 s):
//!
//! - the leader gets SIGTERM (or SIGINT): it releases the Lease, the other
//!   leads within 15 s (in practice at its next try), and the audit log shows
//!   no write of the old leader after its release;
//! - the leader is stopped (SIGSTOP) in the middle of a burst of work, past
//!   its lease: the other takes over, and after SIGCONT the old one writes
//!   nothing (it notices the loss from its renew deadline, its cycle in
//!   flight is cancelled, its writes are fenced) while the new leader works.
//!
//! Each process is told apart in the audit log by its User-Agent, which
//! names its identity.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::{ApiServer, ar, eventually};

/// A running `muster controller`; killed on drop.
struct Controller {
    identity: &'static str,
    child: Child,
    metrics: String,
    log: PathBuf,
}

impl Controller {
    fn start(server: &ApiServer, identity: &'static str) -> Controller {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!(
            "muster-leader-{}-{identity}-{n}.log",
            std::process::id()
        ));
        let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
            .args([
                "controller",
                "--kube-url",
                &server.url,
                "--cluster-name",
                "test-cluster",
                "--identity",
                identity,
                "--metrics-addr",
                "127.0.0.1:0",
                "--debounce",
                "50ms",
                "--tick",
                "1s",
            ])
            .env("RUST_LOG", "info,muster::controller::leader=debug")
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("muster controller starts");
        let metrics = support::logged_addr(&log, "serving metrics", &mut child);
        Controller {
            identity,
            child,
            metrics,
            log,
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill -{sig} {}", self.identity);
    }

    /// The body of a 200 answer to `path` on the metrics port.
    fn get(&self, path: &str) -> Option<String> {
        support::plain_get(&self.metrics, path)
            .and_then(|(code, body)| (code == 200).then_some(body))
    }

    async fn ready(&self) {
        eventually(30, &format!("{} ready", self.identity), || async {
            self.get("/readyz")
        })
        .await;
    }

    fn leading(&self) -> Option<bool> {
        let m = self.get("/metrics")?;
        if m.contains("\nmuster_leader 1") {
            Some(true)
        } else if m.contains("\nmuster_leader 0") {
            Some(false)
        } else {
            None
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

async fn holder(client: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "muster-system")
        .get_opt("muster-controller")
        .await
        .ok()??
        .spec?
        .holder_identity
}

/// Polls every 20 ms until `who` holds the Lease; how long that took.
async fn wait_holder(client: &kube::Client, who: &str, limit: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        if holder(client).await.as_deref() == Some(who) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < limit, "{who} did not lead within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Submits a labelled Job, suspended as the admission webhook leaves it.
async fn submit(client: &kube::Client, name: &str) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"muster.dev/queue": "q"}},
        "spec": {"parallelism": 1, "suspend": true, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}
    }))
    .expect("job");
    Api::<Job>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &job)
        .await
        .expect("job");
}

/// Waits until the leader made the Gang of Job `name`.
async fn gang(client: &kube::Client, name: &str) {
    let gangs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ar("Gang", "gangs"));
    eventually(20, &format!("the Gang of {name}"), || {
        let gangs = gangs.clone();
        async move { gangs.get_opt(name).await.ok()? }
    })
    .await;
}

/// How many Jobs are submitted at once to keep the leader busy.
const BURST: usize = 150;

/// How many Gangs exist.
async fn gangs(client: &kube::Client) -> usize {
    Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar("Gang", "gangs"))
        .list(&Default::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(0)
}

/// One request of the audit log.
#[derive(Debug)]
struct Request {
    agent: String,
    verb: String,
    resource: String,
}

impl Request {
    fn by(&self, identity: &str) -> bool {
        self.agent.contains(&format!("({identity})"))
    }

    fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    fn is_lease_write(&self) -> bool {
        self.is_write() && self.resource == "leases"
    }
}

fn audit(server: &ApiServer) -> Vec<Request> {
    std::fs::read_to_string(&server.audit_log)
        .expect("audit log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| Request {
            agent: e["userAgent"].as_str().unwrap_or_default().to_string(),
            verb: e["verb"].as_str().unwrap_or_default().to_string(),
            resource: e["resource"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

/// Index of the first Lease write of `identity` after `from`: when it took
/// the Lease (a follower writes the Lease only to take it).
fn first_lease_write(log: &[Request], identity: &str, from: usize) -> usize {
    log.iter()
        .enumerate()
        .skip(from)
        .find(|(_, r)| r.by(identity) && r.is_lease_write())
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("{identity} never wrote the Lease"))
}

/// Two controllers, `a` leading with a Gang made; returns them.
async fn two_controllers(server: &ApiServer, client: &kube::Client) -> (Controller, Controller) {
    support::install_crds(client).await;
    let a = Controller::start(server, "a");
    a.ready().await;
    wait_holder(client, "a", Duration::from_secs(20)).await;
    let b = Controller::start(server, "b");
    b.ready().await;
    submit(client, "before").await;
    gang(client, "before").await;
    assert_eq!(a.leading(), Some(true));
    assert_eq!(b.leading(), Some(false));
    let log = audit(server);
    assert!(
        log.iter()
            .any(|r| r.by("a") && r.is_write() && r.resource != "leases"),
        "the leader wrote before the handover"
    );
    assert!(
        !log.iter().any(|r| r.by("b") && r.is_write()),
        "the follower wrote nothing"
    );
    (a, b)
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_the_other_leads_at_once() {
    hand_over_on("TERM").await;
}

#[tokio::test]
async fn sigint_releases_the_lease_and_the_other_leads_at_once() {
    hand_over_on("INT").await;
}

/// The leader gets `signal`: it releases the Lease and exits cleanly, the
/// other leads within 15 s, and no write of the old leader follows.
async fn hand_over_on(signal: &str) {
    let server = ApiServer::start();
    let client = server.client();
    let (mut a, b) = two_controllers(&server, &client).await;
    let before = audit(&server).len();
    a.signal(signal);
    let took = wait_holder(&client, "b", Duration::from_secs(15)).await;
    eprintln!("takeover after SIG{signal}: {:.2} s", took.as_secs_f64());
    let status = a.child.wait().expect("a exits");
    assert!(status.success(), "a exits cleanly: {status:?}\n{}", a.log());
    assert!(a.log().contains("lease released"), "{}", a.log());
    submit(&client, "after").await;
    gang(&client, "after").await;
    assert_eq!(b.leading(), Some(true));
    let log = audit(&server);
    let b_took = first_lease_write(&log, "b", before);
    let a_last = log
        .iter()
        .rposition(|r| r.by("a") && r.is_write())
        .expect("a wrote");
    assert!(
        log[a_last].is_lease_write(),
        "a's last write is its release: {:?}",
        log[a_last]
    );
    assert!(
        a_last < b_took,
        "a wrote after b took the Lease: {:?}",
        &log[b_took..]
            .iter()
            .filter(|r| r.by("a"))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_paused_leader_writes_nothing_after_the_other_took_over() {
    let server = ApiServer::start();
    let client = server.client();
    let (a, b) = two_controllers(&server, &client).await;
    let before = audit(&server).len();
    // stop a in the middle of its work: a burst of Jobs, each a Gang to
    // create and a Job to suspend
    let burst: Vec<String> = (0..BURST).map(|i| format!("burst-{i}")).collect();
    let submitting = {
        let client = client.clone();
        let burst = burst.clone();
        tokio::spawn(async move {
            for name in &burst {
                submit(&client, name).await;
            }
        })
    };
    eventually(30, "a at work on the burst", || {
        let client = client.clone();
        async move { (gangs(&client).await >= 10).then_some(()) }
    })
    .await;
    a.signal("STOP");
    let stopped = Instant::now();
    let at_stop = gangs(&client).await;
    // the Lease expires 15 s after b last saw it change; b's next try takes it
    wait_holder(&client, "b", Duration::from_secs(25)).await;
    let took = stopped.elapsed();
    eprintln!("takeover after SIGSTOP: {:.2} s", took.as_secs_f64());
    submitting.await.expect("burst submitted");
    eprintln!("Gangs when a stopped: {at_stop} of {}", BURST + 1);
    assert!(at_stop < BURST, "a was stopped in the middle of its work");
    // a leads at most a renew deadline (10 s) past its last renewal, b takes
    // over at least a lease (15 s) after it: never sooner than 5 s after the stop
    assert!(
        took >= Duration::from_secs(5),
        "b waited for expiry: {took:?}\n{}\n{}",
        a.log(),
        b.log()
    );
    a.signal("CONT");
    // work the old leader would do if it still believed it led
    submit(&client, "after-1").await;
    submit(&client, "after-2").await;
    gang(&client, "after-1").await;
    gang(&client, "after-2").await;
    for name in &burst {
        gang(&client, name).await;
    }
    // a sees b's renewals and stays a follower
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(a.leading(), Some(false), "{}", a.log());
    assert!(
        a.log()
            .contains("lease not renewed within the renew deadline"),
        "a noticed the loss from its renew deadline:\n{}",
        a.log()
    );
    assert_eq!(b.leading(), Some(true));
    let log = audit(&server);
    let b_took = first_lease_write(&log, "b", before);
    let a_after: Vec<&Request> = log[b_took..].iter().filter(|r| r.by("a")).collect();
    assert!(
        a_after.iter().any(|r| r.resource == "leases"),
        "a is alive and reads the Lease again: {a_after:?}"
    );
    let writes: Vec<_> = a_after.iter().filter(|r| r.is_write()).collect();
    assert!(
        writes.is_empty(),
        "a wrote after b took the Lease: {writes:?}\n{}",
        a.log()
    );
}
