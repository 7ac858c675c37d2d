//! Preemptions reported once each across polls of `instances.list`.

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
}
