//! Capacity that ends: a node on a Capacity Block (or any reservation with
//! an end, `Node::capacity_ends_at`) is drained `reservationDrainAhead`
//! before the end, whatever runs on it, with removal kind
//! `CapacityEnding`. The driver evicts every gang with a pod there as a
//! whole and requeues it at once, as for a spot interruption; this cycle
//! already places nothing on the node. Runs before every other decision of
//! the cycle.
//!
//! The cloud ends the capacity whatever muster does (EC2 terminates a
//! Capacity Block's instances from 30 minutes before its end), so neither
//! `do-not-disrupt` nor disruption budgets hold the drain back: they would
//! only turn an orderly requeue into a lost gang.

use crate::decided::Cycle;
use crate::index::World;
use crate::model::NodePhase;
use crate::plan::{Removal, RemovalKind};

/// Drains every managed node whose capacity ends within the drain-ahead
/// window, in node order.
pub(crate) fn plan(w: &mut World<'_>, cx: &mut Cycle) {
    if !w.capacity_ends {
        return;
    }
    let ahead = w.policy.reservation_drain_ahead;
    for ni in 0..w.nodes.len() {
        let n = w.nodes[ni].node;
        let (Some(end), Some(pool)) = (n.capacity_ends_at, n.pool.as_ref()) else {
            continue;
        };
        if matches!(n.phase, NodePhase::Draining | NodePhase::Terminating) || w.now + ahead < end {
            continue;
        }
        w.nodes[ni].removed = true;
        let left = end.since(w.now);
        cx.plan.removals.push(Removal {
            node: n.name.clone(),
            pool: pool.clone(),
            kind: RemovalKind::CapacityEnding { ends_at: end },
            saves_per_hour: n.price.unwrap_or_default(),
            message: format!(
                "the capacity it runs on ends in {left} (reservation {}); drained {ahead} ahead, its gangs requeued whole",
                n.offering
                    .as_ref()
                    .and_then(|k| k.reservation.as_deref())
                    .unwrap_or("unknown")
            ),
        });
    }
}
