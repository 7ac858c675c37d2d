//! The NVIDIA device plugin lands on every GPU node the example pools
//! launch. For each GPUPool of `docs/examples` (with the NodeClasses there),
//! the pool is translated as a cycle does, its PoolNode's launch request built
//! by [`launch_request`], and the request turned into the kubelet's
//! registration by the provider's own code (nodeadm `NodeConfig` and
//! Bottlerocket settings on AWS, GKE `kube-env` and the plain bootstrap on
//! GCP); the labels and taints read back from that are checked against the
//! plugin chart's default scheduling rules (`tests/data/nvidia-device-plugin-scheduling.yaml`)
//! with the values `docs/eks.md` tells the operator to pass
//! (`docs/nvidia-device-plugin-values.yaml`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement, Toleration};
use kube::api::DynamicObject;
use muster_crds::NodeClass;
use muster_crds::nodeclass::ImageFamily;
use muster_planner::{Pool, Provider};
use muster_provider_api::LaunchRequest;
use serde::Deserialize;

use super::launch_request;
use crate::controller::base::objects::PoolNodeSpec;
use crate::controller::translate::pool::{node_classes, pools};

/// A chart's scheduling values: what the DaemonSet's pod template gets.
#[derive(Debug, Clone, Default, Deserialize)]
struct Scheduling {
    affinity: Option<Affinity>,
    tolerations: Option<Vec<Toleration>>,
}

impl Scheduling {
    /// `values` given with `-f` over these defaults: Helm replaces a list
    /// (`tolerations`) as a whole; `affinity`, a map, is taken whole here,
    /// which is what Helm's merge gives when only one side sets it.
    fn with(&self, values: &Scheduling) -> Scheduling {
        Scheduling {
            affinity: values.affinity.clone().or_else(|| self.affinity.clone()),
            tolerations: values
                .tolerations
                .clone()
                .or_else(|| self.tolerations.clone()),
        }
    }
}

/// A taint read back from a node's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeTaint {
    key: String,
    value: String,
    effect: String,
}

/// The labels and taints a node registers with.
#[derive(Debug, Clone, Default)]
struct Registered {
    labels: BTreeMap<String, String>,
    taints: Vec<NodeTaint>,
}

fn read(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn yaml<T: serde::de::DeserializeOwned>(path: &str) -> T {
    serde_norway::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Whether a requirement holds for a node's labels (the operators of
/// `NodeSelectorRequirement`; `Gt`/`Lt` compare integers).
fn requirement_holds(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let label = labels.get(&r.key);
    let int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => label.is_some_and(|v| values.contains(v)),
        "NotIn" => label.is_none_or(|v| !values.contains(v)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" | "Lt" => match (
            label.and_then(|v| int(v)),
            values.first().and_then(|v| int(v)),
        ) {
            (Some(l), Some(b)) => (r.operator == "Gt" && l > b) || (r.operator == "Lt" && l < b),
            _ => false,
        },
        other => panic!("unknown node selector operator {other}"),
    }
}

/// Whether a toleration tolerates a taint (Kubernetes' `ToleratesTaint`: the
/// effect and key match when set, `Exists` ignores the value).
fn tolerates(t: &Toleration, taint: &NodeTaint) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_ok = t
        .key
        .as_deref()
        .is_none_or(|k| k.is_empty() || k == taint.key);
    let value_ok = match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => t.value.as_deref().unwrap_or_default() == taint.value,
        other => panic!("unknown toleration operator {other}"),
    };
    effect_ok && key_ok && value_ok
}

/// Whether the plugin's DaemonSet would run on the node, and if not why:
/// one of the required node selector terms holds, and every `NoSchedule`
/// and `NoExecute` taint is tolerated.
fn would_land(node: &Registered, plugin: &Scheduling) -> Result<(), String> {
    let terms = plugin
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.as_slice());
    if let Some(terms) = terms {
        // an empty term matches no node; matchFields are not used by the chart
        let matches = terms.iter().any(|t| {
            let exprs = t.match_expressions.as_deref().unwrap_or_default();
            assert!(t.match_fields.is_none(), "matchFields are not modelled");
            !exprs.is_empty() && exprs.iter().all(|r| requirement_holds(r, &node.labels))
        });
        if !matches {
            return Err(format!(
                "no required node selector term matches the labels {:?}",
                node.labels
            ));
        }
    }
    let tolerations = plugin.tolerations.as_deref().unwrap_or_default();
    for taint in &node.taints {
        let repels = taint.effect == "NoSchedule" || taint.effect == "NoExecute";
        if repels && !tolerations.iter().any(|t| tolerates(t, taint)) {
            return Err(format!(
                "taint {}={}:{} is not tolerated",
                taint.key, taint.value, taint.effect
            ));
        }
    }
    Ok(())
}

/// `k=v,...` of `--node-labels`.
fn flag_labels(v: &str) -> BTreeMap<String, String> {
    v.split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// `k=v:Effect,...` of `--register-with-taints`.
fn flag_taints(v: &str) -> Vec<NodeTaint> {
    v.split(',')
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (kv, effect) = t.rsplit_once(':').expect("taint with an effect");
            let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
            NodeTaint {
                key: key.into(),
                value: value.into(),
                effect: effect.into(),
            }
        })
        .collect()
}

/// The kubelet flags in any text (user data, `kube-env`, `KUBELET_ARGS`):
/// every `--node-labels=` and `--register-with-taints=` word.
fn from_flags(text: &str) -> Registered {
    let mut out = Registered::default();
    for word in text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
        if let Some(v) = word.strip_prefix("--node-labels=") {
            out.labels.extend(flag_labels(v));
        } else if let Some(v) = word.strip_prefix("--register-with-taints=") {
            out.taints.extend(flag_taints(v));
        }
    }
    out
}

/// Bottlerocket settings: `settings.kubernetes.node-labels` and
/// `node-taints` (`key = ["value:Effect", ...]`).
fn from_bottlerocket(toml_text: &str) -> Registered {
    let doc: toml::Table = toml_text.parse().expect("Bottlerocket TOML");
    let k8s = &doc["settings"]["kubernetes"];
    let mut out = Registered::default();
    for (k, v) in k8s["node-labels"].as_table().into_iter().flatten() {
        out.labels
            .insert(k.clone(), v.as_str().unwrap_or_default().to_string());
    }
    for (k, list) in k8s["node-taints"].as_table().into_iter().flatten() {
        for v in list.as_array().into_iter().flatten() {
            let (value, effect) = v
                .as_str()
                .unwrap_or_default()
                .rsplit_once(':')
                .expect("effect");
            out.taints.push(NodeTaint {
                key: k.clone(),
                value: value.into(),
                effect: effect.into(),
            });
        }
    }
    out
}

fn example_objects(prefix: &str) -> Vec<Arc<DynamicObject>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("docs/examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("example");
            Arc::new(
                serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            )
        })
        .collect()
}

/// The PoolNode spec of a GPU node of `pool`: its first GPU model, the
/// smallest GPU count it may buy (the instance type and zone do not reach
/// the registration).
fn poolnode(pool: &Pool) -> PoolNodeSpec {
    let provider = match pool.provider {
        Provider::Aws => muster_crds::common::Provider::Aws,
        Provider::Gcp => muster_crds::common::Provider::Gcp,
        Provider::Sim => muster_crds::common::Provider::Sim,
    };
    let gpus = pool.requirements.min_gpus.unwrap_or(1).max(1);
    let model = pool
        .requirements
        .gpu_models
        .first()
        .map_or("A100", |m| m.as_str());
    serde_json::from_value(serde_json::json!({
        "pool": pool.name,
        "nodeClass": pool.node_class,
        "offering": {
            "provider": provider, "region": "r", "zone": "z", "instanceType": "gpu-machine",
            "capacityType": "on-demand", "pricePerHour": "1", "gpuModel": model,
            "gpuCount": gpus,
        },
        "idempotencyKey": "k",
    }))
    .expect("PoolNode spec")
}

/// Every registration of the request on the pool's cloud: one per image
/// family or bootstrap path.
fn registrations(class: &NodeClass, req: &LaunchRequest) -> Vec<(&'static str, Registered)> {
    if let Some(aws) = &class.spec.aws {
        let al2023 = muster_provider_aws::bootstrap::user_data(ImageFamily::Al2023, None, req, aws)
            .expect("nodeadm user data");
        let br =
            muster_provider_aws::bootstrap::user_data(ImageFamily::Bottlerocket, None, req, aws)
                .expect("Bottlerocket user data");
        return vec![
            ("AL2023 nodeadm", from_flags(&al2023)),
            ("Bottlerocket", from_bottlerocket(&br)),
        ];
    }
    if let Some(gcp) = &class.spec.gcp {
        use muster_provider_gcp::node_pools::{Shape, pool_body};
        // GKE registers a node pool's nodes with its labels and taints
        // (`kube-labels`, kube-env `NODE_LABELS`/`NODE_TAINTS`); GKE's own
        // labels are added to those, never in place of them
        let shape = Shape {
            machine_type: "g2-standard-8",
            accelerator: Some(("nvidia-l4", 1)),
            capacity: req.offering.capacity_type,
            zone: &req.offering.zone,
            reservation: None,
        };
        let body = pool_body("muster-test", &shape, gcp, req, false);
        let config = &body["config"];
        let mut gke = Registered::default();
        for (k, v) in config["labels"].as_object().into_iter().flatten() {
            gke.labels
                .insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
        gke.labels.insert(
            "cloud.google.com/gke-accelerator".into(),
            "nvidia-l4".into(),
        );
        for t in config["taints"].as_array().into_iter().flatten() {
            let effect = match t["effect"].as_str() {
                Some("NO_SCHEDULE") => "NoSchedule",
                Some("PREFER_NO_SCHEDULE") => "PreferNoSchedule",
                _ => "NoExecute",
            };
            gke.taints.push(NodeTaint {
                key: t["key"].as_str().unwrap_or_default().into(),
                value: t["value"].as_str().unwrap_or_default().into(),
                effect: effect.into(),
            });
        }
        let plain = muster_provider_gcp::provider::kubelet_args(req);
        return vec![
            ("GKE node pool", gke),
            ("plain bootstrap", from_flags(&plain)),
        ];
    }
    Vec::new()
}

/// The chart's defaults with the values `docs/eks.md` passes.
fn plugin() -> (Scheduling, Scheduling) {
    let defaults: Scheduling = yaml("tests/data/nvidia-device-plugin-scheduling.yaml");
    let values: Scheduling = yaml("docs/nvidia-device-plugin-values.yaml");
    (defaults.clone(), defaults.with(&values))
}

#[test]
fn the_device_plugin_lands_on_every_example_gpu_node() {
    let (defaults, installed) = plugin();
    let mut issues = Vec::new();
    let classes_objs = example_objects("nodeclass-");
    let classes = node_classes(&classes_objs, &mut issues);
    let pools = pools(&example_objects("gpupool-"), &classes, &mut issues);
    assert!(issues.is_empty(), "{issues:?}");
    assert!(pools.len() >= 2, "the example pools: {pools:?}");
    let mut checked = 0;
    for pool in &pools {
        let class_obj = classes_objs
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(pool.node_class.as_str()))
            .expect("the pool's NodeClass");
        let class: NodeClass =
            serde_json::from_value(serde_json::to_value(class_obj.as_ref()).expect("json"))
                .expect("NodeClass");
        let spec = poolnode(pool);
        let req = launch_request("pn-0", &spec, "c", &pool.labels, pool.taints.clone());
        for (path, node) in registrations(&class, &req) {
            let what = format!("pool {} ({path})", pool.name);
            assert!(
                !node.taints.is_empty(),
                "{what}: registers without its taints"
            );
            would_land(&node, &installed)
                .unwrap_or_else(|why| panic!("{what}: the device plugin would not land: {why}"));

            // the same check against a node without the label, with a wrong
            // value, and with a toleration missing says why it would not land
            let mut unlabelled = node.clone();
            unlabelled
                .labels
                .remove(muster_planner::labels::GPU_PRESENT);
            let why = would_land(&unlabelled, &installed).expect_err("no label");
            assert!(
                why.contains("no required node selector term"),
                "{what}: {why}"
            );
            let mut wrong = node.clone();
            wrong
                .labels
                .insert(muster_planner::labels::GPU_PRESENT.into(), "false".into());
            assert!(
                would_land(&wrong, &installed).is_err(),
                "{what}: gpu.present=false lands"
            );
            let bare = Scheduling {
                tolerations: Some(Vec::new()),
                ..installed.clone()
            };
            let why = would_land(&node, &bare).expect_err("no tolerations");
            assert!(why.contains("is not tolerated"), "{what}: {why}");
            checked += 1;
        }
    }
    assert!(checked >= 4, "checked {checked} registrations");

    // the chart's defaults tolerate nvidia.com/gpu only with NoSchedule: a pool
    // tainting it NoExecute needs the values of docs/eks.md
    let no_execute = Registered {
        labels: BTreeMap::from([(muster_planner::labels::GPU_PRESENT.into(), "true".into())]),
        taints: vec![NodeTaint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: "NoExecute".into(),
        }],
    };
    assert!(would_land(&no_execute, &defaults).is_err());
    assert_eq!(would_land(&no_execute, &installed), Ok(()));
}

/// `docs/eks.md` shows the values file in full, as the heredoc the operator
/// writes it with.
#[test]
fn eks_guide_shows_the_values_file() {
    let guide = read("docs/eks.md");
    let values = read("docs/nvidia-device-plugin-values.yaml");
    let heredoc = format!("cat > nvidia-device-plugin-values.yaml <<'EOF'\n{values}EOF\n");
    assert!(
        guide.contains(&heredoc),
        "docs/eks.md does not show docs/nvidia-device-plugin-values.yaml as\n{heredoc}"
    );
    assert!(guide.contains("-f nvidia-device-plugin-values.yaml"));
}
