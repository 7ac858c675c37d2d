//! End to end on AWS: the controller, with the real AWS provider and an AWS
//! NodeClass, against the API test server and a local moto server. A Job
//! labelled for a queue becomes a gang of two p4d.24xlarge nodes: both
//! PoolNodes are written, each is launched with one `RunInstances` call
//! (tagged for the cluster, pool, PoolNode and gang), the emulated kubelet
//! registers a Node per instance, and the Job runs pinned to them.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use muster::controller::cloud::clouds::CloudOptions;
use muster_provider_api::{CloudProvider, tags};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use serde_json::json;
use support::cloud_e2e::{CLUSTER, machine, not_ready_message, run_gang, start, world};
use support::emulator::{Emulator, Machine, Machines};
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
    let pns = run_gang(&client).await;
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
