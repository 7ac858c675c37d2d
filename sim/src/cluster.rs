//! The simulated cluster: nodes (in flight and Ready) with the pods bound to
//! them. Mechanics only; who decides what goes where is a policy.

use std::collections::{BTreeSet, HashMap};

use muster_planner::{
    CapacityType, GpuModel, NodePhase, Offering, OfferingKey, Price, Resources, Time,
};

use crate::events::{JobId, NodeId};

/// One pod bound to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundPod {
    /// Its job.
    pub job: JobId,
    /// Pod index within the job.
    pub pod: u32,
    /// When it was bound.
    pub since: Time,
}

/// A node of the simulated cluster.
#[derive(Debug, Clone)]
pub struct SimNode {
    /// Name (unique in the run).
    pub name: String,
    /// What was bought.
    pub key: OfferingKey,
    /// The pool (node group, NodePool) it belongs to.
    pub pool: String,
    /// Price per hour.
    pub price: Price,
    /// GPU model.
    pub gpu_model: Option<GpuModel>,
    /// Memory per GPU, MiB.
    pub gpu_memory_mib: u64,
    /// GPUs.
    pub gpu_count: u32,
    /// Allocatable.
    pub allocatable: Resources,
    /// Requests of the pods bound to it.
    pub used: Resources,
    /// Pods bound to it.
    pub pods: Vec<BoundPod>,
    /// Life-cycle phase.
    pub phase: NodePhase,
    /// When the cloud accepted the launch (billing starts).
    pub created_at: Time,
    /// When it entered its phase.
    pub phase_since: Time,
    /// When it went away (billing stops).
    pub gone_at: Option<Time>,
    /// The job it is held for (muster reservations, Karpenter nominations).
    pub reserved_for: Option<JobId>,
    /// Cordoned.
    pub unschedulable: bool,
    /// Ready with no pods since.
    pub empty_since: Option<Time>,
    /// GPU-seconds requested by pods that were bound to it.
    pub bound_gpu_secs: f64,
    /// Its network layers, broadest first (block, rack); empty when the
    /// cloud has no topology.
    pub network: Vec<String>,
    /// When the cloud takes it back with its reservation.
    pub reclaim_at: Option<Time>,
}

impl SimNode {
    /// A node of `offering`, launched at `now`.
    pub fn new(name: String, offering: &Offering, pool: &str, now: Time) -> SimNode {
        SimNode {
            name,
            key: offering.key(),
            pool: pool.to_string(),
            price: offering.price.unwrap_or(Price::ZERO),
            gpu_model: offering.gpu_model.clone(),
            gpu_memory_mib: offering.gpu_memory_mib,
            gpu_count: offering.gpu_count,
            allocatable: offering.resources.clone(),
            used: Resources::zero(),
            pods: Vec::new(),
            phase: NodePhase::Launched,
            created_at: now,
            phase_since: now,
            gone_at: None,
            reserved_for: None,
            unschedulable: false,
            empty_since: None,
            bound_gpu_secs: 0.0,
            network: Vec::new(),
            reclaim_at: None,
        }
    }

    /// True while it exists (launched and not gone).
    pub fn alive(&self) -> bool {
        self.gone_at.is_none()
    }

    /// Pods may be bound now.
    pub fn schedulable(&self) -> bool {
        self.alive() && self.phase == NodePhase::Ready && !self.unschedulable
    }

    /// True when `req` fits in what is left.
    pub fn has_room(&self, req: &Resources) -> bool {
        let mut sum = self.used.clone();
        sum.add(req);
        sum.fits_in(&self.allocatable)
    }

    /// Free resources.
    pub fn free(&self) -> Resources {
        let mut f = self.allocatable.clone();
        f.saturating_sub(&self.used);
        f
    }

    /// Spot or on-demand.
    pub fn capacity_type(&self) -> CapacityType {
        self.key.capacity_type
    }
}

/// All nodes of a run; ids are never reused.
#[derive(Debug, Default)]
pub struct Cluster {
    /// Every node ever launched, by id.
    pub nodes: Vec<SimNode>,
    by_name: HashMap<String, NodeId>,
    alive: BTreeSet<NodeId>,
}

impl Cluster {
    /// Adds a node; its id.
    pub fn add(&mut self, node: SimNode) -> NodeId {
        let id = self.nodes.len();
        self.by_name.insert(node.name.clone(), id);
        self.nodes.push(node);
        self.alive.insert(id);
        id
    }

    /// The live node of this name.
    pub fn by_name(&self, name: &str) -> Option<NodeId> {
        self.by_name
            .get(name)
            .copied()
            .filter(|id| self.nodes[*id].alive())
    }

    /// True when a node of this name was ever launched.
    pub fn name_used(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Marks a node gone.
    pub fn remove(&mut self, id: NodeId, now: Time) {
        if let Some(n) = self.nodes.get_mut(id) {
            n.gone_at.get_or_insert(now);
        }
        self.alive.remove(&id);
    }

    /// Live node ids in launch order.
    pub fn alive_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.alive.iter().copied()
    }

    /// Number of live nodes.
    pub fn alive_count(&self) -> usize {
        self.alive.len()
    }
}
