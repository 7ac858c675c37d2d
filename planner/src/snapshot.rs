//! The planner's input: a consistent picture of queues, pools, offerings,
//! nodes and gangs, and the policy knobs that are not per object.
//!
//! Drivers build a [`Snapshot`]: the controller from its watch caches, the
//! simulator from its virtual cluster, `muster plan -f` from a YAML file.
//! Order of the lists does not matter: the planner sorts what it needs.

use serde::{Deserialize, Serialize};

use crate::model::{Gang, GangUtilization, GpuModel, Node, Offering, Pool, Queue};
use crate::time::{Dur, Time};

/// Everything the planner looks at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Snapshot {
    /// Queues.
    #[serde(default)]
    pub queues: Vec<Queue>,
    /// Pools.
    #[serde(default)]
    pub pools: Vec<Pool>,
    /// Offerings the pools may buy.
    #[serde(default)]
    pub offerings: Vec<Offering>,
    /// Nodes, existing and in flight.
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Gangs in every phase but Finished.
    #[serde(default)]
    pub gangs: Vec<Gang>,
    /// GPU utilisation observed for running gangs (idle detection); gangs
    /// without an entry are not judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_utilization: Vec<GangUtilization>,
    /// Recent arrivals, finished gangs included: the demand warm capacity
    /// is sized from (`Disruption::keep_warm`). A driver keeps each for the
    /// longest `keepWarm.window` of its pools ([`Snapshot::arrivals_window`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrivals: Vec<Arrival>,
}

/// One pod set of a gang that arrived.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Arrival {
    /// The GPUQueue it arrived in.
    pub queue: String,
    /// When.
    pub at: Time,
    /// Whole GPUs each pod asks for.
    pub gpus_per_pod: u32,
    /// Its pods.
    pub pods: u32,
    /// The GPU models its pods accept; empty accepts any. Warm nodes kept
    /// for it are of one of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_models: Vec<GpuModel>,
}

impl Arrival {
    /// The arrivals of `gang`, one per pod set that asks for GPUs.
    pub fn of(gang: &crate::model::Gang) -> Vec<Arrival> {
        gang.pod_sets
            .iter()
            .filter_map(|s| {
                let gpus = u32::try_from(s.requests.gpus_ceil()).unwrap_or(u32::MAX);
                (gpus > 0 && s.count > 0).then(|| Arrival {
                    queue: gang.queue.clone(),
                    at: gang.arrival,
                    gpus_per_pod: gpus,
                    pods: s.count,
                    gpu_models: s.gpu_models.clone(),
                })
            })
            .collect()
    }
}

impl Snapshot {
    /// How long a driver keeps arrivals: the longest `keepWarm.window` of
    /// the pools, `None` when no pool keeps nodes warm.
    pub fn arrivals_window(&self) -> Option<Dur> {
        crate::model::pool::arrivals_window(&self.pools)
    }
}

/// Cluster-wide knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Policy {
    /// How long a gang's launched capacity may take to become Ready before it
    /// is released (a pool's own `provisioningTimeout` wins).
    pub provisioning_timeout: Dur,
    /// How long the cloud may take to accept a launch.
    pub launch_timeout: Dur,
    /// How long a launched machine may take to register as a Node.
    pub registration_timeout: Dur,
    /// How long a Registered node may take to become Ready with GPUs.
    pub initialization_timeout: Dur,
    /// How long a registered Node may be Ready without allocatable
    /// `nvidia.com/gpu` before its PoolNode is flagged (device plugin or
    /// driver missing); shorter than `initialization_timeout` so the warning
    /// comes before the node is given up.
    pub gpu_registration_timeout: Dur,
    /// How long an offering is avoided after an insufficient-capacity error.
    pub unavailable_offering_ttl: Dur,
    /// Default pods-ready timeout for queues that set none.
    pub pods_ready_timeout: Dur,
    /// First requeue backoff after an eviction; doubles each time.
    pub requeue_backoff_base: Dur,
    /// Largest requeue backoff.
    pub requeue_backoff_max: Dur,
    /// Expected run time of gangs that declare none (spot risk).
    pub default_expected_duration: Dur,
    /// A node whose requested GPUs (or CPU, without GPUs) are below this
    /// percentage of allocatable is underutilized.
    pub underutilized_percent: u32,
    /// Most new nodes planned in one cycle; `None` is unlimited.
    pub max_new_nodes_per_cycle: Option<u32>,
    /// A gang that would be the only work on a node it is placed on gets a
    /// launch of its own instead when that costs, over its expected
    /// duration plus the boot, below this percentage of keeping the node
    /// up for it (see the planner's `hole` module); 0, the default, never
    /// launches instead. On the simulator's matrix (docs/benchmarks.md,
    /// "Idle nodes against machines of a gang's own") 50 lowers the cost
    /// and raises the median wait, as small jobs wait for machines of their
    /// own to boot; the default keeps the wait.
    pub own_machine_below_percent: u32,
    /// A gang looks first only at nodes no bigger (in GPUs) than the
    /// smallest machine its pools may buy for it, and gets such a machine
    /// when none has room; a hole in a bigger machine is taken only when no
    /// such launch is possible, or when the machine is reserved (paid for
    /// whole, so a hole in it keeps up nothing not paid already) and the
    /// gang's size is at least half of it (see the planner's `hole`
    /// module). On by default.
    pub size_matched_placement: bool,
    /// A Provisioning gang still waiting for machines in flight starts at
    /// once when Ready nodes have room for all of it, and its machines in
    /// flight are cancelled (the planner's `freed_room` module), as
    /// kube-scheduler binds a pending pod to whichever node frees first.
    /// On by default.
    pub start_on_freed_room: bool,
    /// How long before the end of the capacity a node runs on
    /// (`Node::capacity_ends_at`, a Capacity Block) the planner drains it,
    /// its gangs evicted whole and requeued. EC2 sends its "Capacity Block
    /// Reservation Expiration Warning" 40 minutes before the end and starts
    /// terminating the block's instances 30 minutes before it (EC2 User
    /// Guide, "Monitor Capacity Blocks using EventBridge"): the default, 40
    /// minutes, drains at the warning, ten minutes ahead of EC2.
    pub reservation_drain_ahead: Dur,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            provisioning_timeout: Dur::mins(15),
            launch_timeout: Dur::mins(5),
            registration_timeout: Dur::mins(15),
            initialization_timeout: Dur::mins(10),
            gpu_registration_timeout: Dur::mins(5),
            unavailable_offering_ttl: Dur::mins(3),
            pods_ready_timeout: Dur::mins(10),
            requeue_backoff_base: Dur::secs(60),
            requeue_backoff_max: Dur::hours(1),
            default_expected_duration: Dur::hours(1),
            underutilized_percent: 50,
            max_new_nodes_per_cycle: None,
            own_machine_below_percent: 0,
            size_matched_placement: true,
            start_on_freed_room: true,
            reservation_drain_ahead: Dur::mins(40),
        }
    }
}

/// A snapshot, a policy and the time: everything `plan` needs, as one
/// document (the format of `muster plan -f`). Unknown fields are rejected
/// at every level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "PlanInputDoc")]
pub struct PlanInput {
    /// The time of the plan.
    #[serde(default)]
    pub now: Time,
    /// Policy knobs.
    #[serde(default)]
    pub policy: Policy,
    /// The snapshot, flattened into the document.
    #[serde(flatten)]
    pub snapshot: Snapshot,
}

/// The wire form of [`PlanInput`]: the snapshot's lists at the top level,
/// without `flatten` (which would defeat `deny_unknown_fields` and field
/// paths in errors).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PlanInputDoc {
    #[serde(default)]
    now: Time,
    #[serde(default)]
    policy: Policy,
    #[serde(default)]
    queues: Vec<Queue>,
    #[serde(default)]
    pools: Vec<Pool>,
    #[serde(default)]
    offerings: Vec<Offering>,
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    gangs: Vec<Gang>,
    #[serde(default)]
    gpu_utilization: Vec<GangUtilization>,
    #[serde(default)]
    arrivals: Vec<Arrival>,
}

impl From<PlanInputDoc> for PlanInput {
    fn from(d: PlanInputDoc) -> Self {
        PlanInput {
            now: d.now,
            policy: d.policy,
            snapshot: Snapshot {
                queues: d.queues,
                pools: d.pools,
                offerings: d.offerings,
                nodes: d.nodes,
                gangs: d.gangs,
                gpu_utilization: d.gpu_utilization,
                arrivals: d.arrivals,
            },
        }
    }
}
