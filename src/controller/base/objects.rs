//! The muster custom resources as the controller reads and writes them.
//!
//! The controller handles every muster object as a `DynamicObject` and parses
//! its `spec`/`status` per object, so one malformed object becomes a condition
//! and an Event on that object instead of an error that stops a whole watch.
//! Specs and statuses are the `muster-crds` types, read and written typed
//! (a Gang's status as the planner's record of it:
//! `translate::gang::record_of` and `write_record`).

use kube::core::{ApiResource, GroupVersionKind};

pub(crate) use muster_crds::{GROUP, VERSION};

/// Label on Jobs: the GPUQueue they wait in.
pub(crate) const QUEUE_LABEL: &str = "muster.dev/queue";
/// Annotation on Jobs: the least number of pods the gang may start with.
pub(crate) const MIN_COUNT_ANNOTATION: &str = "muster.dev/min-count";
/// Annotation on Jobs: acceptable GPU models, comma-separated.
pub(crate) const GPU_MODEL_ANNOTATION: &str = "muster.dev/gpu-model";
/// Annotation on Jobs: how close the gang's pods must be (`Any`, `SameZone`,
/// `SamePlacementGroup`, `SameNode`).
pub(crate) const TOPOLOGY_ANNOTATION: &str = "muster.dev/topology";
/// Annotation on Jobs: priority of the gang (an integer).
pub(crate) const PRIORITY_ANNOTATION: &str = "muster.dev/priority";
/// Annotation on workloads: every pod of the gang must be within one domain
/// of this network-topology node label (one of
/// [`muster_planner::labels::NETWORK_LAYERS`]), as Kueue's
/// `kueue.x-k8s.io/podset-required-topology`.
pub(crate) const REQUIRED_TOPOLOGY_ANNOTATION: &str = "muster.dev/podset-required-topology";
/// Annotation on workloads: the gang's pods should be within one domain of
/// this network-topology node label, and may spread when they do not fit
/// (Kueue's `kueue.x-k8s.io/podset-preferred-topology`).
pub(crate) const PREFERRED_TOPOLOGY_ANNOTATION: &str = "muster.dev/podset-preferred-topology";
/// Annotation on workloads: `"true"` lets the gang run on reserved capacity
/// that ends before it is expected to finish.
pub(crate) const MAY_OUTLIVE_CAPACITY_ANNOTATION: &str = "muster.dev/may-outlive-capacity";
/// Annotation on Jobs: the pod template as submitted, before muster pinned it.
pub(crate) const ORIGINAL_TEMPLATE_ANNOTATION: &str = "muster.dev/original-template";
/// Annotation on Jobs: the nodes the admitted gang was pinned to (comma-separated).
pub(crate) const ADMITTED_NODES_ANNOTATION: &str = "muster.dev/admitted-nodes";
/// Annotation on Jobs admitted at fewer pods than submitted (elastic): the
/// submitted `parallelism`, and `completions` where it changed in tandem
/// (`4` or `4/4`).
pub(crate) const ORIGINAL_PARALLELISM_ANNOTATION: &str = "muster.dev/original-parallelism";
/// Annotation on Jobs: a stop (suspend, clear `startTime`, restore the
/// template) was begun and is not finished; written with the suspension.
pub(crate) const STOPPING_ANNOTATION: &str = "muster.dev/stopping";
/// Label on nodes reserved for a gang, and node selector of its pinned pods.
pub(crate) const GANG_LABEL: &str = "muster.dev/gang";
/// Label on nodes launched by muster: their pool.
pub(crate) const POOL_LABEL: &str = "muster.dev/pool";
/// Label on nodes launched by muster: their PoolNode.
pub(crate) const POOLNODE_LABEL: &str = "muster.dev/poolnode";
/// Finalizer on PoolNodes: the instance is terminated before the object goes.
pub(crate) const TERMINATE_FINALIZER: &str = "muster.dev/terminate-instance";
/// Field manager of every write the controller makes.
pub(crate) const FIELD_MANAGER: &str = "muster-controller";

pub(crate) use muster_crds::Kind;

/// What the controller needs of a kind beyond its names.
pub(crate) trait KindExt {
    /// True for the one namespaced kind, `Gang`.
    fn namespaced(self) -> bool;
    /// The `ApiResource` for a dynamic `Api`.
    fn api_resource(self) -> ApiResource;
}

impl KindExt for Kind {
    fn namespaced(self) -> bool {
        self == Kind::Gang
    }

    fn api_resource(self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, VERSION, self.name()),
            self.plural(),
        )
    }
}

pub(crate) use muster_crds::common::{Condition, ConditionStatus};

pub(crate) use muster_crds::gang::{GangSpec, PodSet as PodSetSpec};

pub(crate) use muster_crds::poolnode::{
    GangRef, Grant as GrantSpec, GrantMember as GrantMemberSpec, Offering as OfferingSpec,
    PoolNodePhase, PoolNodeSpec, PoolNodeStatus,
};

/// True when the Node's Ready condition is True.
pub fn node_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
