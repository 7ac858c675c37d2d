//! The `instances.insert` request body for one launch.
//!
//! Everything in the body is derived from the NodeClass and the launch
//! request, so a retried launch sends the same body under the same instance
//! name and `requestId` (see [`request_id`]).

use muster_crds::nodeclass::GcpNodeClass;
use muster_planner::CapacityType;
use muster_provider_api::{LaunchRequest, label_key, tags};
use serde_json::{Value, json};

use crate::names::{fnv1a, instance_name};
use crate::prices::parse_offering_name;

/// A launch request that cannot become an insert body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// The offering's instance type is not `<machine>` or
    /// `<machine>+<count>x<accelerator>`.
    #[error(
        "offering instance type {0:?} is not a machine type or <machine>+<count>x<accelerator>"
    )]
    BadInstanceType(String),
    /// Neither `spec.gcp.image` nor a GKE node pool gives a boot image.
    #[error("spec.gcp.image is required without spec.gcp.cluster")]
    NoImage,
}

/// The `requestId` for a launch: a UUID-shaped string derived from the
/// idempotency key, so Compute drops a repeated insert within its
/// deduplication window.
pub fn request_id(idempotency_key: &str) -> String {
    let a = fnv1a(idempotency_key.as_bytes());
    let b = fnv1a(format!("{idempotency_key}#2").as_bytes());
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A label value GCE accepts: lowercase letters, digits, `-` and `_`, at
/// most 63 characters.
pub fn label_value(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .take(63)
        .collect()
}

/// The instance labels: the NodeClass's, the request's tags, then muster's
/// ownership labels (which win).
pub(crate) fn instance_labels(
    spec: &GcpNodeClass,
    req: &LaunchRequest,
) -> serde_json::Map<String, Value> {
    let mut labels = serde_json::Map::new();
    for (k, v) in &spec.labels {
        labels.insert(k.clone(), json!(label_value(v)));
    }
    for (k, v) in &req.tags {
        labels.insert(label_key(k), json!(label_value(v)));
    }
    labels.insert(label_key(tags::CLUSTER), json!(label_value(&req.cluster)));
    labels.insert(label_key(tags::POOL), json!(label_value(&req.pool)));
    labels.insert(label_key(tags::POOL_NODE), json!(label_value(&req.name)));
    if let Some(gang) = &req.gang {
        labels.insert(label_key(tags::GANG), json!(label_value(gang)));
    }
    labels
}

/// Spot (deleted when preempted) or standard scheduling; GPUs cannot live
/// migrate, so both terminate on host maintenance.
pub(crate) fn scheduling(capacity: CapacityType) -> Value {
    match capacity {
        CapacityType::Spot => json!({
            "provisioningModel": "SPOT",
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": false,
        }),
        // Compute Engine's flex-start provisioning model: the VM is granted
        // when capacity is found and deleted at its `maxRunDuration` (at most
        // seven days).
        CapacityType::FlexStart => json!({
            "provisioningModel": "FLEX_START",
            "maxRunDuration": {"seconds": 7 * 24 * 3600},
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": false,
        }),
        CapacityType::OnDemand | CapacityType::Reserved => json!({
            "provisioningModel": "STANDARD",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": true,
        }),
    }
}

/// The body of `instances.insert` for `req` in the zone of its offering;
/// `bootstrap` is the kubelet bootstrap script put in metadata.
pub fn insert_body(
    spec: &GcpNodeClass,
    req: &LaunchRequest,
    bootstrap: &str,
) -> Result<Value, InsertError> {
    let bad = || InsertError::BadInstanceType(req.offering.instance_type.clone());
    let (machine, attached) = parse_offering_name(&req.offering.instance_type).ok_or_else(bad)?;
    let zone = &req.offering.zone;
    let project = &spec.project;

    let labels = instance_labels(spec, req);
    let scheduling = scheduling(req.offering.capacity_type);

    let mut metadata: Vec<Value> = spec
        .metadata
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    metadata.push(json!({"key": "muster-bootstrap", "value": bootstrap}));

    let disk_type = serde_json::to_value(spec.boot_disk.type_)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "pd-balanced".to_owned());
    let region = &spec.region;
    let network = spec.network.clone().unwrap_or_else(|| "default".to_owned());
    let mut nic = json!({ "network": qualify(project, "global/networks", &network) });
    if let Some(sub) = &spec.subnetwork {
        nic["subnetwork"] = json!(qualify(
            project,
            &format!("regions/{region}/subnetworks"),
            sub
        ));
    }

    let mut body = json!({
        "name": instance_name(&req.idempotency_key),
        "machineType": format!("zones/{zone}/machineTypes/{machine}"),
        "labels": labels,
        "scheduling": scheduling,
        "disks": [{
            "boot": true,
            "autoDelete": true,
            "initializeParams": {
                "sourceImage": spec.image.as_deref().ok_or(InsertError::NoImage)?,
                "diskSizeGb": spec.boot_disk.size_gb.to_string(),
                "diskType": format!("zones/{zone}/diskTypes/{disk_type}"),
                "labels": labels,
            },
        }],
        "networkInterfaces": [nic],
        "metadata": { "items": metadata },
    });
    if let Some((accel, count)) = attached {
        body["guestAccelerators"] = json!([{
            "acceleratorType": format!("zones/{zone}/acceleratorTypes/{accel}"),
            "acceleratorCount": count,
        }]);
    }
    if let Some(sa) = &spec.service_account {
        body["serviceAccounts"] = json!([{ "email": sa.email, "scopes": sa.scopes }]);
    }
    if !spec.network_tags.is_empty() {
        body["tags"] = json!({ "items": spec.network_tags });
    }
    if let Some(affinity) = crate::reservations::affinity(spec, &req.offering) {
        body["reservationAffinity"] = affinity;
    }
    Ok(body)
}

/// A resource given by name or self link, as a self link path.
pub(crate) fn qualify(project: &str, collection: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("projects/{project}/{collection}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use muster_planner::{OfferingKey, Provider};

    use super::*;

    fn spec() -> GcpNodeClass {
        serde_json::from_value(json!({
            "project": "my-project",
            "region": "us-central1",
            "zones": ["us-central1-a"],
            "image": "projects/cos-cloud/global/images/family/cos-stable",
            "subnetwork": "gpu-subnet",
            "serviceAccount": {"email": "nodes@my-project.iam.gserviceaccount.com"},
            "labels": {"team": "ml"},
            "networkTags": ["gpu-nodes"],
        }))
        .expect("GcpNodeClass")
    }

    fn request(instance_type: &str, capacity: CapacityType) -> LaunchRequest {
        LaunchRequest {
            name: "train-Abc-0".into(),
            idempotency_key: "pn-7f3a".into(),
            offering: OfferingKey {
                provider: Provider::Gcp,
                zone: "us-central1-a".into(),
                instance_type: instance_type.into(),
                capacity_type: capacity,
                reservation: None,
            },
            pool: "a100".into(),
            cluster: "prod".into(),
            gang: Some("team-a/train".into()),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            tags: BTreeMap::new(),
            placement_group: None,
            grant: None,
        }
    }

    #[test]
    fn spot_body_has_name_labels_spot_scheduling_and_no_attached_gpus() {
        let body = insert_body(
            &spec(),
            &request("a2-highgpu-8g", CapacityType::Spot),
            "#!/bin/sh",
        )
        .expect("body");
        assert_eq!(body["name"], "muster-pn-7f3a");
        assert_eq!(
            body["machineType"],
            "zones/us-central1-a/machineTypes/a2-highgpu-8g"
        );
        assert_eq!(body["scheduling"]["provisioningModel"], "SPOT");
        assert_eq!(body["scheduling"]["instanceTerminationAction"], "DELETE");
        let labels = &body["labels"];
        assert_eq!(labels["muster-cluster"], "prod");
        assert_eq!(labels["muster-pool"], "a100");
        assert_eq!(labels["muster-poolnode"], "train-abc-0");
        assert_eq!(labels["muster-gang"], "team-a-train");
        assert_eq!(labels["team"], "ml");
        assert!(body.get("guestAccelerators").is_none());
        assert_eq!(
            body["networkInterfaces"][0]["subnetwork"],
            "projects/my-project/regions/us-central1/subnetworks/gpu-subnet"
        );
        assert_eq!(
            body["networkInterfaces"][0]["network"],
            "projects/my-project/global/networks/default"
        );
        assert_eq!(
            body["disks"][0]["initializeParams"]["diskType"],
            "zones/us-central1-a/diskTypes/pd-balanced"
        );
        assert_eq!(
            body["serviceAccounts"][0]["scopes"][0],
            "https://www.googleapis.com/auth/cloud-platform"
        );
        assert_eq!(body["tags"]["items"][0], "gpu-nodes");
        let items = body["metadata"]["items"].as_array().expect("items");
        assert!(
            items
                .iter()
                .any(|i| i["key"] == "muster-bootstrap" && i["value"] == "#!/bin/sh")
        );
    }

    #[test]
    fn on_demand_n1_body_attaches_gpus_and_terminates_on_maintenance() {
        let req = request("n1-standard-8+4xnvidia-tesla-t4", CapacityType::OnDemand);
        let body = insert_body(&spec(), &req, "").expect("body");
        assert_eq!(
            body["machineType"],
            "zones/us-central1-a/machineTypes/n1-standard-8"
        );
        assert_eq!(body["scheduling"]["provisioningModel"], "STANDARD");
        assert_eq!(body["scheduling"]["onHostMaintenance"], "TERMINATE");
        assert_eq!(
            body["guestAccelerators"],
            json!([{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 4}])
        );
    }

    #[test]
    fn same_request_same_body_and_request_id() {
        let req = request("a2-highgpu-8g", CapacityType::Spot);
        assert_eq!(
            insert_body(&spec(), &req, "x"),
            insert_body(&spec(), &req, "x")
        );
        let id = request_id(&req.idempotency_key);
        assert_eq!(id, request_id("pn-7f3a"));
        assert_ne!(id, request_id("pn-7f3b"));
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
    }

    #[test]
    fn a_reserved_launch_names_its_reservation_and_on_demand_ones_stay_out_of_it() {
        let mut spec = spec();
        let mut req = request("a2-highgpu-8g", CapacityType::OnDemand);
        let body = insert_body(&spec, &req, "").expect("body");
        assert!(
            body.get("reservationAffinity").is_none(),
            "no reservations selected"
        );
        spec.reservations = serde_json::from_value(json!([{"name": "a100-resv"}])).expect("list");
        let body = insert_body(&spec, &req, "").expect("body");
        assert_eq!(
            body["reservationAffinity"]["consumeReservationType"],
            "NO_RESERVATION"
        );
        req.offering.capacity_type = CapacityType::Reserved;
        req.offering.reservation = Some("a100-resv".into());
        let body = insert_body(&spec, &req, "").expect("body");
        assert_eq!(
            body["reservationAffinity"],
            json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                   "key": "compute.googleapis.com/reservation-name", "values": ["a100-resv"]})
        );
        assert_eq!(body["scheduling"]["provisioningModel"], "STANDARD");
    }

    #[test]
    fn malformed_instance_type_is_a_typed_error_naming_it() {
        let err = insert_body(&spec(), &request("n1-standard-8+x", CapacityType::Spot), "")
            .expect_err("malformed");
        assert!(err.to_string().contains("n1-standard-8+x"), "{err}");
    }
}
