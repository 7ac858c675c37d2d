//! Every reason the controller writes (Event reasons, condition reasons,
//! `status.reason` of Gangs and PoolNodes) with what happened, why, and what
//! to do. `docs/reference/events.md` is generated from [`catalog`]; the
//! reasons themselves come from the `as_str()` of the bounded enums that
//! produce them, so a renamed reason renames its row, and a new variant does
//! not compile until it is described here.

use muster_planner::lifecycle::gang::EvictReason;
use muster_planner::lifecycle::pool_node::TerminateReason;
use muster_planner::plan::{IdleReason, PreemptionReason, WaitReason};
use muster_provider_api::{ErrorCategory, InterruptionKind};

use crate::controller::base::errors::IssueReason;
use crate::controller::base::errors::ProviderSetupError;
use crate::controller::base::errors::WorkloadError;

/// One reason and its explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReasonDoc {
    /// The reason as written to the cluster.
    pub reason: &'static str,
    /// Where it appears: object kind and field, Event type.
    pub(crate) appears: &'static str,
    /// What happened.
    pub(crate) what: &'static str,
    /// What the operator or user can do.
    pub(crate) todo: &'static str,
}

const fn doc(
    reason: &'static str,
    appears: &'static str,
    what: &'static str,
    todo: &'static str,
) -> ReasonDoc {
    ReasonDoc {
        reason,
        appears,
        what,
        todo,
    }
}

/// Started as a Job without a Gang (Warning Event on the Job).
pub(crate) const STARTED_OUTSIDE_MUSTER: &str = "StartedOutsideMuster";
/// A write to a workload (pin, unsuspend, suspend, restore) the API server
/// refused or could not make (Warning Event on the workload).
pub(crate) const WORKLOAD_WRITE_FAILED: &str = "WorkloadWriteFailed";
/// A pod keeps a node from draining (Warning Event on the PoolNode).
pub(crate) const DRAIN_BLOCKED: &str = "DrainBlocked";
/// Reason of a PoolNode drained because its cloud interrupts it.
pub(crate) const INTERRUPTED: &str = "Interrupted";
/// Reason of a PoolNode whose replacement failed: it serves on.
pub(crate) const REPLACEMENT_FAILED: &str = "ReplacementFailed";
/// Reason of a PoolNode removed because it holds nothing.
pub(crate) const EMPTY: &str = "Empty";
/// Reason of a PoolNode removed because its gangs fit elsewhere.
pub(crate) const UNDERUTILIZED: &str = "Underutilized";
/// Reason of a PoolNode replaced by a cheaper one.
pub(crate) const REPLACED: &str = "Replaced";
/// Reason of a PoolNode removed when its pool scales to zero.
pub(crate) const SCALE_TO_ZERO: &str = "ScaleToZero";
/// Reason of a PoolNode drained ahead of the end of the capacity it runs on
/// (a Capacity Block); its gangs are requeued whole without backoff.
pub(crate) const CAPACITY_ENDING: &str = "CapacityEnding";
/// Condition reason once a gang is no longer judged idle.
pub(crate) const NOT_IDLE: &str = "GPUsNotIdle";
/// Warning Event on a Gang whose workload's network-topology annotations
/// are wrong: a label that is not one of the known network layers (the
/// annotation is ignored), or both the required and the preferred one (the
/// required one is used).
pub(crate) const INVALID_NETWORK_TOPOLOGY: &str = "InvalidNetworkTopology";

fn job_error(e: &WorkloadError) -> ReasonDoc {
    let on = "workload (Job, JobSet, first pod of a pod group): Warning Event";
    match e {
        WorkloadError::NoQueue => doc(
            e.reason(),
            on,
            "The workload's `muster.dev/queue` label is empty, so no Gang is made for it and it is not queued.",
            "Set the label to the name of a GPUQueue (`kubectl get gpuqueues`).",
        ),
        WorkloadError::BadAnnotation(..) => doc(
            e.reason(),
            on,
            "A `muster.dev/*` annotation of the workload (min-count, gpu-model, priority, pod-group-size) does not parse; it is not queued.",
            "Fix the annotation named in the message (min-count, priority and pod-group-size are integers, gpu-model a comma-separated list).",
        ),
        WorkloadError::BadRequest(..) => doc(
            e.reason(),
            on,
            "A container's resource request is not a valid quantity; the workload is not queued.",
            "Fix the request named in the message (e.g. `nvidia.com/gpu: 8`, `memory: 40Gi`).",
        ),
        WorkloadError::BadShape(..) => doc(
            e.reason(),
            on,
            "The object does not have the shape its kind's API gives it (a JobSet without replicated jobs, for example); it is not queued.",
            "Fix the field named in the message.",
        ),
        WorkloadError::Unsupported(..) => doc(
            e.reason(),
            on,
            "The workload asks for what muster cannot run as a gang: a RayJob in `InteractiveMode` or without `shutdownAfterJobFinishes`, a RayCluster or RayJob with `enableInTreeAutoscaling: true`, a JobSet with `muster.dev/min-count` (the message names the field and why); it is not queued. The admission webhook refuses such an object at creation with the same message.",
            "Change the field named in the message (see docs/workloads.md) and submit the workload again.",
        ),
    }
}

fn issue(r: IssueReason) -> ReasonDoc {
    let on = "any muster object: `Valid=False` condition and Warning Event";
    match r {
        IssueReason::InvalidSpec => doc(
            r.as_str(),
            on,
            "The object's `spec` could not be read; the object is left out of planning until it is fixed.",
            "Correct the field named in the message; `kubectl explain` and docs/reference/crds.md show the schema.",
        ),
        IssueReason::InvalidReference => doc(
            r.as_str(),
            on,
            "The object names a NodeClass, pool or queue that does not exist or does not work; it is left out of planning.",
            "Create the referenced object or fix the name; a NodeClass must show `Ready=True`.",
        ),
        IssueReason::NamespaceNotAllowed => doc(
            r.as_str(),
            on,
            "The Gang's queue does not admit gangs from this namespace (its namespace selector does not match).",
            "Submit to a queue whose `namespaceSelector` selects the namespace, or widen the selector.",
        ),
    }
}

fn provider_setup(e: &ProviderSetupError) -> ReasonDoc {
    let on = "NodeClass: `Ready=False` condition";
    match e {
        ProviderSetupError::InvalidNodeClass(_) => doc(
            e.reason(),
            on,
            "The NodeClass spec could not be read for its cloud (a field is missing or malformed); its pools launch nothing until it is fixed.",
            "Correct the field the message names; `kubectl explain nodeclass.spec` and docs/reference/crds.md show the schema.",
        ),
        ProviderSetupError::Unsupported(_) => doc(
            e.reason(),
            on,
            "This controller binary was built without the NodeClass's cloud.",
            "Run an image built with that cloud's feature (`aws`, `gcp`), or use a NodeClass of a built-in cloud.",
        ),
        ProviderSetupError::Disabled(_) => doc(
            e.reason(),
            on,
            "The NodeClass's cloud is built in but not enabled: the simulated cloud (`sim`) makes Node objects with no machine behind them, so the controller launches on it only when told to.",
            "In a cluster meant for trying muster, start the controller with `--cloud sim` (chart value `clouds: [sim]`); elsewhere use a NodeClass of a real cloud.",
        ),
    }
}

fn launch_error(c: ErrorCategory) -> ReasonDoc {
    let on = "PoolNode: Warning Event and `status.reason` while Pending";
    match c {
        ErrorCategory::InsufficientCapacity => doc(
            c.as_str(),
            on,
            "The cloud has no capacity for the offering now; the offering is marked unavailable for a while and the gang is planned again on another.",
            "Nothing, usually. If it repeats, allow more zones, GPU models or capacity types in the GPUPool.",
        ),
        ErrorCategory::QuotaExceeded => doc(
            c.as_str(),
            on,
            "The cloud account's quota (e.g. vCPUs or GPUs per region) refused the launch.",
            "Raise the cloud quota, or lower the GPUPool's limits so muster does not ask for more than the account allows.",
        ),
        ErrorCategory::NotFound => doc(
            c.as_str(),
            on,
            "The cloud did not find something the launch named (image, subnet, instance type in that zone).",
            "Check the NodeClass's resolved status and the names in the message.",
        ),
        ErrorCategory::Transient => doc(
            c.as_str(),
            on,
            "The cloud call failed in a way that may pass (throttling, timeout); the same launch is retried with the same idempotency key.",
            "Nothing unless it persists; then check the controller's network path and cloud credentials.",
        ),
        ErrorCategory::CapacityTypeNotPermitted => doc(
            c.as_str(),
            on,
            "The cloud account refuses the offering's capacity type until a one-time step is done (EC2: a spot launch on an account without the `AWSServiceRoleForEC2Spot` service-linked role, by a role that may not create it); every offering of that capacity type is avoided for a while, and the NodeClass's `CapacityTypesPermitted` condition says so.",
            "Do the step the message names (EC2: `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com` once per account, docs/eks.md); spot launches resume by themselves when the mark expires.",
        ),
        ErrorCategory::Permanent => doc(
            c.as_str(),
            on,
            "The cloud refused the launch for good (permissions, invalid parameters).",
            "Read the message; fix the NodeClass or the controller's cloud permissions (docs/aws.md, docs/gcp.md).",
        ),
    }
}

fn terminate(r: TerminateReason) -> ReasonDoc {
    let on = "PoolNode: Warning Event, then the PoolNode is deleted";
    match r {
        TerminateReason::LaunchTimeout => doc(
            r.as_str(),
            on,
            "The cloud did not accept the launch within the pool's `launchTimeout`; the node is given up and the gang re-planned.",
            "Nothing unless it repeats; then look at the cloud's API errors in the earlier Events.",
        ),
        TerminateReason::RegistrationTimeout => doc(
            r.as_str(),
            on,
            "The machine started but no Node registered within `registrationTimeout`.",
            "Check the NodeClass's image and bootstrap (user data) and that the machine can reach the API server.",
        ),
        TerminateReason::InitializationTimeout => doc(
            r.as_str(),
            on,
            "The Node registered but was not Ready with allocatable GPUs within `initializationTimeout`.",
            "Check the GPU driver and device plugin on the image (`kubectl describe node`).",
        ),
        TerminateReason::InsufficientCapacity => doc(
            r.as_str(),
            on,
            "The cloud had no capacity for this offering; the offering is avoided for a while.",
            "Nothing, usually; allow more zones or GPU models in the pool if gangs keep waiting.",
        ),
        TerminateReason::CapacityTypeNotPermitted => doc(
            r.as_str(),
            on,
            "The account does not permit the offering's capacity type yet (see the `CapacityTypeNotPermitted` launch error); every offering of that type is avoided for a while and the gang is planned again on the others.",
            "Do the step the launch error's message names; nothing else.",
        ),
        TerminateReason::LaunchFailed => doc(
            r.as_str(),
            on,
            "The cloud refused the launch for a reason a retry will not fix; the PoolNode is deleted and the gang planned again on other capacity.",
            "Read the Warning Event before it on the same PoolNode (QuotaExceeded, NotFound or Permanent) and fix its cause in the NodeClass, the GPUPool or the cloud account.",
        ),
    }
}

fn removals() -> [ReasonDoc; 5] {
    let on = "PoolNode: Normal Event and `status.reason` (phase Draining)";
    [
        doc(
            EMPTY,
            on,
            "The node held no gang for the pool's `disruption.consolidateAfter`; it is drained and terminated so it stops costing money.",
            "Nothing. Raise the pool's `spec.disruption.consolidateAfter` to keep every empty node longer, or its `spec.disruption.keepWarm` window or burst to keep as many as recent arrivals used.",
        ),
        doc(
            UNDERUTILIZED,
            on,
            "Its gangs fit on other nodes; it is drained to save cost (consolidation).",
            "Nothing. To keep a node, annotate its pods `muster.dev/do-not-disrupt`, or set the pool's `spec.disruption.consolidation` to `WhenEmpty`.",
        ),
        doc(
            REPLACED,
            on,
            "A cheaper offering can hold what it runs; a replacement is launched first, then this node drains.",
            "Nothing. Set the pool's `spec.disruption.consolidation` to `WhenEmpty` to turn replacements off.",
        ),
        doc(
            SCALE_TO_ZERO,
            on,
            "The pool had no queued or running work for its `disruption.scaleToZeroAfter`; the node is removed.",
            "Nothing. The next queued gang launches capacity again; raise `scaleToZeroAfter` to keep nodes through short pauses.",
        ),
        doc(
            CAPACITY_ENDING,
            "PoolNode: `status.reason` (phase Draining) and Event; Gang: `status.reason` (phase Evicted)",
            "The reserved capacity the node runs on (a Capacity Block, a reservation with an end date) ends soon; the node drains ahead of the end and every gang with a pod on it is evicted whole and requeued at once, at its priority, without backoff.",
            "Nothing; checkpoint long jobs. A gang that must not be cut short should leave out `muster.dev/may-outlive-capacity`, so it is placed only on capacity that outlives its `expectedDuration`.",
        ),
    ]
}

fn interruption(k: InterruptionKind) -> ReasonDoc {
    let on = "PoolNode: Warning Event and `Interrupted=True` condition";
    match k {
        InterruptionKind::SpotInterruption => doc(
            k.as_str(),
            on,
            "The cloud will reclaim this spot machine shortly; its gangs are evicted whole and requeued.",
            "Nothing; checkpoint long jobs, or use on-demand capacity for gangs that cannot restart.",
        ),
        InterruptionKind::RebalanceRecommendation => doc(
            k.as_str(),
            on,
            "The cloud says this spot machine is at raised risk of interruption; muster records it and keeps the node until an interruption notice comes.",
            "Nothing. Gangs that cannot afford a restart belong on on-demand capacity (the pool's `capacityTypes`).",
        ),
        InterruptionKind::Preempted => doc(
            k.as_str(),
            on,
            "The cloud preempted or stopped the machine (GCP spot or preemptible capacity); its gangs are evicted whole and requeued.",
            "Nothing; checkpoint long jobs, or use on-demand capacity for gangs that cannot restart.",
        ),
        InterruptionKind::ScheduledMaintenance => doc(
            k.as_str(),
            on,
            "The cloud scheduled maintenance that stops, reboots or retires this machine (an AWS Health scheduled change for EC2); the node drains now and its gangs are evicted whole and requeued.",
            "Nothing; the offering stays available, so the gang may be placed on a new machine of the same type.",
        ),
        InterruptionKind::Terminated => doc(
            k.as_str(),
            on,
            "The machine was terminated outside muster (cloud console, another tool, the cloud itself); its gangs are requeued.",
            "Find who terminated it (the cloud's audit log); muster launches capacity again if gangs still need it.",
        ),
    }
}

fn wait(r: WaitReason) -> ReasonDoc {
    let on = "Gang: `status.reason` (the message says the numbers)";
    match r {
        WaitReason::QuotaExhausted => doc(
            r.as_str(),
            on,
            "Its queue, with what its cohort can lend, has no quota left for the gang.",
            "Wait for gangs of the queue to finish, raise the queue's quota or borrowing limit, or lower the gang's size.",
        ),
        WaitReason::Provisioning => doc(
            r.as_str(),
            on,
            "Nodes for the gang are being launched; it is admitted when all are Ready.",
            "Nothing. `kubectl get poolnodes` shows their progress.",
        ),
        WaitReason::ProvisioningTimeout => doc(
            r.as_str(),
            on,
            "Its nodes were not all Ready by its `provisioningDeadline`: they were released (launches whose machine never registered a Node cancelled, not offered to another gang) and the gang is `Queued` again.",
            "If it repeats, the PoolNodes' Events say why (launch errors, machines that never register); raise the pool's `provisioningTimeout` if machines boot slower than it.",
        ),
        WaitReason::LaunchBudget => doc(
            r.as_str(),
            on,
            "Capacity would be launched for it, but this cycle's budget of new nodes is spent (a limit against launching too much at once).",
            "Nothing; the next cycle launches more.",
        ),
        WaitReason::PoolLimit => doc(
            r.as_str(),
            on,
            "The pools it may use are at a limit (maxNodes, GPUs or dollars per hour).",
            "Raise the pool's limits or wait for capacity to free up.",
        ),
        WaitReason::NoOffering => doc(
            r.as_str(),
            on,
            "No offering that fits is available now (recent capacity errors, unknown prices).",
            "Wait, or allow more zones, GPU models or capacity types in the pools.",
        ),
        WaitReason::Unsatisfiable => doc(
            r.as_str(),
            on,
            "Nothing any pool it may use can buy will ever hold the gang (too many GPUs per pod, no such model).",
            "Change the gang's requests or GPU model, or add a pool with larger machines.",
        ),
        WaitReason::BehindHead => doc(
            r.as_str(),
            on,
            "Its queue is StrictFIFO and an earlier gang is blocked (or would be delayed).",
            "Wait; or use BestEffortFIFO for the queue.",
        ),
        WaitReason::Backoff => doc(
            r.as_str(),
            on,
            "It was evicted and waits out its backoff before it is considered again.",
            "Nothing; look at why it was evicted (previous `status.reason`, Events).",
        ),
        WaitReason::QueueStopped => doc(
            r.as_str(),
            on,
            "Its queue's `spec.stopPolicy` is `Hold` or `HoldAndDrain`, so the queue admits nothing new.",
            "Set the queue's `spec.stopPolicy` to `None` (`kubectl patch gpuqueue NAME --type merge -p '{\"spec\":{\"stopPolicy\":\"None\"}}'`).",
        ),
        WaitReason::UnknownQueue => doc(
            r.as_str(),
            on,
            "The queue it names does not exist.",
            "Create the GPUQueue or fix the Job's `muster.dev/queue` label.",
        ),
        WaitReason::Preempting => doc(
            r.as_str(),
            on,
            "Room is being made for it: lower-priority gangs (or gangs running on borrowed quota) are evicted whole; it is planned again once their capacity is free.",
            "Nothing. The message names the victims; they show phase `Evicted` with reason `WithinQueue` or `ReclaimWithinCohort`.",
        ),
    }
}

fn evict(r: EvictReason) -> ReasonDoc {
    let on = "Gang: `status.reason` (phase Evicted)";
    match r {
        EvictReason::PodsReadyTimeout => doc(
            r.as_str(),
            on,
            "Not all of its pods were running within `podsReadyTimeout`; it is evicted whole and requeued.",
            "Check pod events (image pulls, crash loops); raise the queue's podsReadyTimeout for slow starts.",
        ),
        EvictReason::NodeLost => doc(
            r.as_str(),
            "Gang: `status.reason` (phase Evicted); PoolNode: `status.reason` (phase Draining) and Warning Event",
            "A node it ran on went away: its Node was deleted (with its instance, or by hand). The PoolNode drains and its instance is terminated; the gang is evicted whole and requeued.",
            "Nothing; the gang starts again on new capacity. Checkpoint long jobs so a restart loses little.",
        ),
        EvictReason::SpotInterruption => doc(
            r.as_str(),
            on,
            "A spot node it held is being reclaimed; it is evicted whole and requeued.",
            "Nothing; checkpoint long jobs.",
        ),
        EvictReason::CapacityEnding => doc(
            r.as_str(),
            on,
            "A node it held drains because its reserved capacity ends soon; it is evicted whole and requeued at once.",
            "Nothing; checkpoint long jobs.",
        ),
    }
}

fn preempt(r: PreemptionReason) -> ReasonDoc {
    let on = "Gang: `status.reason` (phase Evicted)";
    match r {
        PreemptionReason::WithinQueue => doc(
            r.as_str(),
            on,
            "A higher-priority gang of the same queue needed the room; it is requeued.",
            "Nothing. Give gangs that must not be preempted a higher priority (the `muster.dev/priority` annotation or a priority class).",
        ),
        PreemptionReason::ReclaimWithinCohort => doc(
            r.as_str(),
            on,
            "It ran on quota its queue borrowed, and the lending queue took it back; it is requeued.",
            "Nothing. To avoid it, set a `borrowingLimit` on the queue's resources so its gangs stay within what it owns.",
        ),
        PreemptionReason::QueueDrained => doc(
            r.as_str(),
            on,
            "Its queue's `spec.stopPolicy` is `HoldAndDrain` (as `muster uninstall --running stop` sets it): it is evicted whole, its workload left suspended, and waits queued while the hold lasts.",
            "Set the queue's `spec.stopPolicy` back to `None` to run it again.",
        ),
    }
}

fn idle(r: IdleReason) -> ReasonDoc {
    match r {
        IdleReason::GPUsIdle => doc(
            r.as_str(),
            "Gang: `GPUsIdle=True` condition and Warning Event",
            "The gang's GPUs stayed below its queue's `idlePolicy.thresholdPercent` (the busiest GPU, from the DCGM exporter) for the whole `window`; the policy's action is `Report`, so it keeps running.",
            "Ask the gang's owner whether its work is done; delete the Job to free the GPUs, or set the queue's `spec.idlePolicy.action` to `Requeue` or `Stop`.",
        ),
        IdleReason::IdleRequeued => doc(
            r.as_str(),
            "Gang: `GPUsIdle=True` condition, Warning Event and `status.reason` (phase Evicted)",
            "The gang's GPUs stayed below its queue's idle threshold for the window and the policy is `Requeue`: it was evicted whole (Job suspended, pods deleted, GPUs freed) and queues again after the eviction backoff.",
            "Nothing for the operator. The job's owner should checkpoint, and keep GPUs busy while holding them (load data before asking for GPUs).",
        ),
        IdleReason::IdleStopped => doc(
            r.as_str(),
            "Gang: `GPUsIdle=True` condition, Warning Event and `status.reason` (phase Finished)",
            "The gang's GPUs stayed below its queue's idle threshold for the window and the policy is `Stop`: it was evicted whole and not queued again; its Job stays suspended.",
            "Delete the Job if its work is done; to run it again, delete and resubmit it.",
        ),
    }
}

/// Every reason, grouped by where it appears.
pub(crate) fn catalog() -> Vec<ReasonDoc> {
    let mut out = Vec::new();
    for e in [
        WorkloadError::NoQueue,
        WorkloadError::BadAnnotation("", String::new()),
        WorkloadError::BadRequest(String::new(), String::new()),
        WorkloadError::BadShape(String::new()),
        WorkloadError::Unsupported(""),
    ] {
        out.push(job_error(&e));
    }
    out.push(doc(
        STARTED_OUTSIDE_MUSTER,
        "workload: Warning Event",
        "The workload's pods started before muster admitted it; it is suspended and queued.",
        "Submit labelled Jobs with `spec.suspend: true` (the admission webhook does this).",
    ));
    out.push(doc(
        WORKLOAD_WRITE_FAILED,
        "workload: Warning Event",
        "A write muster makes to run or stop the workload (pin, unsuspend, suspend, restore) was refused or failed; the message carries the API server's answer, e.g. `failed calling webhook` when the workload controller's own admission webhook is down. Nothing else is written to it that cycle; the write is decided again and retried every cycle.",
        "Read the message: a webhook named there must be reachable (its controller running); a 422 names the field the API server refused. The gang keeps its admission until its pods-ready timeout.",
    ));
    for r in [
        IssueReason::InvalidSpec,
        IssueReason::InvalidReference,
        IssueReason::NamespaceNotAllowed,
    ] {
        out.push(issue(r));
    }
    out.push(doc(
        "Valid",
        "GPUPool, GPUQueue, NodeClass: `Valid=True` condition",
        "The object was read and is part of planning.",
        "Nothing.",
    ));
    out.push(doc(
        "Resolved",
        "NodeClass: `Ready=True` condition",
        "The cloud resolved the NodeClass (images, subnets, zones in its status).",
        "Nothing.",
    ));
    out.push(doc(
        "NotResolved",
        "NodeClass: `Ready=False` condition and Warning Event",
        "The cloud could not resolve the NodeClass (the message says what); its pools launch nothing.",
        "Fix the NodeClass or the cloud resource it names; check the controller's cloud credentials.",
    ));
    for e in [
        ProviderSetupError::InvalidNodeClass(String::new()),
        ProviderSetupError::Unsupported(String::new()),
        ProviderSetupError::Disabled(String::new()),
    ] {
        out.push(provider_setup(&e));
    }
    out.push(doc(
        "OfferingsKnown",
        "GPUPool: `Ready=True` condition",
        "Offerings of the pool's NodeClass are known; the message counts them.",
        "Nothing.",
    ));
    out.push(doc(
        "NoOfferings",
        "GPUPool: `Ready=False` condition",
        "No offering of the pool's NodeClass is known yet; the pool cannot launch.",
        "Look at the NodeClass's `Ready` condition; check the pool's requirements match some instance types.",
    ));
    out.push(doc(
        "Admitting",
        "GPUQueue: `Active=True` condition",
        "The queue admits gangs.",
        "Nothing.",
    ));
    out.push(doc(
        "Stopped",
        "GPUQueue: `Active=False` condition",
        "The queue's `spec.stopPolicy` is `Hold` or `HoldAndDrain`: it admits no new gang (and with `HoldAndDrain` evicts admitted ones).",
        "Set `spec.stopPolicy` to `None` to admit again.",
    ));
    out.push(doc(
        "CRDNotInstalled",
        "GPUQueue: `WorkloadKindsServed=False` condition",
        "A workload kind enabled with `--workload-kinds` (the chart's `workloadKinds`) is not served by the API server: its CRD is not installed, so its objects are not run as gangs. The controller said so once in its log at start.",
        "Install the kind's CRD (usually with its own controller) and restart muster, or drop the kind from `--workload-kinds`.",
    ));
    out.push(doc(
        "UnsupportedVersion",
        "GPUQueue: `WorkloadKindsServed=False` condition",
        "A workload kind enabled with `--workload-kinds` is served in a version muster cannot run, so its objects are not run as gangs: a TrainJob CRD of Kubeflow Trainer v2.0 (`spec.podSpecOverrides`) or v2.1 (`spec.podTemplateOverrides`), which has no `spec.runtimePatches`, the field muster pins TrainJobs through (its writes would be pruned and the TrainJobs would run unpinned). The message names the version; the controller said so once in its log at start.",
        "Upgrade the kind's controller (Kubeflow Trainer v2.2 or later) and restart muster, or drop the kind from `--workload-kinds`.",
    ));
    out.push(doc(
        "Served",
        "GPUQueue: `WorkloadKindsServed=True` condition",
        "Every enabled workload kind is served again.",
        "Nothing.",
    ));
    out.push(doc(
        "CapacityTypeNotPermitted",
        "NodeClass: `CapacityTypesPermitted=False` condition and Warning Event",
        "A launch found a capacity type the NodeClass's cloud account refuses until a one-time step is done (EC2: spot without the `AWSServiceRoleForEC2Spot` service-linked role); offerings of that type are avoided until the time the message names, then tried again.",
        "Do the step the message names (EC2: `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`). The condition turns True when the time it names passes; if the step was not done by then, the next launch of that type is refused again and it turns False again.",
    ));
    out.push(doc(
        "Permitted",
        "NodeClass: `CapacityTypesPermitted=True` condition",
        "The time a refused capacity type was avoided until has passed: it is tried again.",
        "Nothing.",
    ));
    out.push(doc(
        "SubnetsFull",
        "NodeClass: `SubnetsUsable=False` condition and Warning Event",
        "Some subnets the NodeClass's `subnetSelectorTerms` resolved had no free address when resolved; the message names them with their zones. Launches in those zones go into the zone's other subnets.",
        "Free addresses in the subnets named (or select larger subnets). The condition is written again at each resolution (every offerings TTL, or when the NodeClass changes).",
    ));
    out.push(doc(
        "ZoneWithoutFreeSubnet",
        "NodeClass: `SubnetsUsable=False` condition and Warning Event",
        "Every subnet the NodeClass resolved in a zone had no free address: no launch goes into that zone (one planned there is refused as short of capacity and the gang is planned elsewhere). The message names the subnets and the zones.",
        "Free addresses in the subnets named, or tag a subnet of that zone with free addresses so the selector finds it.",
    ));
    out.push(doc(
        "SubnetsUsable",
        "NodeClass: `SubnetsUsable=True` condition",
        "Every subnet the NodeClass resolved had free addresses. The message also names zones whose launches go into a public subnet, no private one being selected or usable there.",
        "Nothing.",
    ));
    for c in ErrorCategory::ALL {
        out.push(launch_error(c));
    }
    for r in [
        TerminateReason::LaunchTimeout,
        TerminateReason::RegistrationTimeout,
        TerminateReason::InitializationTimeout,
        TerminateReason::InsufficientCapacity,
        TerminateReason::CapacityTypeNotPermitted,
        TerminateReason::LaunchFailed,
    ] {
        out.push(terminate(r));
    }
    out.extend(removals());
    out.push(doc(
        DRAIN_BLOCKED,
        "PoolNode: Warning Event",
        "A pod keeps the node from draining: annotated `muster.dev/do-not-disrupt`, or its eviction is refused by a PodDisruptionBudget.",
        "Wait for the pod to finish, or remove the annotation / relax the PodDisruptionBudget.",
    ));
    out.push(doc(
        REPLACEMENT_FAILED,
        "PoolNode: `status.reason` (back to Ready)",
        "The replacement launched for this node failed; the node keeps serving.",
        "Nothing; consolidation tries again later.",
    ));
    out.push(doc(
        INTERRUPTED,
        "PoolNode, Gang: `status.reason`",
        "The cloud is interrupting the node; it drains and its gangs are requeued.",
        "Nothing; see SpotInterruption.",
    ));
    for k in [
        InterruptionKind::SpotInterruption,
        InterruptionKind::RebalanceRecommendation,
        InterruptionKind::Preempted,
        InterruptionKind::Terminated,
        InterruptionKind::ScheduledMaintenance,
    ] {
        out.push(interruption(k));
    }
    for r in [
        WaitReason::QuotaExhausted,
        WaitReason::Provisioning,
        WaitReason::ProvisioningTimeout,
        WaitReason::LaunchBudget,
        WaitReason::PoolLimit,
        WaitReason::NoOffering,
        WaitReason::Unsatisfiable,
        WaitReason::BehindHead,
        WaitReason::Backoff,
        WaitReason::QueueStopped,
        WaitReason::UnknownQueue,
        WaitReason::Preempting,
    ] {
        out.push(wait(r));
    }
    for r in [
        EvictReason::PodsReadyTimeout,
        EvictReason::NodeLost,
        EvictReason::SpotInterruption,
        // EvictReason::CapacityEnding is described with the PoolNode
        // removal reason of the same name
    ] {
        out.push(evict(r));
    }
    for r in [
        PreemptionReason::WithinQueue,
        PreemptionReason::ReclaimWithinCohort,
        PreemptionReason::QueueDrained,
    ] {
        out.push(preempt(r));
    }
    for r in [
        IdleReason::GPUsIdle,
        IdleReason::IdleRequeued,
        IdleReason::IdleStopped,
    ] {
        out.push(idle(r));
    }
    out.push(doc(
        INVALID_NETWORK_TOPOLOGY,
        "Gang: Warning Event",
        "The workload sets both `muster.dev/podset-required-topology` and `muster.dev/podset-preferred-topology` (the required one is used), or one of them names a label that is not a network layer muster knows; such an annotation is ignored and the Gang is made as if the workload had not said: the `spec.networkTopology` of a pool its queue may use applies, if one sets it, else its pods may be placed in any network domain.",
        "Name one of `topology.k8s.aws/network-node-layer-1`, `-2`, `-3` (EKS) or `cloud.google.com/gce-topology-block`, `-subblock`, `-host` (GKE), and set only one of the two annotations; then submit the workload again.",
    ));
    out.push(doc(
        NOT_IDLE,
        "Gang: `GPUsIdle=False` condition",
        "The gang had been found idle, runs, and no longer is idle: its GPUs are busy again, or no fresh utilisation data came from Prometheus.",
        "Nothing. If `muster_gpu_utilization_up` is 0, check `--prometheus-url` and that Prometheus scrapes the DCGM exporter.",
    ));
    out
}

/// True when `reason` is described in [`catalog`].
pub fn known(reason: &str) -> bool {
    catalog().iter().any(|d| d.reason == reason)
}

/// `docs/reference/events.md`.
pub fn reference_markdown() -> String {
    let mut s = String::from(
        "# Events and conditions\n\n\
         <!-- generated from src/controller/base/reasons.rs; regenerate with \
         MUSTER_BLESS=1 cargo test --features controller --test references -->\n\n\
         Every reason muster writes to the cluster: Event reasons, condition \
         reasons and the `status.reason` of Gangs and PoolNodes. The message \
         next to a reason carries the figures (GPUs, quota, prices, names); \
         this table says what the reason means and what to do about it. \
         `kubectl get events --field-selector reason=REASON -A` lists where \
         one occurred.\n\n\
         | Reason | Appears on | What happened | What to do |\n\
         |---|---|---|---|\n",
    );
    for d in catalog() {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            d.reason,
            d.appears.replace('|', "\\|"),
            d.what.replace('|', "\\|"),
            d.todo.replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_says_what_happened_and_what_to_do() {
        for d in catalog() {
            assert!(!d.reason.is_empty() && d.reason.chars().all(|c| c.is_ascii_alphanumeric()));
            assert!(d.what.ends_with('.'), "{}: {}", d.reason, d.what);
            assert!(d.todo.ends_with('.'), "{}: {}", d.reason, d.todo);
        }
    }

    #[test]
    fn reasons_used_as_literals_are_described() {
        for r in [
            STARTED_OUTSIDE_MUSTER,
            WORKLOAD_WRITE_FAILED,
            DRAIN_BLOCKED,
            NOT_IDLE,
            INVALID_NETWORK_TOPOLOGY,
            CAPACITY_ENDING,
            "Valid",
            "NotResolved",
        ] {
            assert!(known(r), "{r}");
        }
        assert!(!known("SomethingElse"));
    }
}
