//! Karpenter's delegate mode end to end: the controller, with a NodeClass
//! whose `spec.karpenter` names an `EC2NodeClass`, against the API test
//! server running its Karpenter stand-in (`tests/kube_api/README.md`,
//! "Karpenter"), with moto behind muster's AWS catalog. muster chooses the
//! offering and writes the PoolNodes; each launch is one standalone
//! NodeClaim that Karpenter's life cycle launches, registers and
//! initializes; the emulated scheduler and kubelet run the gang's pods on
//! the Nodes Karpenter's kubelets register; Karpenter's disruption never
//! takes a claim of muster's, and muster's scale-down deletes the claims so
//! Karpenter's termination ends the instances.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use muster::controller::base::metrics::Metrics;
use muster::controller::cloud::clouds::{CloudName, CloudOptions, Clouds};
use muster::controller::{self, ControllerConfig, Deps};
use muster_provider_aws::moto::Moto;
use serde_json::{Value, json};
use support::cloud_e2e::submit;
use support::emulator::Emulator;
use support::karpenter::{ec2nodeclass, hook, list_nodeclaims, start_standin};
use support::{ApiServer, create, eventually, install_crds};

const CLUSTER: &str = "delegate-cluster";
const EC2_NODE_CLASS: &str = "gpu";
const TYPE: &str = "p4d.24xlarge";

/// Karpenter's timings for a test: upstream's except the drain's minimum
/// and the periodic passes, which are shortened.
fn settings() -> Value {
    json!({"minDrainSeconds": 0, "gcPeriodSeconds": 1, "disruptionPeriodSeconds": 0.5})
}

/// muster's side: its CRDs, the delegated NodeClass, a pool of on-demand
/// p4d.24xlarge that scales to zero a second after its nodes empty, and a
/// queue.
async fn muster_world(client: &kube::Client) {
    install_crds(client).await;
    create(
        client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": "delegated"}, "spec": {"karpenter": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
            "name": EC2_NODE_CLASS, "region": "us-east-1"}}}),
    )
    .await;
    create(
        client,
        "GPUPool",
        "gpupools",
        None,
        json!({
            "metadata": {"name": "gpu"},
            "spec": {"nodeClassRef": {"name": "delegated"},
                     "requirements": {"instanceTypes": [TYPE], "capacityTypes": ["on-demand"]},
                     "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1s"}}
        }),
    )
    .await;
    create(
        client,
        "GPUQueue",
        "gpuqueues",
        None,
        json!({"metadata": {"name": "team-a"}, "spec": {"pools": ["gpu"], "namespaceSelector": {}}}),
    )
    .await;
}

/// The controller in-process with the delegate mode enabled.
fn start_controller(server: &ApiServer, moto: &Moto) -> tokio::task::JoinHandle<()> {
    let mut config = ControllerConfig::new(CLUSTER, "c1");
    config.debounce = Duration::from_millis(50);
    config.tick = Duration::from_millis(500);
    // claims whose launch failed are let go by orphan collection
    config.orphan_gc_period = Duration::from_secs(1);
    config.orphan_grace = Duration::from_secs(2);
    let client = server.client_as("controller");
    let options = CloudOptions {
        aws: moto.options(),
        ..CloudOptions::default()
    }
    .enable(&[CloudName::Karpenter]);
    let deps = Deps {
        providers: Arc::new(Clouds::new(options).with_client(client.clone())),
        planner: controller::real_planner(),
        metrics: Arc::new(Metrics::new()),
    };
    tokio::spawn(async move {
        let _ = controller::run(client, config, deps, futures::future::pending()).await;
    })
}

/// A Job of `pods` pods of 8 GPUs each, queued on `team-a`.
fn gang(name: &str, pods: i32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team-a", "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "trainer",
                "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "8", "memory": "64Gi"}}
            }], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}
    }))
    .expect("job")
}

/// The pods of Job `name` in `team-a` running, once there are `n`.
async fn running(client: &kube::Client, name: &str, n: usize, secs: u64) -> Vec<Pod> {
    support::waits::wait_for_running_pods(client, "team-a", &format!("job-name={name}"), n, secs)
        .await
}

fn condition(nc: &Value, t: &str) -> String {
    nc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == t)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

fn requirement(nc: &Value, key: &str) -> String {
    nc["spec"]["requirements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["key"] == key)
        .and_then(|r| r["values"][0].as_str())
        .unwrap_or_default()
        .to_string()
}

/// One file of the complete example of docs/karpenter.md
/// (`docs/examples/karpenter/NAME.yaml`).
fn example(name: &str) -> Value {
    let path = format!(
        "{}/docs/examples/karpenter/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The names of the NodeClaims; with `live`, only those not being deleted.
async fn claim_names(client: &kube::Client, live: bool) -> BTreeSet<String> {
    list_nodeclaims(client)
        .await
        .iter()
        .filter(|c| !live || c["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The NodeClaim creations the controller made, from the audit log.
fn claim_creates(server: &ApiServer) -> usize {
    server
        .audited("controller")
        .iter()
        .filter(|(verb, _, resource, _)| verb == "create" && resource == "nodeclaims")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_of_four_launches_as_nodeclaims_and_scales_to_zero_through_them() {
    let moto = Moto::start();
    let server = ApiServer::start();
    let client = server.client();
    // the complete example of docs/karpenter.md, as an operator applies it
    start_standin(&client, example("ec2nodeclass")).await;
    hook(&client, "PUT", "settings", settings()).await;
    // a NodePool of Karpenter's own beside muster: its provisioner serves
    // the cluster's other pods
    create_nodepool(&client).await;
    install_crds(&client).await;
    support::ensure_namespace(&client, "team-a", json!({"muster.dev/team": "team-a"})).await;
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        None,
        example("nodeclass"),
    )
    .await;
    let mut pool = example("gpupool");
    // (the example waits ten minutes before it scales down, and keeps warm
    // the nodes its recent arrivals used; a test a second, none kept)
    pool["spec"]["disruption"]["consolidateAfter"] = json!("1s");
    pool["spec"]["disruption"]["keepWarm"] = json!({"window": "0s"});
    create(&client, "GPUPool", "gpupools", None, pool).await;
    create(&client, "GPUQueue", "gpuqueues", None, example("gpuqueue")).await;
    let _emu =
        Emulator::start_running_for(client.clone(), Vec::new(), Some(Duration::from_secs(4)));
    let ctl = start_controller(&server, &moto);

    let job: Job = serde_json::from_value(example("job")).expect("the example Job");
    let name = job.metadata.name.clone().unwrap_or_default();
    submit(&client, &job).await;
    let pods = running(&client, &name, 4, 120).await;

    // four NodeClaims, written together: one per PoolNode, each pinning the
    // offering muster chose, all in one zone, launched, registered and
    // initialized by Karpenter
    let claims = list_nodeclaims(&client).await;
    assert_eq!(claims.len(), 4, "{claims:#?}");
    assert_eq!(claim_creates(&server), 4, "no NodeClaim created twice");
    let zones: BTreeSet<String> = claims
        .iter()
        .map(|c| requirement(c, "topology.kubernetes.io/zone"))
        .collect();
    assert_eq!(zones.len(), 1, "one zone for the gang: {zones:?}");
    for c in &claims {
        assert_eq!(
            requirement(c, "node.kubernetes.io/instance-type"),
            example("gpupool")["spec"]["requirements"]["instanceTypes"][0]
        );
        assert_eq!(requirement(c, "karpenter.sh/capacity-type"), "on-demand");
        assert_eq!(c["spec"]["expireAfter"], "Never");
        assert!(c["metadata"]["labels"]["karpenter.sh/nodepool"].is_null());
        for t in ["Launched", "Registered", "Initialized"] {
            assert_eq!(condition(c, t), "True", "{t} of {c:#?}");
        }
    }
    // the PoolNodes record Karpenter's instances and Nodes
    let pns = support::waits::poolnodes(&client).await;
    assert_eq!(pns.len(), 4);
    let claim_pids: BTreeSet<String> = claims
        .iter()
        .map(|c| {
            c["status"]["providerID"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let pn_pids: BTreeSet<String> = pns
        .iter()
        .map(|p| {
            p.data["status"]["providerID"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(claim_pids, pn_pids);
    for pn in &pns {
        assert_eq!(pn.data["status"]["phase"], "Ready", "{pn:?}");
    }
    // one pod on each of Karpenter's four Nodes
    let on: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let node_names: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c["status"]["nodeName"].as_str().map(str::to_string))
        .collect();
    assert_eq!(on, node_names);

    // Karpenter's disruption never picks a claim of muster's while the
    // gang runs on it (they are standalone: no NodePool)
    let candidates = hook(&client, "GET", "candidates", Value::Null).await;
    for c in &claims {
        let name = c["metadata"]["name"].as_str().unwrap_or_default();
        for (method, verdict) in candidates["nodeClaims"][name]
            .as_object()
            .into_iter()
            .flatten()
        {
            assert_eq!(
                verdict["candidate"], false,
                "{name} is a {method} candidate: {verdict}"
            );
        }
    }
    // a pod of another team that does not tolerate the pool's taint is one
    // Karpenter's provisioner serves from its own NodePool, and the
    // scheduler never places it on muster's nodes
    let web: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"containers": [{"name": "web", "image": "nginx",
                                 "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .expect("pod");
    Api::<Pod>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &web)
        .await
        .expect("web pod");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let web = Api::<Pod>::namespaced(client.clone(), "team-a")
        .get("web")
        .await
        .expect("web");
    assert_eq!(web.spec.as_ref().and_then(|s| s.node_name.clone()), None);
    assert!(
        support::karpenter::incompatible(&web, &general_pool_requirements()).is_none(),
        "Karpenter's own NodePool serves the web pod"
    );

    // the Job completes; a second after the nodes empty, muster deletes the
    // four claims and Karpenter terminates their instances
    eventually(60, "the NodeClaims gone", || {
        let client = client.clone();
        async move { list_nodeclaims(&client).await.is_empty().then_some(()) }
    })
    .await;
    eventually(30, "the Nodes and PoolNodes gone", || {
        let client = client.clone();
        async move {
            let nodes = Api::<Node>::all(client.clone())
                .list(&ListParams::default())
                .await
                .ok()?;
            let pns = support::waits::poolnodes(&client).await;
            (nodes.items.is_empty() && pns.is_empty()).then_some(())
        }
    })
    .await;
    let instances = hook(&client, "GET", "instances", Value::Null).await;
    let states: Vec<&str> = instances["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["state"].as_str())
        .collect();
    assert_eq!(states.len(), 4, "{instances}");
    assert!(states.iter().all(|s| *s != "running"), "{instances}");
    assert_eq!(claim_creates(&server), 4);
    server.assert_rbac_allows_controller_by(&support::rbac::rules_with_karpenter());
    ctl.abort();
}

/// The world of the ICE and interruption tests: moto, the API test server
/// with the Karpenter stand-in and muster's world, the emulated kubelet,
/// and the controller (stopped on drop).
struct Delegated {
    _moto: Moto,
    server: ApiServer,
    _emu: Emulator,
    ctl: tokio::task::JoinHandle<()>,
}

impl Delegated {
    async fn start() -> Delegated {
        let moto = Moto::start();
        let server = ApiServer::start();
        let client = server.client();
        start_standin(&client, ec2nodeclass(EC2_NODE_CLASS)).await;
        hook(&client, "PUT", "settings", settings()).await;
        muster_world(&client).await;
        let emu = Emulator::start_running_for(client.clone(), Vec::new(), None);
        let ctl = start_controller(&server, &moto);
        Delegated {
            _moto: moto,
            server,
            _emu: emu,
            ctl,
        }
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        self.ctl.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_capacity_moves_the_whole_gang_to_the_next_zone() {
    let world = Delegated::start().await;
    let client = world.server.client();
    // EC2 has no p4d.24xlarge now in every zone of the EC2NodeClass but the
    // last one
    let zones = delegated_zones(&client).await;
    assert!(zones.len() >= 2, "{zones:?}");
    let (last, dry) = zones.split_last().expect("zones");
    for zone in dry {
        hook(
            &client,
            "POST",
            "offerings",
            json!({"instanceType": TYPE, "zone": zone, "capacityType": "on-demand", "available": false}),
        )
        .await;
    }
    submit(&client, &gang("train", 2)).await;
    running(&client, "train", 2, 120).await;
    let claims: Vec<Value> = list_nodeclaims(&client)
        .await
        .into_iter()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .collect();
    assert_eq!(claims.len(), 2, "{claims:#?}");
    for c in &claims {
        assert_eq!(
            &requirement(c, "topology.kubernetes.io/zone"),
            last,
            "the whole gang moved to the zone with capacity"
        );
        assert_eq!(condition(c, "Initialized"), "True");
    }
    // the gang was tried where Karpenter had no capacity first: its claims
    // there were deleted by Karpenter, read and let go
    assert!(
        claim_creates(&world.server) > 2,
        "a zone without capacity was tried"
    );
    let events = support::waits::events_of(&client, "InsufficientCapacity").await;
    assert!(
        !events.is_empty(),
        "an InsufficientCapacity Event names the failure"
    );
}

/// The zones of the delegated NodeClass, as its status reports what the
/// EC2NodeClass resolved.
async fn delegated_zones(client: &kube::Client) -> Vec<String> {
    eventually(30, "the delegated NodeClass's zones", || {
        let client = client.clone();
        async move {
            let nc = support::waits::nodeclass_ready_status(&client, "delegated").await?;
            let zones: Vec<String> = nc["zones"]
                .as_array()?
                .iter()
                .filter_map(|z| z.as_str().map(str::to_string))
                .collect();
            (!zones.is_empty()).then_some(zones)
        }
    })
    .await
}

/// Karpenter's own NodePool for the cluster's other pods.
async fn create_nodepool(client: &kube::Client) {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    );
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    let pool: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": EC2_NODE_CLASS},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]
        }}}
    }))
    .expect("NodePool");
    api.create(&PostParams::default(), &pool)
        .await
        .expect("create NodePool");
}

/// The requirements of the `general` NodePool, as Karpenter's scheduler
/// reads them (its requirements plus its name label).
fn general_pool_requirements() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    [
        (
            "node.kubernetes.io/instance-type".to_string(),
            ["m5.large".to_string()].into(),
        ),
        (
            "karpenter.sh/nodepool".to_string(),
            ["general".to_string()].into(),
        ),
    ]
    .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_karpenter_interruption_requeues_the_whole_gang() {
    let world = Delegated::start().await;
    let client = world.server.client();
    submit(&client, &gang("train", 2)).await;
    let pods_before: BTreeSet<String> = running(&client, "train", 2, 120)
        .await
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let before = claim_names(&client, false).await;
    assert_eq!(before.len(), 2);
    // EC2 announces maintenance of one instance: Karpenter deletes its
    // NodeClaim, drains and terminates it
    let one = before.iter().next().cloned().unwrap_or_default();
    let found = hook(
        &client,
        "POST",
        "interruption",
        json!({"nodeClaim": one, "kind": "ScheduledChange"}),
    )
    .await;

    assert_eq!(found["nodeClaims"], json!([one]));
    // the gang is evicted whole (both pods, not only the one on the
    // interrupted node) and planned again: it runs on two claims, the
    // interrupted one not among them, with new pods
    let after = eventually(90, "the gang running again on two NodeClaims", || {
        let client = client.clone();
        let (one, pods_before) = (one.clone(), pods_before.clone());
        async move {
            let claims = claim_names(&client, true).await;
            let pods: BTreeSet<String> =
                support::waits::running_pods(&client, "team-a", "job-name=train")
                    .await
                    .iter()
                    .filter_map(|p| p.metadata.uid.clone())
                    .collect();
            (claims.len() == 2
                && !claims.contains(&one)
                && pods.len() == 2
                && pods.is_disjoint(&pods_before))
            .then_some(claims)
        }
    })
    .await;
    assert_eq!(after.len(), 2);
    // muster saw its node go (Karpenter drained and deleted it) and said so
    // on the PoolNode; such an eviction is not the gang's fault and does not
    // count toward its backoff
    let mut lost = Vec::new();
    for reason in ["NodeLost", "Interrupted"] {
        lost.extend(
            support::waits::events_of(&client, reason)
                .await
                .into_iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(one.as_str())
                }),
        );
    }
    assert!(!lost.is_empty(), "an Event on PoolNode {one}");
    let gang = support::waits::gang(&client, "team-a", "train")
        .await
        .expect("gang");
    assert_eq!(
        gang.data["status"]["evictions"], 0,
        "{:#?}",
        gang.data["status"]
    );
    // the interrupted claim was let go once Karpenter had terminated it
    eventually(30, "the interrupted NodeClaim gone", || {
        let (client, one) = (client.clone(), one.clone());
        async move {
            (!list_nodeclaims(&client)
                .await
                .iter()
                .any(|c| c["metadata"]["name"] == one.as_str()))
            .then_some(())
        }
    })
    .await;
}
