//! The seam between world facts and the planner crate's life-cycle state
//! machines (`muster_planner::lifecycle::{pool_node, gang}`): what the
//! driver observes about a machine, and how a gang step is carried out on
//! the mirror. Kept in one small module so the driver's life-cycle handling
//! stays in one place.

use muster_planner::lifecycle::gang::Step as GangStep;
use muster_planner::lifecycle::pool_node::{LaunchError, Observed};
use muster_planner::{Gang, GangPhase, NodePhase, Time};

use crate::cluster::SimNode;

/// What the driver sees of a machine the cloud accepted.
pub fn observed(node: &SimNode) -> Observed {
    Observed {
        launch_accepted: true,
        registered: matches!(node.phase, NodePhase::Registered | NodePhase::Ready),
        ready_with_gpus: node.phase == NodePhase::Ready,
        launch_error: None,
    }
}

/// What the driver sees of a launch the cloud refused for capacity.
pub fn refused() -> Observed {
    Observed {
        launch_error: Some(LaunchError::InsufficientCapacity),
        ..Observed::default()
    }
}

/// What a gang step does to the mirrored gang. Returns true when the gang
/// must be evicted in the world (its pods unbound) and its reservations
/// cleared; `Finish` is handled by the caller (the gang leaves the snapshot).
pub fn apply_gang_step(g: &mut Gang, step: &GangStep, now: Time) -> bool {
    match step {
        GangStep::Stay | GangStep::Finish => false,
        GangStep::MarkRunning => {
            g.phase = GangPhase::Running;
            g.started_at = Some(now);
            false
        }
        GangStep::Evict {
            not_before, counts, ..
        } => {
            evict(g, *not_before);
            if *counts {
                g.evictions = g.evictions.saturating_add(1);
            }
            true
        }
    }
}

/// Evicts a mirrored gang as a whole: phase `Evicted` from `not_before`,
/// assignments and timestamps cleared.
pub fn evict(g: &mut Gang, not_before: Time) {
    g.phase = GangPhase::Evicted;
    g.not_before = Some(not_before);
    g.assignments.clear();
    g.admitted_at = None;
    g.started_at = None;
    g.provisioning_deadline = None;
}
