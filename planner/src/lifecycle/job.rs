//! The life of a gang's workload object (a `batch/v1` Job) as the API server
//! allows it to change: which single write comes next, decided from what is
//! observed of the object now, never from what the driver remembers doing.
//!
//! The rules behind the table (Kubernetes `pkg/registry/batch/job/strategy.go`
//! and `pkg/apis/batch/validation/validation.go`; the Job controller
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
//! So starting is two writes (pin the template while suspended, then
//! unsuspend) and stopping is three (suspend and mark the stop, clear
//! `startTime` through the status, restore the submitted template and drop the
//! mark). The stop mark is written with the suspension so that a stop cut
//! short by a crash is finished before anything else, whatever the gang's
//! state says by then.
//!
//! | want         | finished | stopping | suspended | started | pinned        | step |
//! |--------------|----------|----------|-----------|---------|---------------|------|
//! | any          | yes      |          |           |         |               | none |
//! | Queued       |          |          | no        |         |               | suspend (and mark the stop) |
//! | Queued       |          |          | yes       | yes     |               | clear `startTime` |
//! | Queued       |          | yes, or pinned | yes | no      |               | restore the submitted template |
//! | Queued       |          | no       | yes       | no      | no            | none |
//! | Run(nodes)   |          |          | no        |         | to `nodes`, not stopping | none |
//! | Run(nodes)   |          |          | no        |         | otherwise     | suspend (and mark the stop) |
//! | Run(nodes)   |          |          | yes       | yes     |               | clear `startTime` |
//! | Run(nodes)   |          |          | yes       | no      | not to `nodes`, or stopping | pin to `nodes` (from the submitted template; drops the mark) |
//! | Run(nodes)   |          | no       | yes       | no      | to `nodes`    | unsuspend |

use std::collections::BTreeSet;

/// What the driver observes of the workload object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The workload completed or failed for good.
    pub finished: bool,
    /// `spec.suspend` is true.
    pub suspended: bool,
    /// `status.startTime` is set.
    pub started: bool,
    /// A stop was begun and not finished (the mark written with the suspension).
    pub stopping: bool,
    /// The nodes the pod template is pinned to; `None` while it is as submitted.
    pub pinned: Option<BTreeSet<String>>,
}

/// What the gang's state asks of the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// Not admitted: suspended, with the template as submitted.
    Queued,
    /// Admitted to these nodes: pinned to them and running.
    Run(BTreeSet<String>),
}

/// The one write to make next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The object is where it should be.
    None,
    /// Set `spec.suspend` and the stop mark (one write).
    Suspend,
    /// Clear `status.startTime` through the status subresource.
    ClearStartTime,
    /// Put the submitted template back and drop the pin record and the stop mark.
    Restore,
    /// Replace the template by the submitted one pinned to these nodes and
    /// record them; drops the stop mark.
    Pin(BTreeSet<String>),
    /// Clear `spec.suspend`.
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

/// The next write that brings the workload `observed` towards `want`.
pub fn next_step(observed: &Observed, want: &Want) -> Step {
    if observed.finished {
        return Step::None;
    }
    match want {
        Want::Queued => {
            if !observed.suspended {
                Step::Suspend
            } else if observed.started {
                Step::ClearStartTime
            } else if observed.stopping || observed.pinned.is_some() {
                Step::Restore
            } else {
                Step::None
            }
        }
        Want::Run(nodes) => {
            let pinned_here = observed.pinned.as_ref() == Some(nodes) && !observed.stopping;
            if !observed.suspended {
                if pinned_here {
                    Step::None
                } else {
                    Step::Suspend
                }
            } else if observed.started {
                Step::ClearStartTime
            } else if !pinned_here {
                Step::Pin(nodes.clone())
            } else {
                Step::Unsuspend
            }
        }
    }
}

/// Carries `step` out on `observed` the way the API server and the Job
/// controller would (the controller deleting pods aside): the reference a
/// driver's writes are checked against, and what the tests walk the table
/// with. `None` when the step would be refused (a template change on a Job
/// that is not suspended, or that has a `startTime`).
pub fn apply(observed: &Observed, step: &Step) -> Option<Observed> {
    let mut o = observed.clone();
    let template_mutable = observed.suspended && !observed.started;
    match step {
        Step::None => {}
        Step::Suspend => {
            o.suspended = true;
            o.stopping = true;
        }
        Step::ClearStartTime => o.started = false,
        Step::Restore => {
            if !template_mutable {
                return None;
            }
            o.pinned = None;
            o.stopping = false;
        }
        Step::Pin(nodes) => {
            if !template_mutable {
                return None;
            }
            o.pinned = Some(nodes.clone());
            o.stopping = false;
        }
        Step::Unsuspend => {
            o.suspended = false;
            // the Job controller starts it at once
            o.started = true;
        }
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
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
            assert_eq!(next_step(&o, &want), step, "{what}");
        }
    }

    /// Every observable state (finished aside), every want: following the
    /// table never makes a write the server refuses, reaches the want within
    /// four writes, and then stays.
    #[test]
    fn every_state_converges_with_accepted_writes() {
        let pins: Vec<Option<BTreeSet<String>>> =
            vec![None, Some(nodes(&["a"])), Some(nodes(&["b"]))];
        let wants = [Want::Queued, Want::Run(nodes(&["a"]))];
        for bits in 0..8u8 {
            for pin in &pins {
                for want in &wants {
                    let start = Observed {
                        finished: false,
                        suspended: bits & 1 != 0,
                        started: bits & 2 != 0,
                        stopping: bits & 4 != 0,
                        pinned: pin.clone(),
                    };
                    let mut o = start.clone();
                    let mut writes = 0;
                    loop {
                        let step = next_step(&o, want);
                        if step == Step::None {
                            break;
                        }
                        o = apply(&o, &step).unwrap_or_else(|| {
                            panic!("{step:?} refused on {o:?} (from {start:?}, want {want:?})")
                        });
                        writes += 1;
                        assert!(writes <= 4, "no convergence from {start:?} to {want:?}");
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

    /// A crash between any two writes: the next cycle, deciding from the
    /// object alone, continues the same sequence (no step is undone).
    #[test]
    fn stop_then_readmit_resumes_after_a_crash_anywhere() {
        let running = obs("t", &["a"]);
        let mut o = running.clone();
        let mut seen = vec![o.clone()];
        while next_step(&o, &Want::Queued) != Step::None {
            o = apply(&o, &next_step(&o, &Want::Queued)).expect("accepted");
            seen.push(o.clone());
        }
        assert_eq!(seen.len(), 4, "suspend, clear startTime, restore: {seen:?}");
        // from every intermediate state the remaining steps are the tail of the sequence
        for (i, s) in seen.iter().enumerate() {
            let mut o = s.clone();
            let mut n = 0;
            while next_step(&o, &Want::Queued) != Step::None {
                o = apply(&o, &next_step(&o, &Want::Queued)).expect("accepted");
                n += 1;
            }
            assert_eq!(n, seen.len() - 1 - i);
        }
        // and the re-admission after it is pin, then unsuspend
        let want = Want::Run(nodes(&["b"]));
        assert_eq!(next_step(&o, &want), Step::Pin(nodes(&["b"])));
        let o = apply(&o, &Step::Pin(nodes(&["b"]))).expect("accepted");
        assert_eq!(next_step(&o, &want), Step::Unsuspend);
    }
}
