//! What an interruption notice from a cloud means for the node it names.
//!
//! | notice                  | node phase            | step |
//! |-------------------------|-----------------------|------|
//! | spot interruption, preemption | not yet Draining/Terminating | drain now (its gangs are evicted whole and requeued at once); mark the offering unavailable for `unavailableOfferingTtl` |
//! | terminated outside muster | not yet Draining/Terminating | drain now (nothing to wait for); the offering stays available |
//! | scheduled maintenance  | not yet Draining/Terminating | drain now (its gangs are evicted whole and requeued at once, before the cloud stops the machine); the offering stays available (the maintenance is the host's, not a shortage) |
//! | rebalance recommendation | any                  | record only (the machine still runs; moving early would cost a running gang) |
//! | any                     | Draining, Terminating | record only (already going) |
//!
//! The node is drained with reason `Interrupted`, which the gang life cycle
//! reads as [`super::gang::Event::SpotInterruption`].

use crate::model::{NodePhase, OfferingKey};
use crate::snapshot::Policy;
use crate::time::Time;

/// A notice about one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// The spot machine will be reclaimed shortly.
    SpotInterruption,
    /// The cloud suggests moving off the machine.
    RebalanceRecommendation,
    /// The machine was preempted (GCP Spot VM).
    Preempted,
    /// The machine was stopped or terminated outside muster.
    Terminated,
    /// The cloud has scheduled maintenance that stops, reboots or retires
    /// the machine.
    ScheduledMaintenance,
}

/// What the driver does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Record the notice (condition, Event); nothing else.
    Record,
    /// Drain the node now.
    Drain {
        /// Also mark this offering unavailable until this time.
        mark_unavailable: Option<(OfferingKey, Time)>,
    },
}

/// The step for a notice about a node of `offering` in `phase`.
pub fn on_notice(
    notice: Notice,
    phase: NodePhase,
    offering: &OfferingKey,
    policy: &Policy,
    now: Time,
) -> Step {
    if matches!(phase, NodePhase::Draining | NodePhase::Terminating) {
        return Step::Record;
    }
    match notice {
        Notice::RebalanceRecommendation => Step::Record,
        Notice::SpotInterruption | Notice::Preempted => Step::Drain {
            mark_unavailable: Some((offering.clone(), now + policy.unavailable_offering_ttl)),
        },
        Notice::Terminated | Notice::ScheduledMaintenance => Step::Drain {
            mark_unavailable: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CapacityType, Provider};

    #[test]
    fn the_table_holds() {
        let key = OfferingKey {
            provider: Provider::Aws,
            zone: "us-east-1a".into(),
            instance_type: "p4d.24xlarge".into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        };
        let policy = Policy::default();
        let now = Time(1_000);
        let until = now + policy.unavailable_offering_ttl;
        use NodePhase::*;
        use Notice::*;
        let marked = Step::Drain {
            mark_unavailable: Some((key.clone(), until)),
        };
        let unmarked = Step::Drain {
            mark_unavailable: None,
        };
        let cases = [
            (SpotInterruption, Ready, marked.clone()),
            (Preempted, Ready, marked.clone()),
            (SpotInterruption, Registered, marked.clone()),
            (Terminated, Ready, unmarked.clone()),
            (RebalanceRecommendation, Ready, Step::Record),
            (SpotInterruption, Draining, Step::Record),
            (Preempted, Terminating, Step::Record),
            (Terminated, Draining, Step::Record),
            (ScheduledMaintenance, Ready, unmarked.clone()),
            (ScheduledMaintenance, Registered, unmarked.clone()),
            (ScheduledMaintenance, Launched, unmarked.clone()),
            (ScheduledMaintenance, Draining, Step::Record),
            (ScheduledMaintenance, Terminating, Step::Record),
        ];
        for (notice, phase, want) in cases {
            assert_eq!(
                on_notice(notice, phase, &key, &policy, now),
                want,
                "{notice:?} in {phase:?}"
            );
        }
    }
}
