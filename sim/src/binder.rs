//! A kube-scheduler-like binder: which nodes a pod may go to (GPU model and
//! GPU memory required by its job, room left, node Ready and not cordoned),
//! the check behind a pin (muster names the node), and first-fit placement
//! (the baselines' default scheduler model).

use muster_planner::{GpuModel, Offering, Resources};

use crate::cluster::{Cluster, SimNode};
use crate::events::NodeId;

/// Which machines a job's pods accept (node selector / affinity on GPU model
/// and GPU memory). Every GPU pod tolerates the GPU taint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Constraint {
    /// Acceptable GPU models; empty accepts any.
    pub models: Vec<GpuModel>,
    /// Least memory per GPU, MiB.
    pub min_gpu_memory_mib: u64,
    /// Only machines of exactly this many GPUs: the node selector of a
    /// layout that splits node groups (NodePools) by GPU count, so a pod
    /// goes to the smallest machine size that holds it; `None` accepts any.
    pub node_gpus: Option<u32>,
}

impl Constraint {
    fn model_ok(&self, model: Option<&GpuModel>, mem: u64, gpus: u32) -> bool {
        mem >= self.min_gpu_memory_mib
            && self.node_gpus.is_none_or(|g| g == gpus)
            && (self.models.is_empty()
                || model.is_some_and(|m| self.models.iter().any(|w| m.satisfies(w))))
    }

    /// True when pods of this constraint may run on the node.
    pub fn accepts_node(&self, n: &SimNode) -> bool {
        self.model_ok(n.gpu_model.as_ref(), n.gpu_memory_mib, n.gpu_count)
    }

    /// True when a pod with `req` fits a machine of this offering.
    pub fn accepts_offering(&self, o: &Offering, req: &Resources) -> bool {
        self.model_ok(o.gpu_model.as_ref(), o.gpu_memory_mib, o.gpu_count)
            && req.fits_in(&o.resources)
    }
}

/// Why a pod cannot be bound where it was asked to go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// No live node of that name.
    #[error("node {0} does not exist")]
    NoSuchNode(String),
    /// Not Ready or cordoned.
    #[error("node {0} is not schedulable")]
    NotSchedulable(String),
    /// GPU model or memory mismatch.
    #[error("node {0} does not satisfy the pod's GPU requirements")]
    Mismatch(String),
    /// Not enough room.
    #[error("pod does not fit on node {0}")]
    NoRoom(String),
    /// The pod is already bound, or does not exist.
    #[error("pod {0} of the job is already bound or does not exist")]
    BadPod(u32),
}

/// Checks one pod on one node.
pub fn check(node: &SimNode, constraint: &Constraint, req: &Resources) -> Result<(), BindError> {
    if !node.schedulable() {
        return Err(BindError::NotSchedulable(node.name.clone()));
    }
    if !constraint.accepts_node(node) {
        return Err(BindError::Mismatch(node.name.clone()));
    }
    if !node.has_room(req) {
        return Err(BindError::NoRoom(node.name.clone()));
    }
    Ok(())
}

/// The first live, schedulable node (in launch order) that takes the pod.
pub fn first_fit(cluster: &Cluster, constraint: &Constraint, req: &Resources) -> Option<NodeId> {
    cluster
        .alive_ids()
        .find(|id| check(&cluster.nodes[*id], constraint, req).is_ok())
}
