//! Fault storms: the real `muster controller` binary against the API test
//! server in chaos mode (seeded 409, 429 and 500 answers and cut watches on
//! its requests) and the Compute test double, while the cloud has no
//! capacity for the pool's whole family in its only zone, then no quota,
//! then answers 503 and 429 bursts; meanwhile each new machine draws its
//! fate from the storm's seed: one in four never registers a Node, one in
//! four registers a Node that stays `Ready=False` (`KubeletNotReady`, as
//! with a network plugin that never starts). Asserted while the storm
//! lasts: every gang is finished, admitted or running, or waits with a
//! reason; no gang stays Provisioning (holding the nodes it has) past its
//! provisioning deadline; no never-Ready machine is held for a gang past
//! the provisioning timeout it was launched under, plus what one handover
//! while it booted may add, plus slack. After it: every Job completes,
//! every never-Ready machine is terminated, no instance is without a
//! PoolNode after one orphan-collection period, no idempotency key has two
//! instances.

mod soak;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject, ListParams};
use muster_provider_api::CloudProvider;
use soak::controllers::{Controller, Flags};
use soak::gcp::Fate;
use soak::never_ready::NeverReady;
use soak::workload::complete;
use soak::world::{CLUSTER, NAMESPACE, SoakCloud};
use support::ar;

/// The pool's provisioning timeout, in seconds.
const PROVISIONING_TIMEOUT: i64 = 20;

/// The storm's seed: the API server's chaos and the machines' fates.
const SEED: u64 = 7;

/// Seconds a cycle may take to act on a deadline, on top of it.
const SLACK: i64 = 10;

/// Seconds since the epoch.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// What one look at the gangs found wrong: gangs waiting without a reason,
/// gangs Provisioning past their deadline (with [`SLACK`] for the cycle
/// that gives up).
async fn look(
    client: &kube::Client,
    seen_without_reason: &mut BTreeMap<String, Instant>,
) -> (Vec<String>, Vec<String>) {
    let gangs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ar("Gang", "gangs"));
    let Ok(list) = gangs.list(&ListParams::default()).await else {
        return (Vec::new(), Vec::new());
    };
    let mut silent = Vec::new();
    let mut overdue = Vec::new();
    for g in list.items {
        let name = g.metadata.name.clone().unwrap_or_default();
        let st = &g.data["status"];
        let phase = st["phase"].as_str().unwrap_or_default();
        let reason = st["reason"].as_str().unwrap_or_default();
        let waiting = matches!(
            phase,
            "" | "Queued" | "Provisioning" | "Unsatisfiable" | "Evicted"
        );
        if waiting && reason.is_empty() {
            // a new gang gets its status in the next cycle
            let since = *seen_without_reason
                .entry(name.clone())
                .or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(15) {
                silent.push(format!("{name} {phase:?}"));
            }
        } else {
            seen_without_reason.remove(&name);
        }
        if phase == "Provisioning"
            && let Some(deadline) = st["provisioningDeadline"]
                .as_str()
                .and_then(muster_provider_api::parse_rfc3339)
            && now() > deadline + SLACK
        {
            overdue.push(format!("{name} {}s past", now() - deadline));
        }
    }
    (silent, overdue)
}

/// Gangs by phase and reason.
async fn phases(client: &kube::Client) -> BTreeMap<String, usize> {
    let gangs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ar("Gang", "gangs"));
    let mut out = BTreeMap::new();
    for g in gangs
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let st = &g.data["status"];
        let phase = st["phase"].as_str().unwrap_or("-");
        *out.entry(format!("{phase} {}", st["reason"].as_str().unwrap_or("-")))
            .or_default() += 1;
        if phase != "Finished" {
            eprintln!(
                "not finished: {} {st}",
                g.metadata.name.clone().unwrap_or_default()
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_gang_runs_or_waits_with_a_reason_through_fault_storms() {
    let chaos = std::env::var("MUSTER_STORM_API_CHAOS").unwrap_or_else(|_| "0.03".into());
    let setup = soak::world::Setup {
        run_for: Duration::from_millis(1500),
        max_gpus: 24,
        quota_gpus: None,
        provisioning_timeout: format!("{PROVISIONING_TIMEOUT}s"),
        crds: soak::world::Crds::Current,
    };
    let world = soak::world::start(
        &setup,
        &[
            "--pod-termination-secs",
            "0.2",
            "--chaos",
            &chaos,
            "--chaos-seed",
            &SEED.to_string(),
        ],
        soak::gcp::Gcp::start,
    )
    .await;
    let dir = std::env::temp_dir().join(format!("muster-storm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("log dir");
    let flags = Flags {
        // capacity errors keep an offering out of plans for 20 s, not 3 min
        extra: vec!["--unavailable-offering-ttl".into(), "20s".into()],
        ..Flags::for_cloud(&world.server.url, world.cloud.controller(), &dir)
    };
    let gangs = soak::workload::gangs(40, Duration::from_secs(40), 17);
    let names: BTreeSet<String> = gangs.iter().map(|g| g.name.clone()).collect();
    let mut ctl = Controller::start(&flags, "storm-0", &dir);
    let submitting = tokio::spawn(soak::workload::submit(world.client.clone(), gangs));
    let machine = soak::gcp::MACHINE;
    // the storm, step by step: (seconds from the start, control request)
    let storm: Vec<(u64, String)> = vec![
        (
            5,
            format!("stockout?zone=us-central1-a&machineType={machine}"),
        ),
        (20, "restock".into()),
        (20, format!("quota?machineType={machine}")),
        (32, "restock".into()),
        (32, "fail?code=503&n=40".into()),
        (40, "fail?code=429&n=40".into()),
    ];
    world.cloud.machines.fail_from(SEED);
    let mut never_ready = NeverReady::default();
    let t0 = Instant::now();
    let mut steps = storm.into_iter().peekable();
    let mut without_reason = BTreeMap::new();
    let mut silent = BTreeSet::new();
    let mut overdue = BTreeSet::new();
    while t0.elapsed() < Duration::from_secs(45) {
        while let Some((at, _)) = steps.peek() {
            if t0.elapsed() < Duration::from_secs(*at) {
                break;
            }
            let (_, req) = steps.next().expect("peeked");
            world.cloud.fake.control("POST", &req);
        }
        let (s, o) = look(&world.client, &mut without_reason).await;
        silent.extend(s);
        overdue.extend(o);
        let ids = world.cloud.machines.with_fate(Fate::NeverReady);
        never_ready.sample(&world.client, &ids, now()).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    world.cloud.machines.stop_failing();
    world.cloud.fake.control("POST", "restock");
    submitting.await.expect("workload submitted");
    // after the storm: everything completes
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), NAMESPACE);
    // progress-based: stuck means no Job completed for 90 s
    let mut progress = Instant::now();
    let mut complete_jobs = 0;
    while progress.elapsed() < Duration::from_secs(90) {
        let (s, o) = look(&world.client, &mut without_reason).await;
        silent.extend(s);
        overdue.extend(o);
        let ids = world.cloud.machines.with_fate(Fate::NeverReady);
        never_ready.sample(&world.client, &ids, now()).await;
        let done = jobs
            .list(&ListParams::default())
            .await
            .map(|l| l.items.iter().filter(|j| complete(j)).count())
            .unwrap_or(0);
        if done > complete_jobs {
            complete_jobs = done;
            progress = Instant::now();
        }
        if complete_jobs == names.len() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let phases = phases(&world.client).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let pns: BTreeSet<String> =
        Api::<DynamicObject>::all_with(world.client.clone(), &ar("PoolNode", "poolnodes"))
            .list(&ListParams::default())
            .await
            .expect("poolnodes")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
    let instances = world.cloud.provider.list(CLUSTER).await.expect("instances");
    let orphans: Vec<String> = instances
        .iter()
        .filter(|i| !i.pool_node.as_ref().is_some_and(|p| pns.contains(p)))
        .map(|i| i.provider_id.clone())
        .collect();
    let never_ready_ids = world.cloud.machines.with_fate(Fate::NeverReady);
    let still_running: Vec<String> = instances
        .iter()
        .filter(|i| never_ready_ids.contains(&i.provider_id))
        .map(|i| i.provider_id.clone())
        .collect();
    // launched under the timeout; handed over at most while it booted (so
    // before the timeout), to a gang whose own deadline is at most one
    // timeout later
    let held_past = never_ready.held_past(2 * PROVISIONING_TIMEOUT + SLACK);
    let longest = never_ready
        .machines
        .values()
        .map(|h| h.held_for())
        .max()
        .unwrap_or(0);
    let created = soak::gcp::created(&world.cloud.fake);
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in &created {
        *by_name.entry(name).or_default() += 1;
    }
    let doubles = by_name.values().filter(|n| **n > 1).count();
    let exited = ctl.exited();
    drop(ctl);
    let panics = soak::controllers::panics(&dir);
    println!(
        "storm: {} gangs, {complete_jobs} complete, {} instances created, {} never registered, {} never Ready (held by {} gangs, at most {longest}s after launch, {} still running), {} without a PoolNode, {doubles} double launches, {} waiting without a reason, {} Provisioning past the deadline, {} panics; gangs by phase and reason: {phases:?}",
        names.len(),
        created.len(),
        world.cloud.machines.hidden(),
        never_ready_ids.len(),
        never_ready.gangs().len(),
        still_running.len(),
        orphans.len(),
        silent.len(),
        overdue.len(),
        panics.len()
    );
    assert!(
        silent.is_empty(),
        "gangs waiting without a reason: {silent:?}"
    );
    assert!(
        overdue.is_empty(),
        "gangs Provisioning past their deadline: {overdue:?}"
    );
    assert_eq!(
        complete_jobs,
        names.len(),
        "every Job completes after the storm"
    );
    assert!(
        orphans.is_empty(),
        "instances without a PoolNode: {orphans:?}"
    );
    assert_eq!(doubles, 0, "double launches");
    assert!(panics.is_empty(), "{panics:?}");
    assert!(exited.is_none(), "the controller exited: {exited:?}");
    assert!(
        world.cloud.machines.hidden() > 0,
        "some machines never registered"
    );
    assert!(
        !never_ready.gangs().is_empty(),
        "some gang got a machine that never turned Ready: {:?}",
        never_ready.machines
    );
    assert!(
        held_past.is_empty(),
        "never-Ready machines held past their timeout: {held_past:?}"
    );
    assert!(
        still_running.is_empty(),
        "never-Ready machines not terminated: {still_running:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
