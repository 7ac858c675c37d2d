//! What the time decides before the fair-share loop, and what changes of it
//! between two times.
//!
//! A plan reads the time in two ways. Some comparisons decide things: an
//! offering is usable again once its `unavailableUntil` passed, a
//! provisioning gang is timed out at its deadline, a machine not Ready yet
//! (no Node, or a Node not Ready) is given up once its pool's provisioning
//! timeout passed, an
//! evicted gang queues again when its backoff ends. The rest only renders
//! times as durations from now in messages, or stamps new deadlines.
//!
//! [`World::build`](crate::index::World::build) and the loop make the
//! deciding comparisons through the predicates here, and [`changes`] makes
//! the same comparisons at two times: when they all agree, the state before
//! the fair-share loop is the same at both times, so a re-plan may take
//! the earlier tries over (the driver of the loop renders messages and
//! deadlines at the new time; see [`crate::incremental`]).

use std::collections::BTreeSet;

use crate::model::{Gang, GangId, GangPhase, Node, Offering};
use crate::snapshot::{Policy, Snapshot};
use crate::time::{Dur, Time};

/// A managed machine that is not Ready yet: its Node has not registered
/// (`Pending`, `Launched`) or is not Ready with its GPUs (`Registered`).
/// Only such a machine is given up once [`launch_overdue`].
pub(crate) fn not_ready(n: &Node) -> bool {
    n.managed() && n.phase.in_flight()
}

/// The provisioning deadline of a gang has passed.
pub(crate) fn deadline_passed(g: &Gang, now: Time) -> bool {
    g.provisioning_deadline.is_some_and(|d| now >= d)
}

/// A machine launched at `node.created_at` is past a provisioning timeout.
pub(crate) fn launch_overdue(node: &Node, timeout: Dur, now: Time) -> bool {
    now >= node.created_at + timeout
}

/// An evicted gang still waits out its backoff.
pub(crate) fn in_backoff(g: &Gang, now: Time) -> bool {
    g.phase == GangPhase::Evicted && g.not_before.is_some_and(|t| t > now)
}

/// An offering may be bought.
fn usable(o: &Offering, now: Time) -> bool {
    o.usable_at(now)
}

/// What the time decides differently at `b` than at `a`, for `s`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Changes {
    /// Nothing but pending gangs without assignments entering or leaving
    /// their backoff (listed): they are changed gangs to the loop.
    Backoffs(BTreeSet<GangId>),
    /// Something the state before the loop is built from: an offering,
    /// a deadline, a machine's timeout, or the backoff of a gang that holds
    /// capacity.
    Other,
}

/// Compares every deciding comparison of `s` at `a` and at `b`.
pub(crate) fn changes(s: &Snapshot, policy: &Policy, a: Time, b: Time) -> Changes {
    if a == b {
        return Changes::Backoffs(BTreeSet::new());
    }
    if s.offerings.iter().any(|o| usable(o, a) != usable(o, b)) {
        return Changes::Other;
    }
    // Capacity with an end: whether a gang may use it, and whether a node
    // is drained ahead of it, are read against the time.
    if s.nodes.iter().any(|n| n.capacity_ends_at.is_some())
        || s.offerings
            .iter()
            .any(|o| o.reservation.as_ref().is_some_and(|r| r.ends_at.is_some()))
    {
        return Changes::Other;
    }
    let mut backoffs = BTreeSet::new();
    for g in &s.gangs {
        if deadline_passed(g, a) != deadline_passed(g, b) {
            return Changes::Other;
        }
        if in_backoff(g, a) != in_backoff(g, b) {
            if !g.assignments.is_empty() {
                return Changes::Other;
            }
            backoffs.insert(g.id.clone());
        }
    }
    for n in s.nodes.iter().filter(|n| not_ready(n)) {
        let Some(pool) = n.pool.as_deref() else {
            continue;
        };
        // (A flex-start machine's timeout also depends on its gang's queue.)
        if n.capacity_type == Some(crate::model::CapacityType::FlexStart) {
            return Changes::Other;
        }
        // Every timeout the node's pool name could stand for (the cycle
        // keeps one pool per name; the policy's when it has none).
        let timeouts = s.pools.iter().filter(|p| p.name == pool).map(|p| {
            p.provisioning_timeout
                .unwrap_or(policy.provisioning_timeout)
        });
        for t in timeouts {
            if launch_overdue(n, t, a) != launch_overdue(n, t, b) {
                return Changes::Other;
            }
        }
    }
    Changes::Backoffs(backoffs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{gang, node, offering, pool};

    fn snapshot() -> Snapshot {
        Snapshot {
            offerings: vec![
                offering("a100", "zone-a")
                    .price(crate::Price(1_000_000))
                    .build(),
            ],
            pools: vec![pool("gpu").build()],
            ..Snapshot::default()
        }
    }

    #[test]
    fn the_same_time_changes_nothing() {
        let s = snapshot();
        assert_eq!(
            changes(&s, &Policy::default(), Time(5), Time(5)),
            Changes::Backoffs(BTreeSet::new())
        );
    }

    #[test]
    fn an_offering_usable_again_changes_the_state() {
        let mut s = snapshot();
        s.offerings[0].unavailable_until = Some(Time(100));
        let p = Policy::default();
        assert_eq!(
            changes(&s, &p, Time(10), Time(99)),
            Changes::Backoffs(BTreeSet::new())
        );
        assert_eq!(changes(&s, &p, Time(10), Time(100)), Changes::Other);
    }

    #[test]
    fn a_backoff_ending_marks_the_gang_or_rebuilds_when_it_holds_nodes() {
        let mut s = snapshot();
        let mut g = gang("ns/a", "q").build();
        g.phase = GangPhase::Evicted;
        g.not_before = Some(Time(50));
        s.gangs.push(g);
        let p = Policy::default();
        assert_eq!(
            changes(&s, &p, Time(10), Time(60)),
            Changes::Backoffs([GangId("ns/a".into())].into())
        );
        s.gangs[0].assignments.push(crate::model::Assignment {
            pod_set: "main".into(),
            index: 0,
            node: "n1".into(),
        });
        assert_eq!(changes(&s, &p, Time(10), Time(60)), Changes::Other);
    }

    #[test]
    fn a_deadline_or_a_machine_timeout_passing_rebuilds() {
        let mut s = snapshot();
        let mut g = gang("ns/a", "q").build();
        g.phase = GangPhase::Provisioning;
        g.provisioning_deadline = Some(Time(50));
        s.gangs.push(g);
        let p = Policy::default();
        assert_eq!(changes(&s, &p, Time(10), Time(50)), Changes::Other);

        let mut s = snapshot();
        let mut n = node("m1").build();
        n.pool = Some("gpu".into());
        n.phase = crate::model::NodePhase::Launched;
        n.created_at = Time(0);
        s.nodes.push(n);
        let timeout = p.provisioning_timeout;
        let at = Time(0) + timeout;
        assert_eq!(
            changes(&s, &p, Time(0), Time(at.0 - 1)),
            Changes::Backoffs(BTreeSet::new())
        );
        assert_eq!(changes(&s, &p, Time(0), at), Changes::Other);
        // A Node registered but not Ready is given up the same way.
        s.nodes[0].phase = crate::model::NodePhase::Registered;
        assert_eq!(changes(&s, &p, Time(0), at), Changes::Other);
        s.nodes[0].phase = crate::model::NodePhase::Ready;
        assert_eq!(
            changes(&s, &p, Time(0), at),
            Changes::Backoffs(BTreeSet::new())
        );
    }
}
