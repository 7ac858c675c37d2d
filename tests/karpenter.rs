//! muster beside Karpenter: a cluster with a Karpenter GPU node (registered,
//! with its NodeClaim) that has room for a muster gang, and a pending pod
//! outside muster that a Karpenter NodePool is meant to serve.
//!
//! muster must not count the Karpenter node as capacity (it launches its
//! own), must never label, cordon or drain it or touch its NodeClaim, must
//! leave the outside pod alone, and must pin its admitted pods so that no
//! Karpenter NodePool finds them compatible (Karpenter's rules:
//! `support::karpenter`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::in_process::Running;
use support::karpenter::{incompatible, nodeclaims, provisionable, registered_node};
use support::objects::{job, start_world};
use support::waits::wait_for_running_pods;

const NS: &str = "team-a";
const KARPENTER_NODE: &str = "ip-10-0-9-9.ec2.internal";

fn start(client: &kube::Client, cloud: &Arc<FakeCloud>) -> Running {
    let mut config = support::in_process::config("c1");
    config.tick = Duration::from_millis(300);
    support::in_process::spawn(client, cloud, Arc::new(support::stub_planner::plan), config)
}

/// A GPU NodePool as Karpenter's scheduler sees it: what its template's
/// requirements and labels define.
fn gpu_nodepool() -> BTreeMap<String, BTreeSet<String>> {
    [
        ("karpenter.sh/nodepool", vec!["gpu"]),
        ("karpenter.sh/capacity-type", vec!["on-demand", "spot"]),
        (
            "node.kubernetes.io/instance-type",
            vec!["p4d.24xlarge", "fake-8gpu"],
        ),
        ("nvidia.com/gpu.present", vec!["true"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect()
}

/// The outside pod's NodePool, a CPU one.
fn cpu_nodepool() -> BTreeMap<String, BTreeSet<String>> {
    [(
        "karpenter.sh/nodepool".to_string(),
        ["cpu".to_string()].into(),
    )]
    .into()
}

/// The pod as Karpenter would find it if the kube-scheduler could not place
/// it: unbound, `PodScheduled=False` with reason `Unschedulable`.
fn as_unschedulable(mut pod: Pod) -> Pod {
    if let Some(s) = pod.spec.as_mut() {
        s.node_name = None;
    }
    let status = pod.status.get_or_insert_with(Default::default);
    status.conditions = Some(vec![PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        ..Default::default()
    }]);
    status.nominated_node_name = None;
    pod
}

async fn outside_pending_pod(client: &kube::Client) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "web");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "web", "labels": {"app": "web"}},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": "cpu"},
            "containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "2"}}}]
        }
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create outside pod");
    // what the kube-scheduler writes when no node fits
    pods.patch_status(
        "web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
        }]}})),
    )
    .await
    .expect("outside pod status")
}

#[tokio::test]
async fn karpenter_nodes_claims_and_pods_are_left_to_karpenter() {
    let (server, client) = start_world(&[]).await;
    support::karpenter::install_nodeclaim_crd(&client).await;
    // Karpenter's: an idle 8-GPU node (it fits the gang) and its NodeClaim
    registered_node(&client, KARPENTER_NODE, "gpu", 8).await;
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &nodeclaims());
    let claim_before = claims
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert_eq!(claim_before.len(), 1);
    let outside = outside_pending_pod(&client).await;
    assert!(
        provisionable(&outside),
        "the outside pod is Karpenter's to serve"
    );
    assert_eq!(incompatible(&outside, &cpu_nodepool()), None);

    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server.client_as("controller"), &cloud);
    job("train").queue("team-a").gpus(8).create(&client).await;

    let pod = wait_for_running_pods(&client, NS, "job-name=train", 1, 30)
        .await
        .remove(0);
    // not counted as capacity: muster launched its own node rather than use
    // the idle Karpenter node
    assert_eq!(cloud.instances().len(), 1, "one muster launch");
    let on = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound");
    assert_ne!(on, KARPENTER_NODE);
    let nodes: Api<Node> = Api::all(client.clone());
    let muster_node = nodes.get(&on).await.expect("muster node");
    assert!(muster_node.labels().contains_key("muster.dev/poolnode"));

    // pinned: Karpenter finds neither the pod nor its Job's template
    // compatible with a GPU NodePool, even were they unschedulable
    let unschedulable = as_unschedulable(pod.clone());
    assert!(provisionable(&unschedulable));
    let why = incompatible(&unschedulable, &gpu_nodepool()).expect("incompatible");
    assert!(why.contains("muster.dev/gang"), "{why}");
    let template = Api::<Job>::namespaced(client.clone(), NS)
        .get("train")
        .await
        .expect("job")
        .spec
        .expect("spec")
        .template;
    let from_template = as_unschedulable(Pod {
        metadata: Default::default(),
        spec: template.spec,
        status: None,
    });
    assert!(incompatible(&from_template, &gpu_nodepool()).is_some());
    // the same pod without muster's pin would be Karpenter's: the check can pass
    let mut unpinned = unschedulable.clone();
    if let Some(s) = unpinned.spec.as_mut() {
        s.node_selector = None;
        s.affinity = None;
    }
    assert_eq!(incompatible(&unpinned, &gpu_nodepool()), None);

    // a few more cycles: Karpenter's node, NodeClaim and pending pod are as they were
    tokio::time::sleep(Duration::from_secs(2)).await;
    let karp = nodes
        .get(KARPENTER_NODE)
        .await
        .expect("Karpenter node kept");
    assert!(
        !karp.labels().keys().any(|k| k.starts_with("muster.dev/")),
        "{:?}",
        karp.labels()
    );
    assert_eq!(
        karp.spec.as_ref().and_then(|s| s.unschedulable),
        None,
        "not cordoned"
    );
    assert!(
        karp.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none_or(|t| t.is_empty())
    );
    let claim_after = claims
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert_eq!(claim_after.len(), 1);
    assert_eq!(
        claim_after[0].resource_version(),
        claim_before[0].resource_version(),
        "NodeClaim untouched"
    );
    let outside_after = Api::<Pod>::namespaced(client.clone(), "web")
        .get("web-0")
        .await
        .expect("outside pod kept");
    assert_eq!(outside_after.spec, outside.spec);
    assert_eq!(outside_after.labels(), outside.labels());
    assert_eq!(outside_after.annotations(), outside.annotations());
    assert!(provisionable(&outside_after), "still Karpenter's to serve");
}
