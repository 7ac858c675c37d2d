//! Admission and launch: a gang admitted on capacity that exists (1), a
//! gang of four whose PoolNodes are written before any launch and which is
//! admitted once all four nodes are Ready (2), a launch refused for want of
//! capacity and replanned (3), the controller killed between intent and
//! launch (4); planning going on while launches hang or a NodeClass
//! resolves slowly; a reservation handed to another gang; a Job recreated
//! under the same name never reusing PoolNodes or idempotency keys.
//!
//! Each runs the real `kube::Client` over HTTP against the API test server,
//! the controller in-process on a fake cloud, and the kubelet / scheduler
//! emulator; most with the scripted stub planner, the `*_real_planner`
//! twins with the real one.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use muster::controller::{self, PlanFn};
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::{FakeCloud, Hang};
use support::objects::{TEAM_A as NS, gpu_node, job, pool, start_world};
use support::scenario::{scenario_gang_of_four, start, start_configured, stub};
use support::waits::{
    assert_no_invalid_writes, events_of, gang, gang_phase, nodeclass_ready_status, patch_pool,
    poolnodes, wait_for_gang_phase, wait_for_running_pods,
};
use support::{ar, eventually};

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

/// A Job whose required node affinity allows only one of two free nodes
/// runs on that one: the real planner reads the affinity (carried by the
/// Gang) and pins the pods to a node their own terms allow. Before, the
/// planner took the first node by name, the pin ANDed the Job's terms with
/// that node's name, and the pods stayed Pending for good.
#[tokio::test]
async fn a_job_runs_on_the_node_its_required_node_affinity_allows() {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-a").create(&client).await;
    gpu_node("gpu-b")
        .label("topology.kubernetes.io/zone", "us-central1-b")
        .create(&client)
        .await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, controller::real_planner());
    job("zonal")
        .queue("team-a")
        .required_node_affinity(json!([
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-central1-b"]}]}
        ]))
        .create(&client)
        .await;
    let pods = wait_for_running_pods(&client, NS, "job-name=zonal", 1, 20).await;
    assert_eq!(
        pods[0].spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("gpu-b")
    );
    let g = gang(&client, NS, "zonal").await.expect("gang");
    assert_eq!(
        g.data["spec"]["podSets"][0]["affinity"]["requiredNodeSelectorTerms"][0]["matchExpressions"]
            [0]["values"],
        json!(["us-central1-b"])
    );
    assert!(cloud.launch_calls().is_empty(), "no launch");
}

/// A Job whose pod template carries a field newer than the Kubernetes
/// types muster is built with (`hostnameOverride`, Kubernetes 1.34) runs
/// pinned, and the field is still there: the pin and the restore write
/// only what they change. Before, the pin replaced the Job from its typed
/// copy, the field was dropped, and the API server refused the write as a
/// change of the immutable template, so the Job never ran.
#[tokio::test]
async fn a_pod_field_newer_than_muster_s_types_survives_the_pin() {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, controller::real_planner());
    let mut body = serde_json::to_value(job("newer").queue("team-a").build()).expect("json");
    body["apiVersion"] = json!("batch/v1");
    body["kind"] = json!("Job");
    body["spec"]["template"]["spec"]["hostnameOverride"] = json!("trainer-0");
    let jobs = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar_job());
    jobs.create(
        &Default::default(),
        &serde_json::from_value(body).expect("object"),
    )
    .await
    .expect("submit");
    wait_for_running_pods(&client, NS, "job-name=newer", 1, 20).await;
    let stored = jobs.get("newer").await.expect("job");
    let spec = &stored.data["spec"]["template"]["spec"];
    assert_eq!(spec["hostnameOverride"], "trainer-0", "{spec}");
    assert!(spec["affinity"].is_object(), "pinned: {spec}");
    assert_no_invalid_writes();
}

fn ar_job() -> kube::core::ApiResource {
    kube::core::ApiResource::erase::<Job>(&())
}

// ---------------------------------------------------------------- (2)

// The scenario itself is `support::scenario::scenario_gang_of_four`: the
// metrics and RBAC checks of `scenarios_validation_observability.rs` run it
// too.

#[tokio::test]
async fn s2_four_node_gang_written_first_then_launched_then_admitted() {
    let s2 = scenario_gang_of_four(stub()).await;
    let client = s2.server.client();
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
    s2.server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
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

// ---------------------------------------------------------------- capacity types

/// A capacity type the account refuses (EC2: spot without its service-linked
/// role) is no permanent failure: the NodeClass's `CapacityTypesPermitted`
/// condition turns False naming the step, and once the step is done and the
/// mark has passed, the same gang launches and the condition turns True.
#[tokio::test]
async fn a_refused_capacity_type_is_named_on_the_nodeclass_and_tried_again() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let step = "run `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`";
    cloud.refuse(muster_planner::CapacityType::OnDemand, step);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start_configured(&server, &cloud, stub(), |c| {
        c.policy.unavailable_offering_ttl = muster_planner::Dur::secs(3);
    });
    job("refused").queue("team-a").create(&client).await;
    let condition = |status: &'static str| {
        let client = client.clone();
        move || {
            let client = client.clone();
            async move {
                let nc = Api::<DynamicObject>::all_with(client, &ar("NodeClass", "nodeclasses"))
                    .get("gcp-default")
                    .await
                    .ok()?;
                nc.data["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "CapacityTypesPermitted" && c["status"] == status)
                    .cloned()
            }
        }
    };
    let refused = eventually(20, "CapacityTypesPermitted=False", condition("False")).await;
    assert_eq!(refused["reason"], "CapacityTypeNotPermitted");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("on-demand launches are avoided until "),
        "{message}"
    );
    assert!(message.contains("create-service-linked-role"), "{message}");
    assert!(
        !events_of(&client, "CapacityTypeNotPermitted")
            .await
            .is_empty(),
        "a Warning Event says so"
    );
    assert!(
        cloud.instances().is_empty(),
        "nothing launched while refused"
    );
    // the operator does the step; after the mark the gang launches
    cloud.permit(muster_planner::CapacityType::OnDemand);
    wait_for_running_pods(&client, NS, "job-name=refused", 1, 30).await;
    let permitted = eventually(20, "CapacityTypesPermitted=True", condition("True")).await;
    assert_eq!(permitted["reason"], "Permitted");
    assert_no_invalid_writes();
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

// ---------------------------------------------------------------- planning off the cloud's path

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
    // `first`, left without capacity and not planned again in that plan,
    // queues again (driver contract) and may get a launch of its own later;
    // `second` never gets one: the one PoolNode it holds is the handed one
    let second_uid = Api::<Job>::namespaced(client.clone(), NS)
        .get("second")
        .await
        .expect("job")
        .uid();
    let held: Vec<_> = poolnodes(&client)
        .await
        .into_iter()
        .filter(|p| p.data["spec"]["gang"]["name"] == "second")
        .collect();
    assert_eq!(held.len(), 1, "no capacity of its own for second");
    assert_eq!(
        held[0].data["status"]["nodeName"], node,
        "second runs on the handed node"
    );
    assert_eq!(
        held[0].data["spec"]["gang"],
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
