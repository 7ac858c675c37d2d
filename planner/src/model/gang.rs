//! Gangs: the unit of admission. All pods of a gang get a place, or none do.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::offering::GpuModel;
use super::scheduling::{NodeAffinity, Toleration};
use crate::resources::Resources;
use crate::time::{Dur, Time};

/// A gang's identity: `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GangId(pub String);

impl GangId {
    /// From `namespace/name`.
    pub fn new(id: impl Into<String>) -> GangId {
        GangId(id.into())
    }
    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GangId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a gang is in its life.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum GangPhase {
    /// Waiting for quota or capacity.
    #[default]
    Queued,
    /// Capacity is being launched for it; nodes are reserved.
    Provisioning,
    /// Every pod has a place; pods are being started.
    Admitted,
    /// All pods run.
    Running,
    /// Done; holds nothing.
    Finished,
    /// Evicted as a whole; waits for its backoff to pass, then queues again.
    Evicted,
    /// Can never fit any allowed pool; waits for the pools or itself to change.
    Unsatisfiable,
}

impl GangPhase {
    /// The phase's name as the Gang status and metric labels spell it
    /// (its serialized form).
    pub fn as_str(self) -> &'static str {
        match self {
            GangPhase::Queued => "Queued",
            GangPhase::Provisioning => "Provisioning",
            GangPhase::Admitted => "Admitted",
            GangPhase::Running => "Running",
            GangPhase::Finished => "Finished",
            GangPhase::Evicted => "Evicted",
            GangPhase::Unsatisfiable => "Unsatisfiable",
        }
    }

    /// True for gangs that want capacity.
    pub fn pending(self) -> bool {
        matches!(
            self,
            GangPhase::Queued | GangPhase::Evicted | GangPhase::Unsatisfiable
        )
    }

    /// True for gangs that hold quota and nodes.
    pub fn holds_capacity(self) -> bool {
        matches!(
            self,
            GangPhase::Provisioning | GangPhase::Admitted | GangPhase::Running
        )
    }
}

/// How close a gang's pods must be.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum Topology {
    /// Anywhere.
    #[default]
    Any,
    /// All pods in one zone.
    SameZone,
    /// All pods in one placement group (low-latency network).
    SamePlacementGroup,
    /// All pods on one node (NVLink).
    SameNode,
}

/// How close in the network a gang's pods must be, on top of its
/// [`Topology`]: within one network domain at `level` (1 = the broadest
/// layer of [`crate::Node::network`]). Required: the gang waits (or buys
/// into one placement group) rather than spread wider. Preferred: the
/// tightest domain with room, from `level` up to the broadest, then
/// anywhere its `Topology` allows — Kueue's `podset-required-topology` and
/// `podset-preferred-topology`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NetworkTopology {
    /// The layer, from 1 (broadest).
    pub level: u8,
    /// True: never spread wider than one domain at `level`.
    #[serde(default)]
    pub required: bool,
}

/// A group of identical pods in a gang.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodSet {
    /// Name, unique in the gang (`worker`, `launcher`).
    pub name: String,
    /// Number of pods.
    pub count: u32,
    /// The gang may start with this many pods when `count` cannot fit;
    /// `None` means `count`.
    #[serde(default)]
    pub min_count: Option<u32>,
    /// Requests of one pod.
    pub requests: Resources,
    /// Node labels every pod requires.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the pods.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// Required node affinity of the pods; `None` allows every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<NodeAffinity>,
    /// Acceptable GPU models; empty accepts any.
    #[serde(default)]
    pub gpu_models: Vec<GpuModel>,
    /// Least memory per GPU, in MiB.
    #[serde(default)]
    pub min_gpu_memory_mib: u64,
}

impl PodSet {
    /// `count` pods with these requests and no other constraint.
    pub fn new(name: impl Into<String>, count: u32, requests: Resources) -> PodSet {
        PodSet {
            name: name.into(),
            count,
            min_count: None,
            requests,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            affinity: None,
            gpu_models: Vec::new(),
            min_gpu_memory_mib: 0,
        }
    }

    /// The smallest pod count the gang may start with.
    pub fn min(&self) -> u32 {
        self.min_count.unwrap_or(self.count).min(self.count)
    }
}

/// One pod of a gang placed on a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Assignment {
    /// Pod set name.
    pub pod_set: String,
    /// Index of the pod in its set, from 0.
    pub index: u32,
    /// Node name.
    pub node: String,
}

/// A gang of pods, admitted as a whole.
#[derive(Debug, Clone, PartialEq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Gang {
    /// `namespace/name`.
    pub id: GangId,
    /// The GPUQueue it waits in.
    pub queue: String,
    /// Higher runs first within its queue.
    #[serde(default)]
    pub priority: i32,
    /// When it was submitted.
    pub arrival: Time,
    /// Its pods.
    pub pod_sets: Vec<PodSet>,
    /// How close its pods must be.
    #[serde(default)]
    pub topology: Topology,
    /// How close in the network its pods must be, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkTopology>,
    /// May run on capacity that ends before its expected end (a Capacity
    /// Block): it checkpoints and is requeued whole when the block is
    /// drained.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_outlive_capacity: bool,
    /// Life-cycle phase.
    #[serde(default)]
    pub phase: GangPhase,
    /// Where its pods are (Admitted, Running) or will go (Provisioning).
    #[serde(default)]
    pub assignments: Vec<Assignment>,
    /// While Provisioning: when the capacity must be complete, else released.
    #[serde(default)]
    pub provisioning_deadline: Option<Time>,
    /// When it was admitted.
    #[serde(default)]
    pub admitted_at: Option<Time>,
    /// When all its pods ran.
    #[serde(default)]
    pub started_at: Option<Time>,
    /// How long it is expected to run, when known (spot risk).
    #[serde(default)]
    pub expected_duration: Option<Dur>,
    /// After an eviction: not before this time.
    #[serde(default)]
    pub not_before: Option<Time>,
    /// How often it has been evicted.
    #[serde(default)]
    pub evictions: u32,
    /// How many launch sets have been planned for it; part of idempotency keys.
    #[serde(default)]
    pub launch_attempts: u32,
    /// Opted in to being moved by consolidation.
    #[serde(default)]
    pub disruptible: bool,
    /// Identity of the workload behind the gang (the Kubernetes Job's UID):
    /// a workload deleted and created again under the same name has another,
    /// so the names and idempotency keys of its launches differ. Empty where
    /// a driver has none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl Gang {
    /// A newly queued gang: priority 0, topology `Any`, no history.
    pub fn new(id: GangId, queue: impl Into<String>, arrival: Time, pod_sets: Vec<PodSet>) -> Gang {
        Gang {
            id,
            queue: queue.into(),
            priority: 0,
            arrival,
            pod_sets,
            topology: Topology::Any,
            network: None,
            may_outlive_capacity: false,
            phase: GangPhase::Queued,
            assignments: Vec::new(),
            provisioning_deadline: None,
            admitted_at: None,
            started_at: None,
            expected_duration: None,
            not_before: None,
            evictions: 0,
            launch_attempts: 0,
            disruptible: false,
            uid: String::new(),
        }
    }

    /// Requests of all its pods at full size.
    pub fn total_requests(&self) -> Resources {
        let mut r = Resources::zero();
        for ps in &self.pod_sets {
            r.add(&ps.requests.times(u64::from(ps.count)));
        }
        r
    }

    /// Number of pods at full size.
    pub fn pod_count(&self) -> u64 {
        self.pod_sets.iter().map(|p| u64::from(p.count)).sum()
    }

    /// The pod set with this name.
    pub fn pod_set(&self, name: &str) -> Option<&PodSet> {
        self.pod_sets.iter().find(|p| p.name == name)
    }
}
