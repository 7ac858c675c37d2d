//! The PoolNode life cycle: `Pending → Launched → Registered → Ready`, with
//! timeouts from [`Policy`] and launch errors.
//!
//! | phase      | fact observed                         | step                                           |
//! |------------|---------------------------------------|------------------------------------------------|
//! | Pending    | insufficient-capacity error           | terminate, mark offering unavailable until now + `unavailableOfferingTtl` |
//! | Pending    | capacity type not permitted by the account | terminate, mark every offering of the provider with that capacity type unavailable until now + `unavailableOfferingTtl` |
//! | Pending    | other permanent error                 | terminate (`LaunchFailed`)                      |
//! | Pending    | launch accepted                       | advance (to Launched, or further if also registered / ready) |
//! | Pending    | nothing for `launchTimeout`           | terminate (`LaunchTimeout`)                     |
//! | Launched   | insufficient-capacity error           | terminate, mark offering unavailable            |
//! | Launched   | node registered                       | advance to Registered (Ready if also ready)     |
//! | Launched   | nothing for `registrationTimeout`     | terminate (`RegistrationTimeout`)               |
//! | Registered | ready with GPUs allocatable           | advance to Ready                                |
//! | Registered | not for `initializationTimeout`       | terminate (`InitializationTimeout`)             |
//! | Registered, Ready | its Node gone (launched, yet no Node carries its provider id) | lost: drain (`NodeLost`) |
//! | otherwise  |                                       | stay                                            |
//!
//! Transient errors (throttling, 5xx) are retried: the node stays until its
//! phase times out. Timeouts count from `phaseSince`.
//!
//! A lost node is drained, not replaced: its gang's pods are pinned to the
//! gang's nodes by name, and a rank of a distributed job rarely survives a
//! peer's restart anyway, so the whole gang is requeued at once (reason
//! `NodeLost`) and planned again, rather than left with a pod Pending for a
//! node that never comes back. The Node goes when its instance does (the
//! cloud's node controller deletes it) or when someone deletes it; the
//! kubelet does not register it again while running, so the instance is
//! of no more use and is terminated.
//!
//! A node that stays may still deserve a warning ([`gpu_warning`]): Ready for
//! `gpuRegistrationTimeout` without allocatable GPUs means the device plugin
//! never ran on it (it does not tolerate the pool's taints, or the driver is
//! missing). The warning says so well before `initializationTimeout` gives
//! the node up.

use crate::model::{CapacityType, NodePhase, OfferingKey, Provider, Taint, TaintEffect};
use crate::snapshot::Policy;
use crate::time::Dur;
use crate::time::Time;

/// Kinds of launch error a provider reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchError {
    /// The cloud has no capacity for the offering now.
    InsufficientCapacity,
    /// An account limit or quota was hit.
    QuotaExceeded,
    /// The request can never succeed (bad image, bad subnet, …).
    InvalidRequest,
    /// Worth retrying (throttling, server error).
    Transient,
    /// The account refuses the offering's capacity type until its operator
    /// does a one-time step (EC2: the spot service-linked role is missing):
    /// every offering of that type would fail alike.
    CapacityTypeNotPermitted,
}

/// What the driver has observed about the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed {
    /// The cloud accepted the launch (an instance id exists).
    pub launch_accepted: bool,
    /// A Node object registered.
    pub registered: bool,
    /// The Node is Ready and its GPUs are allocatable (device plugin up).
    pub ready_with_gpus: bool,
    /// The last launch error, if any.
    pub launch_error: Option<LaunchError>,
}

/// Why a PoolNode is terminated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateReason {
    /// The cloud did not accept the launch within `launchTimeout`.
    LaunchTimeout,
    /// The machine did not register within `registrationTimeout`.
    RegistrationTimeout,
    /// The node was not Ready with GPUs within `initializationTimeout`.
    InitializationTimeout,
    /// The cloud had no capacity.
    InsufficientCapacity,
    /// The launch failed for good.
    LaunchFailed,
    /// The account does not permit the offering's capacity type yet.
    CapacityTypeNotPermitted,
}

impl TerminateReason {
    /// The bounded name, for conditions, Events and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminateReason::LaunchTimeout => "LaunchTimeout",
            TerminateReason::RegistrationTimeout => "RegistrationTimeout",
            TerminateReason::InitializationTimeout => "InitializationTimeout",
            TerminateReason::InsufficientCapacity => "InsufficientCapacity",
            TerminateReason::LaunchFailed => "LaunchFailed",
            TerminateReason::CapacityTypeNotPermitted => "CapacityTypeNotPermitted",
        }
    }
}

/// Why a node that stays in its phase is flagged (a condition and a Warning
/// Event, not a step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeWarning {
    /// The Node is Ready but has reported no allocatable `nvidia.com/gpu`
    /// for `gpuRegistrationTimeout`.
    GpusNotAllocatable,
}

impl NodeWarning {
    /// The bounded name, for conditions and Events.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeWarning::GpusNotAllocatable => "GPUsNotAllocatable",
        }
    }
}

/// The warning, if any, for a node in `phase` whose Node has been Ready since
/// `ready_since` (`None` when not Ready) and shows `gpus_allocatable` GPUs.
/// Only a Registered node (Ready, yet not advanced for want of GPUs) is
/// flagged; the timeout counts from when the Node became Ready.
pub fn gpu_warning(
    phase: NodePhase,
    ready_since: Option<Time>,
    gpus_allocatable: bool,
    policy: &Policy,
    now: Time,
) -> Option<NodeWarning> {
    let since = ready_since?;
    (phase == NodePhase::Registered
        && !gpus_allocatable
        && now >= since + policy.gpu_registration_timeout)
        .then_some(NodeWarning::GpusNotAllocatable)
}

/// What a [`NodeWarning::GpusNotAllocatable`] tells the operator to check:
/// the device plugin (or GPU operator) must tolerate every taint of the
/// pool, named here, and the image must carry the NVIDIA driver.
pub fn gpu_warning_message(node: &str, taints: &[Taint], waited: Dur) -> String {
    let named: Vec<String> = taints.iter().map(taint_text).collect();
    let tolerate = if named.is_empty() {
        "is scheduled on the node".to_string()
    } else {
        format!("tolerates the pool's taints {}", named.join(", "))
    };
    format!(
        "Node {node} has been Ready for {waited} without allocatable nvidia.com/gpu: check that \
         the NVIDIA device plugin or GPU operator DaemonSet {tolerate}, and that the NVIDIA \
         driver is installed on the node image (or installed by the GPU operator)"
    )
}

fn taint_text(t: &Taint) -> String {
    let effect = match t.effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    };
    if t.value.is_empty() {
        format!("{}:{effect}", t.key)
    } else {
        format!("{}={}:{effect}", t.key, t.value)
    }
}

/// What to do with the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing yet.
    Stay,
    /// Move to this phase (`phaseSince` = now).
    Advance(NodePhase),
    /// The node is lost (its Node is gone): drain it with the reason
    /// [`crate::lifecycle::gang::EvictReason::NodeLost`], which evicts the
    /// gang on it whole, then delete it (its finalizer terminates the
    /// instance).
    Lost,
    /// Delete the PoolNode (its finalizer terminates any instance).
    Terminate {
        /// Why.
        reason: TerminateReason,
        /// Also mark these offerings unavailable until this time (the next
        /// snapshot carries it as `Offering::unavailable_until`), so the
        /// planner re-plans the gang elsewhere.
        mark_unavailable: Option<(Unavailable, Time)>,
    },
}

/// What a failed launch makes unavailable for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// This offering (the cloud had no capacity for it).
    Offering(OfferingKey),
    /// Every offering of this provider with this capacity type (the account
    /// does not permit it yet).
    CapacityType(Provider, CapacityType),
}

impl Unavailable {
    /// Whether `key` is among the offerings this marks.
    pub fn covers(&self, key: &OfferingKey) -> bool {
        match self {
            Unavailable::Offering(k) => k == key,
            Unavailable::CapacityType(p, c) => key.provider == *p && key.capacity_type == *c,
        }
    }
}

/// The next step for a node of `offering` in `phase` since `since`.
pub fn next(
    phase: NodePhase,
    since: Time,
    offering: &OfferingKey,
    seen: Observed,
    policy: &Policy,
    now: Time,
) -> Step {
    let terminate = |reason| Step::Terminate {
        reason,
        mark_unavailable: None,
    };
    let until = now + policy.unavailable_offering_ttl;
    let no_capacity = || Step::Terminate {
        reason: TerminateReason::InsufficientCapacity,
        mark_unavailable: Some((Unavailable::Offering(offering.clone()), until)),
    };
    let not_permitted = || Step::Terminate {
        reason: TerminateReason::CapacityTypeNotPermitted,
        mark_unavailable: Some((
            Unavailable::CapacityType(offering.provider, offering.capacity_type),
            until,
        )),
    };
    let furthest = || {
        if seen.ready_with_gpus && seen.registered {
            NodePhase::Ready
        } else if seen.registered {
            NodePhase::Registered
        } else {
            NodePhase::Launched
        }
    };
    match phase {
        NodePhase::Pending => match seen.launch_error {
            Some(LaunchError::InsufficientCapacity) => no_capacity(),
            Some(LaunchError::CapacityTypeNotPermitted) => not_permitted(),
            Some(LaunchError::QuotaExceeded | LaunchError::InvalidRequest) => {
                terminate(TerminateReason::LaunchFailed)
            }
            _ if seen.launch_accepted || seen.registered => Step::Advance(furthest()),
            _ if now >= since + policy.launch_timeout => terminate(TerminateReason::LaunchTimeout),
            _ => Step::Stay,
        },
        NodePhase::Launched => {
            if seen.launch_error == Some(LaunchError::InsufficientCapacity) && !seen.registered {
                no_capacity()
            } else if seen.registered {
                Step::Advance(furthest())
            } else if now >= since + policy.registration_timeout {
                terminate(TerminateReason::RegistrationTimeout)
            } else {
                Step::Stay
            }
        }
        NodePhase::Registered | NodePhase::Ready if seen.launch_accepted && !seen.registered => {
            Step::Lost
        }
        NodePhase::Registered => {
            if seen.ready_with_gpus {
                Step::Advance(NodePhase::Ready)
            } else if now >= since + policy.initialization_timeout {
                terminate(TerminateReason::InitializationTimeout)
            } else {
                Step::Stay
            }
        }
        NodePhase::Ready | NodePhase::Draining | NodePhase::Terminating => Step::Stay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let key = OfferingKey {
            provider: Provider::Sim,
            zone: "z".into(),
            instance_type: "p4d.24xlarge".into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        };
        let p = Policy::default(); // launch 5m, registration 15m, init 10m, ttl 3m
        let o = |a, r, g, e| Observed {
            launch_accepted: a,
            registered: r,
            ready_with_gpus: g,
            launch_error: e,
        };
        let none = o(false, false, false, None);
        let ice = Some(LaunchError::InsufficientCapacity);
        use NodePhase::*;
        use TerminateReason::*;
        let t = |reason| Step::Terminate {
            reason,
            mark_unavailable: None,
        };
        let cases: Vec<(NodePhase, i64, Observed, Step)> = vec![
            (Pending, 10, none, Step::Stay),
            (Pending, 300, none, t(LaunchTimeout)),
            (
                Pending,
                10,
                o(true, false, false, None),
                Step::Advance(Launched),
            ),
            (Pending, 10, o(true, true, true, None), Step::Advance(Ready)),
            (
                Pending,
                10,
                o(false, false, false, Some(LaunchError::Transient)),
                Step::Stay,
            ),
            (
                Pending,
                10,
                o(false, false, false, Some(LaunchError::InvalidRequest)),
                t(LaunchFailed),
            ),
            (
                Pending,
                10,
                o(false, false, false, Some(LaunchError::QuotaExceeded)),
                t(LaunchFailed),
            ),
            (
                Pending,
                10,
                o(false, false, false, ice),
                Step::Terminate {
                    reason: InsufficientCapacity,
                    mark_unavailable: Some((Unavailable::Offering(key.clone()), Time(1010 + 180))),
                },
            ),
            (
                Pending,
                10,
                o(
                    false,
                    false,
                    false,
                    Some(LaunchError::CapacityTypeNotPermitted),
                ),
                Step::Terminate {
                    reason: TerminateReason::CapacityTypeNotPermitted,
                    mark_unavailable: Some((
                        Unavailable::CapacityType(Provider::Sim, CapacityType::Spot),
                        Time(1010 + 180),
                    )),
                },
            ),
            (Launched, 10, none, Step::Stay),
            (Launched, 900, none, t(RegistrationTimeout)),
            (
                Launched,
                10,
                o(true, true, false, None),
                Step::Advance(Registered),
            ),
            (
                Launched,
                10,
                o(true, true, true, None),
                Step::Advance(Ready),
            ),
            (
                Launched,
                10,
                o(true, false, false, ice),
                Step::Terminate {
                    reason: InsufficientCapacity,
                    mark_unavailable: Some((Unavailable::Offering(key.clone()), Time(1010 + 180))),
                },
            ),
            (Registered, 10, o(true, true, false, None), Step::Stay),
            (
                Registered,
                600,
                o(true, true, false, None),
                t(InitializationTimeout),
            ),
            (
                Registered,
                599,
                o(true, true, true, None),
                Step::Advance(Ready),
            ),
            (Ready, 100_000, none, Step::Stay),
            (Ready, 10, o(true, true, true, None), Step::Stay),
            (Ready, 10, o(true, false, false, None), Step::Lost),
            (Registered, 10, o(true, false, false, None), Step::Lost),
            (Draining, 10, o(true, false, false, None), Step::Stay),
            (Draining, 100_000, none, Step::Stay),
        ];
        for (i, (phase, elapsed, seen, want)) in cases.into_iter().enumerate() {
            let since = Time(1000);
            let now = Time(1000 + elapsed);
            let got = next(phase, since, &key, seen, &p, now);
            // Unavailable-until is relative to now: rebase the expectation.
            let want = match want {
                Step::Terminate {
                    reason,
                    mark_unavailable: Some((k, _)),
                } => Step::Terminate {
                    reason,
                    mark_unavailable: Some((k, now + p.unavailable_offering_ttl)),
                },
                w => w,
            };
            assert_eq!(
                got, want,
                "case {i}: {phase:?} after {elapsed}s with {seen:?}"
            );
        }
    }

    #[test]
    fn a_capacity_type_mark_covers_that_type_of_that_provider_only() {
        let key = |p, c| OfferingKey {
            provider: p,
            zone: "z".into(),
            instance_type: "g5.xlarge".into(),
            capacity_type: c,
            reservation: None,
        };
        let spot = Unavailable::CapacityType(Provider::Aws, CapacityType::Spot);
        assert!(spot.covers(&key(Provider::Aws, CapacityType::Spot)));
        assert!(!spot.covers(&key(Provider::Aws, CapacityType::OnDemand)));
        assert!(!spot.covers(&key(Provider::Gcp, CapacityType::Spot)));
        let one = Unavailable::Offering(key(Provider::Aws, CapacityType::Spot));
        assert!(one.covers(&key(Provider::Aws, CapacityType::Spot)));
        let mut other = key(Provider::Aws, CapacityType::Spot);
        other.zone = "y".into();
        assert!(!one.covers(&other));
    }

    #[test]
    fn gpu_warning_table() {
        let p = Policy::default(); // gpu registration 5m
        let ready = Some(Time(1000));
        use NodePhase::*;
        // (phase, ready since, GPUs allocatable, seconds after 1000, warned)
        let cases: Vec<(NodePhase, Option<Time>, bool, i64, bool)> = vec![
            (Registered, ready, false, 299, false),
            (Registered, ready, false, 300, true),
            (Registered, ready, true, 10_000, false),
            (Registered, None, false, 10_000, false),
            (Launched, ready, false, 10_000, false),
            (Ready, ready, false, 10_000, false),
            (Draining, ready, false, 10_000, false),
        ];
        for (i, (phase, since, gpus, elapsed, warned)) in cases.into_iter().enumerate() {
            let got = gpu_warning(phase, since, gpus, &p, Time(1000 + elapsed));
            assert_eq!(
                got,
                warned.then_some(NodeWarning::GpusNotAllocatable),
                "case {i}: {phase:?} ready since {since:?}, gpus {gpus}, after {elapsed}s"
            );
        }
    }

    #[test]
    fn gpu_warning_message_names_every_taint() {
        let taints = vec![
            Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            },
            Taint {
                key: "muster.dev/pool".into(),
                value: String::new(),
                effect: TaintEffect::NoExecute,
            },
        ];
        let m = gpu_warning_message("ip-10-0-0-1", &taints, Dur::mins(5));
        assert!(m.contains("Node ip-10-0-0-1 has been Ready for 5m"), "{m}");
        assert!(
            m.contains("nvidia.com/gpu=true:NoSchedule, muster.dev/pool:NoExecute"),
            "{m}"
        );
        assert!(m.contains("device plugin") && m.contains("driver"), "{m}");
        let untainted = gpu_warning_message("n", &[], Dur::secs(90));
        assert!(
            untainted.contains("is scheduled on the node"),
            "{untainted}"
        );
    }
}
