//! The kinds held by a suspend flag in their own spec (all but pod groups
//! and LeaderWorkerSet groups, which are held by scheduling gates): the one
//! translation of a life-cycle table step into the write it needs. Suspend
//! and unsuspend are merge patches of the flag (a suspend also marks the
//! object stopping, so that a restore follows); what really differs by kind
//! is its [`Suspendable`]: where the flag is, whether it keeps a start mark
//! to clear (a Job's `status.startTime`), how the submitted templates (and
//! sizes) come back, and how each pod set is pinned to its nodes.

use muster_planner::lifecycle::workload::{Pins, Step};
use serde_json::{Value, json};

use crate::controller::base::api::ActError;
use crate::controller::base::objects::STOPPING_ANNOTATION;
use crate::controller::workloads::Directives;
use crate::controller::workloads::templated::merge_patch_at;
use crate::controller::workloads::writer::{Change, Target, Write};

/// Bounded names of a kind's writes, for errors and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Actions {
    /// Suspending.
    pub(crate) suspend: &'static str,
    /// Restoring the submitted templates.
    pub(crate) restore: &'static str,
    /// Pinning.
    pub(crate) pin: &'static str,
    /// Unsuspending.
    pub(crate) unsuspend: &'static str,
}

/// What differs between kinds held by a suspend flag.
pub(crate) trait Suspendable {
    /// The object written.
    fn target(&self) -> Target;
    /// JSON pointer to the suspend flag (`/spec/suspend`).
    fn suspend_flag(&self) -> &'static str;
    /// The names of its writes.
    fn actions(&self) -> Actions;
    /// The write that clears the kind's start mark; `None` for kinds that
    /// keep none (their controllers clear their children's).
    fn clear_start_time(&self) -> Option<Write> {
        None
    }
    /// The write that gives back the templates (and sizes) as submitted and
    /// takes muster's records and stopping mark out.
    fn restore(&self) -> Result<Write, ActError>;
    /// The write that pins each pod set to its nodes, recording the pins
    /// (and what it changed, to be restored).
    fn pin(&self, pins: &Pins, directives: &Directives) -> Result<Write, ActError>;
}

/// The merge patch that sets the flag at `flag` to `suspend`; a suspend
/// also marks the object stopping.
pub(crate) fn flag_patch(flag: &str, suspend: bool) -> Value {
    let mut patch = merge_patch_at(flag, Value::Bool(suspend));
    if suspend {
        patch["metadata"] = json!({"annotations": {STOPPING_ANNOTATION: "true"}});
    }
    patch
}

/// The writes `step` asks of `kind`, in order (none for [`Step::None`],
/// nor for [`Step::ClearStartTime`] where the kind keeps no start mark).
pub(crate) fn writes(
    kind: &impl Suspendable,
    step: &Step,
    directives: &Directives,
) -> Result<Vec<Write>, ActError> {
    let actions = kind.actions();
    let flag = |suspend: bool, action: &'static str| Write {
        target: kind.target(),
        change: Change::Patch(flag_patch(kind.suspend_flag(), suspend)),
        action,
    };
    Ok(match step {
        Step::None => Vec::new(),
        Step::Suspend => vec![flag(true, actions.suspend)],
        Step::ClearStartTime => kind.clear_start_time().into_iter().collect(),
        Step::Restore => vec![kind.restore()?],
        Step::Pin(pins) => vec![kind.pin(pins, directives)?],
        Step::Unsuspend => vec![flag(false, actions.unsuspend)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspend_marks_the_object_stopping_an_unsuspend_only_lifts_the_flag() {
        assert_eq!(
            flag_patch("/spec/runPolicy/suspend", true),
            json!({"metadata": {"annotations": {STOPPING_ANNOTATION: "true"}},
                "spec": {"runPolicy": {"suspend": true}}})
        );
        assert_eq!(
            flag_patch("/spec/suspend", false),
            json!({"spec": {"suspend": false}})
        );
    }
}
