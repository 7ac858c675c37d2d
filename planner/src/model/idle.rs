//! Idle GPU holders: a queue's policy for gangs whose GPUs stay unused, and
//! the utilisation a driver observed for each gang (from the DCGM
//! exporter's `DCGM_FI_DEV_GPU_UTIL` in the controller).

use serde::{Deserialize, Serialize};

use super::gang::GangId;
use crate::time::{Dur, Time};

/// What happens to a gang whose GPUs stay idle for a queue's window.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum IdleAction {
    /// A condition and an Event on the gang; nothing else.
    #[default]
    Report,
    /// Evicted as a whole and queued again after the backoff.
    Requeue,
    /// Evicted as a whole and not queued again: its workload stays
    /// suspended until someone deletes or resubmits it.
    Stop,
}

impl IdleAction {
    /// The action's name, as in the GPUQueue's `spec.idlePolicy.action`.
    pub fn as_str(self) -> &'static str {
        match self {
            IdleAction::Report => "Report",
            IdleAction::Requeue => "Requeue",
            IdleAction::Stop => "Stop",
        }
    }
}

/// A queue's rule for idle GPU holders.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IdlePolicy {
    /// A gang is idle while the busiest of its GPUs is below this
    /// utilisation, in percent.
    pub threshold_percent: u32,
    /// How long a gang must stay idle before the action is taken.
    pub window: Dur,
    /// What is done then.
    #[serde(default)]
    pub action: IdleAction,
}

/// One observation of a gang's GPUs: the utilisation of the busiest of
/// them at one instant, in percent (0–100).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UtilSample {
    /// When.
    pub at: Time,
    /// Utilisation of the gang's busiest GPU then, in percent.
    pub percent: f64,
}

/// The utilisation a driver observed for one gang's GPUs; the order of
/// the samples does not matter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GangUtilization {
    /// The gang.
    pub gang: GangId,
    /// Observations, any order.
    #[serde(default)]
    pub samples: Vec<UtilSample>,
}
