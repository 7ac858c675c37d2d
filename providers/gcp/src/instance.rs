//! Compute instances read back as provider instances, and preemptions.
//!
//! `instances.get` / `instances.list` answer with the instance's `name`,
//! `zone` and `machineType` self links, `status`, `labels`, `scheduling`,
//! `guestAccelerators`, `creationTimestamp` and, once stopped,
//! `lastStopTimestamp`. A spot instance that is `STOPPING`, `STOPPED` or
//! `TERMINATED` without muster having deleted it was preempted. An instance
//! whose `reservationAffinity` names a reservation (`SPECIFIC_RESERVATION`)
//! was launched into it: its offering is that reservation's.
//!
//! Where it sits in Google's network: `resourceStatus.physicalHostTopology`
//! (`cluster`, `block`, `subblock`, `host`; Compute API reference,
//! `ResourceStatusPhysicalHostTopology`), given for running instances of
//! the machine families that have it. `Instance::network` takes block,
//! sub-block and host, broadest first: the layers GKE labels its nodes with
//! (`cloud.google.com/gce-topology-block`, `-subblock`, `-host`; "Schedule
//! GKE workloads with Topology Aware Scheduling",
//! <https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas>).
//! The cluster is left out: GKE has no label for it.

use std::collections::BTreeMap;

use muster_planner::{CapacityType, OfferingKey, Provider, Time};
use muster_provider_api::{
    Instance, InstanceState, Interruption, InterruptionKind, label_key, tags,
};
use serde_json::Value;

use crate::names::provider_id;
use crate::prices::offering_name;

/// An instance answer muster cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance {instance:?}: field {field} is missing or malformed")]
pub struct ParseError {
    /// The instance name, or `?` when even that is missing.
    pub instance: String,
    /// The field.
    pub field: &'static str,
}

/// The last path segment of a self link (`.../zones/us-central1-a` →
/// `us-central1-a`).
fn last_segment(link: &str) -> &str {
    link.rsplit('/').next().unwrap_or(link)
}

pub use muster_provider_api::parse_rfc3339;

/// The value of metadata item `key` of an instance.
pub fn metadata(v: &Value, key: &str) -> Option<String> {
    v["metadata"]["items"]
        .as_array()?
        .iter()
        .find(|i| i["key"].as_str() == Some(key))?["value"]
        .as_str()
        .map(String::from)
}

/// Reads one Compute instance of `project`.
pub fn parse_instance(project: &str, v: &Value) -> Result<Instance, ParseError> {
    let name = v["name"].as_str().unwrap_or("?").to_owned();
    let err = |field| ParseError {
        instance: name.clone(),
        field,
    };
    let zone = v["zone"]
        .as_str()
        .map(last_segment)
        .ok_or_else(|| err("zone"))?;
    let machine = v["machineType"]
        .as_str()
        .map(last_segment)
        .ok_or_else(|| err("machineType"))?;
    let status = v["status"].as_str().ok_or_else(|| err("status"))?;
    let launched = v["creationTimestamp"]
        .as_str()
        .and_then(parse_rfc3339)
        .ok_or_else(|| err("creationTimestamp"))?;
    let reservation = crate::reservations::affinity_of_instance(v);
    let capacity = match v["scheduling"]["provisioningModel"].as_str() {
        Some("SPOT") => CapacityType::Spot,
        _ if v["scheduling"]["preemptible"] == Value::Bool(true) => CapacityType::Spot,
        _ if reservation.is_some() => CapacityType::Reserved,
        _ => CapacityType::OnDemand,
    };
    let attached = v["guestAccelerators"].get(0).and_then(|a| {
        let accel = a["acceleratorType"].as_str().map(last_segment)?;
        let count = u32::try_from(a["acceleratorCount"].as_u64()?).ok()?;
        Some((accel, count))
    });
    let mut labels: BTreeMap<String, String> = v["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    // a GKE node's per-instance tags travel as metadata (its GCE labels are
    // its node pool's, the same on every node)
    for tag in [tags::POOL_NODE, tags::GANG] {
        let key = label_key(tag);
        if !labels.contains_key(&key)
            && let Some(value) = metadata(v, &key)
        {
            labels.insert(key, value);
        }
    }
    let state = match status {
        "PROVISIONING" | "STAGING" | "REPAIRING" => InstanceState::Pending,
        "RUNNING" => InstanceState::Running,
        "STOPPING" | "SUSPENDING" => InstanceState::ShuttingDown,
        _ => InstanceState::Terminated,
    };
    Ok(Instance {
        provider_id: provider_id(project, zone, &name),
        offering: OfferingKey {
            provider: Provider::Gcp,
            zone: zone.to_owned(),
            instance_type: offering_name(machine, attached),
            capacity_type: capacity,
            reservation: reservation.filter(|_| capacity == CapacityType::Reserved),
        },
        state,
        launched_at: Time(launched),
        pool_node: labels.get(&label_key(tags::POOL_NODE)).cloned(),
        tags: labels,
        network: network(v),
    })
}

/// The instance's block, sub-block and host, broadest first, up to the
/// first one Compute does not give; empty without a physical host topology.
pub fn network(v: &Value) -> Vec<String> {
    let t = &v["resourceStatus"]["physicalHostTopology"];
    ["block", "subblock", "host"]
        .iter()
        .map_while(|k| t[*k].as_str().filter(|s| !s.is_empty()).map(String::from))
        .collect()
}

/// The preemption of a spot instance, if it was preempted: status
/// `STOPPING`, `STOPPED` or `TERMINATED` with spot scheduling, dated by
/// `lastStopTimestamp` (or `now` when Compute has not written it yet).
pub fn preemption(project: &str, v: &Value, now: Time) -> Option<Interruption> {
    let spot = v["scheduling"]["provisioningModel"] == "SPOT"
        || v["scheduling"]["preemptible"] == Value::Bool(true);
    let stopped = matches!(
        v["status"].as_str(),
        Some("STOPPING" | "STOPPED" | "TERMINATED")
    );
    if !spot || !stopped {
        return None;
    }
    let name = v["name"].as_str()?;
    let zone = v["zone"].as_str().map(last_segment)?;
    let at = v["lastStopTimestamp"]
        .as_str()
        .and_then(parse_rfc3339)
        .map_or(now, Time);
    Some(Interruption {
        provider_id: provider_id(project, zone, name),
        kind: InterruptionKind::Preempted,
        at,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(status: &str, model: &str) -> Value {
        json!({
            "kind": "compute#instance",
            "id": "4567",
            "name": "muster-pn-7f3a",
            "zone": "https://www.googleapis.com/compute/v1/projects/p-1/zones/us-central1-a",
            "machineType": "https://www.googleapis.com/compute/v1/projects/p-1/zones/us-central1-a/machineTypes/n1-standard-8",
            "status": status,
            "creationTimestamp": "2026-11-23T07:00:00.000-08:00",
            "lastStopTimestamp": "2026-11-23T07:30:05.000-08:00",
            "scheduling": {"provisioningModel": model},
            "guestAccelerators": [{"acceleratorType": "projects/p-1/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 2}],
            "labels": {"muster-cluster": "prod", "muster-poolnode": "train-0"},
        })
    }

    #[test]
    fn rfc3339_parses_offsets_and_fractions() {
        for (s, want) in [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-11-23T15:00:00Z", Some(1_795_446_000)),
            ("2026-11-23T07:00:00.123-08:00", Some(1_795_446_000)),
            ("2000-02-29T00:00:00+01:00", Some(951_778_800)),
            ("yesterday", None),
            ("2026-11-23T07:00:00", None),
        ] {
            assert_eq!(parse_rfc3339(s), want, "{s}");
        }
    }

    #[test]
    fn instance_reads_back_offering_state_and_pool_node() {
        let i = parse_instance("p-1", &answer("RUNNING", "SPOT")).expect("instance");
        assert_eq!(i.provider_id, "gce://p-1/us-central1-a/muster-pn-7f3a");
        assert_eq!(i.offering.instance_type, "n1-standard-8+2xnvidia-tesla-t4");
        assert_eq!(i.offering.capacity_type, CapacityType::Spot);
        assert_eq!(i.state, InstanceState::Running);
        assert_eq!(i.launched_at, Time(1_795_446_000));
        assert_eq!(i.pool_node.as_deref(), Some("train-0"));
        for (status, state) in [
            ("PROVISIONING", InstanceState::Pending),
            ("STAGING", InstanceState::Pending),
            ("STOPPING", InstanceState::ShuttingDown),
            ("TERMINATED", InstanceState::Terminated),
        ] {
            let i = parse_instance("p-1", &answer(status, "STANDARD")).expect("instance");
            assert_eq!(i.state, state, "{status}");
            assert_eq!(i.offering.capacity_type, CapacityType::OnDemand);
        }
    }

    #[test]
    fn the_network_is_block_subblock_host_and_a_named_reservation_the_offerings() {
        let mut v = answer("RUNNING", "STANDARD");
        assert!(
            parse_instance("p-1", &v)
                .expect("instance")
                .network
                .is_empty()
        );
        v["resourceStatus"] = json!({"physicalHostTopology": {
            "cluster": "europe-cluster-1", "block": "b-7", "subblock": "sb-2", "host": "h-31"}});
        v["reservationAffinity"] = json!({"consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name", "values": ["t4-resv"]});
        let i = parse_instance("p-1", &v).expect("instance");
        assert_eq!(i.network, ["b-7", "sb-2", "h-31"]);
        assert_eq!(i.offering.capacity_type, CapacityType::Reserved);
        assert_eq!(i.offering.reservation.as_deref(), Some("t4-resv"));
        v["resourceStatus"]["physicalHostTopology"] = json!({"block": "b-7", "host": "h-31"});
        assert_eq!(network(&v), ["b-7"], "no layer below a missing one");
    }

    #[test]
    fn malformed_answers_name_instance_and_field() {
        let mut v = answer("RUNNING", "SPOT");
        v["creationTimestamp"] = json!("soon");
        let err = parse_instance("p-1", &v).expect_err("malformed");
        assert_eq!(err.field, "creationTimestamp");
        assert!(err.to_string().contains("muster-pn-7f3a"));
    }

    #[test]
    fn only_stopped_spot_instances_are_preempted() {
        let now = Time(2_000_000_000);
        let p = preemption("p-1", &answer("TERMINATED", "SPOT"), now).expect("preempted");
        assert_eq!(p.kind, InterruptionKind::Preempted);
        assert_eq!(p.at, Time(1_795_446_000 + 30 * 60 + 5));
        assert_eq!(p.provider_id, "gce://p-1/us-central1-a/muster-pn-7f3a");
        assert_eq!(preemption("p-1", &answer("RUNNING", "SPOT"), now), None);
        assert_eq!(
            preemption("p-1", &answer("TERMINATED", "STANDARD"), now),
            None
        );
        let mut v = answer("STOPPING", "SPOT");
        v.as_object_mut()
            .expect("object")
            .remove("lastStopTimestamp");
        assert_eq!(preemption("p-1", &v, now).map(|p| p.at), Some(now));
    }
}
