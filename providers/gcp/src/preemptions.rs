//! Preemptions reported once each across polls: read from the instances'
//! status (`instances.aggregatedList`), and, for a managed instance group
//! that recreates a preempted instance under its name before a poll sees it
//! stopped, from GCE's `compute.instances.preempted` system events (zone
//! operations; "Detecting if a VM was preempted",
//! <https://cloud.google.com/compute/docs/instances/create-use-preemptible#detecting_if_an_instance_was_preempted>).

use std::collections::BTreeSet;

use muster_planner::Time;
use muster_provider_api::Interruption;
use serde_json::Value;

use crate::instance::preemption;

/// Remembers which instances' preemptions were already reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preemptions {
    /// Provider ids already reported.
    reported: BTreeSet<String>,
    /// System events (operation names) already reported.
    events: BTreeSet<String>,
}

impl Preemptions {
    /// The preemptions among one poll's instance answers not reported
    /// before. Ids no longer listed are forgotten, so memory stays bounded
    /// by the instances that exist.
    pub fn poll(&mut self, project: &str, instances: &[Value], now: Time) -> Vec<Interruption> {
        let found: Vec<Interruption> = instances
            .iter()
            .filter_map(|v| preemption(project, v, now))
            .collect();
        let current: BTreeSet<String> = found.iter().map(|i| i.provider_id.clone()).collect();
        self.reported.retain(|id| current.contains(id));
        found
            .into_iter()
            .filter(|i| self.reported.insert(i.provider_id.clone()))
            .collect()
    }
}

impl Preemptions {
    /// The preemptions among one poll's `compute.instances.preempted`
    /// operations not reported before; operations no longer listed are
    /// forgotten.
    pub fn events(&mut self, project: &str, ops: &[Value], now: Time) -> Vec<Interruption> {
        let listed: BTreeSet<String> = ops
            .iter()
            .filter_map(|o| o["name"].as_str().map(String::from))
            .collect();
        self.events.retain(|n| listed.contains(n));
        let mut out = Vec::new();
        for op in ops {
            if op["operationType"].as_str() != Some("compute.instances.preempted") {
                continue;
            }
            let (Some(name), Some(target)) = (op["name"].as_str(), op["targetLink"].as_str())
            else {
                continue;
            };
            let Some(r) = crate::gke::parse_url(target, "instances") else {
                continue;
            };
            let crate::gke::Scope::Zone(zone) = &r.scope else {
                continue;
            };
            if !self.events.insert(name.to_string()) {
                continue;
            }
            let at = op["insertTime"]
                .as_str()
                .and_then(crate::instance::parse_rfc3339)
                .map_or(now, Time);
            out.push(Interruption {
                provider_id: crate::names::provider_id(project, zone, &r.name),
                kind: muster_provider_api::InterruptionKind::Preempted,
                at,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn inst(name: &str, status: &str) -> Value {
        json!({
            "name": name,
            "zone": "projects/p-1/zones/us-central1-a",
            "status": status,
            "scheduling": {"provisioningModel": "SPOT"},
        })
    }

    #[test]
    fn each_preemption_is_reported_once() {
        let mut p = Preemptions::default();
        let now = Time(100);
        assert!(p.poll("p-1", &[inst("a", "RUNNING")], now).is_empty());
        let first = p.poll("p-1", &[inst("a", "TERMINATED"), inst("b", "RUNNING")], now);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].provider_id, "gce://p-1/us-central1-a/a");
        assert!(
            p.poll("p-1", &[inst("a", "TERMINATED")], now).is_empty(),
            "reported twice"
        );
        let second = p.poll("p-1", &[inst("a", "TERMINATED"), inst("b", "STOPPED")], now);
        assert_eq!(
            second
                .iter()
                .map(|i| i.provider_id.as_str())
                .collect::<Vec<_>>(),
            ["gce://p-1/us-central1-a/b"]
        );
        // Once gone from the list, `a` is forgotten.
        assert!(p.poll("p-1", &[], now).is_empty());
        assert_eq!(p, Preemptions::default());
    }

    #[test]
    fn each_preemption_event_is_reported_once() {
        let mut p = Preemptions::default();
        let op = |name: &str, kind: &str| {
            json!({"name": name, "operationType": kind,
                   "targetLink": "https://www.googleapis.com/compute/v1/projects/p-1/zones/us-central1-a/instances/n-1",
                   "insertTime": "2026-11-29T01:00:00.000-00:00"})
        };
        let now = Time(5);
        let ops = [
            op("systemevent-1", "compute.instances.preempted"),
            op("operation-2", "compute.instances.insert"),
        ];
        let first = p.events("p-1", &ops, now);
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].provider_id, "gce://p-1/us-central1-a/n-1");
        assert_eq!(
            first[0].kind,
            muster_provider_api::InterruptionKind::Preempted
        );
        assert_ne!(first[0].at, now, "dated by the event");
        assert!(p.events("p-1", &ops, now).is_empty(), "reported twice");
        assert!(p.events("p-1", &[], now).is_empty());
        assert_eq!(p, Preemptions::default(), "forgotten once no longer listed");
    }
}
