//! Nodes: machines that exist or are being launched, with what runs on them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::gang::GangId;
use super::offering::{CapacityType, GpuModel, OfferingKey, Provider};
use super::price::Price;
use super::scheduling::Taint;
use crate::resources::Resources;
use crate::time::Time;

/// Where a node is in its life. Machines muster launches walk these phases in
/// order (the PoolNode life cycle); nodes muster did not launch are
/// `Ready` (or `Draining` when cordoned).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum NodePhase {
    /// Intent written; the cloud has not been asked yet.
    Pending,
    /// The cloud accepted the launch; no Node object yet.
    Launched,
    /// The Node registered; not Ready or GPUs not yet allocatable.
    Registered,
    /// Ready, GPUs allocatable: pods may be placed.
    #[default]
    Ready,
    /// Cordoned and being emptied.
    Draining,
    /// Being terminated.
    Terminating,
}

impl NodePhase {
    /// True for machines that will become Ready without further decisions.
    pub fn in_flight(self) -> bool {
        matches!(
            self,
            NodePhase::Pending | NodePhase::Launched | NodePhase::Registered
        )
    }
}

/// A pod on a node that is not part of a gang muster admitted (a daemon, a
/// system pod, some other workload). Gang pods are listed on their gang.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OtherPod {
    /// `namespace/name`.
    pub name: String,
    /// Its requests.
    pub requests: Resources,
    /// Owned by a DaemonSet: it goes with the node and never moves.
    #[serde(default)]
    pub daemon: bool,
    /// Annotated `muster.dev/do-not-disrupt`, or unevictable (no controller,
    /// a PodDisruptionBudget with no room): the node must not be drained.
    #[serde(default)]
    pub do_not_disrupt: bool,
}

/// A node, existing or in flight.
#[derive(Debug, Clone, PartialEq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Node {
    /// Node name (for in-flight nodes, the PoolNode name).
    pub name: String,
    /// The GPUPool that launched it; `None` for capacity muster does not manage.
    #[serde(default)]
    pub pool: Option<String>,
    /// The offering it was bought as; `None` when unknown (unmanaged nodes).
    #[serde(default)]
    pub offering: Option<OfferingKey>,
    /// Cloud, when known.
    #[serde(default)]
    pub provider: Option<Provider>,
    /// Zone label (`topology.kubernetes.io/zone`).
    #[serde(default)]
    pub zone: String,
    /// Placement group it was launched into, if any.
    #[serde(default)]
    pub placement_group: Option<String>,
    /// Capacity type, when known.
    #[serde(default)]
    pub capacity_type: Option<CapacityType>,
    /// Price per hour, when known.
    #[serde(default)]
    pub price: Option<Price>,
    /// GPU model, when the node has GPUs.
    #[serde(default)]
    pub gpu_model: Option<GpuModel>,
    /// Memory per GPU in MiB.
    #[serde(default)]
    pub gpu_memory_mib: u64,
    /// What pods may use.
    pub allocatable: Resources,
    /// Node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Life-cycle phase.
    #[serde(default)]
    pub phase: NodePhase,
    /// Cordoned: no new pods.
    #[serde(default)]
    pub unschedulable: bool,
    /// The gang this node is held for, while it provisions or runs.
    #[serde(default)]
    pub reserved_for: Option<GangId>,
    /// Pods that are not gang members.
    #[serde(default)]
    pub pods: Vec<OtherPod>,
    /// When the machine was created (or the intent written).
    #[serde(default)]
    pub created_at: Time,
    /// When it entered its current phase.
    #[serde(default)]
    pub phase_since: Time,
    /// Since when no pod other than daemons has run on it; `None` when busy.
    #[serde(default)]
    pub empty_since: Option<Time>,
    /// Annotated `muster.dev/do-not-disrupt`: never consolidated.
    #[serde(default)]
    pub do_not_disrupt: bool,
    /// When the capacity it runs on ends (a Capacity Block's end, a
    /// reservation's end date): the planner drains it
    /// `Policy::reservation_drain_ahead` before, and plans no gang onto it
    /// that would still run then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_ends_at: Option<Time>,
    /// Its place in the network, broadest first: the network nodes EC2's
    /// `DescribeInstanceTopology` lists (node labels
    /// `topology.k8s.aws/network-node-layer-1`…`-3`), or GCE's block,
    /// sub-block and host (`cloud.google.com/gce-topology-block`, `-subblock`,
    /// `-host`). Empty when unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
}

impl Node {
    /// True for a node muster launched and may remove.
    pub fn managed(&self) -> bool {
        self.pool.is_some()
    }

    /// Whether pods can be placed on it now (Ready and not cordoned).
    pub fn schedulable(&self) -> bool {
        self.phase == NodePhase::Ready && !self.unschedulable
    }

    /// Requests of the non-gang pods on it.
    pub fn other_requests(&self) -> Resources {
        let mut r = Resources::zero();
        for p in &self.pods {
            r.add(&p.requests);
        }
        r
    }
}
