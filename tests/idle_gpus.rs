//! Idle GPU holders end to end: a real Prometheus scrapes a fake DCGM
//! exporter (a small HTTP server here serving `DCGM_FI_DEV_GPU_UTIL` in the
//! exposition format with dcgm-exporter's label set: `gpu`, `UUID`,
//! `pci_bus_id`, `device`, `modelName`, `Hostname`,
//! `DCGM_FI_DRIVER_VERSION`, `container`, `namespace`, `pod`), and the
//! controller, running in-process against the API test server with the real
//! planner, reads it through `--prometheus-url`. A gang whose GPU stays at
//! 0 % for its queue's window gets `GPUsIdle=True` and a Warning Event; with
//! the policy `Requeue` it is evicted whole and queued again; a busy gang
//! next to it is untouched. With Prometheus unreachable the controller keeps
//! planning, says so in a metric, and judges nobody.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams};
use muster_planner::{Dur, Policy};
use serde_json::{Value, json};
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{gpu_node, job, nodeclass, pool, queue};
use support::waits::{self, events_of, wait_for_gang_phase};
use support::{ApiServer, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "team-a";

/// CRDs, a NodeClass, a pool, an 8-GPU node and a queue with `idle_policy`.
async fn world(server: &ApiServer, idle_policy: Value) -> kube::Client {
    let client = server.client();
    support::install_crds(&client).await;
    nodeclass("gcp-default").create(&client).await;
    pool("a100").create(&client).await;
    queue("team-a")
        .idle_policy(idle_policy)
        .create(&client)
        .await;
    gpu_node("gpu-0").create(&client).await;
    client
}

/// A suspended 1-GPU Job queued in `team-a`.
async fn submit(client: &kube::Client, name: &str) {
    job(name)
        .queue("team-a")
        .requests("1", "1Gi")
        .create(client)
        .await;
}

/// One GPU in use: (namespace, pod, GPU index, utilisation %).
type Gpus = Arc<Mutex<Vec<(String, String, u32, f64)>>>;

/// A fake DCGM exporter on 127.0.0.1: `/metrics` lists the GPUs the
/// running pods of the watched Jobs use, each at its Job's utilisation
/// (what dcgm-exporter's Kubernetes mapping reports), plus an unused GPU
/// with empty pod labels.
struct Exporter {
    addr: std::net::SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn exposition(gpus: &[(String, String, u32, f64)]) -> String {
    let mut s = String::from(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
    );
    let line = |gpu: u32, ns: &str, pod: &str, container: &str, v: f64| {
        format!(
            "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{gpu}\",UUID=\"GPU-00000000-0000-0000-0000-00000000000{gpu}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{gpu}\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"gpu-0\",DCGM_FI_DRIVER_VERSION=\"550.54.15\",container=\"{container}\",namespace=\"{ns}\",pod=\"{pod}\"}} {v}\n",
            0x10 + gpu
        )
    };
    for (ns, pod, gpu, v) in gpus {
        s.push_str(&line(*gpu, ns, pod, "train", *v));
    }
    s.push_str(&line(7, "", "", "", 0.0));
    s
}

impl Exporter {
    /// Serves the pods of the Jobs in `util` (job name → utilisation %).
    async fn start(client: kube::Client, util: BTreeMap<&'static str, f64>) -> Exporter {
        let gpus: Gpus = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind exporter");
        let addr = listener.local_addr().expect("exporter address");
        let g = gpus.clone();
        let serve = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let g = g.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    let body = exposition(&g.lock().expect("gpus"));
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        let g = gpus.clone();
        let refresh = tokio::spawn(async move {
            let pods: Api<Pod> = Api::namespaced(client, NS);
            loop {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    let mut next = Vec::new();
                    for p in list.items {
                        let running =
                            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                        let job = p
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("job-name"))
                            .cloned();
                        if let (true, Some(job), Some(name)) =
                            (running, job, p.metadata.name.clone())
                            && let Some(v) = util.get(job.as_str())
                        {
                            let index = u32::try_from(next.len()).unwrap_or(0);
                            next.push((NS.to_string(), name, index, *v));
                        }
                    }
                    *g.lock().expect("gpus") = next;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Exporter {
            addr,
            tasks: vec![serve, refresh],
        }
    }
}

async fn gang(client: &kube::Client, name: &str) -> Option<DynamicObject> {
    waits::gang(client, NS, name).await
}

fn condition(g: &DynamicObject, type_: &str) -> Option<Value> {
    g.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

async fn gang_events(client: &kube::Client, gang: &str, reason: &str) -> Vec<Event> {
    events_of(client, reason)
        .await
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Gang")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(gang)
        })
        .collect()
}

/// The controller with the real planner reading utilisation from `url`
/// every second at a 1 s step; evictions back off 3 s.
fn start(
    client: &kube::Client,
    cloud: &Arc<FakeCloud>,
    url: String,
) -> support::in_process::Running {
    let mut config = support::in_process::config("c1");
    config.prometheus_url = Some(url);
    config.prometheus_interval = Duration::from_secs(1);
    config.prometheus_step = Duration::from_secs(1);
    config.policy = Policy {
        requeue_backoff_base: Dur::secs(3),
        ..Policy::default()
    };
    support::in_process::spawn(client, cloud, muster::controller::real_planner(), config)
}

fn skip() -> bool {
    let skip = std::env::var("MUSTER_SKIP_PROMETHEUS").as_deref() == Ok("1");
    if skip {
        eprintln!("MUSTER_SKIP_PROMETHEUS=1: skipped");
    }
    skip
}

#[tokio::test]
async fn idle_gang_is_reported_evicted_whole_and_requeued_busy_gang_untouched() {
    if skip() {
        return;
    }
    let server = ApiServer::start();
    let client = world(
        &server,
        json!({"thresholdPercent": 10, "window": "1m", "action": "Requeue"}),
    )
    .await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let exporter = Exporter::start(
        client.clone(),
        BTreeMap::from([("notebook", 0.0), ("training", 87.0)]),
    )
    .await;
    let prom = support::prometheus::Prometheus::start(exporter.addr);
    let ctl = start(&server.client_as("controller"), &cloud, prom.url());
    submit(&client, "notebook").await;
    submit(&client, "training").await;
    for name in ["notebook", "training"] {
        wait_for_gang_phase(&client, NS, name, &["Running"], 60).await;
    }
    // Prometheus needs a few seconds for its first samples, then the window
    // (1 m) must pass with the notebook's GPU at 0 %
    let st = eventually(150, "the idle gang evicted", || {
        let client = client.clone();
        async move {
            let g = gang(&client, "notebook").await?;
            // the status and the condition are two writes of one cycle
            let evicted = g.data["status"]["reason"] == "IdleRequeued";
            (evicted && condition(&g, "GPUsIdle").is_some()).then_some(g)
        }
    })
    .await;
    assert_eq!(st.data["status"]["evictions"], 1, "{:?}", st.data["status"]);
    let c = condition(&st, "GPUsIdle").expect("GPUsIdle condition");
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "IdleRequeued");
    let message = c["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("below 10%") && message.contains("Requeue"),
        "{message}"
    );
    let events = eventually(10, "the IdleRequeued Event", || {
        let client = client.clone();
        async move {
            let e = gang_events(&client, "notebook", "IdleRequeued").await;
            (!e.is_empty()).then_some(e)
        }
    })
    .await;
    assert_eq!(events.len(), 1, "one Warning Event: {events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    // evicted whole through the Job life cycle: suspended, pins removed
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let job = jobs.get("notebook").await.expect("job");
    assert_eq!(job.spec.as_ref().and_then(|s| s.suspend), Some(true));
    assert!(
        !job.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("muster.dev/admitted-nodes")
    );
    // and queued again: after the 3 s backoff it is admitted and runs again
    eventually(60, "the evicted gang admitted again", || {
        let client = client.clone();
        let jobs = jobs.clone();
        async move {
            let g = gang(&client, "notebook").await?;
            let running = g.data["status"]["phase"] == "Running";
            let unsuspended = jobs.get("notebook").await.ok()?.spec?.suspend == Some(false);
            (running && unsuspended).then_some(())
        }
    })
    .await;
    // the busy gang was never touched
    let busy = gang(&client, "training").await.expect("training gang");
    assert_eq!(busy.data["status"]["phase"], "Running");
    assert_eq!(busy.data["status"]["evictions"].as_i64().unwrap_or(0), 0);
    assert!(
        condition(&busy, "GPUsIdle").is_none(),
        "{:?}",
        busy.data["status"]
    );
    assert!(
        gang_events(&client, "training", "IdleRequeued")
            .await
            .is_empty()
    );
    assert_eq!(
        jobs.get("training")
            .await
            .expect("job")
            .spec
            .and_then(|s| s.suspend),
        Some(false)
    );
    let text = ctl.metrics.encode();
    assert!(text.contains("muster_gpu_utilization_up 1"), "{text}");
    assert!(
        text.contains("muster_evictions_total{reason=\"IdleRequeued\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn report_only_policy_sets_the_condition_and_keeps_the_gang_running() {
    if skip() {
        return;
    }
    let server = ApiServer::start();
    let client = world(&server, json!({"thresholdPercent": 5, "window": "1m"})).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let exporter = Exporter::start(client.clone(), BTreeMap::from([("notebook", 1.0)])).await;
    let prom = support::prometheus::Prometheus::start(exporter.addr);
    let _ctl = start(&server.client_as("controller"), &cloud, prom.url());
    submit(&client, "notebook").await;
    let g = eventually(150, "GPUsIdle=True", || {
        let client = client.clone();
        async move {
            let g = gang(&client, "notebook").await?;
            (condition(&g, "GPUsIdle")?["status"] == "True").then_some(g)
        }
    })
    .await;
    assert_eq!(
        condition(&g, "GPUsIdle").expect("condition")["reason"],
        "GPUsIdle"
    );
    assert_eq!(g.data["status"]["phase"], "Running");
    // a few more reads: still running, still one Event
    eventually(10, "the GPUsIdle Event", || {
        let client = client.clone();
        async move {
            (!gang_events(&client, "notebook", "GPUsIdle")
                .await
                .is_empty())
            .then_some(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let g = gang(&client, "notebook").await.expect("gang");
    assert_eq!(g.data["status"]["phase"], "Running");
    assert_eq!(gang_events(&client, "notebook", "GPUsIdle").await.len(), 1);
}

#[tokio::test]
async fn prometheus_unreachable_is_a_metric_not_a_crash_or_a_hot_loop() {
    let server = ApiServer::start();
    let client = world(
        &server,
        json!({"thresholdPercent": 10, "window": "1m", "action": "Stop"}),
    )
    .await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    // a port nobody listens on
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port");
    let ctl = start(
        &server.client_as("controller"),
        &cloud,
        format!("http://{closed}"),
    );
    submit(&client, "notebook").await;
    wait_for_gang_phase(&client, NS, "notebook", &["Running"], 60).await;
    let counter = |text: &str, name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    let errors = "muster_gpu_utilization_errors_total{reason=\"Unreachable\"}";
    let before = ctl.metrics.encode();
    let t0 = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = ctl.metrics.encode();
    let secs = t0.elapsed().as_secs_f64();
    assert!(after.contains("muster_gpu_utilization_up 0"), "{after}");
    let reads = counter(&after, errors) - counter(&before, errors);
    // about one read per --prometheus-interval (1 s), not one per cycle
    assert!(
        reads >= 2.0 && reads <= secs + 2.0,
        "{reads} failed reads in {secs} s"
    );
    // and planning goes on
    let cycles = counter(&after, "muster_planning_cycles_total")
        - counter(&before, "muster_planning_cycles_total");
    assert!(cycles >= 2.0, "{cycles} cycles in {secs} s");
    let g = gang(&client, "notebook").await.expect("gang");
    assert_eq!(g.data["status"]["phase"], "Running");
    assert!(condition(&g, "GPUsIdle").is_none());
}

#[tokio::test]
async fn stop_policy_evicts_the_idle_gang_and_leaves_its_job_suspended() {
    if skip() {
        return;
    }
    let server = ApiServer::start();
    let client = world(
        &server,
        json!({"thresholdPercent": 10, "window": "1m", "action": "Stop"}),
    )
    .await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let exporter = Exporter::start(client.clone(), BTreeMap::from([("notebook", 2.0)])).await;
    let prom = support::prometheus::Prometheus::start(exporter.addr);
    let _ctl = start(&server.client_as("controller"), &cloud, prom.url());
    submit(&client, "notebook").await;
    let g = eventually(180, "the idle gang stopped", || {
        let client = client.clone();
        async move {
            let g = gang(&client, "notebook").await?;
            let stopped = g.data["status"]["reason"] == "IdleStopped";
            (stopped && condition(&g, "GPUsIdle").is_some()).then_some(g)
        }
    })
    .await;
    assert_eq!(g.data["status"]["phase"], "Finished");
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    // well past the backoff: not queued again, the Job stays suspended and
    // its pod is gone
    tokio::time::sleep(Duration::from_secs(6)).await;
    let g = gang(&client, "notebook").await.expect("gang");
    assert_eq!(g.data["status"]["phase"], "Finished");
    assert_eq!(
        jobs.get("notebook")
            .await
            .expect("job")
            .spec
            .and_then(|s| s.suspend),
        Some(true)
    );
    let running: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("job-name=notebook"))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect();
    assert!(running.is_empty(), "{running:?}");
}
