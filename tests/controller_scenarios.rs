//! Controller scenarios: the real `kube::Client` over HTTP against the API
//! test server, the controller in-process, a fake cloud, and an emulator for
//! kubelet / Job controller / kube-scheduler.
//!
//! Every scenario runs with the scripted stub planner (tests the driver now)

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use muster::controller::{self, ControllerConfig, LeaseConfig, PlanFn};
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::{FakeCloud, Hang};
use support::in_process::Running;
use support::objects::{gpu_node, job, pool, start_world};
use support::waits::{
    assert_no_invalid_writes, events_of, gang, gang_phase, nodeclass_ready_status, patch_pool,
    patch_queue, poolnodes, running_pods, wait_for_gang_phase, wait_for_job_suspended,
    wait_for_no_poolnodes, wait_for_poolnode_gone, wait_for_poolnode_phase, wait_for_running_pods,
};
use support::{ApiServer, AuditedWrite, ar, eventually};

const NS: &str = "team-a";

fn stub() -> PlanFn {
    Arc::new(support::stub_planner::plan)
}

/// The controller (identity `c1`, no leader election) on `cloud`, deciding
/// with `planner`, as the server's client `controller`.
fn start(server: &ApiServer, cloud: &Arc<FakeCloud>, planner: PlanFn) -> Running {
    start_configured(server, cloud, planner, |_| {})
}

/// [`start`] with `configure` applied to the test configuration.
fn start_configured(
    server: &ApiServer,
    cloud: &Arc<FakeCloud>,
    planner: PlanFn,
    configure: impl FnOnce(&mut ControllerConfig),
) -> Running {
    let mut config = support::in_process::config("c1");
    configure(&mut config);
    support::in_process::spawn(&server.client_as("controller"), cloud, planner, config)
}

/// The controller `identity` with the stub planner, acting only while it
/// holds the Lease (4 s, renewed within 2 s).
fn start_leader(server: &ApiServer, cloud: &Arc<FakeCloud>, identity: &str) -> Running {
    start_configured(server, cloud, stub(), |c| {
        c.identity = identity.to_string();
        c.lease = Some(LeaseConfig {
            duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
            ..LeaseConfig::new("muster-controller", "muster-system")
        });
        c.api_timeout = Duration::from_millis(1500);
    })
}

// ---------------------------------------------------------------- (1)

async fn scenario_admit_on_existing_capacity(planner: PlanFn) {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, planner);
    job("small").queue("team-a").create(&client).await;
    let pods = wait_for_running_pods(&client, NS, "job-name=small", 1, 20).await;
    assert_eq!(
        pods[0].spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("gpu-0")
    );
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("small")
        .await
        .expect("job");
    assert_eq!(
        job.annotations()
            .get("muster.dev/admitted-nodes")
            .map(String::as_str),
        Some("gpu-0")
    );
    let tmpl = job.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(
        tmpl.node_selector
            .expect("selector")
            .get("muster.dev/gang")
            .map(String::as_str),
        Some("team-a.small")
    );
    let node = Api::<Node>::all(client.clone())
        .get("gpu-0")
        .await
        .expect("node");
    assert_eq!(
        node.labels().get("muster.dev/gang").map(String::as_str),
        Some("team-a.small")
    );
    wait_for_gang_phase(&client, NS, "small", &["Running"], 10).await;
    assert!(
        poolnodes(&client).await.is_empty(),
        "no PoolNode for capacity that exists"
    );
    assert!(cloud.launch_calls().is_empty(), "no launch");
    let text = ctl.metrics.encode();
    assert!(
        text.contains("muster_gangs{queue=\"team-a\",phase=\"Running\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("muster_planner_duration_seconds_count"),
        "{text}"
    );
}

#[tokio::test]
async fn s1_one_gpu_job_admitted_on_existing_capacity() {
    scenario_admit_on_existing_capacity(stub()).await;
}

#[tokio::test]
async fn s1_real_planner() {
    scenario_admit_on_existing_capacity(controller::real_planner()).await;
}

// ---------------------------------------------------------------- (2)

/// What a finished scenario (2) leaves running, for further checks.
struct GangOfFour {
    /// The API server (its client reads what the scenario left).
    _server: ApiServer,
    _emu: Emulator,
    ctl: Running,
}

async fn scenario_gang_of_four(planner: PlanFn) -> GangOfFour {
    scenario_gang_of_four_with(planner, &[]).await
}

async fn scenario_gang_of_four_with(planner: PlanFn, server_options: &[&str]) -> GangOfFour {
    let (server, client) = start_world(server_options).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, planner);
    job("big")
        .queue("team-a")
        .pods(4)
        .gpus(8)
        .create(&client)
        .await;
    let pods = wait_for_running_pods(&client, NS, "job-name=big", 4, 30).await;
    // intent first: every launch call saw all four PoolNodes in the API
    let launches = cloud.launch_calls();
    assert!(launches.len() >= 4, "{launches:?}");
    assert_eq!(
        launches[0].poolnodes_seen,
        Some(4),
        "all PoolNodes written before the first launch"
    );
    let keys: BTreeSet<String> = launches.iter().map(|c| c.what.clone()).collect();
    assert_eq!(keys.len(), 4);
    assert_eq!(cloud.instances().len(), 4);
    let pns = poolnodes(&client).await;
    assert_eq!(pns.len(), 4);
    for pn in &pns {
        assert_eq!(pn.data["status"]["phase"], "Ready", "{pn:?}");
        assert!(
            pn.data["status"]["providerID"]
                .as_str()
                .is_some_and(|p| p.starts_with("gce://"))
        );
        let job_uid = Api::<Job>::namespaced(client.clone(), NS)
            .get("big")
            .await
            .expect("job")
            .uid();
        assert_eq!(
            pn.data["spec"]["gang"],
            json!({"namespace": "team-a", "name": "big", "uid": job_uid})
        );
        assert_eq!(pn.data["spec"]["offering"]["gpuCount"], 8);
        assert_eq!(pn.data["spec"]["offering"]["pricePerHour"], "10.000000");
        // the Node is found by its provider id (its name is the cloud's, not the PoolNode's)
        let node_name = pn.data["status"]["nodeName"].as_str().expect("nodeName");
        let node = Api::<Node>::all(client.clone())
            .get(node_name)
            .await
            .expect("the Node");
        assert_eq!(
            node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
            pn.data["status"]["providerID"].as_str()
        );
        assert!(
            pn.data["status"]["registeredAt"].is_string()
                && pn.data["status"]["readyAt"].is_string()
        );
        assert!(
            pn.finalizers()
                .contains(&"muster.dev/terminate-instance".to_string())
        );
    }
    // the Job was unsuspended only when all four nodes were Ready
    let seen = emu.seen.lock().expect("seen").clone();
    assert_eq!(seen.unsuspended_with_ready_nodes.get("big"), Some(&4));
    // pinned: required affinity to the four nodes, toleration of the pool taint
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("big")
        .await
        .expect("job");
    let spec = job.spec.expect("spec").template.spec.expect("pod spec");
    let terms = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|n| n.required_during_scheduling_ignored_during_execution)
        .expect("required affinity")
        .node_selector_terms;
    // one term per node, one name each (the API server takes exactly one
    // value for `In` on a node field)
    let names: BTreeSet<String> = terms
        .iter()
        .map(|t| {
            let values = t.match_fields.clone().expect("fields")[0]
                .values
                .clone()
                .expect("values");
            assert_eq!(values.len(), 1, "{values:?}");
            values[0].clone()
        })
        .collect();
    assert_eq!(terms.len(), names.len());
    let pn_names: BTreeSet<String> = pns
        .iter()
        .filter_map(|p| p.data["status"]["nodeName"].as_str().map(String::from))
        .collect();
    assert_eq!(pn_names.len(), 4);
    assert_eq!(names, pn_names);
    assert!(
        spec.tolerations
            .expect("tolerations")
            .iter()
            .any(|t| t.key.as_deref() == Some("nvidia.com/gpu"))
    );
    let on: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(on, pn_names, "one pod per launched node");
    GangOfFour {
        _server: server,
        _emu: emu,
        ctl,
    }
}

#[tokio::test]
async fn s2_four_node_gang_written_first_then_launched_then_admitted() {
    let s2 = scenario_gang_of_four(stub()).await;
    let client = s2._server.client();
    // pool, queue and NodeClass status follow
    let get = |kind: &'static str, plural: &'static str, name: &'static str| {
        let client = client.clone();
        async move {
            Api::<DynamicObject>::all_with(client, &ar(kind, plural))
                .get(name)
                .await
                .ok()
                .map(|o| o.data["status"].clone())
        }
    };
    let pool = eventually(20, "GPUPool status", || async {
        get("GPUPool", "gpupools", "a100")
            .await
            .filter(|s| s["gpusAllocated"] == 32)
    })
    .await;
    assert_eq!(pool["nodes"], 4, "{pool}");
    assert_eq!(pool["gpus"], 32);
    assert_eq!(pool["pricePerHour"], "40.000000");
    assert!(
        pool["conditions"].as_array().is_some_and(|c| c
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")),
        "{pool}"
    );
    let queue = eventually(20, "GPUQueue status", || async {
        get("GPUQueue", "gpuqueues", "team-a")
            .await
            .filter(|s| s["runningGangs"] == 1)
    })
    .await;
    assert_eq!(queue["gpusUsed"], "32", "{queue}");
    assert_eq!(queue["pendingGangs"], 0);
    // the gang holds all four $10/h nodes; GPU-hours accrue from here
    assert_eq!(queue["pricePerHour"], "40.00", "{queue}");
    assert!(
        queue["gpuHoursLast24h"]
            .as_str()
            .and_then(|h| h.parse::<f64>().ok())
            .is_some_and(|h| (0.0..1.0).contains(&h)),
        "{queue}"
    );
    assert!(
        queue["conditions"].as_array().is_some_and(|c| c
            .iter()
            .any(|c| c["type"] == "Active" && c["status"] == "True")),
        "{queue}"
    );
    let class = eventually(20, "NodeClass status", || async {
        get("NodeClass", "nodeclasses", "gcp-default")
            .await
            .filter(|s| s["conditions"].is_array())
    })
    .await;
    assert_eq!(class["zones"], json!(["us-central1-a"]), "{class}");
    assert_eq!(class["provider"], "gcp");
    assert!(
        class["conditions"].as_array().is_some_and(|c| c
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")),
        "{class}"
    );
    // status writes of pools, queues and NodeClasses included
    s2._server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// A NodeClass whose selector matches nothing gets `Ready=False` naming the
/// selector, and a Warning Event.
#[tokio::test]
async fn nodeclass_whose_selector_matches_nothing_is_not_ready() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    cloud.unresolvable("subnetSelectorTerms[0] (tag team=none)");
    let _ctl = start(&server, &cloud, stub());
    let cond = support::nodeclass_not_ready(&client, "gcp-default").await;
    assert_eq!(cond["reason"], "NotResolved");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("subnetSelectorTerms[0] (tag team=none) matched nothing")),
        "{cond}"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    eventually(10, "a NotResolved Event", || {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("NotResolved"))
        }
    })
    .await;
}

#[tokio::test]
async fn s2_real_planner() {
    scenario_gang_of_four(support::in_process::dumping_planner()).await;
}

// ---------------------------------------------------------------- (3)

async fn scenario_insufficient_capacity(planner: PlanFn) {
    let (server, client) = start_world(&[]).await;
    // the pool may buy both shapes; the cheap 1-GPU shape has no capacity
    patch_pool(
        &client,
        "a100",
        json!({"requirements": {"instanceTypes": ["fake-8gpu", "fake-1gpu"]}}),
    )
    .await;
    let cloud = FakeCloud::new(Some(client.clone()));
    cloud.insufficient("fake-1gpu");
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, planner);
    job("tiny").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=tiny", 1, 20).await;
    let calls = cloud.launch_calls();
    assert!(calls.len() >= 2, "{calls:?}");
    let instances = cloud.instances();
    assert_eq!(instances.len(), 1, "only the fallback launched");
    assert_eq!(instances[0].instance.offering.instance_type, "fake-8gpu");
    assert_ne!(
        calls[0].what, instances[0].request.idempotency_key,
        "a new launch set gets a new key"
    );
    let pns = poolnodes(&client).await;
    assert_eq!(pns.len(), 1, "the failed PoolNode is gone");
    assert_eq!(pns[0].data["spec"]["offering"]["instanceType"], "fake-8gpu");
    let ice = events_of(&client, "InsufficientCapacity").await;
    assert_eq!(ice.len(), 1, "{ice:?}");
    let g = gang(&client, NS, "tiny").await.expect("gang");
    assert_eq!(g.data["status"]["launchAttempts"], 2);
    let text = ctl.metrics.encode();
    for line in [
        r#"muster_launches_total{pool="a100",capacity_type="on-demand",result="InsufficientCapacity"} 1"#,
        r#"muster_launches_total{pool="a100",capacity_type="on-demand",result="Launched"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

#[tokio::test]
async fn s3_insufficient_capacity_deletes_poolnode_and_replans() {
    scenario_insufficient_capacity(stub()).await;
}

#[tokio::test]
async fn s3_real_planner() {
    scenario_insufficient_capacity(controller::real_planner()).await;
}

// ---------------------------------------------------------------- (4)

async fn scenario_restart(planner: PlanFn, hang: Hang) {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    cloud.set_hang(hang);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let first = start(&server, &cloud, planner.clone());
    job("pair")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .create(&client)
        .await;
    eventually(20, "both launches in flight", || {
        let n = cloud.launch_calls().len();
        async move { (n >= 2).then_some(()) }
    })
    .await;
    assert_eq!(poolnodes(&client).await.len(), 2);
    drop(first); // killed mid-launch
    cloud.set_hang(Hang::Never);
    let _second = start_configured(&server, &cloud, planner, |c| c.identity = "c2".into());
    wait_for_running_pods(&client, NS, "job-name=pair", 2, 30).await;
    let pns = poolnodes(&client).await;
    assert_eq!(pns.len(), 2, "no duplicate PoolNodes");
    assert_eq!(cloud.instances().len(), 2, "no duplicate instances");
    let keys: BTreeSet<String> = cloud
        .launch_calls()
        .iter()
        .map(|c| c.what.clone())
        .collect();
    assert_eq!(keys.len(), 2, "relaunches reuse the idempotency keys");
}

#[tokio::test]
async fn s4_restart_between_intent_and_launch() {
    scenario_restart(stub(), Hang::BeforeCreate).await;
}

#[tokio::test]
async fn s4_restart_after_cloud_created_before_recorded() {
    scenario_restart(stub(), Hang::AfterCreate).await;
}

#[tokio::test]
async fn s4_real_planner() {
    scenario_restart(controller::real_planner(), Hang::AfterCreate).await;
}

/// Cloud calls run off the planning path: while every launch of one gang
/// hangs in the cloud, another gang is still planned and admitted on
/// existing capacity.
async fn scenario_planning_goes_on_while_launches_hang(planner: PlanFn) {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    cloud.set_hang(Hang::BeforeCreate);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, planner);
    job("big")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .create(&client)
        .await;
    eventually(20, "both launches in the cloud", || {
        let n = cloud.launch_calls().len();
        async move { (n >= 2).then_some(()) }
    })
    .await;
    gpu_node("gpu-0").create(&client).await;
    job("small").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=small", 1, 20).await;
    assert!(cloud.instances().is_empty(), "the launches still hang");
    assert_eq!(
        gang_phase(&client, NS, "big").await.as_deref(),
        Some("Provisioning")
    );
    assert_eq!(
        cloud.launch_calls().len(),
        2,
        "a hanging launch is not asked again"
    );
}

#[tokio::test]
async fn planning_goes_on_while_launches_hang() {
    scenario_planning_goes_on_while_launches_hang(stub()).await;
}

#[tokio::test]
async fn planning_goes_on_while_launches_hang_real_planner() {
    scenario_planning_goes_on_while_launches_hang(controller::real_planner()).await;
}

/// NodeClass resolution runs off the planning path: while the NodeClass's
/// cloud takes 20 s to answer `resolve`, a gang that fits existing capacity
/// is admitted and runs, and the NodeClass's status is written by a later
/// cycle once the answer comes.
#[tokio::test]
async fn planning_goes_on_while_a_nodeclass_resolves_slowly() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    cloud.set_resolve_delay(Duration::from_secs(20));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, controller::real_planner());
    eventually(20, "a resolve in the cloud", || {
        let n = cloud.resolves_in_flight();
        async move { (n > 0).then_some(()) }
    })
    .await;
    let asked = std::time::Instant::now();
    gpu_node("gpu-0").create(&client).await;
    job("small").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=small", 1, 10).await;
    assert!(
        cloud.resolves_in_flight() > 0 && asked.elapsed() < Duration::from_secs(15),
        "admitted only after the cloud answered ({:?})",
        asked.elapsed()
    );
    let class = eventually(30, "the NodeClass resolved", || {
        nodeclass_ready_status(&client, "gcp-default")
    })
    .await;
    assert_eq!(class["zones"], json!(["us-central1-a"]), "{class}");
    assert!(
        asked.elapsed() >= Duration::from_secs(10),
        "the status waited for the slow answer"
    );
}

/// A NodeClass whose cloud answers `resolve` after 30 s delays no launch on
/// another NodeClass: a gang on the other class's pool is launched for and
/// runs while the slow resolution is still out.
#[tokio::test]
async fn a_nodeclass_resolving_slowly_delays_no_launch_on_another() {
    let (server, client) = start_world(&[]).await;
    support::objects::nodeclass("slow").create(&client).await;
    pool("slow-pool").node_class("slow").create(&client).await;
    let fast = FakeCloud::new(None);
    let slow = FakeCloud::new(None);
    slow.set_resolve_delay(Duration::from_secs(30));
    let _emu = Emulator::start(client.clone(), vec![fast.clone(), slow.clone()]);
    let factory = support::fake_cloud::ByClassFactory {
        default: fast.clone(),
        classes: [("slow".to_string(), slow.clone())].into(),
    };
    let _ctl = support::in_process::spawn_with(
        &server.client_as("controller"),
        Arc::new(factory),
        controller::real_planner(),
        support::in_process::config("c1"),
    );
    eventually(20, "the slow NodeClass's resolve in its cloud", || {
        let n = slow.resolves_in_flight();
        async move { (n > 0).then_some(()) }
    })
    .await;
    job("big").queue("team-a").gpus(8).create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=big", 1, 15).await;
    assert_eq!(fast.instances().len(), 1, "launched on the other class");
    assert!(
        slow.resolves_in_flight() > 0,
        "admitted only after the slow cloud answered"
    );
}

// ---------------------------------------------------------------- (5)

/// Scenario (5): a Job runs and completes, its nodes go empty and are
/// removed (PoolNode `Draining` with the removal's reason, then deleted: the
/// finalizer terminates the instance and deletes the Node), no sooner than
/// `wait` after the Job completed, until the pool has no node left.
async fn scenario_scale_down(disruption: serde_json::Value, reason: &str, wait: Duration) {
    let (server, client) = start_world(&[]).await;
    patch_pool(&client, "a100", json!({"disruption": disruption})).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let emu = Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as Arc<dyn support::emulator::Machines>],
        Some(Duration::from_secs(1)),
    );
    let _ctl = start(&server, &cloud, controller::real_planner());
    job("short")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .create(&client)
        .await;
    wait_for_running_pods(&client, NS, "job-name=short", 2, 30).await;
    assert_eq!(poolnodes(&client).await.len(), 2);
    eventually(30, "the Job completed", || {
        let seen = emu.seen.clone();
        async move {
            seen.lock()
                .expect("seen")
                .completed
                .contains("short")
                .then_some(())
        }
    })
    .await;
    let completed = std::time::Instant::now();
    wait_for_gang_phase(&client, NS, "short", &["Finished"], 10).await;
    // a removal is written as Draining with its reason before the node goes
    let draining = wait_for_poolnode_phase(&client, "Draining", 30).await;
    assert_eq!(draining.data["status"]["reason"], reason, "{draining:?}");
    assert!(
        completed.elapsed() + Duration::from_millis(300) >= wait,
        "removed {:?} after the Job completed, before {wait:?}",
        completed.elapsed()
    );
    wait_for_no_poolnodes(&client, 60).await;
    // every instance terminated, every muster Node deleted
    let instances = cloud.instances();
    assert_eq!(instances.len(), 2);
    assert!(
        instances
            .iter()
            .all(|i| i.instance.state == muster_provider_api::InstanceState::Terminated),
        "{instances:?}"
    );
    let nodes = eventually(10, "Nodes deleted", || {
        let client = client.clone();
        async move {
            let left = Api::<Node>::all(client)
                .list(&ListParams::default().labels("muster.dev/poolnode"))
                .await
                .expect("nodes")
                .items;
            left.is_empty().then_some(left)
        }
    })
    .await;
    assert!(nodes.is_empty());
    let removals = events_of(&client, reason).await.len();
    assert_eq!(removals, 2, "one {reason} Event per node");
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

#[tokio::test]
async fn s5_empty_nodes_removed_after_consolidate_after() {
    scenario_scale_down(
        json!({"consolidateAfter": "2s", "scaleToZeroAfter": "1h"}),
        "Empty",
        Duration::from_secs(2),
    )
    .await;
}

#[tokio::test]
async fn s5_idle_pool_scaled_to_zero_after_scale_to_zero_after() {
    scenario_scale_down(
        json!({"consolidateAfter": "1h", "scaleToZeroAfter": "3s"}),
        "ScaleToZero",
        Duration::from_secs(3),
    )
    .await;
}

/// A Draining PoolNode is drained the way a user expects: the Node is
/// cordoned, a gang on it is evicted whole (its Job suspended again), other
/// pods go through the Eviction API and wait for their PodDisruptionBudget,
/// a `muster.dev/do-not-disrupt` pod is never evicted, and the PoolNode goes
/// (instance terminated, Node deleted) only when nothing but those is left.
#[tokio::test]
async fn draining_evicts_gangs_whole_honours_pdbs_and_do_not_disrupt() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, stub());
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 20).await;
    let node = pn.data["status"]["nodeName"]
        .as_str()
        .expect("nodeName")
        .to_string();
    wait_for_running_pods(&client, NS, "job-name=one", 1, 20).await;
    // two pods that are not muster's, running and Ready on the node
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (name, annotations) in [
        ("web", json!({})),
        ("keep", json!({"muster.dev/do-not-disrupt": "true"})),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name}, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .expect("pod status");
    }
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), NS);
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }))
        .expect("pdb"),
    )
    .await
    .expect("create pdb");
    // the plan's removal, as the removals executor records it
    Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .patch_status(
            &pn.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Draining", "reason": "Underutilized"}})),
        )
        .await
        .expect("draining");
    // cordoned; the gang evicted whole
    eventually(20, "the Node cordoned", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            let n = Api::<Node>::all(client).get(&node).await.ok()?;
            n.spec?.unschedulable.filter(|u| *u)
        }
    })
    .await;
    wait_for_gang_phase(&client, NS, "one", &["Evicted"], 20).await;
    wait_for_job_suspended(&client, NS, "one", 20).await;
    eventually(20, "the gang's pod gone from the node", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            let left = Api::<Pod>::namespaced(client, NS)
                .list(&ListParams::default().labels("job-name=one"))
                .await
                .ok()?
                .items;
            (!left.iter().any(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
            }))
            .then_some(())
        }
    })
    .await;
    // the budget holds the web pod; do-not-disrupt holds the other
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        pods.get_opt("web").await.expect("get").is_some(),
        "the PDB holds web"
    );
    assert!(pods.get_opt("keep").await.expect("get").is_some());
    let exists = |pns: Vec<DynamicObject>| pns.iter().any(|p| p.name_any() == pn.name_any());
    assert!(exists(poolnodes(&client).await), "the PoolNode waits");
    let blocked: Vec<String> = events_of(&client, "DrainBlocked")
        .await
        .into_iter()
        .filter_map(|e| e.note)
        .collect();
    assert!(
        blocked
            .iter()
            .any(|n| n.contains("team-a/keep") && n.contains("do-not-disrupt")),
        "{blocked:?}"
    );
    // the budget lifted: web is evicted through the Eviction API
    pdbs.delete("web", &Default::default())
        .await
        .expect("delete pdb");
    eventually(30, "web evicted", || {
        let pods = pods.clone();
        async move { pods.get_opt("web").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(
        pods.get_opt("keep").await.expect("get").is_some(),
        "never evicted"
    );
    assert!(
        exists(poolnodes(&client).await),
        "keep still holds the node"
    );
    // its owner removes it: the node goes
    pods.delete("keep", &Default::default())
        .await
        .expect("delete keep");
    wait_for_poolnode_gone(&client, &pn.name_any(), 20).await;
    eventually(10, "the Node deleted", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            Api::<Node>::all(client)
                .get_opt(&node)
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID");
    assert!(
        cloud
            .calls()
            .iter()
            .any(|c| c.op == "terminate" && c.what == pid),
        "instance terminated"
    );
    let text = ctl.metrics.encode();
    assert!(
        text.contains(r#"muster_evictions_total{reason="NodeLost"} 1"#),
        "the gang evicted once: {text}"
    );
    // cordon, eviction and Node deletion included
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// Orphan collection terminates exactly the instances tagged for this
/// cluster that no PoolNode accounts for and that are older than the grace
/// period; a launched gang's instance and a fresh stray are kept.
#[tokio::test]
async fn orphan_collection_terminates_exactly_the_orphans() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let now = muster::controller::base::time::now();
    let old = cloud.plant(
        "stray-old",
        "test-cluster",
        now - muster_planner::Dur::secs(3600),
    );
    let fresh = cloud.plant(
        "stray-new",
        "test-cluster",
        now + muster_planner::Dur::secs(3600),
    );
    let other = cloud.plant(
        "other-cluster",
        "elsewhere",
        now - muster_planner::Dur::secs(3600),
    );
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start_configured(&server, &cloud, stub(), |c| {
        c.orphan_gc_period = Duration::from_millis(300);
        c.orphan_grace = Duration::from_secs(600);
    });
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 20).await;
    let mine = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    eventually(20, "the orphan terminated", || {
        let cloud = cloud.clone();
        let old = old.clone();
        async move {
            (cloud.state(&old) == Some(muster_provider_api::InstanceState::Terminated))
                .then_some(())
        }
    })
    .await;
    // a few more collections change nothing else
    tokio::time::sleep(Duration::from_secs(1)).await;
    for pid in [&mine, &fresh, &other] {
        assert_eq!(
            cloud.state(pid),
            Some(muster_provider_api::InstanceState::Running),
            "{pid} kept"
        );
    }
    let terminated: Vec<String> = cloud
        .calls()
        .into_iter()
        .filter(|c| c.op == "terminate")
        .map(|c| c.what)
        .collect();
    assert_eq!(terminated, [old]);
    assert!(
        ctl.metrics
            .encode()
            .contains("muster_orphans_terminated_total 1")
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// A spot interruption of a node a running gang holds: the PoolNode gets an
/// `Interrupted` condition and goes Draining, the gang is evicted whole and
/// requeued at once (no backoff), the node goes, and the offering is marked
/// unavailable so the gang is not launched on it again meanwhile.
#[tokio::test]
async fn spot_interruption_evicts_the_gang_and_marks_the_offering() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start_configured(&server, &cloud, controller::real_planner(), |c| {
        c.interruption_poll = Duration::from_millis(200)
    });
    job("one").queue("team-a").gpus(8).create(&client).await;
    wait_for_gang_phase(&client, NS, "one", &["Running"], 30).await;
    let pn = poolnodes(&client)
        .await
        .into_iter()
        .next()
        .expect("a PoolNode");
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    let launches = cloud.launch_calls().len();
    cloud.interrupt(
        &pid,
        muster_provider_api::InterruptionKind::SpotInterruption,
    );
    let drained = wait_for_poolnode_phase(&client, "Draining", 20).await;
    assert_eq!(drained.data["status"]["reason"], "Interrupted");
    let conds = drained.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conds.iter().any(|c| c["type"] == "Interrupted"
            && c["status"] == "True"
            && c["reason"] == "SpotInterruption"),
        "{conds:?}"
    );
    wait_for_job_suspended(&client, NS, "one", 20).await;
    wait_for_poolnode_gone(&client, &pn.name_any(), 20).await;
    // requeued at once, but the only fitting offering is marked unavailable
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        cloud.launch_calls().len(),
        launches,
        "no launch on the interrupted offering"
    );
    let phase = gang_phase(&client, NS, "one").await;
    assert!(
        matches!(phase.as_deref(), Some("Queued" | "Evicted")),
        "{phase:?}"
    );
    let text = ctl.metrics.encode();
    for line in [
        r#"muster_interruptions_total{kind="SpotInterruption"} 1"#,
        r#"muster_evictions_total{reason="SpotInterruption"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// A Job in a namespace its queue's `namespaceSelector` does not select
/// stays suspended, with `Valid=False`/`NamespaceNotAllowed` on its Gang and
/// no launch; once the queue selects the namespace, it is admitted.
#[tokio::test]
async fn queue_namespace_selector_is_enforced() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("outsider")
        .queue("team-a")
        .namespace("team-b")
        .gpus(8)
        .create(&client)
        .await;
    let cond = eventually(20, "NamespaceNotAllowed on the Gang", || {
        let client = client.clone();
        async move {
            let g = gang(&client, "team-b", "outsider").await?;
            g.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid" && c["status"] == "False")
                .cloned()
        }
    })
    .await;
    assert_eq!(cond["reason"], "NamespaceNotAllowed", "{cond}");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("team-b")),
        "{cond}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(cloud.launch_calls().is_empty(), "nothing launched for it");
    let job = Api::<Job>::namespaced(client.clone(), "team-b")
        .get("outsider")
        .await
        .expect("job");
    assert_eq!(job.spec.and_then(|s| s.suspend), Some(true));
    // the queue opens to every namespace: admitted
    patch_queue(
        &client,
        "team-a",
        json!({"namespaceSelector": {"matchLabels": null}}),
    )
    .await;
    eventually(30, "the outsider running", || {
        let client = client.clone();
        async move {
            let pods = Api::<Pod>::namespaced(client, "team-b")
                .list(&ListParams::default().labels("job-name=outsider"))
                .await
                .ok()?
                .items;
            pods.iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .then_some(())
        }
    })
    .await; // Namespaces watched included
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

// ---------------------------------------------------------------- (7)

async fn lease_holder(client: &kube::Client) -> Option<String> {
    let l = Api::<Lease>::namespaced(client.clone(), "muster-system")
        .get_opt("muster-controller")
        .await
        .ok()??;
    l.spec?.holder_identity
}

#[tokio::test]
async fn s7_only_the_leader_acts() {
    let (server, client) = start_world(&[]).await;
    let cloud_a = FakeCloud::new(None);
    let cloud_b = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud_a.clone(), cloud_b.clone()]);
    let a = start_leader(&server, &cloud_a, "a");
    eventually(10, "a leads", || {
        let client = client.clone();
        async move { (lease_holder(&client).await.as_deref() == Some("a")).then_some(()) }
    })
    .await;
    let b = start_leader(&server, &cloud_b, "b");
    job("first").queue("team-a").gpus(8).create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=first", 1, 20).await;
    assert_eq!(cloud_a.launch_calls().len(), 1);
    assert!(
        cloud_b.calls().is_empty(),
        "the follower never calls the cloud"
    );
    assert!(
        b.metrics
            .encode()
            .contains("muster_planning_cycles_total 0"),
        "the follower never plans"
    );
    assert_eq!(lease_holder(&client).await.as_deref(), Some("a"));
    drop(a); // killed: the lease expires, b takes over
    eventually(10, "b leads", || {
        let client = client.clone();
        async move { (lease_holder(&client).await.as_deref() == Some("b")).then_some(()) }
    })
    .await;
    job("second").queue("team-a").gpus(8).create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=second", 1, 20).await;
    assert_eq!(cloud_b.launch_calls().len(), 1, "the new leader launches");
    assert_eq!(cloud_a.launch_calls().len(), 1);
    // leader election included, every request is allowed by deploy/rbac.yaml
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

// ---------------------------------------------------------------- (8)

#[tokio::test]
async fn s8_malformed_pool_gets_condition_and_event_others_served() {
    let (server, client) = start_world(&[]).await;
    // the schema allows any decimal; the planner's prices end below 10^12 dollars
    pool("broken")
        .no_requirements()
        .limits(json!({"maxPricePerHour": "5000000000000"}))
        .create(&client)
        .await;
    pool("orphan")
        .no_requirements()
        .node_class("missing")
        .create(&client)
        .await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("ok").queue("team-a").gpus(8).create(&client).await;
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &ar("GPUPool", "gpupools"));
    let cond = eventually(20, "Valid=False on the broken pool", || {
        let pools = pools.clone();
        async move {
            let p = pools.get("broken").await.ok()?;
            let c = p.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid")?
                .clone();
            (c["status"] == "False").then_some(c)
        }
    })
    .await;
    assert_eq!(cond["reason"], "InvalidSpec");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("limits")),
        "{cond}"
    );
    let c = eventually(10, "Valid=False on the orphan pool", || {
        let pools = pools.clone();
        async move {
            let p = pools.get("orphan").await.ok()?;
            p.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid")
                .cloned()
        }
    })
    .await;
    assert_eq!(c["reason"], "InvalidReference");
    // the good pool is Valid and serves the job
    wait_for_running_pods(&client, NS, "job-name=ok", 1, 20).await;
    let good = pools.get("a100").await.expect("a100");
    assert_eq!(good.data["status"]["conditions"][0]["status"], "True");
    // a Warning Event names the broken pool
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let ev = eventually(10, "an Event on the broken pool", || {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken"))
        }
    })
    .await;
    assert_eq!(ev.reason.as_deref(), Some("InvalidSpec"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
}

// ---------------------------------------------------------------- gangs

#[tokio::test]
async fn gangs_created_and_fresh_jobs_suspended() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    // no emulator: nothing creates pods, so the controller may suspend
    let _ctl = start(
        &server,
        &cloud,
        Arc::new(|_: &_, _: &_, _| Default::default()),
    );
    job("eager")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .unsuspended()
        .create(&client)
        .await;
    let gang = eventually(10, "the Gang", || {
        let client = client.clone();
        async move { gang(&client, NS, "eager").await }
    })
    .await;
    assert_eq!(gang.data["spec"]["queue"], "team-a");
    assert_eq!(gang.data["spec"]["podSets"][0]["count"], 2);
    assert_eq!(
        gang.data["spec"]["podSets"][0]["requests"]["nvidia.com/gpu"],
        "8"
    );
    let owner = &gang.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Job", "eager", Some(true))
    );
    eventually(10, "the Job suspended", || {
        let client = client.clone();
        async move {
            let j = Api::<Job>::namespaced(client, NS).get("eager").await.ok()?;
            j.spec?.suspend.filter(|s| *s).map(|_| ())
        }
    })
    .await;
    wait_for_gang_phase(&client, NS, "eager", &["Queued"], 10).await;
}

// ---------------------------------------------------------------- more

#[tokio::test]
async fn no_planning_before_caches_sync() {
    // the controller starts before its CRDs exist: the muster watches fail,
    // the caches never sync, nothing is written; once the CRDs are installed
    // the watches recover and the controller acts
    let server = ApiServer::start();
    let client = server.client();
    let cloud = FakeCloud::new(None);
    let ctl = start(&server, &cloud, stub());
    job("early")
        .queue("team-a")
        .unsuspended()
        .create(&client)
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("early")
        .await
        .expect("job");
    assert_eq!(
        job.spec.and_then(|s| s.suspend),
        Some(false),
        "no write before sync"
    );
    assert!(
        ctl.metrics
            .encode()
            .contains("muster_planning_cycles_total 0")
    );
    support::install_crds(&client).await;
    eventually(30, "the Job suspended after sync", || {
        let client = client.clone();
        async move {
            Api::<Job>::namespaced(client, NS)
                .get("early")
                .await
                .ok()?
                .spec?
                .suspend
                .filter(|s| *s)
        }
    })
    .await;
}

#[tokio::test]
async fn waiting_gangs_show_position_and_reason() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    let _ctl = start(&server, &cloud, stub());
    job("huge").queue("team-a").gpus(16).create(&client).await; // no offering has 16 GPUs
    let st = eventually(10, "a waiting status", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "huge").await?;
            g.data["status"]["reason"]
                .is_string()
                .then(|| g.data["status"].clone())
        }
    })
    .await;
    assert_eq!(st["phase"], "Queued");
    assert_eq!(st["reason"], "NoOffering");
    assert!(
        st["message"].as_str().is_some_and(|m| !m.is_empty()),
        "why it waits, in words, in status: {st}"
    );
    assert_eq!(st["position"], 1);
    assert!(cloud.calls().is_empty());
}

#[tokio::test]
async fn deleting_a_poolnode_terminates_its_instance_first() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 20).await;
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .delete(&pn.name_any(), &Default::default())
        .await
        .expect("delete");
    wait_for_no_poolnodes(&client, 10).await;
    let terminated: Vec<String> = cloud
        .calls()
        .into_iter()
        .filter(|c| c.op == "terminate")
        .map(|c| c.what)
        .collect();
    assert_eq!(terminated, [pid]);
}

#[tokio::test]
async fn pods_not_ready_in_time_evict_the_whole_gang() {
    let (server, client) = start_world(&["--audit-level", "Request"]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    // no emulator: the admitted pods never run; the queue allows them 1 s
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "1s"})).await;
    let _ctl = start(&server, &cloud, stub());
    job("stuck").queue("team-a").pods(2).create(&client).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    eventually(10, "admitted", || {
        let jobs = jobs.clone();
        async move { (jobs.get("stuck").await.ok()?.spec?.suspend == Some(false)).then_some(()) }
    })
    .await;
    let st = eventually(15, "evicted", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "stuck").await?;
            (g.data["status"]["phase"] == "Evicted").then(|| g.data["status"].clone())
        }
    })
    .await;
    assert_eq!(st["evictions"], 1);
    assert_eq!(st["reason"], "PodsReadyTimeout");
    assert!(st["requeueAfter"].is_string());
    // the Gang records the eviction first; the Job's stop follows
    let job = eventually(10, "the stop finished", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("stuck").await.ok()?;
            let done = j.spec.as_ref()?.suspend == Some(true) && !pinned_to_gang(&j);
            done.then_some(j)
        }
    })
    .await;
    assert!(
        !job.annotations().contains_key("muster.dev/admitted-nodes"),
        "admission record removed"
    );
    let tmpl = job.spec.expect("spec").template.spec.expect("pod spec");
    assert!(tmpl.affinity.is_none(), "submitted template restored");
    // the Gang records the eviction before its Job is stopped
    let log = server.audited_writes("controller");
    let unsuspended = job_suspend_written(&log, "stuck", false, 0).expect("Job unsuspended");
    let evicted = gang_phase_written(&log, "stuck", "Evicted", unsuspended).expect("Gang Evicted");
    let suspended = job_suspend_written(&log, "stuck", true, unsuspended).expect("Job suspended");
    assert!(
        evicted < suspended,
        "the Gang was set Evicted (write {evicted}) after its Job was suspended (write {suspended})"
    );
}

// ---------------------------------------------------------------- metrics and RBAC over scenario (2)

/// A real Prometheus scrapes the controller's `/metrics` after scenario (2)
/// and finds the launches, the running gang and the pool's GPUs.
#[tokio::test]
async fn s2_metrics_scraped_by_prometheus() {
    if std::env::var("MUSTER_SKIP_PROMETHEUS").as_deref() == Ok("1") {
        eprintln!("MUSTER_SKIP_PROMETHEUS=1: skipped");
        return;
    }
    let done = scenario_gang_of_four(stub()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind metrics");
    let target = listener.local_addr().expect("metrics address");
    let serving = tokio::spawn(controller::http::serve_metrics(
        listener,
        done.ctl.metrics.clone(),
    ));
    let prom = support::prometheus::Prometheus::start(target);
    let expected = [
        (
            r#"muster_launches_total{pool="a100",capacity_type="on-demand",result="Launched"}"#,
            4.0,
        ),
        (r#"sum(muster_gangs{phase="Running"})"#, 1.0),
        (r#"muster_pool_gpus{pool="a100"}"#, 32.0),
        (r#"muster_pool_allocated_gpus{pool="a100"}"#, 32.0),
        (r#"muster_pool_busy_gpus{pool="a100"}"#, 32.0),
        (r#"muster_pool_cost_dollars_per_hour{pool="a100"}"#, 40.0),
        (
            r#"muster_admission_wait_seconds_count{queue="team-a"}"#,
            1.0,
        ),
        ("muster_leader", 1.0),
    ];
    let prom = Arc::new(prom);
    eventually(90, "Prometheus has the expected series", || {
        let prom = prom.clone();
        async move {
            let got: Vec<Option<f64>> = expected.iter().map(|(q, _)| prom.value(q)).collect();
            let ok = expected
                .iter()
                .zip(&got)
                .all(|((_, want), got)| *got == Some(*want));
            if !ok {
                eprintln!("prometheus: {got:?}");
            }
            ok.then_some(())
        }
    })
    .await;
    let cycles = prom
        .value("muster_planner_duration_seconds_count")
        .expect("planner duration scraped");
    assert!(cycles >= 1.0, "{cycles}");
    serving.abort();
}

/// The RBAC manifest names no wildcard.
#[test]
fn rbac_has_no_wildcards() {
    let rules = support::rbac::rules();
    assert!(rules.len() >= 5, "{rules:?}");
    for r in &rules {
        for field in [&r.api_groups, &r.resources, &r.verbs] {
            assert!(
                field.iter().all(|v| !v.contains('*')),
                "wildcard in a rule of {}: {r:?}",
                r.from
            );
            assert!(
                !field.is_empty(),
                "empty list in a rule of {}: {r:?}",
                r.from
            );
        }
    }
}

/// Every request the controller makes during scenario (2) is allowed by
/// `deploy/rbac.yaml` (the API test server's audit log lists them).
#[tokio::test]
async fn rbac_allows_every_request_of_scenario_2() {
    let log = std::env::temp_dir().join(format!("muster-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let log_arg = log.to_str().expect("utf-8 temp path").to_string();
    let done = scenario_gang_of_four_with(stub(), &["--audit-log", &log_arg]).await;
    drop(done);
    let text = std::fs::read_to_string(&log).expect("audit log");
    let _ = std::fs::remove_file(&log);
    let rules = support::rbac::rules();
    let mut used = vec![false; rules.len()];
    let mut denied = BTreeSet::new();
    let mut seen = 0;
    for line in text.lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("audit line");
        if e["client"] != "controller" {
            continue;
        }
        seen += 1;
        let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
        let resource = match s("subresource").as_str() {
            "" => s("resource"),
            sub => format!("{}/{sub}", s("resource")),
        };
        let (verb, group, ns) = (s("verb"), s("apiGroup"), s("namespace"));
        let mut allowed = false;
        for (i, r) in rules.iter().enumerate() {
            if r.allows(&verb, &group, &resource, &ns, &s("name")) {
                used[i] = true;
                allowed = true;
            }
        }
        if !allowed {
            denied.insert(format!("{verb} {group}/{resource} in {ns:?}"));
        }
    }
    assert!(seen > 20, "the audit log saw {seen} controller requests");
    assert!(denied.is_empty(), "requests RBAC would deny: {denied:#?}");
    for (r, used) in rules.iter().zip(&used) {
        if !used {
            eprintln!("rule not used by scenario (2): {} {r:?}", r.from);
        }
    }
}

// ---------------------------------------------------------------- the Job life cycle

fn pinned_to_gang(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.node_selector.as_ref())
        .is_some_and(|s| s.contains_key("muster.dev/gang"))
}

/// An admitted gang whose pods never run is evicted: its Job is suspended,
/// `startTime` is cleared through the status subresource and the submitted
/// template is restored, in that order; after the backoff it is admitted
/// again (pinned while suspended, then unsuspended) and runs.
#[tokio::test]
async fn eviction_then_readmission() {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "1s"})).await;
    let _ctl = start_configured(&server, &cloud, stub(), |c| {
        c.policy.requeue_backoff_base = muster_planner::Dur::secs(2)
    });
    job("again").queue("team-a").create(&client).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    eventually(10, "admitted", || {
        let jobs = jobs.clone();
        async move { (jobs.get("again").await.ok()?.spec?.suspend == Some(false)).then_some(()) }
    })
    .await;
    wait_for_gang_phase(&client, NS, "again", &["Evicted"], 15).await;
    // the stop finished: suspended, startTime cleared, template restored, no marks
    let job = eventually(10, "the stop finished", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("again").await.ok()?;
            let done = j.spec.as_ref()?.suspend == Some(true)
                && j.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .is_none()
                && !pinned_to_gang(&j);
            done.then_some(j)
        }
    })
    .await;
    for a in [
        "muster.dev/stopping",
        "muster.dev/admitted-nodes",
        "muster.dev/original-template",
    ] {
        assert!(!job.annotations().contains_key(a), "{a} left on the Job");
    }
    let requests = server.audited("controller");
    let status_patch = requests
        .iter()
        .position(|(v, g, r, _)| v == "patch" && g == "batch" && r == "jobs/status")
        .expect("startTime cleared through jobs/status");
    let restore = requests
        .iter()
        .rposition(|(v, g, r, _)| v == "update" && g == "batch" && r == "jobs")
        .expect("template restored by an update");
    assert!(
        status_patch < restore,
        "startTime is cleared before the template changes"
    );
    // now pods run: the gang is admitted again after its backoff and runs
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "60s"})).await;
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    wait_for_running_pods(&client, NS, "job-name=again", 1, 30).await;
    let job = jobs.get("again").await.expect("job");
    assert!(pinned_to_gang(&job), "re-pinned");
    assert_eq!(
        job.annotations()
            .get("muster.dev/admitted-nodes")
            .map(String::as_str),
        Some("gpu-0")
    );
    wait_for_gang_phase(&client, NS, "again", &["Running"], 10).await;
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// The stub planner, except that once `team-a/second` is pending while
/// `team-a/first` runs, `first` is preempted for it; once `second` exists,
/// neither is admitted.
fn preempting_planner() -> PlanFn {
    use muster_planner::plan::{Preemption, PreemptionReason};
    use muster_planner::{GangId, GangPhase};
    Arc::new(
        |s: &muster_planner::Snapshot, p: &muster_planner::Policy, now| {
            let first = GangId::new("team-a/first");
            let second = GangId::new("team-a/second");
            let phase = |id: &GangId| s.gangs.iter().find(|g| &g.id == id).map(|g| g.phase);
            let mut plan = support::stub_planner::plan(s, p, now);
            if phase(&first) == Some(GangPhase::Running)
                && phase(&second).is_some_and(|ph| ph.pending())
            {
                plan.admissions.clear();
                plan.launches.clear();
                plan.preemptions.push(Preemption {
                    victim: first.clone(),
                    for_gang: second.clone(),
                    reason: PreemptionReason::WithinQueue,
                    message: "room for team-a/second".into(),
                });
            }
            if phase(&second).is_some() {
                // neither is admitted again: the test looks at one preemption
                plan.admissions
                    .retain(|a| a.gang != second && a.gang != first);
                plan.launches
                    .retain(|l| l.gang != second && l.gang != first);
            }
            plan
        },
    )
}

/// Index of the first write at or after `after` that sets Gang `name`'s phase to `phase`.
fn gang_phase_written(
    log: &[AuditedWrite],
    name: &str,
    phase: &str,
    after: usize,
) -> Option<usize> {
    (after..log.len()).find(|&i| {
        let w = &log[i];
        w.name == name && w.resource == "gangs/status" && w.body["status"]["phase"] == phase
    })
}

/// Index of the first write at or after `after` that sets Job `name`'s `spec.suspend` to `value`.
fn job_suspend_written(
    log: &[AuditedWrite],
    name: &str,
    value: bool,
    after: usize,
) -> Option<usize> {
    (after..log.len()).find(|&i| {
        let w = &log[i];
        w.name == name && w.resource == "jobs" && w.body["spec"]["suspend"] == value
    })
}

/// Intent before action for gangs as for machines: the Gang's status
/// records an admission before its Job is unsuspended, and an eviction
/// before its Job is suspended, so a process killed between the two leaves
/// a Gang that says what its Job is to become (the next process's workload
/// life cycle carries it out) rather than a running Job whose Gang says
/// `Queued`, or a stopping one whose Gang says `Admitted`. A preemption
/// requeues at once and is not counted in `evictions`.
#[tokio::test]
async fn gang_status_is_written_before_its_job() {
    let (server, client) = start_world(&["--audit-level", "Request"]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, preempting_planner());
    job("first").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=first", 1, 20).await;
    wait_for_gang_phase(&client, NS, "first", &["Running"], 10).await;
    job("second").queue("team-a").create(&client).await;
    wait_for_job_suspended(&client, NS, "first", 20).await;
    let st = eventually(10, "first evicted", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "first").await?;
            (g.data["status"]["phase"] != "Running").then(|| g.data["status"].clone())
        }
    })
    .await;

    let log = server.audited_writes("controller");
    let gang_phase_at = |phase: &str, after| gang_phase_written(&log, "first", phase, after);
    let job_suspend_at = |value, after| job_suspend_written(&log, "first", value, after);
    let admitted = gang_phase_at("Admitted", 0).expect("Gang set Admitted");
    let unsuspended = job_suspend_at(false, 0).expect("Job unsuspended");
    assert!(
        admitted < unsuspended,
        "the Gang was set Admitted (write {admitted}) after its Job was unsuspended (write {unsuspended})"
    );
    let evicted = gang_phase_at("Evicted", unsuspended).expect("Gang set Evicted");
    let suspended = job_suspend_at(true, unsuspended).expect("Job suspended again");
    assert!(
        evicted < suspended,
        "the Gang was set Evicted (write {evicted}) after its Job was suspended (write {suspended})"
    );
    assert_eq!(st["evictions"].as_i64().unwrap_or(0), 0, "{st}");
    assert!(st["requeueAfter"].is_string(), "{st}");
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// A labelled Job submitted without `suspend` runs before muster sees it:
/// it is stopped (the Job controller deletes its pods), queued, and only
/// then admitted — pinned, on the node the plan chose.
#[tokio::test]
async fn labelled_job_created_unsuspended_is_stopped_then_admitted() {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    job("eager")
        .queue("team-a")
        .unsuspended()
        .create(&client)
        .await;
    let first = eventually(20, "the unadmitted pod to run", || {
        let client = client.clone();
        async move {
            let pods = running_pods(&client, NS, "job-name=eager").await;
            (pods.len() == 1).then(|| pods[0].uid())?
        }
    })
    .await;
    let _ctl = start(&server, &cloud, stub());
    eventually(30, "a pinned pod running in place of the first", || {
        let client = client.clone();
        let first = first.clone();
        async move {
            let running = running_pods(&client, NS, "job-name=eager").await;
            let pinned = running.iter().all(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_selector.as_ref())
                    .is_some_and(|s| s.contains_key("muster.dev/gang"))
            });
            (running.len() == 1 && pinned && running[0].uid() != Some(first)).then_some(())
        }
    })
    .await;
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("eager")
        .await
        .expect("job");
    assert!(pinned_to_gang(&job));
    assert_eq!(job.spec.as_ref().and_then(|s| s.suspend), Some(false));
    let requests = server.audited("controller");
    assert!(
        requests
            .iter()
            .any(|(v, _, r, _)| v == "patch" && r == "jobs/status"),
        "startTime cleared before the template changed"
    );
    wait_for_gang_phase(&client, NS, "eager", &["Running"], 10).await;
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

// ---------------------------------------------------------------- reservations

/// The stub planner, except that `team-a/first` is never admitted and
/// `team-a/second` never gets capacity of its own: once a node reserved for
/// `first` is Ready while `second` waits, the node is handed over to
/// `second`, which is admitted on it.
fn hand_over_planner() -> PlanFn {
    use muster_planner::plan::{Admission, Release, ReleaseReason};
    use muster_planner::{Assignment, GangId, NodePhase, Plan};
    Arc::new(
        |s: &muster_planner::Snapshot, p: &muster_planner::Policy, now| {
            let first = GangId::new("team-a/first");
            let second = GangId::new("team-a/second");
            let waiting = s.gangs.iter().any(|g| g.id == second && g.phase.pending());
            let node = s
                .nodes
                .iter()
                .find(|n| n.reserved_for.as_ref() == Some(&first) && n.phase == NodePhase::Ready);
            if let (true, Some(n)) = (waiting, node) {
                return Plan {
                    releases: vec![Release {
                        gang: first,
                        nodes: vec![n.name.clone()],
                        reason: ReleaseReason::Replanned,
                        handed_to: Some(second.clone()),
                        message: "handed over".into(),
                    }],
                    admissions: vec![Admission {
                        gang: second,
                        assignments: vec![Assignment {
                            pod_set: "main".into(),
                            index: 0,
                            node: n.name.clone(),
                        }],
                    }],
                    ..Default::default()
                };
            }
            let mut plan = support::stub_planner::plan(s, p, now);
            plan.admissions.retain(|a| a.gang != first);
            plan.launches.retain(|l| l.gang != second);
            plan
        },
    )
}

/// A reservation handed from one gang to another: the PoolNode's
/// `spec.gang` (the one mutable field of its spec) and the node's gang label
/// name the new gang, whose pod runs there.
#[tokio::test]
async fn reservation_handed_over_to_another_gang() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    job("first").queue("team-a").gpus(8).create(&client).await;
    job("second").queue("team-a").gpus(8).create(&client).await;
    let _ctl = start(&server, &cloud, hand_over_planner());
    let pods = wait_for_running_pods(&client, NS, "job-name=second", 1, 30).await;
    let node = pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound");
    let pns = poolnodes(&client).await;
    assert_eq!(pns.len(), 1, "no capacity of its own for second");
    let second_uid = Api::<Job>::namespaced(client.clone(), NS)
        .get("second")
        .await
        .expect("job")
        .uid();
    assert_eq!(
        pns[0].data["spec"]["gang"],
        json!({"namespace": "team-a", "name": "second", "uid": second_uid})
    );
    let n = Api::<Node>::all(client.clone())
        .get(&node)
        .await
        .expect("node");
    assert_eq!(
        n.labels().get("muster.dev/gang").map(String::as_str),
        Some("team-a.second")
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

// ---------------------------------------------------------------- identity

/// A Job deleted and created again under the same name is another workload:
/// its launches get other PoolNode names and idempotency keys (they carry
/// the Job's UID), its reservations name the new UID, and the PoolNode of
/// the first Job is not taken for the second's launch.
#[tokio::test]
async fn recreated_same_name_job_never_reuses_poolnodes_or_keys() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("dup").queue("team-a").gpus(8).create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=dup", 1, 30).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let first_uid = jobs.get("dup").await.expect("job").uid().expect("uid");
    let first: Vec<DynamicObject> = poolnodes(&client).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].data["spec"]["gang"]["uid"], first_uid.as_str());
    let old_name = first[0].name_any();
    let old_key = first[0].data["spec"]["idempotencyKey"].clone();
    // deleted (its Gang and pods go with it) and created again, now with two pods
    jobs.delete("dup", &Default::default())
        .await
        .expect("delete");
    eventually(10, "the first Job gone", || {
        let jobs = jobs.clone();
        async move { jobs.get_opt("dup").await.ok()?.is_none().then_some(()) }
    })
    .await;
    job("dup")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .create(&client)
        .await;
    let second_uid = jobs.get("dup").await.expect("job").uid().expect("uid");
    assert_ne!(first_uid, second_uid);
    wait_for_running_pods(&client, NS, "job-name=dup", 2, 30).await;
    let all = poolnodes(&client).await;
    let new: Vec<&DynamicObject> = all.iter().filter(|p| p.name_any() != old_name).collect();
    assert!(!new.is_empty(), "the second Job launched capacity");
    for p in &new {
        assert_ne!(p.data["spec"]["idempotencyKey"], old_key, "key reused");
        assert_eq!(p.data["spec"]["gang"]["uid"], second_uid.as_str());
    }
    let keys: BTreeSet<String> = cloud
        .launch_calls()
        .iter()
        .map(|c| c.what.clone())
        .collect();
    assert_eq!(
        keys.len(),
        1 + new.len(),
        "one launch per PoolNode, none repeated: {keys:?}"
    );
    let g = gang(&client, NS, "dup").await.expect("gang");
    assert_eq!(
        g.owner_references()[0].uid,
        second_uid,
        "the Gang is the second Job's"
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}
