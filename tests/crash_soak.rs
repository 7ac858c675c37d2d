//! The crash soak: the real `muster controller` binary against the API test
//! server and a cloud whose instances outlive every controller — the
//! Compute test double (GCP), the simulated cloud (`--cloud sim`, machines
//! as Nodes), moto (AWS, with the `aws-test-support` feature) and the
//! Karpenter stand-in (the delegate mode, `--cloud karpenter`) — a
//! workload of gangs of 1–8 nodes arriving over time and completing, a
//! share of them of low priority that higher-priority gangs preempt whole
//! once the queue's quota is used, and SIGKILLs of the controller at seeded
//! moments biased toward the steps that matter (the launch path, each drain
//! and eviction step, the Job life cycle; see `soak/trigger.rs`), each
//! followed by a restart. Asserted: no double launch (never two instances
//! for one idempotency key), no instance without a PoolNode after one
//! orphan-collection period, every Job complete (none lost or stuck), no
//! gang partly running, no panic; and that the run reached the drain and
//! eviction steps. With two replicas (GCP), the leader is the one killed:
//! leadership moves within 15 s each time and no process writes while
//! another holds the Lease.
//!
//! Short form in `cargo test`; the full form and the figures of
//! docs/reliability.md come from `scripts/soak`. Knobs (environment):
//! `MUSTER_SOAK_KILLS` (default 25 on GCP, 12 on the simulated cloud and
//! AWS), `MUSTER_SOAK_GANGS` (50 on GCP, 30 on the others),
//! `MUSTER_SOAK_LEADER_KILLS` (6), `MUSTER_SOAK_SEED` (1),
//! `MUSTER_SOAK_REPORT` (file the summaries are appended to).

mod soak;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, ListParams};
use soak::Rng;
use soak::controllers::{Controller, Flags};
use soak::summary::Summary;
use soak::trigger::{AuditTail, Counters, Window};
use soak::workload::{Partial, complete};
use soak::world::{CLUSTER, Crds, NAMESPACE, QUOTA_GPUS, Setup, SoakCloud, World};
use support::ar;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How long pods run.
const RUN_FOR: Duration = Duration::from_millis(1500);
/// The pool's GPU limit.
const MAX_GPUS: u32 = 32;
/// How long a gang may be partly running before it counts (a gang's pods
/// are bound and started one by one).
const PARTIAL_GRACE: Duration = Duration::from_secs(10);
/// How long a kill waits for its window to open before it falls anyway.
const WINDOW_WAIT: Duration = Duration::from_secs(3);
/// How long no Job may complete while some are not, before those count as
/// stuck.
const STALL: Duration = Duration::from_secs(90);
/// One orphan-collection period of the controllers (`--orphan-gc-period`
/// 2 s, `--orphan-grace` 3 s), with slack.
const ORPHAN_PERIOD: Duration = Duration::from_secs(8);
/// Share of the gangs of low priority (preempted by the others).
const LOW_SHARE: f64 = 0.25;
/// The API test server's flags: pods go 0.2 s after a graceful delete; the
/// audit log holds each write's body (the kill windows read it).
const SERVER_ARGS: [&str; 4] = ["--pod-termination-secs", "0.2", "--audit-level", "Request"];

/// The world's settings of every soak.
fn setup() -> Setup {
    Setup {
        run_for: RUN_FOR,
        max_gpus: MAX_GPUS,
        quota_gpus: Some(QUOTA_GPUS),
        provisioning_timeout: "15m".into(),
        crds: Crds::Current,
    }
}

fn log_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("muster-soak-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("log dir");
    dir
}

/// Samples partial gangs every 500 ms until `stop`.
fn watch_partial(
    client: kube::Client,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (
    Arc<Mutex<BTreeMap<String, Duration>>>,
    tokio::task::JoinHandle<()>,
) {
    let partial = Arc::new(Mutex::new(BTreeMap::new()));
    let p = partial.clone();
    let task = tokio::spawn(async move {
        let mut mine = Partial::default();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            mine.sample(&client, PARTIAL_GRACE).await;
            *p.lock().unwrap_or_else(|e| e.into_inner()) = mine.found.clone();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    (partial, task)
}

/// Waits for every Job to complete while they make progress (a Job that
/// does not complete while none other does for `stall` is stuck), then one
/// orphan period; fills in the end-state figures.
async fn settle<C: SoakCloud>(
    world: &World<C>,
    names: &BTreeSet<String>,
    stall: Duration,
    s: &mut Summary,
) {
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), NAMESPACE);
    let mut last = Vec::new();
    let mut done_before = 0;
    let mut progress = Instant::now();
    while progress.elapsed() < stall {
        last = jobs
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let done = last.iter().filter(|j| complete(j)).count();
        if done == names.len() {
            break;
        }
        if done > done_before {
            done_before = done;
            progress = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let present: BTreeSet<String> = last
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    s.jobs_complete = last.iter().filter(|j| complete(j)).count();
    s.jobs_lost = names.difference(&present).count();
    s.jobs_stuck = names.len() - s.jobs_complete - s.jobs_lost;
    tokio::time::sleep(ORPHAN_PERIOD).await;
    s.orphans = orphans(world).await.len();
    let created = world.cloud.created().await;
    s.instances_created = created.len();
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_pool_node: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, pn) in &created {
        *by_name.entry(name).or_default() += 1;
        by_pool_node.entry(pn).or_default().insert(name);
    }
    s.double_launches = by_name.values().filter(|n| **n > 1).count()
        + by_pool_node.values().filter(|n| n.len() > 1).count();
}

/// Instances no PoolNode accounts for, in two readings of the PoolNodes
/// around one of the instances (a PoolNode is written before its instance
/// and removed after it).
async fn orphans<C: SoakCloud>(world: &World<C>) -> Vec<String> {
    let pns: Api<DynamicObject> = Api::all_with(world.client.clone(), &ar("PoolNode", "poolnodes"));
    let names = |l: Vec<DynamicObject>| -> BTreeSet<String> {
        l.into_iter().filter_map(|p| p.metadata.name).collect()
    };
    let before = names(
        pns.list(&ListParams::default())
            .await
            .expect("poolnodes")
            .items,
    );
    let instances = world
        .cloud
        .provider()
        .list(CLUSTER)
        .await
        .expect("instances");
    let after = names(
        pns.list(&ListParams::default())
            .await
            .expect("poolnodes")
            .items,
    );
    instances
        .into_iter()
        .filter(|i| {
            let pn = soak::world::pool_node_of(i);
            !before.contains(&pn) && !after.contains(&pn)
        })
        .map(|i| i.provider_id)
        .collect()
}

/// Asserts the figures every soak must show.
fn assert_safe(s: &Summary) {
    let table = s.markdown();
    assert_eq!(s.double_launches, 0, "double launches\n{table}");
    assert_eq!(s.orphans, 0, "orphans\n{table}");
    assert_eq!(s.jobs_lost, 0, "lost Jobs\n{table}");
    assert_eq!(s.jobs_stuck, 0, "stuck Jobs\n{table}");
    assert_eq!(s.partial_gangs, 0, "partial gangs\n{table}");
    assert_eq!(s.panics, 0, "panics\n{table}");
    assert_eq!(s.unexpected_exits, 0, "exits\n{table}");
    assert!(s.drains > 0, "no node was drained\n{table}");
    assert!(s.evictions() > 0, "no gang was evicted\n{table}");
}

/// The drain and eviction windows.
const DISRUPTION_WINDOWS: [Window; 6] = [
    Window::Draining,
    Window::Cordon,
    Window::GangEvicted,
    Window::JobRequeued,
    Window::InstanceTerminated,
    Window::NodeDeleted,
];

/// The delay between a window opening and the kill.
fn jitter(rng: &mut Rng, w: Window) -> Duration {
    match w {
        Window::PoolNodeCreated | Window::InstanceCreated => rng.millis(0, 30),
        Window::Random => Duration::ZERO,
        _ => rng.millis(0, 15),
    }
}

/// Waits for the window `w` of the process `identity` (see `wait_for`).
async fn open<C: SoakCloud>(world: &World<C>, w: Window, identity: &str) -> bool {
    let mut tail = AuditTail::at_end(world.server.audit_log.clone());
    let (a, b) = (world.cloud.clone(), world.cloud.clone());
    let launches = move || a.launches();
    let terminations = move || b.terminations();
    let counters = Counters {
        launches: &launches,
        terminations: &terminations,
    };
    soak::trigger::wait_for(w, identity, &mut tail, &counters, WINDOW_WAIT).await
}

/// Counts the window a kill fell in: opened, or at the end of the wait.
fn count_kill(s: &mut Summary, w: Window, opened: bool) {
    let e = s.kills.entry(w.as_str()).or_default();
    if opened || w == Window::Random {
        e.0 += 1;
    } else {
        e.1 += 1;
    }
}

/// One controller SIGKILLed `MUSTER_SOAK_KILLS` times (default `kills`)
/// over `MUSTER_SOAK_GANGS` gangs (default `gangs`) on the cloud `world`
/// runs; returns the summary, asserted.
async fn one_controller<C: SoakCloud>(world: World<C>, kills: u64, gangs: u64) -> Summary {
    let kills = env("MUSTER_SOAK_KILLS", kills);
    let n_gangs = env("MUSTER_SOAK_GANGS", gangs) as usize;
    let seed = env("MUSTER_SOAK_SEED", 1);
    let t0 = Instant::now();
    let cloud = world.cloud.name();
    let dir = log_dir(&format!("one-{cloud}"));
    let flags = Flags::for_cloud(&world.server.url, world.cloud.controller(), &dir);
    // arrivals spread over the kills (about 2 s each)
    let arrival = Duration::from_millis(kills.max(30) * 2000);
    let gangs = soak::workload::mixed(n_gangs, arrival, seed, LOW_SHARE);
    let names: BTreeSet<String> = gangs.iter().map(|g| g.name.clone()).collect();
    let mut s = Summary {
        mode: format!("{cloud}, 1 replica"),
        seed,
        gangs: gangs.len(),
        low_priority: gangs.iter().filter(|g| g.low).count(),
        pods: gangs.iter().map(|g| u64::from(g.pods)).sum(),
        ..Summary::default()
    };
    let submitting = tokio::spawn(soak::workload::submit(world.client.clone(), gangs));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (partial, watcher) = watch_partial(world.client.clone(), stop.clone());
    let mut rng = Rng::new(seed);
    let mut ctl = Controller::start(&flags, "soak-0", &dir);
    for k in 1..=kills {
        tokio::time::sleep(rng.millis(200, 1500)).await;
        if rng.below(4) == 0 && world.cloud.interrupt(rng.next()).await.is_some() {
            s.interrupted += 1;
        }
        let w = rng.weighted(&Window::WEIGHTED);
        let opened = open(&world, w, &ctl.identity).await;
        tokio::time::sleep(jitter(&mut rng, w)).await;
        if ctl.exited().is_some() {
            s.unexpected_exits += 1;
        }
        ctl.kill();
        count_kill(&mut s, w, opened);
        ctl = Controller::start(&flags, &format!("soak-{k}"), &dir);
    }
    submitting.await.expect("workload submitted");
    settle(&world, &names, STALL, &mut s).await;
    if ctl.exited().is_some() {
        s.unexpected_exits += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.await;
    s.partial_gangs = partial.lock().unwrap_or_else(|e| e.into_inner()).len();
    drop(ctl);
    s.panics = soak::controllers::panics(&dir).len();
    soak::summary::disruptions(&world.server.audit_log, &mut s);
    s.secs = t0.elapsed().as_secs_f64();
    s.publish();
    // kept with the controllers' logs while the run fails
    let _ = std::fs::copy(&world.server.audit_log, dir.join("audit.jsonl"));
    assert_safe(&s);
    let in_disruption: u32 = DISRUPTION_WINDOWS
        .iter()
        .filter_map(|w| s.kills.get(w.as_str()))
        .map(|(hit, _)| hit)
        .sum();
    // about one kill in six lands in an opened drain or eviction window;
    // a run of a dozen kills may see none
    assert!(
        kills < 25 || in_disruption > 0,
        "no kill fell in a drain or eviction step\n{}",
        s.markdown()
    );
    let _ = std::fs::remove_dir_all(&dir);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_controller_survives_sigkills_at_every_step_on_gcp() {
    let world = soak::world::start(&setup(), &SERVER_ARGS, soak::gcp::Gcp::start_with_spot).await;
    one_controller(world, 25, 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_controller_survives_sigkills_at_every_step_on_sim() {
    let world = soak::world::start(&setup(), &SERVER_ARGS, soak::sim::Sim::start).await;
    one_controller(world, 12, 30).await;
}

#[cfg(feature = "aws-test-support")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_controller_survives_sigkills_at_every_step_on_aws() {
    let world = soak::world::start(&setup(), &SERVER_ARGS, soak::aws::Aws::start).await;
    one_controller(world, 12, 30).await;
}

/// Karpenter's delegate mode: each launch is a NodeClaim the Karpenter
/// stand-in launches; a double launch is a NodeClaim created twice for one
/// PoolNode, an orphan a NodeClaim without one.
#[cfg(feature = "aws-test-support")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_controller_survives_sigkills_at_every_step_in_karpenter_delegate_mode() {
    let world = soak::world::start(&setup(), &SERVER_ARGS, soak::karpenter::Karpenter::start).await;
    one_controller(world, 12, 30).await;
}

/// Seconds since the epoch (the audit log's clock).
fn epoch() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The Lease holder now.
async fn holder(client: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "muster-system")
        .get_opt("muster-controller")
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
}

/// Readings of the Lease holder: `(epoch secs, holder)`.
type LeaseReadings = Arc<Mutex<Vec<(f64, String)>>>;

/// Records the Lease holder every 50 ms until `stop`: `(epoch secs, holder)`.
fn watch_lease(
    client: kube::Client,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (LeaseReadings, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let task = tokio::spawn(async move {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let h = holder(&client).await.unwrap_or_default();
            s.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((epoch(), h));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (seen, task)
}

/// The writes (other than to the Lease) of the replicas (processes named
/// `replica-*` in their User-Agent) in the audit log: `(identity, line)`.
fn replica_writes(audit: &std::path::Path) -> Vec<(String, serde_json::Value)> {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let mut out = Vec::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let verb = e["verb"].as_str().unwrap_or_default();
        if !matches!(verb, "create" | "update" | "patch" | "delete") || e["resource"] == "leases" {
            continue;
        }
        let agent = e["userAgent"].as_str().unwrap_or_default();
        let Some(who) = agent
            .split_once('(')
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(w, _)| w.to_string())
        else {
            continue;
        };
        if who.starts_with("replica-") {
            out.push((who, e));
        }
    }
    out
}

/// Of the replicas' `writes`, those made while the readings of the Lease
/// just before and just after show another holder.
fn non_leader_writes(
    writes: &[(String, serde_json::Value)],
    leases: &[(f64, String)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (who, e) in writes {
        let verb = e["verb"].as_str().unwrap_or_default();
        let ts = e["ts"].as_f64().unwrap_or(0.0);
        let before = leases.iter().rev().find(|(t, _)| *t <= ts);
        let after = leases.iter().find(|(t, _)| *t >= ts);
        if let (Some((_, b)), Some((_, a))) = (before, after)
            && b != who
            && a != who
        {
            out.push(format!(
                "{who} {verb} {} at {ts:.3} (holder {b} then {a})",
                e["resource"].as_str().unwrap_or_default()
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_leader_moves_leadership_and_no_follower_writes_on_gcp() {
    let kills = env("MUSTER_SOAK_LEADER_KILLS", 6);
    let n_gangs = env("MUSTER_SOAK_GANGS", 200).min(kills * 5).max(30) as usize;
    let seed = env("MUSTER_SOAK_SEED", 1) + 1000;
    let t0 = Instant::now();
    let world = soak::world::start(&setup(), &SERVER_ARGS, soak::gcp::Gcp::start).await;
    let dir = log_dir("two");
    // lease 6 s, renew deadline 4 s, retry 1 s, API timeout 1.5 s
    let flags = Flags {
        election: Some((6, 4, 1, 1500)),
        ..Flags::for_cloud(&world.server.url, world.cloud.controller(), &dir)
    };
    let arrival = Duration::from_secs(kills * 8);
    let gangs = soak::workload::mixed(n_gangs, arrival, seed, LOW_SHARE);
    let names: BTreeSet<String> = gangs.iter().map(|g| g.name.clone()).collect();
    let mut s = Summary {
        mode: "gcp, 2 replicas".into(),
        seed,
        gangs: gangs.len(),
        low_priority: gangs.iter().filter(|g| g.low).count(),
        pods: gangs.iter().map(|g| u64::from(g.pods)).sum(),
        ..Summary::default()
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (leases, lease_watch) = watch_lease(world.client.clone(), stop.clone());
    let mut next = 0;
    let start = |next: &mut u32| {
        let c = Controller::start(&flags, &format!("replica-{next}"), &dir);
        *next += 1;
        c
    };
    let mut live: Vec<Controller> = vec![start(&mut next), start(&mut next)];
    let submitting = tokio::spawn(soak::workload::submit(world.client.clone(), gangs));
    let (partial, watcher) = watch_partial(world.client.clone(), stop.clone());
    let mut rng = Rng::new(seed);
    for _ in 0..kills {
        // a leader among the live processes
        let ids: Vec<String> = live.iter().map(|c| c.identity.clone()).collect();
        let leader = holder_among(&world.client, &ids, 30).await;
        tokio::time::sleep(rng.millis(500, 2500)).await;
        let w = rng.weighted(&Window::WEIGHTED);
        let opened = open(&world, w, &leader).await;
        tokio::time::sleep(jitter(&mut rng, w)).await;
        let i = live
            .iter()
            .position(|c| c.identity == leader)
            .expect("the leader is live");
        for c in live.iter_mut() {
            if c.exited().is_some() {
                s.unexpected_exits += 1;
            }
        }
        live.remove(i).kill();
        let killed_at = Instant::now();
        count_kill(&mut s, w, opened);
        live.push(start(&mut next));
        let ids: Vec<String> = live.iter().map(|c| c.identity.clone()).collect();
        holder_among(&world.client, &ids, 20).await;
        s.takeovers.push(killed_at.elapsed().as_secs_f64());
    }
    let watches = Watches {
        stop,
        partial,
        watcher,
        leases,
        lease_watch,
    };
    let (_, writes) = finish_replicas(&world, &names, submitting, watches, &mut s).await;
    drop(live);
    s.panics = soak::controllers::panics(&dir).len();
    soak::summary::disruptions(&world.server.audit_log, &mut s);
    s.secs = t0.elapsed().as_secs_f64();
    s.publish();
    assert_safe(&s);
    assert!(writes.is_empty(), "writes from a non-leader: {writes:#?}");
    let slowest = s.takeovers.iter().copied().fold(0.0, f64::max);
    assert!(slowest <= 15.0, "leadership took {slowest:.1} s to move");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The watches of a run of replicas, stopped by [`finish_replicas`].
struct Watches {
    stop: Arc<std::sync::atomic::AtomicBool>,
    partial: Arc<Mutex<BTreeMap<String, Duration>>>,
    watcher: tokio::task::JoinHandle<()>,
    leases: LeaseReadings,
    lease_watch: tokio::task::JoinHandle<()>,
}

/// The end of a run of replicas: the workload submitted and settled, the
/// watches stopped, the partial gangs and the writes from a non-leader
/// counted. Returns the replicas' writes and those from a non-leader.
async fn finish_replicas<C: SoakCloud, T>(
    world: &World<C>,
    names: &BTreeSet<String>,
    submitting: tokio::task::JoinHandle<T>,
    watches: Watches,
    s: &mut Summary,
) -> (Vec<(String, serde_json::Value)>, Vec<String>) {
    submitting.await.expect("workload submitted");
    settle(world, names, STALL, s).await;
    watches
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watches.watcher.await;
    let _ = watches.lease_watch.await;
    s.partial_gangs = watches
        .partial
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .len();
    let writes = replica_writes(&world.server.audit_log);
    let non_leader = non_leader_writes(
        &writes,
        &watches.leases.lock().unwrap_or_else(|e| e.into_inner()),
    );
    s.non_leader_writes = Some(non_leader.len());
    (writes, non_leader)
}

/// The Lease holder among `ids`, once there is one (within `secs`).
async fn holder_among(client: &kube::Client, ids: &[String], secs: u64) -> String {
    support::eventually(secs, "a leader among the live replicas", || {
        let client = client.clone();
        let ids = ids.to_vec();
        async move { holder(&client).await.filter(|h| ids.contains(h)) }
    })
    .await
}

/// A rolling upgrade under load, as docs/install.md has the operator do it
/// and as the Deployment's default strategy (2 replicas, maxSurge 1,
/// maxUnavailable 0) runs it: two replicas of the previous release
/// (`tests/data/previous-release`, built by `scripts/previous-build`) run
/// the workload over that release's CRDs; today's CRDs are applied over
/// them; a replica of this build starts and becomes ready; the old follower
/// is stopped (SIGTERM); a second new replica starts and becomes ready; the
/// old leader is stopped (SIGTERM) in the middle of a cycle, at a launch,
/// drain or eviction step. Asserted: what every soak asserts (no double
/// launch, no instance without a PoolNode, no Job lost or stuck, no gang
/// partly running, no panic), each old replica exits 0 within the grace
/// period, leadership moves to a new replica within 15 s, and no process
/// writes while another holds the Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rolling_upgrade_from_the_previous_release_on_sim() {
    let n_gangs = env("MUSTER_SOAK_GANGS", 30) as usize;
    let seed = env("MUSTER_SOAK_SEED", 1) + 2000;
    let t0 = Instant::now();
    let previous = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/previous-release"
    ))
    .expect("tests/data/previous-release");
    let field = |key: &str| -> String {
        previous
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|r| r.trim().to_string()))
            .unwrap_or_else(|| panic!("tests/data/previous-release: no `{key}` line"))
    };
    let rev = field("rev:");
    let setup = Setup {
        crds: Crds::Previous(field("crds:")),
        ..setup()
    };
    let world = soak::world::start(&setup, &SERVER_ARGS, soak::sim::Sim::start).await;
    let dir = log_dir("rolling");
    // lease 6 s, renew deadline 4 s, retry 1 s, API timeout 1.5 s
    let new = Flags {
        election: Some((6, 4, 1, 1500)),
        ..Flags::for_cloud(&world.server.url, world.cloud.controller(), &dir)
    };
    let old = Flags {
        binary: soak::controllers::previous_binary(&dir),
        ..new.clone()
    };
    // the chart's terminationGracePeriodSeconds
    let grace = Duration::from_secs(30);
    let gangs = soak::workload::mixed(n_gangs, Duration::from_secs(40), seed, LOW_SHARE);
    let names: BTreeSet<String> = gangs.iter().map(|g| g.name.clone()).collect();
    let mut s = Summary {
        mode: "sim, 2 replicas, rolling upgrade".into(),
        seed,
        gangs: gangs.len(),
        low_priority: gangs.iter().filter(|g| g.low).count(),
        pods: gangs.iter().map(|g| u64::from(g.pods)).sum(),
        upgraded_from: Some(rev.chars().take(12).collect()),
        ..Summary::default()
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (leases, lease_watch) = watch_lease(world.client.clone(), stop.clone());
    let mut olds: Vec<Controller> = ["replica-old-0", "replica-old-1"]
        .into_iter()
        .map(|id| Controller::start(&old, id, &dir))
        .collect();
    let old_ids: Vec<String> = olds.iter().map(|c| c.identity.clone()).collect();
    let old_leader = holder_among(&world.client, &old_ids, 30).await;
    let submitting = tokio::spawn(soak::workload::submit(world.client.clone(), gangs));
    let (partial, watcher) = watch_partial(world.client.clone(), stop.clone());
    let mut rng = Rng::new(seed);
    // the previous release runs the first gangs
    tokio::time::sleep(rng.millis(6000, 9000)).await;
    // docs/install.md, upgrade step 1: today's CRDs over the stored objects
    support::apply_current_crds(&world.client).await;
    let crds_applied = epoch();
    tokio::time::sleep(rng.millis(1000, 3000)).await;
    // the rollout: a new replica, ready, before an old one goes
    let mut news = vec![Controller::start(&new, "replica-new-0", &dir)];
    news[0].ready(60).await;
    let i = olds
        .iter()
        .position(|c| c.identity != old_leader)
        .expect("an old follower");
    let follower = olds.remove(i);
    count_kill(&mut s, Window::Random, true);
    if !follower.stop(grace) {
        s.unclean_stops += 1;
    }
    news.push(Controller::start(&new, "replica-new-1", &dir));
    news[1].ready(60).await;
    // the old leader stopped in the middle of a cycle
    let w = rng.weighted(&Window::WEIGHTED);
    let opened = open(&world, w, &old_leader).await;
    tokio::time::sleep(jitter(&mut rng, w)).await;
    for c in olds.iter_mut().chain(news.iter_mut()) {
        if c.exited().is_some() {
            s.unexpected_exits += 1;
        }
    }
    count_kill(&mut s, w, opened);
    let leader = olds.pop().expect("the old leader");
    assert_eq!(leader.identity, old_leader, "the old leader still leads");
    let stopped_at = Instant::now();
    if !leader.stop(grace) {
        s.unclean_stops += 1;
    }
    let new_ids: Vec<String> = news.iter().map(|c| c.identity.clone()).collect();
    holder_among(&world.client, &new_ids, 20).await;
    s.takeovers.push(stopped_at.elapsed().as_secs_f64());
    let watches = Watches {
        stop,
        partial,
        watcher,
        leases,
        lease_watch,
    };
    let (replica_writes, writes) =
        finish_replicas(&world, &names, submitting, watches, &mut s).await;
    for c in news.iter_mut() {
        if c.exited().is_some() {
            s.unexpected_exits += 1;
        }
    }
    let refused = |old: bool| -> Vec<(String, &serde_json::Value)> {
        replica_writes
            .iter()
            .filter(|(who, e)| {
                who.starts_with("replica-old-") == old && e["responseStatus"]["code"] == 422
            })
            .map(|(who, e)| (who.clone(), e))
            .collect()
    };
    let describe = |w: &[(String, &serde_json::Value)]| -> Vec<String> {
        w.iter()
            .map(|(who, e)| format!("{who} {} {} {}", e["verb"], e["resource"], e["name"]))
            .collect()
    };
    let refused_new = describe(&refused(false));
    s.invalid_writes = Some(refused_new.len());
    // the previous release's own refused writes are its bugs (they are
    // counted, by resource); those to muster's objects under today's CRDs
    // would be the upgrade's
    let refused_old = refused(true);
    for (_, e) in &refused_old {
        *s.previous_invalid_writes
            .entry(e["resource"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let refused_old_crds = describe(
        &refused_old
            .into_iter()
            .filter(|(_, e)| {
                e["apiGroup"] == "muster.dev" && e["ts"].as_f64().unwrap_or(0.0) > crds_applied
            })
            .collect::<Vec<_>>(),
    );
    // the previous release's leader acted under today's CRDs
    let old_under_new = replica_writes
        .iter()
        .filter(|(who, e)| {
            who.starts_with("replica-old-")
                && e["ts"].as_f64().unwrap_or(0.0) > crds_applied
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| c < 300)
        })
        .count();
    drop(news);
    s.panics = soak::controllers::panics(&dir).len();
    soak::summary::disruptions(&world.server.audit_log, &mut s);
    s.secs = t0.elapsed().as_secs_f64();
    s.publish();
    let _ = std::fs::copy(&world.server.audit_log, dir.join("audit.jsonl"));
    assert_safe(&s);
    assert_eq!(s.unclean_stops, 0, "unclean stops\n{}", s.markdown());
    assert!(
        refused_new.is_empty(),
        "writes of this build refused as invalid: {refused_new:#?}"
    );
    assert!(
        refused_old_crds.is_empty(),
        "writes of the previous release refused under today's CRDs: {refused_old_crds:#?}"
    );
    assert!(
        old_under_new > 0,
        "the previous release made no write under today's CRDs"
    );
    assert!(writes.is_empty(), "writes from a non-leader: {writes:#?}");
    let slowest = s.takeovers.iter().copied().fold(0.0, f64::max);
    assert!(slowest <= 15.0, "leadership took {slowest:.1} s to move");
    let _ = std::fs::remove_dir_all(&dir);
}
