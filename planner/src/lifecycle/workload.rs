//! The life of a gang's workload object as the API server allows it to
//! change: which single write comes next, decided from what is observed of
//! the object now, never from what the driver remembers doing. One table for
//! every workload kind (a `batch/v1` Job, a JobSet, a group of Pods, ...);
//! what differs between kinds is stated in their [`Rules`].
//!
//! The rules behind the table for a `batch/v1` Job (Kubernetes
//! `pkg/registry/batch/job/strategy.go` and
//! `pkg/apis/batch/validation/validation.go`; the Job controller
//! `pkg/controller/job/job_controller.go`; Kueue's
//! `pkg/controller/jobs/job/job_controller.go` stops a Job the same way):
//!
//! - the scheduling directives of the pod template (node selector, affinity,
//!   tolerations, labels, annotations, scheduling gates) may change only while
//!   the *stored* Job is suspended and has no `status.startTime`;
//! - the Job controller sets `startTime` when it first runs the Job and never
//!   clears it; a suspended Job's active pods are deleted by it;
//! - `status` is written only through the `jobs/status` subresource.
//!
//! So starting is two writes (pin the templates while suspended, then
//! unsuspend) and stopping is three (suspend and mark the stop, clear
//! `startTime` through the status, restore the submitted templates and drop
//! the mark). The stop mark is written with the suspension so that a stop
//! cut short by a crash is finished before anything else, whatever the gang's
//! state says by then. A kind without a start mark (a JobSet: its
//! controller clears its child Jobs' `startTime` itself when it resumes them)
//! skips that write; a kind whose directives cannot be put back (a Pod: its
//! scheduling gate can only be removed and its node selector and affinity
//! only narrowed while gated) is stopped by deleting its started pods, and
//! pods pinned elsewhere are stopped the same way rather than restored.
//! A kind whose controller honours the suspend flag only in some of its
//! states (a RayJob: KubeRay moves only an Initializing or Running job to
//! Suspending, and a job waiting for its id in InteractiveMode not at all)
//! reports the flag as not yet honoured until its controller says it
//! stopped; until then nothing is written, so neither a restore nor a new
//! pin races the pods still running.
//!
//! | want         | finished | stopping | suspended | started | pinned        | step |
//! |--------------|----------|----------|-----------|---------|---------------|------|
//! | any          | yes      |          |           |         |               | none |
//! | any          |          |          | yes, not yet honoured |  |          | none (wait for the owning controller) |
//! | Queued       |          |          | no        |         |               | suspend (and mark the stop) |
//! | Queued       |          |          | yes       | yes (start mark) |      | clear `startTime` |
//! | Queued       |          | yes, or pinned | yes | no      |               | restore the submitted templates (not restorable: suspend) |
//! | Queued       |          | no       | yes       | no      | no            | none |
//! | Run(pins)    |          |          | no        |         | to `pins`, not stopping | none |
//! | Run(pins)    |          |          | no        |         | otherwise     | suspend (and mark the stop) |
//! | Run(pins)    |          |          | yes       | yes (start mark) |      | clear `startTime` |
//! | Run(pins)    |          |          | yes       | no      | not to `pins`, or stopping | pin to `pins` (from the submitted templates; drops the mark; not restorable and pinned elsewhere: suspend) |
//! | Run(pins)    |          | no       | yes       | no      | to `pins`     | unsuspend |

use std::collections::{BTreeMap, BTreeSet};

/// The nodes each pod set is pinned to, by pod set name.
pub type Pins = BTreeMap<String, BTreeSet<String>>;

/// What a workload kind allows, as far as the table cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The object keeps a start mark (a Job's `status.startTime`) that must
    /// be cleared before its scheduling directives may change.
    pub start_mark: bool,
    /// The submitted scheduling directives can be written back while
    /// suspended (the object holds pod templates). False for plain Pods:
    /// stopping them means deleting them.
    pub restorable: bool,
}

impl Rules {
    /// A `batch/v1` Job.
    pub const JOB: Rules = Rules {
        start_mark: true,
        restorable: true,
    };
    /// An object whose controller clears its children's start marks itself
    /// (JobSet and the kinds built like it).
    pub const TEMPLATED: Rules = Rules {
        start_mark: false,
        restorable: true,
    };
    /// Plain Pods held by a scheduling gate.
    pub const PODS: Rules = Rules {
        start_mark: false,
        restorable: false,
    };
}

/// What the driver observes of the workload object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The workload completed or failed for good.
    pub finished: bool,
    /// Held back: `spec.suspend` is true (for Pods: none of them is released).
    pub suspended: bool,
    /// The start mark is set (`status.startTime`; for Pods: one was released).
    pub started: bool,
    /// A stop was begun and not finished (the mark written with the suspension).
    pub stopping: bool,
    /// The nodes the pod sets are pinned to; `None` while as submitted.
    pub pinned: Option<Pins>,
    /// The suspend flag is set but the owning controller has not reported
    /// the workload stopped yet (a RayJob before KubeRay reports it
    /// `Suspended`): what it started may still run on its nodes.
    pub releasing: bool,
}

/// What the gang's state asks of the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// Not admitted: suspended, with the templates as submitted.
    Queued,
    /// Admitted: each pod set pinned to its nodes, and running.
    Run(Pins),
}

/// The one write to make next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The object is where it should be.
    None,
    /// Set `spec.suspend` and the stop mark (one write); for Pods: delete the
    /// released ones and those pinned elsewhere.
    Suspend,
    /// Clear `status.startTime` through the status subresource.
    ClearStartTime,
    /// Put the submitted templates back and drop the pin record and the stop mark.
    Restore,
    /// Replace the templates by the submitted ones pinned to these nodes and
    /// record them; drops the stop mark.
    Pin(Pins),
    /// Clear `spec.suspend` (for Pods: remove the scheduling gate).
    Unsuspend,
}

impl Step {
    /// A bounded name of the step, for logs and metric labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            Step::None => "None",
            Step::Suspend => "Suspend",
            Step::ClearStartTime => "ClearStartTime",
            Step::Restore => "Restore",
            Step::Pin(_) => "Pin",
            Step::Unsuspend => "Unsuspend",
        }
    }
}

/// The next write that brings the workload `observed` towards `want`, for a
/// kind with `rules`.
pub fn next_step(observed: &Observed, want: &Want, rules: Rules) -> Step {
    if observed.finished || (observed.suspended && observed.releasing) {
        return Step::None;
    }
    let must_clear = observed.started && rules.start_mark;
    match want {
        Want::Queued => {
            if !observed.suspended {
                Step::Suspend
            } else if must_clear {
                Step::ClearStartTime
            } else if observed.stopping || observed.pinned.is_some() {
                if rules.restorable {
                    Step::Restore
                } else {
                    Step::Suspend
                }
            } else {
                Step::None
            }
        }
        Want::Run(pins) => {
            let pinned_here = observed.pinned.as_ref() == Some(pins) && !observed.stopping;
            if !observed.suspended {
                if pinned_here {
                    Step::None
                } else {
                    Step::Suspend
                }
            } else if must_clear {
                Step::ClearStartTime
            } else if !pinned_here {
                if rules.restorable || observed.pinned.is_none() {
                    Step::Pin(pins.clone())
                } else {
                    Step::Suspend
                }
            } else {
                Step::Unsuspend
            }
        }
    }
}

/// Carries `step` out on `observed` the way the API server and the owning
/// controller would (pods being deleted aside): the reference a driver's
/// writes are checked against, and what the tests walk the table with.
/// `None` when the step would be refused (a template change on an object
/// that is not suspended, or that has a start mark; a pin on Pods pinned
/// before).
pub fn apply(observed: &Observed, step: &Step, rules: Rules) -> Option<Observed> {
    let mut o = observed.clone();
    let template_mutable = observed.suspended && !(observed.started && rules.start_mark);
    match step {
        Step::None => {}
        Step::Suspend => {
            if rules.restorable {
                o.suspended = true;
                o.stopping = true;
            } else {
                // the released and pinned pods are deleted; what comes back is gated
                o = Observed {
                    suspended: true,
                    ..Observed::default()
                };
            }
        }
        Step::ClearStartTime => o.started = false,
        Step::Restore => {
            if !template_mutable || !rules.restorable {
                return None;
            }
            o.pinned = None;
            o.stopping = false;
        }
        Step::Pin(pins) => {
            if !template_mutable || (!rules.restorable && observed.pinned.is_some()) {
                return None;
            }
            o.pinned = Some(pins.clone());
            o.stopping = false;
        }
        Step::Unsuspend => {
            o.suspended = false;
            // the owning controller starts it at once
            o.started = true;
        }
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pod set, `main`, pinned to `list`.
    fn nodes(list: &[&str]) -> Pins {
        [(
            "main".to_string(),
            list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
        )]
        .into()
    }

    /// Observed state from a compact description:
    /// `s` suspended, `t` startTime set, `x` stopping, `f` finished;
    /// pinned to `pin` (empty: not pinned).
    fn obs(flags: &str, pin: &[&str]) -> Observed {
        Observed {
            finished: flags.contains('f'),
            suspended: flags.contains('s'),
            started: flags.contains('t'),
            stopping: flags.contains('x'),
            pinned: (!pin.is_empty()).then(|| nodes(pin)),
            releasing: false,
        }
    }

    #[test]
    fn table() {
        let run_ab = Want::Run(nodes(&["a", "b"]));
        let cases: Vec<(&str, Observed, Want, Step)> = vec![
            (
                "finished job is left alone",
                obs("f", &["a"]),
                Want::Queued,
                Step::None,
            ),
            (
                "finished suspended job is left alone",
                obs("fst", &[]),
                run_ab.clone(),
                Step::None,
            ),
            (
                "fresh unsuspended job is suspended",
                obs("", &[]),
                Want::Queued,
                Step::Suspend,
            ),
            (
                "running outside admission is suspended",
                obs("t", &[]),
                Want::Queued,
                Step::Suspend,
            ),
            (
                "queued suspended job waits",
                obs("s", &[]),
                Want::Queued,
                Step::None,
            ),
            (
                "evicted: startTime cleared",
                obs("stx", &["a"]),
                Want::Queued,
                Step::ClearStartTime,
            ),
            (
                "evicted: template restored",
                obs("sx", &["a"]),
                Want::Queued,
                Step::Restore,
            ),
            (
                "pinned but not admitted: restored",
                obs("s", &["a"]),
                Want::Queued,
                Step::Restore,
            ),
            (
                "stopping mark alone: restored",
                obs("sx", &[]),
                Want::Queued,
                Step::Restore,
            ),
            (
                "admitted: pinned",
                obs("s", &[]),
                run_ab.clone(),
                Step::Pin(nodes(&["a", "b"])),
            ),
            (
                "pinned: unsuspended",
                obs("s", &["a", "b"]),
                run_ab.clone(),
                Step::Unsuspend,
            ),
            (
                "running where admitted",
                obs("t", &["a", "b"]),
                run_ab.clone(),
                Step::None,
            ),
            (
                "running elsewhere: stopped first",
                obs("t", &["c"]),
                run_ab.clone(),
                Step::Suspend,
            ),
            (
                "running unpinned: stopped first",
                obs("t", &[]),
                run_ab.clone(),
                Step::Suspend,
            ),
            (
                "suspended after running: startTime cleared",
                obs("stx", &["c"]),
                run_ab.clone(),
                Step::ClearStartTime,
            ),
            (
                "stop cut short, admitted again: re-pinned",
                obs("sx", &["a", "b"]),
                run_ab.clone(),
                Step::Pin(nodes(&["a", "b"])),
            ),
            (
                "pinned elsewhere while suspended: re-pinned",
                obs("s", &["c"]),
                run_ab.clone(),
                Step::Pin(nodes(&["a", "b"])),
            ),
            (
                "unsuspended by someone with a stop mark: stopped again",
                obs("xt", &["a", "b"]),
                run_ab.clone(),
                Step::Suspend,
            ),
        ];
        for (what, o, want, step) in cases {
            assert_eq!(next_step(&o, &want, Rules::JOB), step, "{what}");
        }
    }

    /// Every observable state (finished aside), every want, every kind's
    /// rules: following the table never makes a write the server refuses,
    /// reaches the want within four writes, and then stays.
    #[test]
    fn every_state_converges_with_accepted_writes() {
        let pins: Vec<Option<Pins>> = vec![None, Some(nodes(&["a"])), Some(nodes(&["b"]))];
        let wants = [Want::Queued, Want::Run(nodes(&["a"]))];
        for rules in [Rules::JOB, Rules::TEMPLATED, Rules::PODS] {
            for bits in 0..8u8 {
                for pin in &pins {
                    for want in &wants {
                        let start = Observed {
                            finished: false,
                            suspended: bits & 1 != 0,
                            started: bits & 2 != 0,
                            stopping: bits & 4 != 0,
                            pinned: pin.clone(),
                            releasing: false,
                        };
                        let mut o = start.clone();
                        let mut writes = 0;
                        loop {
                            let step = next_step(&o, want, rules);
                            if step == Step::None {
                                break;
                            }
                            o = apply(&o, &step, rules).unwrap_or_else(|| {
                            panic!("{step:?} refused on {o:?} (from {start:?}, want {want:?}, {rules:?})")
                        });
                            writes += 1;
                            assert!(
                                writes <= 4,
                                "no convergence from {start:?} to {want:?} ({rules:?})"
                            );
                        }
                        match want {
                            Want::Queued => {
                                assert!(o.suspended && o.pinned.is_none() && !o.stopping, "{o:?}");
                            }
                            Want::Run(n) => {
                                assert!(
                                    !o.suspended && o.pinned.as_ref() == Some(n) && !o.stopping,
                                    "{o:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// A crash between any two writes: the next cycle, deciding from the
    /// object alone, continues the same sequence (no step is undone).
    #[test]
    fn stop_then_readmit_resumes_after_a_crash_anywhere() {
        let running = obs("t", &["a"]);
        let mut o = running.clone();
        let mut seen = vec![o.clone()];
        while next_step(&o, &Want::Queued, Rules::JOB) != Step::None {
            o = apply(&o, &next_step(&o, &Want::Queued, Rules::JOB), Rules::JOB).expect("accepted");
            seen.push(o.clone());
        }
        assert_eq!(seen.len(), 4, "suspend, clear startTime, restore: {seen:?}");
        // from every intermediate state the remaining steps are the tail of the sequence
        for (i, s) in seen.iter().enumerate() {
            let mut o = s.clone();
            let mut n = 0;
            while next_step(&o, &Want::Queued, Rules::JOB) != Step::None {
                o = apply(&o, &next_step(&o, &Want::Queued, Rules::JOB), Rules::JOB)
                    .expect("accepted");
                n += 1;
            }
            assert_eq!(n, seen.len() - 1 - i);
        }
        // and the re-admission after it is pin, then unsuspend
        let want = Want::Run(nodes(&["b"]));
        assert_eq!(next_step(&o, &want, Rules::JOB), Step::Pin(nodes(&["b"])));
        let o = apply(&o, &Step::Pin(nodes(&["b"])), Rules::JOB).expect("accepted");
        assert_eq!(next_step(&o, &want, Rules::JOB), Step::Unsuspend);
    }
}

#[cfg(test)]
mod kinds {
    use super::*;

    fn pins(sets: &[(&str, &[&str])]) -> Pins {
        sets.iter()
            .map(|(p, n)| (p.to_string(), n.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_kind_without_a_start_mark_goes_straight_to_the_templates() {
        let o = Observed {
            suspended: true,
            started: true,
            stopping: true,
            pinned: Some(pins(&[("driver", &["cpu-1"]), ("workers", &["g1", "g2"])])),
            ..Observed::default()
        };
        assert_eq!(
            next_step(&o, &Want::Queued, Rules::JOB),
            Step::ClearStartTime
        );
        assert_eq!(
            next_step(&o, &Want::Queued, Rules::TEMPLATED),
            Step::Restore
        );
        let want = pins(&[("driver", &["cpu-2"]), ("workers", &["g1", "g2"])]);
        assert_eq!(
            next_step(&o, &Want::Run(want.clone()), Rules::TEMPLATED),
            Step::Pin(want)
        );
    }

    #[test]
    fn a_suspend_not_yet_honoured_is_waited_for() {
        let releasing = Observed {
            suspended: true,
            stopping: true,
            releasing: true,
            pinned: Some(pins(&[("head", &["cpu-1"]), ("gpu", &["g1"])])),
            ..Observed::default()
        };
        let elsewhere = pins(&[("head", &["cpu-1"]), ("gpu", &["g2"])]);
        for want in [Want::Queued, Want::Run(elsewhere.clone())] {
            assert_eq!(
                next_step(&releasing, &want, Rules::TEMPLATED),
                Step::None,
                "{want:?}"
            );
        }
        // once the owning controller reports it stopped: restore, or re-pin
        let stopped = Observed {
            releasing: false,
            ..releasing
        };
        assert_eq!(
            next_step(&stopped, &Want::Queued, Rules::TEMPLATED),
            Step::Restore
        );
        assert_eq!(
            next_step(&stopped, &Want::Run(elsewhere.clone()), Rules::TEMPLATED),
            Step::Pin(elsewhere)
        );
    }

    #[test]
    fn pods_are_deleted_where_a_template_would_be_restored() {
        let pinned_elsewhere = Observed {
            suspended: true,
            pinned: Some(pins(&[("main", &["a"])])),
            ..Observed::default()
        };
        // a gated pod's directives can only be narrowed: never re-pinned
        assert_eq!(
            next_step(
                &pinned_elsewhere,
                &Want::Run(pins(&[("main", &["b"])])),
                Rules::PODS
            ),
            Step::Suspend
        );
        assert_eq!(
            next_step(&pinned_elsewhere, &Want::Queued, Rules::PODS),
            Step::Suspend
        );
        assert_eq!(apply(&pinned_elsewhere, &Step::Restore, Rules::PODS), None);
        let fresh = Observed {
            suspended: true,
            ..Observed::default()
        };
        let want = pins(&[("main", &["b"])]);
        assert_eq!(
            next_step(&fresh, &Want::Run(want.clone()), Rules::PODS),
            Step::Pin(want)
        );
    }
}
