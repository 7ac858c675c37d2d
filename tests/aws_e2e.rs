//! End to end on AWS: the controller, with the real AWS provider and an AWS
//! NodeClass, against the API test server and a local moto server. A Job
//! labelled for a queue becomes a gang of two p4d.24xlarge nodes: both
//! PoolNodes are written, each is launched with one `RunInstances` call
//! (tagged for the cluster, pool, PoolNode and gang) into the gang's cluster
//! placement group with every EFA interface of the type, the emulated
//! kubelet registers a Node per instance, and the Job runs pinned to them.
//!
//! A second run starts on an account without the spot service-linked role:
//! a spot pool of g5.xlarge gets the NodeClass condition that says what to
//! do, and once the role exists the gang of two launches; each kubelet
//! registers the labels and taints its user data gives nodeadm, and the
//! NVIDIA device plugin's default scheduling rules select those nodes.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use muster::controller::cloud::clouds::CloudOptions;
use muster_provider_api::{CloudProvider, tags};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use serde_json::json;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use muster_provider_aws::nodeadm;
use support::cloud_e2e::{
    CLUSTER, both_running, gang_job, machine, not_ready_message, run_gang_with, start, start_with,
    submit, world,
};
use support::emulator::{Emulator, Machine, Machines};
use support::eventually;
use support::{ApiServer, ar, create};

/// The emulated kubelet boots every instance moto runs for the cluster: a
/// Node named after its PoolNode, with the labels and GPU taint its user
/// data registers, and the GPUs of a p4d.24xlarge.
struct MotoMachines(Arc<AwsProvider>);

#[async_trait::async_trait]
impl Machines for MotoMachines {
    async fn machines(&self) -> Vec<Machine> {
        self.0
            .list(CLUSTER)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|i| {
                let gpus = if i.offering.instance_type == "p4d.24xlarge" {
                    8
                } else {
                    0
                };
                let pool = i.tags[tags::POOL].clone();
                machine(i, pool, gpus)
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_launched_on_aws_end_to_end() {
    let moto = Moto::start();
    let spec = moto.node_class_spec().await;
    let server = ApiServer::start();
    let client = server.client();
    world(&client, "aws-default", spec.clone(), "p4d.24xlarge").await;
    let machines = Arc::new(
        AwsProvider::new(&spec, moto.options())
            .await
            .expect("provider"),
    );
    let _emu = Emulator::start_with(
        client.clone(),
        vec![Arc::new(MotoMachines(machines.clone()))],
    );
    let ctl = start(
        &server,
        CloudOptions {
            aws: moto.options(),
            ..CloudOptions::default()
        },
    );
    moto.reset();
    let pns = run_gang_with(
        &client,
        json!({"muster.dev/topology": "SamePlacementGroup"}),
    )
    .await;
    // one placement group for the gang, named in both PoolNodes before the
    // launch; each node launched into it with p4d.24xlarge's 4 EFA interfaces
    let group = pns[0].data["spec"]["placementGroup"].clone();
    assert!(group.is_string(), "{:?}", pns[0].data["spec"]);
    assert_eq!(pns[1].data["spec"]["placementGroup"], group);
    let log = moto.log();
    let runs: Vec<_> = log
        .iter()
        .filter(|e| e["action"] == "RunInstances")
        .collect();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        assert_eq!(
            run["params"]["Placement.GroupName"][0].as_str(),
            Some(format!("muster-{CLUSTER}-{}", group.as_str().unwrap_or_default()).as_str())
        );
        assert_eq!(
            run["params"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| k.ends_with(".InterfaceType") && v[0] == "efa")
                .count(),
            4,
            "{run:?}"
        );
    }
    assert_eq!(
        machines.placement_groups(CLUSTER).await.expect("groups"),
        [group.as_str().unwrap_or_default()]
    );
    // two instances, tagged for the cluster, pool, PoolNode and gang
    let instances = machines.list(CLUSTER).await.expect("list");
    assert_eq!(instances.len(), 2, "{instances:?}");
    for i in &instances {
        assert_eq!(i.tags[tags::POOL], "gpu");
        assert_eq!(i.tags[tags::GANG], "team-a/big");
        assert_eq!(i.offering.instance_type, "p4d.24xlarge");
    }
    assert_eq!(moto.run_instances_calls(), 2, "one RunInstances per node");
    let pids: BTreeSet<String> = instances.iter().map(|i| i.provider_id.clone()).collect();
    for pn in &pns {
        let pid = pn.data["status"]["providerID"].as_str().unwrap_or_default();
        assert!(pids.contains(pid), "{pid} in {pids:?}");
    }
    // the NodeClass reports what its selectors resolved
    let nc = Api::<DynamicObject>::all_with(client.clone(), &ar("NodeClass", "nodeclasses"))
        .get("aws-default")
        .await
        .expect("nodeclass");
    assert_eq!(
        nc.data["status"]["zones"],
        json!(["us-east-1a", "us-east-1b"]),
        "{nc:?}"
    );
    // its subnets all have free addresses
    let subnets_usable = nc.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "SubnetsUsable")
        .cloned();
    assert_eq!(
        subnets_usable
            .as_ref()
            .map(|c| (&c["status"], &c["reason"])),
        Some((&json!("True"), &json!("SubnetsUsable"))),
        "{nc:?}"
    );
    // a NodeClass whose subnets match nothing is not Ready, naming the selector
    let mut bad = spec.clone();
    bad["aws"]["subnetSelectorTerms"] = json!([{"tags": {"team": "none"}}]);
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        None,
        json!({"metadata": {"name": "aws-broken"}, "spec": bad}),
    )
    .await;
    let message = not_ready_message(&client, "aws-broken").await;
    assert!(
        message.contains("spec.aws.subnetSelectorTerms (tags team=none) matched nothing"),
        "{message}"
    );
    server.assert_rbac_allows_controller();
    ctl.abort();
}

/// The kubelet of every instance moto runs for the cluster, booted from its
/// user data: it registers the labels and taints nodeadm gives it
/// ([`nodeadm::registered`]), with the GPUs of its type.
struct BootedMachines {
    provider: Arc<AwsProvider>,
    moto: Arc<Moto>,
}

#[async_trait::async_trait]
impl Machines for BootedMachines {
    async fn machines(&self) -> Vec<Machine> {
        let mut out = Vec::new();
        for i in self.provider.list(CLUSTER).await.unwrap_or_default() {
            let Some(ud) = self.moto.user_data(&i.provider_id).await else {
                continue;
            };
            let Ok(reg) = nodeadm::registered(&ud) else {
                continue;
            };
            let gpus = match i.offering.instance_type.as_str() {
                "g5.xlarge" => 1,
                "p4d.24xlarge" => 8,
                _ => 0,
            };
            let pool = i.tags[tags::POOL].clone();
            let mut m = machine(i, pool, gpus);
            m.labels = reg.labels;
            m.taints = reg.taints;
            out.push(m);
        }
        out
    }
}

/// The NVIDIA device plugin chart's default scheduling rules
/// (`tests/data/nvidia-device-plugin-scheduling.yaml`): the node's labels
/// match one of its required node-selector terms (the file uses `In` only),
/// and each NoSchedule/NoExecute taint is tolerated.
fn device_plugin_lands(node: &Node) -> Result<(), String> {
    let data: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/nvidia-device-plugin-scheduling.yaml"
        ))
        .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let terms = data["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let matches = terms.iter().any(|t| {
        t["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| {
                assert_eq!(e["operator"], "In", "the data file uses In only");
                labels
                    .get(e["key"].as_str().unwrap_or_default())
                    .is_some_and(|v| e["values"].as_array().into_iter().flatten().any(|x| x == v))
            })
    });
    if !matches {
        return Err(format!("no node-selector term matches {labels:?}"));
    }
    let tolerations = data["tolerations"].as_array().cloned().unwrap_or_default();
    for t in node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
    {
        if t.effect == "PreferNoSchedule" {
            continue;
        }
        let tolerated = tolerations.iter().any(|o| {
            o["key"].as_str() == Some(t.key.as_str())
                && (o["operator"] == "Exists" || o["value"].as_str() == t.value.as_deref())
                && o["effect"].as_str().is_none_or(|e| e == t.effect)
        });
        if !tolerated {
            return Err(format!("taint {}:{} not tolerated", t.key, t.effect));
        }
    }
    Ok(())
}

/// The NodeClass condition `CapacityTypesPermitted`, once it has `status`.
async fn capacity_types_permitted(client: &kube::Client, status: &str) -> serde_json::Value {
    eventually(90, &format!("CapacityTypesPermitted={status}"), || {
        let client = client.clone();
        let status = status.to_string();
        async move {
            let nc = Api::<DynamicObject>::all_with(client, &ar("NodeClass", "nodeclasses"))
                .get("aws-default")
                .await
                .ok()?;
            nc.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "CapacityTypesPermitted" && c["status"] == status.as_str())
                .cloned()
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_gang_waits_for_the_spot_role_then_its_g5_nodes_take_the_device_plugin() {
    let moto = Arc::new(Moto::start());
    let spec = moto.node_class_spec().await;
    // a fresh account: no spot service-linked role, and muster may not create it
    moto.control("POST", "/spot-role?state=absent");
    let server = ApiServer::start();
    let client = server.client();
    world(&client, "aws-default", spec.clone(), "g5.xlarge").await;
    Api::<DynamicObject>::all_with(client.clone(), &ar("GPUPool", "gpupools"))
        .patch(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"requirements": {"capacityTypes": ["spot"]}}})),
        )
        .await
        .expect("spot pool");
    let provider = Arc::new(
        AwsProvider::new(&spec, moto.options())
            .await
            .expect("provider"),
    );
    let _emu = Emulator::start_with(
        client.clone(),
        vec![Arc::new(BootedMachines {
            provider: provider.clone(),
            moto: moto.clone(),
        })],
    );
    let ctl = start_with(
        &server,
        CloudOptions {
            aws: moto.options(),
            ..CloudOptions::default()
        },
        |c| c.policy.unavailable_offering_ttl = muster_planner::Dur::secs(5),
    );
    submit(&client, &gang_job("small", "1", "2", "8Gi", json!({}))).await;
    // the launch is refused; the NodeClass says what to do
    let cond = capacity_types_permitted(&client, "False").await;
    let message = cond["message"].as_str().unwrap_or_default();
    assert_eq!(cond["reason"], "CapacityTypeNotPermitted", "{cond}");
    assert!(
        message
            .contains("aws iam create-service-linked-role --aws-service-name spot.amazonaws.com"),
        "{message}"
    );
    assert!(provider.list(CLUSTER).await.expect("list").is_empty());
    // the operator's one step
    moto.control("POST", "/spot-role?state=exists");
    let pods = both_running(&client, "small", 120).await;
    let instances = provider.list(CLUSTER).await.expect("list");
    assert_eq!(instances.len(), 2, "{instances:?}");
    for i in &instances {
        assert_eq!(i.offering.instance_type, "g5.xlarge");
        assert_eq!(i.offering.capacity_type, muster_planner::CapacityType::Spot);
    }
    let nodes = Api::<Node>::all(client.clone());
    for p in &pods {
        let name = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let node = nodes.get(&name).await.expect("node");
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("nvidia.com/gpu.present").map(String::as_str),
            Some("true"),
            "{labels:?}"
        );
        device_plugin_lands(&node).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // ... and the check fails on a node without the label
    let mut bare = nodes
        .get(
            &pods[0]
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
        )
        .await
        .expect("node");
    if let Some(l) = bare.metadata.labels.as_mut() {
        l.remove("nvidia.com/gpu.present");
    }
    assert!(device_plugin_lands(&bare).is_err());
    capacity_types_permitted(&client, "True").await;
    ctl.abort();
}
