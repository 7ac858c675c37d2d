//! End to end on AWS: the controller, with the real AWS provider and an AWS
//! NodeClass, against the API test server and a local moto server. A Job
//! labelled for a queue becomes a gang of two p4d.24xlarge nodes: both
//! PoolNodes are written, each is launched with one `RunInstances` call
//! (tagged for the cluster, pool, PoolNode and gang), the emulated kubelet
//! registers a Node per instance, and the Job runs pinned to them.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::controller::clouds::{CloudOptions, Clouds};
use muster::controller::metrics::Metrics;
use muster::controller::{self, ControllerConfig, Deps};
use muster_provider_api::{CloudProvider, tags};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use serde_json::json;
use support::emulator::{Emulator, Machine, Machines};
use support::{ApiServer, eventually};

const CLUSTER: &str = "test-cluster";

fn ar(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("muster.dev", "v1alpha1", kind),
        plural,
    )
}

async fn create(client: &kube::Client, kind: &str, plural: &str, body: serde_json::Value) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar(kind, plural));
    let mut obj: DynamicObject = serde_json::from_value(body).expect("object");
    obj.types = Some(kube::core::TypeMeta {
        api_version: "muster.dev/v1alpha1".into(),
        kind: kind.into(),
    });
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
}

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
                let name = i.pool_node.clone().unwrap_or_default();
                Machine {
                    labels: [
                        (tags::POOL.to_string(), i.tags[tags::POOL].clone()),
                        (tags::POOL_NODE.to_string(), name.clone()),
                    ]
                    .into(),
                    name,
                    provider_id: i.provider_id,
                    instance_type: i.offering.instance_type.clone(),
                    zone: i.offering.zone,
                    gpus: if i.offering.instance_type == "p4d.24xlarge" {
                        8
                    } else {
                        0
                    },
                    taints: muster_planner::model::pool::default_taints(),
                    terminated: false,
                }
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
    support::install_crds(&client).await;
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        json!({
            "metadata": {"name": "aws-default"}, "spec": spec
        }),
    )
    .await;
    create(&client, "GPUPool", "gpupools", json!({
        "metadata": {"name": "a100"},
        "spec": {"nodeClassRef": {"name": "aws-default"},
                 "requirements": {"instanceTypes": ["p4d.24xlarge"], "capacityTypes": ["on-demand"]}}
    }))
    .await;
    create(
        &client,
        "GPUQueue",
        "gpuqueues",
        json!({
            "metadata": {"name": "team-a"},
            "spec": {"pools": ["a100"], "namespaceSelector": {}}
        }),
    )
    .await;
    let machines = Arc::new(
        AwsProvider::new(&spec, moto.options())
            .await
            .expect("provider"),
    );
    let _emu = Emulator::start_with(
        client.clone(),
        vec![Arc::new(MotoMachines(machines.clone()))],
    );
    let mut config = ControllerConfig::new(CLUSTER, "c1");
    config.debounce = Duration::from_millis(50);
    config.tick = Duration::from_millis(500);
    let deps = Deps {
        providers: Arc::new(Clouds::new(CloudOptions {
            aws: moto.options(),
        })),
        planner: controller::real_planner(),
        metrics: Arc::new(Metrics::new()),
    };
    let ctl_client = server.client_as("controller");
    let ctl = tokio::spawn(async move {
        let _ = controller::run(ctl_client, config, deps, futures::future::pending()).await;
    });
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "big", "namespace": "team-a", "labels": {"muster.dev/queue": "team-a"}},
        "spec": {"parallelism": 2, "completions": 2, "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "trainer",
                "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "8", "memory": "64Gi"}}
            }], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}
    }))
    .expect("job");
    Api::<Job>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &job)
        .await
        .expect("submit");
    let pods = eventually(90, "both pods running", || {
        let client = client.clone();
        async move {
            let pods: Vec<Pod> = Api::<Pod>::namespaced(client, "team-a")
                .list(&ListParams::default().labels("job-name=big"))
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .collect();
            (pods.len() == 2).then_some(pods)
        }
    })
    .await;
    // two instances, tagged for the cluster, pool, PoolNode and gang
    let instances = machines.list(CLUSTER).await.expect("list");
    assert_eq!(instances.len(), 2, "{instances:?}");
    for i in &instances {
        assert_eq!(i.tags[tags::POOL], "a100");
        assert_eq!(i.tags[tags::GANG], "team-a/big");
        assert_eq!(i.offering.instance_type, "p4d.24xlarge");
    }
    assert_eq!(moto.run_instances_calls(), 2, "one RunInstances per node");
    // both PoolNodes Ready with the instances' provider ids; pods on their Nodes
    let pns = Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .list(&ListParams::default())
        .await
        .expect("poolnodes")
        .items;
    assert_eq!(pns.len(), 2);
    let pids: BTreeSet<String> = instances.iter().map(|i| i.provider_id.clone()).collect();
    for pn in &pns {
        assert_eq!(pn.data["status"]["phase"], "Ready", "{pn:?}");
        let pid = pn.data["status"]["providerID"].as_str().unwrap_or_default();
        assert!(pids.contains(pid), "{pid} in {pids:?}");
    }
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let pn_names: BTreeSet<String> = pns.iter().filter_map(|p| p.metadata.name.clone()).collect();
    assert_eq!(nodes, pn_names, "one pod on each launched node");
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
    // a NodeClass whose subnets match nothing is not Ready, naming the selector
    let mut bad = spec.clone();
    bad["aws"]["subnetSelectorTerms"] = json!([{"tags": {"team": "none"}}]);
    create(
        &client,
        "NodeClass",
        "nodeclasses",
        json!({
            "metadata": {"name": "aws-broken"}, "spec": bad
        }),
    )
    .await;
    let cond = eventually(30, "Ready=False on aws-broken", || {
        let client = client.clone();
        async move {
            let nc = Api::<DynamicObject>::all_with(client, &ar("NodeClass", "nodeclasses"))
                .get("aws-broken")
                .await
                .ok()?;
            nc.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready" && c["status"] == "False")
                .cloned()
        }
    })
    .await;
    let message = cond["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.aws.subnetSelectorTerms (tags team=none) matched nothing"),
        "{cond}"
    );
    server.assert_rbac_allows_controller();
    ctl.abort();
}
