//! Karpenter's side, for scenarios where muster runs beside it: the
//! NodeClaim CRD (`karpenter.sh/v1`, the fields of kubernetes-sigs/karpenter
//! `pkg/apis/v1/nodeclaim.go` that scenarios use, with the upstream
//! required fields), Karpenter-labelled Nodes, and the two rules Karpenter
//! applies before it provisions for a pod:
//!
//! - provisionable (`pkg/utils/pod/scheduling.go`, `IsProvisionable`): the
//!   kube-scheduler marked it `PodScheduled=False` with reason
//!   `Unschedulable`, it is not bound, not nominated (preempting), not owned
//!   by a DaemonSet or a Node;
//! - compatible with a NodePool (`pkg/scheduling/requirements.go`,
//!   `newPodRequirements` and `Compatible` with the well-known labels of
//!   `pkg/apis/v1/labels.go` allowed undefined): the pod's requirements are
//!   its `nodeSelector` (as `In`) and the `matchExpressions` of its first
//!   required node-selector term (`matchFields` are not read); a key that is
//!   not well known and that the NodePool does not define denies the pod
//!   unless its operator is `NotIn` or `DoesNotExist`; a key both define
//!   must share a value.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Labels Karpenter knows without a NodePool defining them
/// (`WellKnownLabels`, `pkg/apis/v1/labels.go`).
pub const WELL_KNOWN: [&str; 8] = [
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
];

/// Installs the NodeClaim CRD (cluster-scoped, status subresource).
pub async fn install_nodeclaim_crd(client: &kube::Client) {
    let requirement = json!({
        "type": "object", "required": ["key", "operator"],
        "properties": {
            "key": {"type": "string"},
            "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]},
            "values": {"type": "array", "items": {"type": "string"}},
            "minValues": {"type": "integer", "minimum": 1, "maximum": 50}
        }
    });
    let taint = json!({
        "type": "object", "required": ["key", "effect"],
        "properties": {
            "key": {"type": "string"}, "value": {"type": "string"},
            "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}
        }
    });
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "nodeclaims.karpenter.sh"},
        "spec": {
            "group": "karpenter.sh", "scope": "Cluster",
            "names": {"kind": "NodeClaim", "listKind": "NodeClaimList", "plural": "nodeclaims", "singular": "nodeclaim", "categories": ["karpenter"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object", "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                        "spec": {
                            "type": "object", "required": ["requirements", "nodeClassRef"],
                            "properties": {
                                "requirements": {"type": "array", "maxItems": 100, "items": requirement},
                                "taints": {"type": "array", "items": taint},
                                "startupTaints": {"type": "array", "items": taint},
                                "resources": {"type": "object", "properties": {"requests": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}}}},
                                "nodeClassRef": {
                                    "type": "object", "required": ["group", "kind", "name"],
                                    "properties": {"group": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}
                                },
                                "expireAfter": {"type": "string"},
                                "terminationGracePeriod": {"type": "string"}
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {
                                "nodeName": {"type": "string"},
                                "providerID": {"type": "string"},
                                "imageID": {"type": "string"},
                                "capacity": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
                                "allocatable": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
                                "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                            }
                        }
                    }
                }}
            }]
        }
    }))
    .expect("NodeClaim CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("create NodeClaim CRD");
}

/// The resource of Karpenter's NodeClaim.
pub fn nodeclaims() -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

/// A registered, Ready Karpenter node of `nodepool` with `gpus` GPUs, and
/// its NodeClaim (launched and registered), as Karpenter leaves them:
/// the NodeClaim's labels on the Node plus `karpenter.sh/registered`, an
/// owner reference to the NodeClaim, Karpenter's termination finalizer.
pub async fn registered_node(client: &kube::Client, name: &str, nodepool: &str, gpus: u32) {
    let claim_name = format!("{nodepool}-{name}");
    let provider_id = format!("aws:///us-central1-a/i-{name}");
    let claims: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &nodeclaims());
    let claim: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": claim_name, "labels": {
            "karpenter.sh/nodepool": nodepool,
            "karpenter.sh/capacity-type": "on-demand",
            "node.kubernetes.io/instance-type": "p4d.24xlarge"
        }},
        "spec": {
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [nodepool]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }
    }))
    .expect("NodeClaim");
    let created = claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("create NodeClaim");
    claims
        .patch_status(
            &claim_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "providerID": provider_id, "nodeName": name,
                "conditions": [{"type": "Registered", "status": "True"}, {"type": "Initialized", "status": "True"}]
            }})),
        )
        .await
        .expect("NodeClaim status");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": nodepool,
                "karpenter.sh/registered": "true",
                "karpenter.sh/initialized": "true",
                "karpenter.sh/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": "p4d.24xlarge",
                "topology.kubernetes.io/zone": "us-central1-a",
                "kubernetes.io/hostname": name
            },
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [{
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "name": claim_name, "uid": created.metadata.uid.clone().unwrap_or_default(),
                "blockOwnerDeletion": true
            }]
        },
        "spec": {"providerID": provider_id}
    }))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create Karpenter node");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": gpus.to_string()},
                "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": gpus.to_string()},
            }})),
        )
        .await
        .expect("Karpenter node status");
}

/// True when Karpenter would try to provision for the pod (`IsProvisionable`).
pub fn provisionable(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))
        });
    let bound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let nominated = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let owned = pod.metadata.owner_references.iter().flatten().any(|o| {
        (o.api_version == "apps/v1" && o.kind == "DaemonSet")
            || (o.api_version == "v1" && o.kind == "Node")
    });
    unschedulable && !bound && !nominated && !owned
}

/// A pod requirement: operator and values of one label key.
type Requirements = BTreeMap<String, (String, BTreeSet<String>)>;

/// The pod's requirements as Karpenter reads them (`newPodRequirements`,
/// required terms only).
fn pod_requirements(pod: &Pod) -> Requirements {
    let mut out = Requirements::new();
    let Some(spec) = pod.spec.as_ref() else {
        return out;
    };
    for (k, v) in spec.node_selector.iter().flatten() {
        out.insert(k.clone(), ("In".into(), [v.clone()].into()));
    }
    let first = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .and_then(|r| r.node_selector_terms.first());
    for e in first
        .and_then(|t| t.match_expressions.as_ref())
        .into_iter()
        .flatten()
    {
        let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
        out.insert(e.key.clone(), (e.operator.clone(), values));
    }
    out
}

/// Why Karpenter finds the pod incompatible with a NodePool whose template
/// defines `nodepool` (key → allowed values, from its requirements and
/// labels), or `None` when it is compatible.
pub fn incompatible(pod: &Pod, nodepool: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    for (key, (op, values)) in pod_requirements(pod) {
        let negative = op == "NotIn" || op == "DoesNotExist";
        match nodepool.get(&key) {
            None if WELL_KNOWN.contains(&key.as_str()) || negative => {}
            None => return Some(format!("label {key:?} does not have known values")),
            Some(allowed) => {
                let meets = match op.as_str() {
                    "In" => values.iter().any(|v| allowed.contains(v)),
                    "Exists" => !allowed.is_empty(),
                    _ => true,
                };
                if !meets {
                    return Some(format!("key {key}, {op} {values:?} not in {allowed:?}"));
                }
            }
        }
    }
    None
}

/// Karpenter's CRDs as upstream ships them (`tests/kube_api/crds`):
/// installing all three starts the API test server's Karpenter stand-in.
pub const STANDIN_CRDS: [&str; 3] = [
    "karpenter.sh_nodeclaims",
    "karpenter.sh_nodepools",
    "karpenter.k8s.aws_ec2nodeclasses",
];

/// An `EC2NodeClass` named `name` with the fields its CRD requires.
pub fn ec2nodeclass(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}]}
    })
}

/// Installs [`STANDIN_CRDS`] and the `EC2NodeClass` `class`, and waits
/// until the stand-in has resolved it (`Ready=True`).
pub async fn start_standin(client: &kube::Client, class: serde_json::Value) {
    super::workload_crds::install(client, &STANDIN_CRDS).await;
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
        "ec2nodeclasses",
    );
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    let name = class["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let obj: kube::api::DynamicObject = serde_json::from_value(class).expect("EC2NodeClass");
    let pp = PostParams::default();
    super::retry_transient(|| api.create(&pp, &obj))
        .await
        .expect("create EC2NodeClass");
    super::eventually(30, "the EC2NodeClass is Ready", || {
        let (api, name) = (api.clone(), name.clone());
        async move {
            let o = api.get(&name).await.ok()?;
            o.data["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(())
        }
    })
    .await;
}

/// One request to the stand-in's test hooks (`/karpenter-test/PATH`, see
/// `tests/kube_api/README.md`) through the API client; panics unless it
/// answers 2xx.
pub async fn hook(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let req = http::Request::builder()
        .method(method)
        .uri(format!("/karpenter-test/{path}"))
        .header("content-type", "application/json")
        .body(bytes)
        .expect("hook request");
    let out = client
        .request_text(req)
        .await
        .unwrap_or_else(|e| panic!("{method} /karpenter-test/{path}: {e}"));
    serde_json::from_str(&out).unwrap_or(serde_json::Value::Null)
}

/// Every NodeClaim, as JSON.
pub async fn list_nodeclaims(client: &kube::Client) -> Vec<serde_json::Value> {
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &nodeclaims());
    api.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .collect()
        })
        .unwrap_or_default()
}
