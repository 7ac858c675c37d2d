//! The `instances.insert` body of a machine that joins a GKE cluster: a copy
//! of the properties of the instance template GKE runs a node pool's
//! machines from — boot disk and image, bootstrap metadata (`kube-env`,
//! `configure-sh`, `user-data`, `cluster-name`, …), service account,
//! network interface with its pod alias range, network tags, shielded-VM
//! settings — as production GCP providers for Karpenter launch GKE nodes
//! (cloudpilot-ai/karpenter-provider-gcp `pkg/providers/instance/`,
//! `pkg/providers/nodepooltemplate/`). On top: the offering's machine type
//! and accelerators, spot or standard scheduling, muster's instance labels,
//! and muster's node labels and taints in the kubelet flags of `kube-env`
//! ([`kube_env`](crate::kube_env)). For GPU machines the node also gets the
//! labels GKE's NVIDIA device plugin and driver installer select on:
//! `cloud.google.com/gke-accelerator` and (unless the NodeClass disables it)
//! `cloud.google.com/gke-gpu-driver-version`; a spot machine gets
//! `cloud.google.com/gke-spot=true`. These labels are dropped from the
//! template's first: they describe the source pool's machines. The NodeClass's `image`,
//! `network`, `subnetwork`, `serviceAccount`, `networkTags` and `metadata`
//! override or add to the template's.

use std::collections::BTreeMap;

use muster_crds::nodeclass::GcpNodeClass;
use muster_planner::CapacityType;
use muster_provider_api::LaunchRequest;
use serde_json::{Value, json};

use crate::insert::{InsertError, instance_labels, qualify, scheduling};
use crate::kube_env::{self, KubeEnvError, Registration};
use crate::names::instance_name;
use crate::prices::parse_offering_name;

/// Node label GKE's device plugin and driver installer select GPU nodes by.
pub const ACCELERATOR_LABEL: &str = "cloud.google.com/gke-accelerator";
/// Node label GKE's driver installer reads the driver version from.
pub const DRIVER_LABEL: &str = "cloud.google.com/gke-gpu-driver-version";
/// Node label of GKE spot nodes.
pub const SPOT_LABEL: &str = "cloud.google.com/gke-spot";

/// Node labels of the template that describe the source pool's machines
/// (accelerator, driver, spot or preemptible) rather than the one made:
/// dropped before muster's are set.
pub const MACHINE_LABELS: [&str; 4] = [
    ACCELERATOR_LABEL,
    DRIVER_LABEL,
    SPOT_LABEL,
    "cloud.google.com/gke-preemptible",
];

/// Why a template could not become an insert body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The offering does not read.
    #[error(transparent)]
    Insert(#[from] InsertError),
    /// `kube-env` could not be patched.
    #[error(transparent)]
    KubeEnv(#[from] KubeEnvError),
    /// The template carries no `kube-env` metadata: not a GKE node template.
    #[error("the node pool's instance template has no kube-env metadata")]
    NoKubeEnv,
    /// The template has no boot disk.
    #[error("the node pool's instance template has no boot disk")]
    NoBootDisk,
}

/// A template's zonal reference (`pd-balanced`, `zones/Z/diskTypes/…`) as
/// the instance needs it.
fn zonal(zone: &str, collection: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("zones/{zone}/{collection}/{name}")
    }
}

/// The node labels of a machine: the pool's, GKE's spot label for a spot
/// machine, and for a GPU machine of type `accelerator` GKE's accelerator
/// and driver labels.
pub fn node_labels(
    class: &GcpNodeClass,
    req: &LaunchRequest,
    accelerator: Option<&str>,
) -> BTreeMap<String, String> {
    let mut labels = req.labels.clone();
    if req.offering.capacity_type == CapacityType::Spot {
        labels.insert(SPOT_LABEL.into(), "true".into());
    }
    if let Some(a) = accelerator {
        labels.insert(ACCELERATOR_LABEL.into(), a.to_string());
        if let Some(v) = class.gpu_driver_version.label_value() {
            labels.insert(DRIVER_LABEL.into(), v.to_string());
        }
    }
    labels
}

/// The insert body for `req` from template `properties`; `accelerator` is
/// the GPU type of the machine (attached or built in), if any.
pub fn insert_body(
    properties: &Value,
    class: &GcpNodeClass,
    req: &LaunchRequest,
    accelerator: Option<&str>,
) -> Result<Value, TemplateError> {
    let bad = || InsertError::BadInstanceType(req.offering.instance_type.clone());
    let (machine, attached) = parse_offering_name(&req.offering.instance_type).ok_or_else(bad)?;
    let zone = &req.offering.zone;
    let project = &class.project;

    let mut labels = properties["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.extend(instance_labels(class, req));

    // metadata: the template's, kube-env patched, then the NodeClass's
    let node_labels = node_labels(class, req, accelerator);
    let mut items: Vec<Value> = Vec::new();
    let mut has_kube_env = false;
    for item in properties["metadata"]["items"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = item["key"].as_str().unwrap_or_default();
        if class.metadata.contains_key(key) {
            continue;
        }
        if key == "kube-env" {
            let value = item["value"].as_str().unwrap_or_default();
            let reg = Registration {
                labels: &node_labels,
                drop: &MACHINE_LABELS,
                taints: &req.taints,
            };
            let patched = kube_env::patch(value, reg, zone)?;
            items.push(json!({"key": key, "value": patched}));
            has_kube_env = true;
        } else {
            items.push(item.clone());
        }
    }
    if !has_kube_env {
        return Err(TemplateError::NoKubeEnv);
    }
    for (k, v) in &class.metadata {
        items.push(json!({"key": k, "value": v}));
    }

    // disks: the template's, zonal types, the NodeClass's image on the boot disk
    let mut disks = Vec::new();
    for d in properties["disks"].as_array().into_iter().flatten() {
        let mut d = d.clone();
        let boot = d["boot"].as_bool() == Some(true);
        if let Some(ip) = d.get_mut("initializeParams").and_then(Value::as_object_mut) {
            if let Some(t) = ip.get("diskType").and_then(Value::as_str) {
                let t = zonal(zone, "diskTypes", t);
                ip.insert("diskType".into(), json!(t));
            }
            ip.insert("labels".into(), Value::Object(labels.clone()));
            if boot && let Some(image) = &class.image {
                ip.insert("sourceImage".into(), json!(image));
            }
        }
        if let Some(o) = d.as_object_mut() {
            o.insert("autoDelete".into(), json!(true));
        }
        disks.push(d);
    }
    if !disks.iter().any(|d| d["boot"].as_bool() == Some(true)) {
        return Err(TemplateError::NoBootDisk);
    }

    let mut nics = properties["networkInterfaces"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(nic) = nics.first_mut().and_then(Value::as_object_mut) {
        if let Some(n) = &class.network {
            nic.insert(
                "network".into(),
                json!(qualify(project, "global/networks", n)),
            );
        }
        if let Some(s) = &class.subnetwork {
            let region = &class.region;
            nic.insert(
                "subnetwork".into(),
                json!(qualify(
                    project,
                    &format!("regions/{region}/subnetworks"),
                    s
                )),
            );
        }
    }

    let mut tags: Vec<Value> = properties["tags"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for t in &class.network_tags {
        if !tags.iter().any(|x| x.as_str() == Some(t)) {
            tags.push(json!(t));
        }
    }

    let mut body = json!({
        "name": instance_name(&req.idempotency_key),
        "machineType": format!("zones/{zone}/machineTypes/{machine}"),
        "labels": labels,
        "scheduling": scheduling(req.offering.capacity_type),
        "disks": disks,
        "networkInterfaces": nics,
        "metadata": {"items": items},
        "tags": {"items": tags},
    });
    for key in ["serviceAccounts", "shieldedInstanceConfig", "canIpForward"] {
        if let Some(v) = properties.get(key) {
            body[key] = v.clone();
        }
    }
    if let Some(sa) = &class.service_account {
        body["serviceAccounts"] = json!([{ "email": sa.email, "scopes": sa.scopes }]);
    }
    if let Some((accel, count)) = attached {
        body["guestAccelerators"] = json!([{
            "acceleratorType": format!("zones/{zone}/acceleratorTypes/{accel}"),
            "acceleratorCount": count,
        }]);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use muster_planner::{CapacityType, OfferingKey, Provider, Taint, TaintEffect};

    use super::*;

    fn template() -> Value {
        let fixture: Value =
            serde_json::from_str(include_str!("../tests/gke_fixture.json")).expect("fixture");
        fixture["instanceTemplates"][0]["properties"].clone()
    }

    fn class(extra: Value) -> GcpNodeClass {
        let mut v = json!({
            "project": "my-project", "region": "us-central1",
            "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        serde_json::from_value(v).expect("class")
    }

    fn request(ty: &str, capacity: CapacityType) -> LaunchRequest {
        LaunchRequest {
            name: "l4-x-0".into(),
            idempotency_key: "pn-1".into(),
            offering: OfferingKey {
                provider: Provider::Gcp,
                zone: "us-central1-a".into(),
                instance_type: ty.into(),
                capacity_type: capacity,
            },
            pool: "l4".into(),
            cluster: "prod".into(),
            gang: None,
            labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
            taints: vec![Taint {
                key: "muster.dev/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            }],
            tags: BTreeMap::new(),
            placement_group: None,
        }
    }

    fn kube_env_of(body: &Value) -> String {
        body["metadata"]["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|i| i["key"] == "kube-env")
            .and_then(|i| i["value"].as_str())
            .expect("kube-env")
            .to_string()
    }

    #[test]
    fn a_gke_template_becomes_a_spot_gpu_machine_with_musters_labels_and_taints() {
        let body = insert_body(
            &template(),
            &class(json!({})),
            &request("g2-standard-4", CapacityType::Spot),
            Some("nvidia-l4"),
        )
        .expect("body");
        assert_eq!(body["name"], "muster-pn-1");
        assert_eq!(
            body["machineType"],
            "zones/us-central1-a/machineTypes/g2-standard-4"
        );
        assert_eq!(body["scheduling"]["provisioningModel"], "SPOT");
        // GKE's instance labels are kept, muster's added
        assert_eq!(body["labels"]["goog-k8s-cluster-name"], "prod");
        assert_eq!(body["labels"]["muster-poolnode"], "l4-x-0");
        // boot disk: the node pool's image, a zonal disk type
        let disk = &body["disks"][0];
        assert!(
            disk["initializeParams"]["sourceImage"]
                .as_str()
                .is_some_and(|i| i.contains("gke-node-images"))
        );
        assert_eq!(
            disk["initializeParams"]["diskType"],
            "zones/us-central1-a/diskTypes/pd-balanced"
        );
        // the pod alias range, service account and tags of the node pool
        assert_eq!(
            body["networkInterfaces"][0]["aliasIpRanges"][0]["subnetworkRangeName"],
            "gke-prod-pods-5f1e2d3c"
        );
        assert!(
            body["serviceAccounts"][0]["email"]
                .as_str()
                .is_some_and(|e| e.contains("gke-nodes"))
        );
        assert_eq!(body["tags"]["items"][0], "gke-prod-5f1e2d3c-node");
        // every bootstrap item is there, kube-env patched
        let keys: Vec<&str> = body["metadata"]["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["key"].as_str())
            .collect();
        for k in [
            "kube-env",
            "configure-sh",
            "user-data",
            "cluster-name",
            "cluster-location",
        ] {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        let env = kube_env_of(&body);
        let args = kube_env::get(&env, "KUBELET_ARGS").expect("args");
        assert!(args.contains("muster.dev/pool=l4"), "{args}");
        assert!(
            args.contains("cloud.google.com/gke-accelerator=nvidia-l4"),
            "{args}"
        );
        assert!(
            args.contains("cloud.google.com/gke-gpu-driver-version=default"),
            "{args}"
        );
        assert!(
            args.contains("--register-with-taints=muster.dev/gpu=true:NoSchedule"),
            "{args}"
        );
        assert_eq!(kube_env::get(&env, "ZONE"), Some("us-central1-a"));
        // G2 has its GPUs built in: nothing attached
        assert!(body.get("guestAccelerators").is_none());
    }

    #[test]
    fn n1_attaches_gpus_the_driver_can_be_left_to_an_operator_and_the_class_overrides() {
        let class = class(json!({
            "gpuDriverVersion": "disabled",
            "image": "projects/my-project/global/images/my-gke-image",
            "networkTags": ["gpu"],
            "metadata": {"startup-script": "echo hi"},
        }));
        let body = insert_body(
            &template(),
            &class,
            &request("n1-standard-8+2xnvidia-tesla-t4", CapacityType::OnDemand),
            Some("nvidia-tesla-t4"),
        )
        .expect("body");
        assert_eq!(
            body["guestAccelerators"],
            json!([{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 2}])
        );
        assert_eq!(body["scheduling"]["onHostMaintenance"], "TERMINATE");
        assert_eq!(
            body["disks"][0]["initializeParams"]["sourceImage"],
            "projects/my-project/global/images/my-gke-image"
        );
        assert_eq!(body["tags"]["items"][1], "gpu");
        let args = kube_env::get(&kube_env_of(&body), "KUBELET_ARGS")
            .expect("args")
            .to_string();
        assert!(
            args.contains("cloud.google.com/gke-accelerator=nvidia-tesla-t4"),
            "{args}"
        );
        assert!(!args.contains(DRIVER_LABEL), "{args}");
        assert!(!args.contains(SPOT_LABEL), "an on-demand machine: {args}");
        assert!(
            body["metadata"]["items"]
                .as_array()
                .expect("items")
                .iter()
                .any(|i| i["key"] == "startup-script" && i["value"] == "echo hi")
        );
    }

    #[test]
    fn a_template_without_kube_env_is_not_a_gke_node_template() {
        let mut t = template();
        t["metadata"]["items"] = json!([{"key": "startup-script", "value": "x"}]);
        let err = insert_body(
            &t,
            &class(json!({})),
            &request("g2-standard-4", CapacityType::Spot),
            None,
        );
        assert_eq!(err, Err(TemplateError::NoKubeEnv));
    }
}
