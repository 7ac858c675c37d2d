//! The planner's output: what to admit, launch, release, preempt and remove,
//! and why every other gang waits.
//!
//! A [`Plan`] is an instruction list for a driver. Drivers carry it out
//! idempotently; anything they cannot do shows up in the next snapshot and is
//! planned again.
//!
//! # Driver contract
//!
//! Apply the items of one plan in this order ([`crate::apply::apply`] is a
//! reference implementation for an instant cloud). What each item makes of
//! a gang's record is one pure mapping every driver applies,
//! [`crate::lifecycle::record::after_plan`]; the driver carries out the rest:
//!
//! 1. **Preemptions** — evict the victim gang as a whole: phase `Evicted`
//!    with `notBefore` = now (preemption does not back off and does not
//!    count in `evictions`), assignments cleared — recorded before the
//!    workload is re-suspended, and the workload left alone when that
//!    record cannot be written; clear
//!    `reservedFor` on nodes reserved for it. The preemptor is not admitted in
//!    this plan; it is planned again once the victim's capacity is free.
//! 2. **Releases** — for every node listed: if `handedTo` is set, set its
//!    `reservedFor` to that gang (which has an admission or launch in the
//!    same plan using it); otherwise clear `reservedFor`, and delete nodes
//!    still in flight (`Pending`, `Launched`, `Registered`: cancel the
//!    launch, terminate the instance); Ready nodes stay as free capacity
//!    (consolidation removes them later). If the releasing gang has no
//!    admission or launch in the same plan and is `Provisioning`, it goes
//!    back to `Queued` (assignments and deadline cleared).
//! 3. **Launches** — first write every PoolNode of `nodes` (phase `Pending`,
//!    `reservedFor` = the gang, the given name, idempotency key, offering,
//!    price and placement group), set `reservedFor` = the gang on every node
//!    of `reserve`, and set the gang to `Provisioning` with `assignments`,
//!    `provisioningDeadline` = `deadline` and, for a launch set it does not
//!    hold yet, `launchAttempts` + 1 — all before any cloud call. Then launch each PoolNode with its idempotency
//!    key. Pods are not started; the gang is admitted by a later plan once
//!    every node in its assignments is Ready.
//! 4. **Admissions** — set the gang `Admitted` (`admittedAt` = now,
//!    `provisioningDeadline` cleared) with the given assignments, and only once that is recorded, pin every pod to
//!    its node (node selector on
//!    `kubernetes.io/hostname`, tolerations for the taints of the node's
//!    pool — the planner treats those as tolerated for pod sets that request
//!    GPUs or another device; a pod set that requests none, and any other
//!    taint, must be tolerated by the pods themselves) and unsuspend the
//!    workload. `reservedFor` is left as it is.
//! 5. **Removals** — `Empty`, `Underutilized`, `ScaleToZero`: cordon, evict
//!    the movable pods (a disruptible gang with a pod there is evicted as a
//!    whole and requeued without backoff), then terminate. `Replace`: launch
//!    `with` first; when it is Ready, drain and terminate the old node.
//! 6. **Waiting** — write `reason`, `message` and `position` to the gang's
//!    status (condition + Event with the bounded reason). Nothing else.
//! 7. **Idle** — for each gang whose GPUs stayed below its queue's idle
//!    threshold for the window: set its `GPUsIdle` condition and publish an
//!    Event with the entry's reason; for `Requeue`, evict it as a whole like
//!    a pods-ready timeout (re-suspend the workload, clear assignments and
//!    reservations, phase `Evicted` with `notBefore`, `evictions` + 1); for
//!    `Stop`, evict it the same way but do not queue it again (phase
//!    `Finished`, the workload left suspended). A gang preempted in the same
//!    plan is only preempted.
//!
//! A gang appears in at most one of admissions, launches and waiting. New
//! node names are derived from the gang id, `launchAttempts` and an index,
//! so re-planning after a crash between writing and launching yields the
//! same names and keys.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{Assignment, GangId, IdleAction, OfferingKey, Price};
use crate::time::Time;

/// Everything decided in one planning cycle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Gangs whose every pod has a place on Ready nodes: pin and start them.
    pub admissions: Vec<Admission>,
    /// Gangs that need new machines: write all the PoolNodes, then launch.
    pub launches: Vec<Launch>,
    /// Reserved capacity to give up.
    pub releases: Vec<Release>,
    /// Gangs to evict as a whole to make room.
    pub preemptions: Vec<Preemption>,
    /// Nodes to remove (consolidation, scale to zero).
    pub removals: Vec<Removal>,
    /// Every gang that still waits, with its position and reason.
    pub waiting: Vec<Waiting>,
    /// Running gangs whose GPUs stayed idle past their queue's window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<IdleGang>,
    /// Empty nodes kept past `consolidateAfter` as warm capacity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warm: Vec<WarmNode>,
}

/// An empty node a pool keeps for the gangs that arrive next
/// (`keepWarm`), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WarmNode {
    /// Node name.
    pub node: String,
    /// Its pool.
    pub pool: String,
    /// Its GPUs: the size class it is kept for.
    pub gpus: u64,
    /// What it costs per hour.
    pub price: Price,
    /// Machines of that class the pool's recent arrivals asked for at
    /// most within one `keepWarm.burst`.
    pub demand: u64,
}

/// Start a gang on the nodes given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// The gang.
    pub gang: GangId,
    /// A node for every pod.
    pub assignments: Vec<Assignment>,
}

/// A machine to launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewNode {
    /// Name of the PoolNode (and of the node, where the cloud allows).
    pub name: String,
    /// Idempotency key for the cloud call (stable across re-plans of the same
    /// launch attempt).
    pub idempotency_key: String,
    /// The pool that buys it.
    pub pool: String,
    /// Exactly what to buy.
    pub offering: OfferingKey,
    /// Its price per hour.
    pub price: Price,
    /// The placement group to launch it into (created by the driver if it
    /// does not exist); set for `SamePlacementGroup` gangs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group: Option<String>,
    /// The grant request this node is bought in (flex-start): every
    /// flex-start node of one launch names the same request, so the cloud
    /// grants them together or not at all. Derived from the launch attempt
    /// (`naming::grant_name`), so it is the same across re-plans of the
    /// attempt. `None` for capacity bought one machine at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// New capacity for one gang, launched as a set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    /// The gang.
    pub gang: GangId,
    /// Machines to launch, all of them.
    pub nodes: Vec<NewNode>,
    /// Existing or in-flight nodes also held for the gang.
    pub reserve: Vec<String>,
    /// Where each pod will go once every node is Ready.
    pub assignments: Vec<Assignment>,
    /// Price per hour of the new machines together.
    pub price_per_hour: Price,
    /// Why this choice, for people.
    pub message: String,
    /// When the capacity must be complete (the driver stores it as the
    /// gang's `provisioningDeadline`): now + the pool's or the policy's
    /// provisioning timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
}

/// Why reserved capacity is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ReleaseReason {
    /// The capacity did not become Ready before the deadline.
    ProvisioningTimeout,
    /// The gang was planned again onto other capacity.
    Replanned,
    /// The gang no longer needs it (finished, deleted, evicted).
    NoLongerNeeded,
}

/// Give up nodes held for a gang.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    /// The gang that held them.
    pub gang: GangId,
    /// The nodes.
    pub nodes: Vec<String>,
    /// Why.
    pub reason: ReleaseReason,
    /// The gang that takes them over, if any.
    pub handed_to: Option<GangId>,
    /// For people.
    pub message: String,
}

/// Why a gang is preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PreemptionReason {
    /// A higher-priority gang of the same queue needs the room.
    WithinQueue,
    /// A queue takes back quota it lent to the cohort.
    ReclaimWithinCohort,
    /// Its own queue is drained (`stopPolicy: HoldAndDrain`): evicted and
    /// queued again, where the hold keeps it; `for_gang` is the gang itself.
    QueueDrained,
}

impl PreemptionReason {
    /// The bounded name, for conditions, Events and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptionReason::WithinQueue => "WithinQueue",
            PreemptionReason::ReclaimWithinCohort => "ReclaimWithinCohort",
            PreemptionReason::QueueDrained => "QueueDrained",
        }
    }
}

/// Evict a whole gang.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// The gang evicted.
    pub victim: GangId,
    /// The gang it makes room for.
    pub for_gang: GangId,
    /// Why.
    pub reason: PreemptionReason,
    /// For people.
    pub message: String,
}

/// How a node goes away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RemovalKind {
    /// Empty for longer than `consolidateAfter`.
    Empty,
    /// Underutilized; its movable pods fit elsewhere.
    Underutilized,
    /// Replaced by a strictly cheaper machine.
    Replace {
        /// The replacement, launched first.
        with: NewNode,
    },
    /// The pool has had no work for `scaleToZeroAfter`.
    ScaleToZero,
    /// The capacity it runs on ends at `ends_at` (a Capacity Block): it is
    /// drained `reservationDrainAhead` before. Unlike the kinds above, every
    /// gang with a pod on it is evicted as a whole and requeued at once, at
    /// its priority and without backoff, as for a spot interruption.
    CapacityEnding {
        /// When the capacity ends.
        ends_at: Time,
    },
}

/// Remove a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Removal {
    /// The node.
    pub node: String,
    /// Its pool.
    pub pool: String,
    /// How.
    pub kind: RemovalKind,
    /// Price per hour saved.
    pub saves_per_hour: Price,
    /// For people.
    pub message: String,
}

/// Bounded reasons a gang waits (metric labels, Event reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WaitReason {
    /// Its queue (and cohort) has no quota left for it.
    QuotaExhausted,
    /// Its capacity is being launched.
    Provisioning,
    /// Its capacity was not all Ready by its provisioning deadline: released
    /// (machines not Ready by then cancelled), the gang queues again.
    ProvisioningTimeout,
    /// Its capacity is launched-to-be but the cycle's launch budget is spent.
    LaunchBudget,
    /// Pool limits (GPUs, nodes, dollars) leave no room.
    PoolLimit,
    /// No offering that fits is available now (capacity errors, unknown prices).
    NoOffering,
    /// Nothing any allowed pool can buy ever holds it.
    Unsatisfiable,
    /// Behind a blocked head in a StrictFIFO queue, or one it might delay.
    BehindHead,
    /// Evicted; waiting out its backoff.
    Backoff,
    /// Its queue is stopped.
    QueueStopped,
    /// Its queue does not exist.
    UnknownQueue,
    /// Room is being made by preempting other gangs.
    Preempting,
}

impl WaitReason {
    /// The reason as a bounded label.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::QuotaExhausted => "QuotaExhausted",
            WaitReason::Provisioning => "Provisioning",
            WaitReason::ProvisioningTimeout => "ProvisioningTimeout",
            WaitReason::LaunchBudget => "LaunchBudget",
            WaitReason::PoolLimit => "PoolLimit",
            WaitReason::NoOffering => "NoOffering",
            WaitReason::Unsatisfiable => "Unsatisfiable",
            WaitReason::BehindHead => "BehindHead",
            WaitReason::Backoff => "Backoff",
            WaitReason::QueueStopped => "QueueStopped",
            WaitReason::UnknownQueue => "UnknownQueue",
            WaitReason::Preempting => "Preempting",
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A gang that waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// The gang.
    pub gang: GangId,
    /// Its queue.
    pub queue: String,
    /// 1-based position in its queue.
    pub position: u32,
    /// Bounded reason.
    pub reason: WaitReason,
    /// For people: "needs 32 A100 GPUs; queue team-a at nominal quota 16, cohort has 8 to lend".
    pub message: String,
}

/// Bounded reasons of an idle verdict (condition reasons, Event reasons,
/// metric labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum IdleReason {
    /// Idle past the window; the queue's policy only reports it.
    GPUsIdle,
    /// Idle past the window; evicted as a whole and queued again.
    IdleRequeued,
    /// Idle past the window; evicted as a whole and not queued again.
    IdleStopped,
}

impl IdleReason {
    /// The reason an action gives.
    pub fn of(action: IdleAction) -> IdleReason {
        match action {
            IdleAction::Report => IdleReason::GPUsIdle,
            IdleAction::Requeue => IdleReason::IdleRequeued,
            IdleAction::Stop => IdleReason::IdleStopped,
        }
    }

    /// The bounded name.
    pub fn as_str(self) -> &'static str {
        match self {
            IdleReason::GPUsIdle => "GPUsIdle",
            IdleReason::IdleRequeued => "IdleRequeued",
            IdleReason::IdleStopped => "IdleStopped",
        }
    }
}

/// A running gang whose GPUs stayed idle for its queue's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleGang {
    /// The gang.
    pub gang: GangId,
    /// Its queue.
    pub queue: String,
    /// What the driver does (the queue's `idlePolicy.action`).
    pub action: IdleAction,
    /// Bounded reason.
    pub reason: IdleReason,
    /// Since when every observation of its GPUs is below the threshold.
    pub since: Time,
    /// The highest utilisation observed since then, in percent.
    pub peak_percent: f64,
    /// For `Requeue`: when it queues again (now + the eviction backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,
    /// For people: what was seen, the rule, and what happens.
    pub message: String,
}
