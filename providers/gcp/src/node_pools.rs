//! The GKE node pool a launch goes through, as data: its name and the
//! `nodePools.create` body. Pure: no calls.
//!
//! With `spec.gcp.cluster`, GKE makes muster's nodes, the way Cluster
//! Autoscaler adds nodes on GKE (kubernetes/autoscaler
//! `cluster-autoscaler/cloudprovider/gce`: a node group is a node pool's
//! managed instance group). A VM outside every instance group of the
//! cluster's node pools is never approved as a node: GKE's CSR approver
//! looks the VM up among the managed instances of those groups
//! (kubernetes/cloud-provider-gcp `cmd/gcp-controller-manager/node_csr_approver.go`,
//! `clusterHasInstance`), and its node annotator re-applies the labels of
//! the pool's `kube-labels` (`node_annotator.go`). So muster keeps one node
//! pool per shape — machine type, GPUs, capacity type, zone, and the
//! GPUPool's labels and taints — created with autoscaling off and no
//! nodes, and adds and removes named instances through its group.
//!
//! Field names and rules: NodePool and NodeConfig of the GKE API
//! (<https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools>,
//! <https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig>);
//! GPU driver installation: <https://cloud.google.com/kubernetes-engine/docs/how-to/gpus>.

use std::collections::BTreeMap;

use muster_crds::nodeclass::{GcpNodeClass, GpuDriverVersion};
use muster_planner::CapacityType;
use muster_provider_api::{LaunchRequest, label_key, tags};
use serde_json::{Value, json};

use crate::insert::label_value;
use crate::names::fnv1a;

/// Prefix of the node pools muster creates (and alone deletes).
pub const POOL_PREFIX: &str = "muster-";

/// GCE label on a node pool's machines (the pool's `resourceLabels`)
/// marking the pool as muster's own.
pub const MANAGED_LABEL: &str = "muster-managed";

/// Node labels that differ per node: set by the controller once the Node
/// registered, never on the pool (a pool's labels are every node's).
pub const PER_NODE_LABELS: [&str; 1] = [tags::POOL_NODE];

/// GKE's longest node pool name (an RFC 1035 label of at most 40).
const MAX_POOL_NAME: usize = 40;

/// The shape of a node pool: everything its nodes share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape<'a> {
    /// Machine type, e.g. `g2-standard-8`.
    pub machine_type: &'a str,
    /// Attached or built-in GPUs: type and count.
    pub accelerator: Option<(&'a str, u32)>,
    /// Spot or on-demand.
    pub capacity: CapacityType,
    /// The zone (one zone per pool: a pool's group per zone, and a stockout
    /// is a zone's).
    pub zone: &'a str,
    /// The reservation its machines consume (a reserved offering's, as its
    /// affinity names it); a pool consumes one reservation or none.
    pub reservation: Option<&'a str>,
}

/// The node labels every node of the pool registers with: the request's,
/// without the per-node ones.
pub fn pool_labels(req: &LaunchRequest) -> BTreeMap<String, String> {
    req.labels
        .iter()
        .filter(|(k, _)| !PER_NODE_LABELS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The node pool's name: `muster-<machine type>-<8 hex digits>`, the hash
/// over the shape, the GPUPool and its labels and taints, so a change to
/// any of them makes a new pool and the old one empties and goes. A pool
/// consuming a reservation is named after it instead:
/// `muster-r-<reservation name>-<8 hex digits>` (the name cut to fit, the
/// hash over the whole id and the machine shape). At most 40 characters
/// (GKE's limit), lowercase letters, digits and `-`.
pub fn pool_name(shape: &Shape<'_>, req: &LaunchRequest) -> String {
    let mut key = format!(
        "{}|{:?}|{}|{}|{}",
        shape.machine_type,
        shape.accelerator,
        shape.capacity.as_str(),
        shape.zone,
        req.pool
    );
    for (k, v) in pool_labels(req) {
        key.push_str(&format!("|l:{k}={v}"));
    }
    for t in &req.taints {
        key.push_str(&format!("|t:{}={}:{:?}", t.key, t.value, t.effect));
    }
    if let Some(r) = shape.reservation {
        key.push_str(&format!("|r:{r}"));
    }
    let hash = format!("{:08x}", fnv1a(key.as_bytes()) as u32);
    let (tag, word) = match shape.reservation {
        // `projects/<owner>/reservations/<name>`: the name tells it apart
        Some(r) => ("r-", r.rsplit('/').next().unwrap_or(r)),
        None => ("", shape.machine_type),
    };
    let room = MAX_POOL_NAME - POOL_PREFIX.len() - tag.len() - 1 - hash.len();
    let word: String = label_value(word)
        .replace('_', "-")
        .chars()
        .take(room)
        .collect();
    format!("{POOL_PREFIX}{tag}{}-{hash}", word.trim_end_matches('-'))
}

/// GKE's taint effect names.
fn effect(e: &muster_planner::TaintEffect) -> &'static str {
    match e {
        muster_planner::TaintEffect::NoSchedule => "NO_SCHEDULE",
        muster_planner::TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        muster_planner::TaintEffect::NoExecute => "NO_EXECUTE",
    }
}

/// The GCE labels of the pool's machines (`resourceLabels`): the
/// NodeClass's, then muster's ownership labels (which win). Per-node ones
/// (PoolNode, gang) travel as instance metadata instead
/// ([`instance_metadata`]): a pool's labels are every machine's.
pub fn resource_labels(class: &GcpNodeClass, req: &LaunchRequest) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = class
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), label_value(v)))
        .collect();
    labels.insert(label_key(tags::CLUSTER), label_value(&req.cluster));
    labels.insert(label_key(tags::POOL), label_value(&req.pool));
    labels.insert(MANAGED_LABEL.to_string(), "true".to_string());
    labels
}

/// The per-instance metadata of a named instance (`preservedState.metadata`
/// of its per-instance config): what names it as the PoolNode's, read back
/// by [`crate::instance::parse_instance`].
pub fn instance_metadata(req: &LaunchRequest) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(label_key(tags::POOL_NODE), req.name.clone());
    if let Some(g) = &req.gang {
        m.insert(label_key(tags::GANG), g.clone());
    }
    m
}

/// The `nodePool` of a `nodePools.create` request: no nodes, autoscaling
/// off (muster decides the count), one zone, GKE's GPU driver when the
/// NodeClass asks for it, the GKE metadata server for Workload Identity,
/// the GPUPool's labels and taints, and compact placement when `compact`.
pub fn pool_body(
    name: &str,
    shape: &Shape<'_>,
    class: &GcpNodeClass,
    req: &LaunchRequest,
    compact: bool,
) -> Value {
    let mut config = json!({
        "machineType": shape.machine_type,
        "imageType": "COS_CONTAINERD",
        "diskSizeGb": class.boot_disk.size_gb,
        "diskType": serde_json::to_value(class.boot_disk.type_).unwrap_or(Value::Null),
        "labels": pool_labels(req),
        "resourceLabels": resource_labels(class, req),
        "taints": req.taints.iter().map(|t| json!({
            "key": t.key, "value": t.value, "effect": effect(&t.effect),
        })).collect::<Vec<_>>(),
        "workloadMetadataConfig": {"mode": "GKE_METADATA"},
    });
    if shape.capacity == CapacityType::Spot {
        config["spot"] = json!(true);
    }
    if let Some((accel, count)) = shape.accelerator {
        let version = match class.gpu_driver_version {
            GpuDriverVersion::Default => "DEFAULT",
            GpuDriverVersion::Latest => "LATEST",
            GpuDriverVersion::Disabled => "INSTALLATION_DISABLED",
        };
        config["accelerators"] = json!([{
            "acceleratorType": accel,
            "acceleratorCount": count.to_string(),
            "gpuDriverInstallationConfig": {"gpuDriverVersion": version},
        }]);
    }
    if let Some(sa) = &class.service_account {
        config["serviceAccount"] = json!(sa.email);
        config["oauthScopes"] = json!(sa.scopes);
    }
    let mut pool = json!({
        "name": name,
        "initialNodeCount": 0,
        "locations": [shape.zone],
        "autoscaling": {"enabled": false},
        "management": {"autoRepair": true, "autoUpgrade": true},
        "config": config,
    });
    if compact {
        pool["placementPolicy"] = json!({"type": "COMPACT"});
    }
    if let Some(affinity) = pool_affinity(shape, class) {
        pool["config"]["reservationAffinity"] = affinity;
    }
    if shape.capacity == CapacityType::FlexStart {
        flex_start_settings(&mut pool, crate::flex_start::run_secs(class));
    }
    pool
}

/// The node pool's `config.reservationAffinity` (GKE `ReservationAffinity`:
/// `consumeReservationType`, `key`, `values`): the reservation of a
/// reserved shape, named; `NO_RESERVATION` for an on-demand pool while the
/// NodeClass selects reservations, for the reason
/// [`crate::reservations::affinity`] gives; none otherwise.
fn pool_affinity(shape: &Shape<'_>, class: &GcpNodeClass) -> Option<Value> {
    let offering = muster_planner::OfferingKey {
        provider: muster_planner::Provider::Gcp,
        zone: shape.zone.to_string(),
        instance_type: shape.machine_type.to_string(),
        capacity_type: shape.capacity,
        reservation: shape.reservation.map(String::from),
    };
    crate::reservations::affinity(class, &offering)
}

/// A flex-start node pool's settings (GKE's flex-start node pools, "About
/// flex-start provisioning mode",
/// <https://cloud.google.com/kubernetes-engine/docs/concepts/dws>, and the
/// `gcloud container node-pools create --flex-start` command of its how-to
/// pages): `flexStart`, the machines' `maxRunDuration`, no reservation
/// consumed (`--reservation-affinity=none`) and auto-repair off
/// (`--no-enable-autorepair`: a repaired VM would be a new, ungranted
/// one). Autoscaling stays off, as on every pool of muster's: muster asks
/// for the machines itself, in resize requests of the pool's group.
fn flex_start_settings(pool: &mut Value, run_secs: u64) {
    pool["config"]["flexStart"] = json!(true);
    pool["config"]["maxRunDuration"] = json!(format!("{run_secs}s"));
    pool["config"]["reservationAffinity"] = json!({"consumeReservationType": "NO_RESERVATION"});
    pool["management"]["autoRepair"] = json!(false);
}

#[cfg(test)]
mod tests {
    use muster_planner::{OfferingKey, Provider, Taint, TaintEffect};

    use super::*;

    fn class() -> GcpNodeClass {
        serde_json::from_value(json!({
            "project": "my-project", "region": "us-central1",
            "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
            "labels": {"team": "ml"}
        }))
        .expect("class")
    }

    fn req(name: &str, pool: &str) -> LaunchRequest {
        LaunchRequest {
            name: name.into(),
            idempotency_key: format!("key-{name}"),
            offering: OfferingKey {
                provider: Provider::Gcp,
                zone: "us-central1-a".into(),
                instance_type: "g2-standard-8".into(),
                capacity_type: CapacityType::Spot,
                reservation: None,
            },
            pool: pool.into(),
            cluster: "prod".into(),
            gang: Some("ns.train".into()),
            labels: [
                ("muster.dev/pool".to_string(), pool.to_string()),
                ("muster.dev/poolnode".to_string(), name.to_string()),
                ("nvidia.com/gpu.present".to_string(), "true".to_string()),
            ]
            .into(),
            taints: vec![Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            }],
            tags: Default::default(),
            placement_group: None,
            grant: None,
        }
    }

    fn l4() -> Shape<'static> {
        Shape {
            machine_type: "g2-standard-8",
            accelerator: Some(("nvidia-l4", 1)),
            capacity: CapacityType::Spot,
            zone: "us-central1-a",
            reservation: None,
        }
    }

    #[test]
    fn the_nodes_of_one_shape_share_a_pool_and_any_difference_makes_another() {
        let a = pool_name(&l4(), &req("pn-0", "l4"));
        assert_eq!(
            a,
            pool_name(&l4(), &req("pn-1", "l4")),
            "per-node labels do not count"
        );
        assert!(
            a.starts_with("muster-g2-standard-8-") && a.len() <= 40,
            "{a}"
        );
        let on_demand = Shape {
            capacity: CapacityType::OnDemand,
            ..l4()
        };
        let zone_b = Shape {
            zone: "us-central1-b",
            ..l4()
        };
        let mut other_taint = req("pn-0", "l4");
        other_taint.taints[0].value = "present".into();
        let names = [
            pool_name(&on_demand, &req("pn-0", "l4")),
            pool_name(&zone_b, &req("pn-0", "l4")),
            pool_name(&l4(), &req("pn-0", "other")),
            pool_name(&l4(), &other_taint),
        ];
        for n in &names {
            assert_ne!(n, &a);
        }
        let long = Shape {
            machine_type: "a3-ultragpu-8g-with-a-very-long-name-indeed",
            ..l4()
        };
        let n = pool_name(&long, &req("pn-0", "l4"));
        assert!(n.len() <= 40 && !n.contains("--"), "{n}");
    }

    #[test]
    fn a_reserved_pool_is_named_after_its_reservation_and_consumes_only_it() {
        let reserved = |r| Shape {
            capacity: CapacityType::Reserved,
            reservation: Some(r),
            ..l4()
        };
        let long = "projects/host-project/reservations/l4-reservation-of-the-research-team-2026";
        let a = pool_name(&reserved("l4-resv"), &req("pn-0", "l4"));
        let b = pool_name(&reserved(long), &req("pn-0", "l4"));
        assert!(a.starts_with("muster-r-l4-resv-") && a.len() <= 40, "{a}");
        assert!(
            b.starts_with("muster-r-l4-reservation-") && b.len() <= 40,
            "{b}"
        );
        assert!(!b.contains("--"), "{b}");
        let on_demand = Shape {
            capacity: CapacityType::OnDemand,
            ..l4()
        };
        let names = [a.clone(), b, pool_name(&on_demand, &req("pn-0", "l4"))];
        assert_eq!(
            names
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        let mut with = class();
        with.reservations = serde_json::from_value(json!([{"name": "l4-resv"}])).expect("list");
        let body = pool_body(&a, &reserved("l4-resv"), &with, &req("pn-0", "l4"), false);
        assert_eq!(
            body["config"]["reservationAffinity"],
            json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                   "key": "compute.googleapis.com/reservation-name", "values": ["l4-resv"]})
        );
        assert!(body["config"].get("spot").is_none());
        let body = pool_body("muster-x", &on_demand, &with, &req("pn-0", "l4"), false);
        assert_eq!(
            body["config"]["reservationAffinity"]["consumeReservationType"],
            "NO_RESERVATION"
        );
        let body = pool_body("muster-x", &on_demand, &class(), &req("pn-0", "l4"), false);
        assert!(body["config"].get("reservationAffinity").is_none());
    }

    #[test]
    fn the_body_has_no_nodes_no_autoscaling_and_the_pools_labels_and_taints() {
        let body = pool_body("muster-x", &l4(), &class(), &req("pn-0", "l4"), false);
        assert_eq!(body["initialNodeCount"], 0);
        assert_eq!(body["autoscaling"]["enabled"], false);
        assert_eq!(body["locations"], json!(["us-central1-a"]));
        let c = &body["config"];
        assert_eq!(c["spot"], true);
        assert_eq!(c["labels"]["muster.dev/pool"], "l4");
        assert!(c["labels"].get("muster.dev/poolnode").is_none(), "{c}");
        assert_eq!(
            c["taints"],
            json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}])
        );
        assert_eq!(c["accelerators"][0]["acceleratorType"], "nvidia-l4");
        assert_eq!(c["accelerators"][0]["acceleratorCount"], "1");
        assert_eq!(
            c["accelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"],
            "DEFAULT"
        );
        assert_eq!(c["workloadMetadataConfig"]["mode"], "GKE_METADATA");
        assert_eq!(c["resourceLabels"]["muster-cluster"], "prod");
        assert_eq!(c["resourceLabels"]["team"], "ml");
        assert_eq!(c["resourceLabels"][MANAGED_LABEL], "true");
        assert!(body.get("placementPolicy").is_none());
        let compact = pool_body("muster-x", &l4(), &class(), &req("pn-0", "l4"), true);
        assert_eq!(compact["placementPolicy"]["type"], "COMPACT");
        let flex = Shape {
            capacity: CapacityType::FlexStart,
            ..l4()
        };
        let fs = pool_body("muster-x", &flex, &class(), &req("pn-0", "l4"), false);
        assert_eq!(fs["config"]["flexStart"], true);
        assert_eq!(fs["config"]["maxRunDuration"], "604800s");
        assert_eq!(
            fs["config"]["reservationAffinity"]["consumeReservationType"],
            "NO_RESERVATION"
        );
        assert_eq!(fs["management"]["autoRepair"], false);
        assert!(fs["config"].get("spot").is_none());
        assert_ne!(
            pool_name(&flex, &req("pn-0", "l4")),
            pool_name(&l4(), &req("pn-0", "l4"))
        );
        let meta = instance_metadata(&req("pn-0", "l4"));
        assert_eq!(meta["muster-poolnode"], "pn-0");
        assert_eq!(meta["muster-gang"], "ns.train");
    }
}
