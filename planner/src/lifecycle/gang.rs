//! The life of an admitted gang: pods-ready timeout, faults, completion.
//!
//! | phase                 | event                              | step |
//! |-----------------------|------------------------------------|------|
//! | Admitted              | every pod running                  | mark Running (`startedAt` = now) |
//! | Admitted              | not all running `podsReadyTimeout` after `admittedAt` | evict the whole gang, requeue after backoff |
//! | Provisioning, Admitted, Running | node lost / spot interruption / reserved capacity ending | evict the whole gang, requeue now at the same priority |
//! | Admitted, Running     | completed                          | finish: release every node and reservation |
//! | otherwise             |                                    | stay |
//!
//! Backoff after the n-th pods-ready eviction (n counted from 0 in
//! `Gang::evictions`) is `min(base × 2ⁿ, max)` from the policy. Faults that
//! are not the gang's doing (interruptions, lost nodes, capacity ending) do not back off and
//! do not count.

use crate::model::{Gang, GangPhase};
use crate::snapshot::Policy;
use crate::time::{Dur, Time};

/// Something that happened to a gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A periodic check: are all its pods running?
    PodsCheck {
        /// Every pod of the gang runs.
        all_running: bool,
    },
    /// A node it holds was lost.
    NodeLost,
    /// A spot node it holds is being interrupted.
    SpotInterruption,
    /// A node it holds is drained because the reserved capacity it runs on
    /// ends (a Capacity Block's end, less the policy's drain-ahead).
    CapacityEnding,
    /// Every pod finished successfully (or the workload was deleted).
    Completed,
}

/// Why a gang is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictReason {
    /// Pods not all running within `podsReadyTimeout`.
    PodsReadyTimeout,
    /// A node was lost.
    NodeLost,
    /// A spot node was interrupted.
    SpotInterruption,
    /// A node's reserved capacity was about to end.
    CapacityEnding,
}

impl EvictReason {
    /// The bounded name, for conditions, Events and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictReason::PodsReadyTimeout => "PodsReadyTimeout",
            EvictReason::NodeLost => "NodeLost",
            EvictReason::SpotInterruption => "SpotInterruption",
            EvictReason::CapacityEnding => "CapacityEnding",
        }
    }
}

/// What the driver does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing.
    Stay,
    /// Phase Running, `startedAt` = now.
    MarkRunning,
    /// Evict every pod (re-suspend the workload), clear assignments and
    /// reservations, phase Evicted with `notBefore`; priority unchanged.
    Evict {
        /// Why.
        reason: EvictReason,
        /// Queue again from this time.
        not_before: Time,
        /// Whether `evictions` is incremented (backoff grows).
        counts: bool,
    },
    /// Phase Finished: release every node and reservation at once.
    Finish,
}

/// Requeue backoff after `evictions` earlier evictions.
pub fn backoff(evictions: u32, policy: &Policy) -> Dur {
    let base = policy.requeue_backoff_base.as_secs();
    let max = policy.requeue_backoff_max.as_secs();
    let factor = 1u64.checked_shl(evictions.min(63)).unwrap_or(u64::MAX);
    Dur(base.saturating_mul(factor).min(max))
}

/// The step for `event` on `gang`; `pods_ready_timeout` is the queue's
/// (the policy's default when `None`).
pub fn on_event(
    gang: &Gang,
    pods_ready_timeout: Option<Dur>,
    event: Event,
    policy: &Policy,
    now: Time,
) -> Step {
    let holds = matches!(
        gang.phase,
        GangPhase::Provisioning | GangPhase::Admitted | GangPhase::Running
    );
    match event {
        Event::PodsCheck { all_running } if gang.phase == GangPhase::Admitted => {
            if all_running {
                return Step::MarkRunning;
            }
            let timeout = pods_ready_timeout.unwrap_or(policy.pods_ready_timeout);
            let since = gang.admitted_at.unwrap_or(now);
            if now >= since + timeout {
                Step::Evict {
                    reason: EvictReason::PodsReadyTimeout,
                    not_before: now + backoff(gang.evictions, policy),
                    counts: true,
                }
            } else {
                Step::Stay
            }
        }
        Event::NodeLost | Event::SpotInterruption | Event::CapacityEnding if holds => Step::Evict {
            reason: match event {
                Event::SpotInterruption => EvictReason::SpotInterruption,
                Event::CapacityEnding => EvictReason::CapacityEnding,
                _ => EvictReason::NodeLost,
            },
            not_before: now,
            counts: false,
        },
        Event::Completed if matches!(gang.phase, GangPhase::Admitted | GangPhase::Running) => {
            Step::Finish
        }
        _ => Step::Stay,
    }
}

/// How long after its requeue time an evicted gang without an owner waits
/// for its pods to be submitted again before its Gang goes (see
/// [`ownerless_ends`]).
pub const REGROUP_GRACE: Dur = Dur(300);

/// Whether the Gang of a gang that has no owner object (a group of plain
/// Pods: the garbage collector never deletes its Gang) is deleted, given
/// its phase, how many of its pods still exist (in any phase), and, after
/// an eviction, the time it is queued again from.
///
/// | pods left | phase                                 | step |
/// |-----------|---------------------------------------|------|
/// | some      | any                                   | keep |
/// | none      | Provisioning, Admitted, Running       | keep (it holds capacity: its own life cycle ends it first) |
/// | none      | Finished                              | delete |
/// | none      | evicted (Evicted, or queued again after one), before `requeue_after` + [`REGROUP_GRACE`] | keep (the eviction deleted its pods; submitted again, they find the gang with its evictions and backoff) |
/// | none      | otherwise (Queued, Unsatisfiable)     | delete (a Gang is made for a whole group, so its pods were deleted) |
pub fn ownerless_ends(
    phase: GangPhase,
    pods_left: usize,
    requeue_after: Option<Time>,
    now: Time,
) -> bool {
    if pods_left > 0 {
        return false;
    }
    match phase {
        GangPhase::Provisioning | GangPhase::Admitted | GangPhase::Running => false,
        GangPhase::Finished => true,
        GangPhase::Queued | GangPhase::Evicted | GangPhase::Unsatisfiable => {
            requeue_after.is_none_or(|t| now >= t + REGROUP_GRACE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GangId;

    fn gang(phase: GangPhase, evictions: u32) -> Gang {
        Gang {
            priority: 3,
            phase,
            admitted_at: Some(Time(1000)),
            evictions,
            ..Gang::new(GangId::new("ns/g"), "q", Time(0), Vec::new())
        }
    }

    #[test]
    fn backoff_doubles_to_max() {
        let p = Policy::default(); // 60 s base, 1 h max
        let got: Vec<u64> = (0..8).map(|n| backoff(n, &p).as_secs()).collect();
        assert_eq!(got, vec![60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(backoff(u32::MAX, &p), Dur(3600));
    }

    #[test]
    fn table() {
        use Event::*;
        use GangPhase::*;
        let p = Policy::default(); // pods ready 10 m
        let cases: Vec<(GangPhase, u32, Option<Dur>, Event, i64, Step)> = vec![
            (
                Admitted,
                0,
                None,
                PodsCheck { all_running: true },
                1100,
                Step::MarkRunning,
            ),
            (
                Admitted,
                0,
                None,
                PodsCheck { all_running: false },
                1599,
                Step::Stay,
            ),
            (
                Admitted,
                0,
                None,
                PodsCheck { all_running: false },
                1600,
                Step::Evict {
                    reason: EvictReason::PodsReadyTimeout,
                    not_before: Time(1660),
                    counts: true,
                },
            ),
            (
                Admitted,
                2,
                Some(Dur(60)),
                PodsCheck { all_running: false },
                1060,
                Step::Evict {
                    reason: EvictReason::PodsReadyTimeout,
                    not_before: Time(1060 + 240),
                    counts: true,
                },
            ),
            (
                Running,
                0,
                None,
                PodsCheck { all_running: false },
                99_999,
                Step::Stay,
            ),
            (
                Running,
                5,
                None,
                SpotInterruption,
                5000,
                Step::Evict {
                    reason: EvictReason::SpotInterruption,
                    not_before: Time(5000),
                    counts: false,
                },
            ),
            (
                Provisioning,
                0,
                None,
                NodeLost,
                5000,
                Step::Evict {
                    reason: EvictReason::NodeLost,
                    not_before: Time(5000),
                    counts: false,
                },
            ),
            (Queued, 0, None, NodeLost, 5000, Step::Stay),
            (
                Running,
                3,
                None,
                CapacityEnding,
                5000,
                Step::Evict {
                    reason: EvictReason::CapacityEnding,
                    not_before: Time(5000),
                    counts: false,
                },
            ),
            (Queued, 0, None, CapacityEnding, 5000, Step::Stay),
            (Running, 0, None, Completed, 5000, Step::Finish),
            (Admitted, 0, None, Completed, 5000, Step::Finish),
            (Queued, 0, None, Completed, 5000, Step::Stay),
        ];
        for (i, (phase, ev, timeout, event, now, want)) in cases.into_iter().enumerate() {
            let got = on_event(&gang(phase, ev), timeout, event, &p, Time(now));
            assert_eq!(got, want, "case {i}: {phase:?} {event:?} at {now}");
        }
    }
    #[test]
    fn ownerless_gangs_end_once_their_pods_are_gone() {
        use GangPhase::*;
        let after = Some(Time(1000));
        let grace_end = 1000 + REGROUP_GRACE.as_secs() as i64;
        let cases: Vec<(GangPhase, usize, Option<Time>, i64, bool)> = vec![
            (Running, 2, None, 0, false),
            (Finished, 1, None, 0, false),
            (Finished, 0, None, 0, true),
            (Admitted, 0, None, 0, false),
            (Provisioning, 0, None, 0, false),
            (Running, 0, None, 0, false),
            (Queued, 0, None, 0, true),
            (Unsatisfiable, 0, None, 0, true),
            (Evicted, 0, after, 1000, false),
            (Evicted, 0, after, grace_end - 1, false),
            (Evicted, 0, after, grace_end, true),
            (Queued, 0, after, grace_end - 1, false),
            (Queued, 0, after, grace_end, true),
            (Evicted, 2, after, grace_end, false),
        ];
        for (phase, pods, requeue, now, want) in cases {
            assert_eq!(
                ownerless_ends(phase, pods, requeue, Time(now)),
                want,
                "{phase:?} with {pods} pods, requeue {requeue:?}, now {now}"
            );
        }
    }
}
