//! Orphan collection: which cloud instances owned by this cluster no
//! `PoolNode` accounts for, and may be terminated.
//!
//! An instance is an orphan when all of these hold:
//! - no PoolNode records its provider id;
//! - the PoolNode its tags name (if any) does not exist — a PoolNode that
//!   exists but has not recorded the id yet is mid-launch (the controller may
//!   have crashed between the cloud call and the status write) and will adopt
//!   the instance through its idempotency key;
//! - it was launched at least `grace` ago, so a launch whose PoolNode write
//!   is still propagating through the watch caches is never collected.
//!
//! The result is sorted by provider id, so repeated runs act in the same
//! order.
//!
//! Placement groups follow their nodes: a group the cloud lists for this
//! cluster is deleted once no PoolNode names it ([`unused_placement_groups`]).
//! No grace is needed: the PoolNode that names a group is written before the
//! group is made, and a group deleted under a launch that a stale cache did
//! not yet show is made again by that launch's retry.

use std::collections::BTreeSet;

use crate::{Dur, Time};

/// A cloud instance tagged for this cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedInstance {
    /// Kubernetes provider id.
    pub provider_id: String,
    /// The PoolNode named by its tags.
    pub pool_node: Option<String>,
    /// When the cloud launched it.
    pub launched_at: Time,
}

/// What the cluster knows: PoolNode names and the provider ids they record.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Names of the PoolNodes that exist.
    pub pool_nodes: BTreeSet<String>,
    /// Provider ids recorded in PoolNode status.
    pub provider_ids: BTreeSet<String>,
    /// Placement groups PoolNodes name.
    pub placement_groups: BTreeSet<String>,
}

/// The placement groups in `listed` (the cloud's, for this cluster) that no
/// PoolNode names, sorted.
pub fn unused_placement_groups(listed: &[String], known: &Known) -> Vec<String> {
    let mut out: Vec<String> = listed
        .iter()
        .filter(|g| !known.placement_groups.contains(*g))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Provider ids of the instances to terminate.
pub fn orphans(instances: &[OwnedInstance], known: &Known, now: Time, grace: Dur) -> Vec<String> {
    let mut out: Vec<String> = instances
        .iter()
        .filter(|i| !known.provider_ids.contains(&i.provider_id))
        .filter(|i| {
            i.pool_node
                .as_ref()
                .is_none_or(|n| !known.pool_nodes.contains(n))
        })
        .filter(|i| i.launched_at + grace <= now)
        .map(|i| i.provider_id.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(id: &str, pn: Option<&str>, at: i64) -> OwnedInstance {
        OwnedInstance {
            provider_id: id.into(),
            pool_node: pn.map(String::from),
            launched_at: Time(at),
        }
    }

    #[test]
    fn only_unaccounted_old_instances_are_orphans() {
        let known = Known {
            pool_nodes: ["pn-a", "pn-mid-launch"].map(String::from).into(),
            provider_ids: ["i-a", "i-recorded-elsewhere"].map(String::from).into(),
            ..Known::default()
        };
        let instances = [
            inst("i-a", Some("pn-a"), 0),            // recorded
            inst("i-recorded-elsewhere", None, 0),   // recorded, untagged
            inst("i-mid", Some("pn-mid-launch"), 0), // PoolNode exists
            inst("i-young", Some("pn-gone"), 590),   // inside grace
            inst("i-z-orphan", Some("pn-gone"), 0),  // orphan
            inst("i-b-untagged", None, 100),         // orphan, no tag
        ];
        let got = orphans(&instances, &known, Time(600), Dur::secs(300));
        assert_eq!(
            got,
            vec!["i-b-untagged".to_string(), "i-z-orphan".to_string()]
        );
    }

    #[test]
    fn a_placement_group_goes_once_no_pool_node_names_it() {
        let known = Known {
            placement_groups: ["team-a-big-pg1".to_string()].into(),
            ..Known::default()
        };
        let listed = [
            "team-a-big-pg1",
            "team-a-big-pg0",
            "team-b-x-pg0",
            "team-a-big-pg0",
        ]
        .map(String::from);
        assert_eq!(
            unused_placement_groups(&listed, &known),
            vec!["team-a-big-pg0".to_string(), "team-b-x-pg0".to_string()]
        );
        assert!(unused_placement_groups(&[], &known).is_empty());
    }

    #[test]
    fn grace_boundary_is_inclusive() {
        let known = Known::default();
        let i = [inst("i-1", None, 100)];
        assert!(orphans(&i, &known, Time(399), Dur::secs(300)).is_empty());
        assert_eq!(orphans(&i, &known, Time(400), Dur::secs(300)), vec!["i-1"]);
    }
}
