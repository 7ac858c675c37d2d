//! The workload seam: every kind of object muster runs as a gang (a
//! `batch/v1` Job, a JobSet, a group of plain Pods, ...) behind one
//! [`Workload`] trait, in the spirit of Kueue's `GenericJob`
//! (`pkg/controller/jobframework/interface.go`). An adapter only reads and
//! writes its objects; every decision stays in the planner: the gang's pod
//! sets go into the snapshot, and the next write to the object comes from
//! the one life-cycle table ([`muster_planner::lifecycle::workload`]) under
//! the kind's [`Rules`].
//!
//! What an adapter answers:
//!
//! - its pod sets as submitted: name, count, least count, pod template
//!   (requests, node selector, tolerations, affinity) — [`Workload::pod_sets`];
//! - what the table needs to know of the object now: finished, suspended,
//!   started, stopping, pinned — [`Workload::observe`];
//! - which pods are its own — [`pod_gang`], by labels and owners alone, so
//!   the translation can attribute a pod without the object at hand;
//! - the writes a table step asks for — suspend, clear the start mark,
//!   restore the submitted directives, pin each pod set to its nodes,
//!   unsuspend — as data computed from the object in memory
//!   ([`Workload::writes`]), with the ordering the table gives (scheduling
//!   directives change only while suspended and not started; a stop comes
//!   before a restore); the one [`writer`] makes the API calls and hands
//!   what the server stored back ([`Workload::stored`]).
//!
//! A kind is one file here ([`job`], [`jobset`], [`pod_group`],
//! [`trainjob`], [`pytorchjob`], [`raycluster`], [`rayjob`], [`lws`]) plus
//! one entry in [`WorkloadKind`] (a TrainJob's also [`trainjob_jobset`],
//! its pod sets from the JobSet its Trainer builds, and [`trainer_api`],
//! which Trainer versions it runs on); an object controlled by an object of
//! any of these kinds is part of that workload ([`managed_controller`]); the kinds held by a suspend flag share
//! the step's translation ([`suspendable`]), those that keep pod templates
//! in their own spec share [`templated`]. Kinds are enabled per install
//! (`--workload-kinds`); a custom kind whose CRD the API server does not
//! serve is skipped (see [`crate::controller::observe::crd_check`]).

pub mod job;
pub mod jobset;
pub mod lws;
pub mod pod;
pub mod pod_group;
pub mod pytorchjob;
pub mod raycluster;
pub mod rayjob;
pub mod requests;
pub(crate) mod suspendable;
pub mod template;
pub mod templated;
pub(crate) mod trainer_api;
pub mod trainjob;
pub(crate) mod trainjob_jobset;
pub(crate) mod verbatim;
pub(crate) mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use muster_planner::lifecycle::workload::{Observed as TableObserved, Rules, Step};

use crate::controller::base::api::ActError;
pub(crate) use crate::controller::base::errors::WorkloadError;
use crate::controller::workloads::pod::CachedPod;
use crate::controller::workloads::writer::{Stored, Target, Write};

/// A kind of workload muster can run as a gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    /// `batch/v1` Job: one pod set, indexed or not.
    Job,
    /// `jobset.x-k8s.io/v1alpha2` JobSet: one pod set per replicated job.
    JobSet,
    /// Plain Pods sharing a `muster.dev/pod-group` label, held by a
    /// scheduling gate.
    PodGroup,
    /// Kubeflow `trainer.kubeflow.org/v1alpha1` TrainJob: one pod set per
    /// replicated job of its training runtime.
    TrainJob,
    /// Kubeflow `kubeflow.org/v1` PyTorchJob: master and workers.
    PyTorchJob,
    /// KubeRay `ray.io/v1` RayCluster: head and worker groups.
    RayCluster,
    /// KubeRay `ray.io/v1` RayJob: its cluster's groups and the submitter.
    RayJob,
    /// `leaderworkerset.x-k8s.io/v1` LeaderWorkerSet: each group of a leader
    /// and its workers is a gang, held by scheduling gates like a pod group.
    LeaderWorkerSet,
}

/// A custom resource a workload kind is served as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustomKind {
    /// API group.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
}

impl CustomKind {
    /// The `ApiResource` for a dynamic `Api`.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    /// `plural.group`, as the CRD is named.
    pub(crate) fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// One rule of the controller's ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    /// API group ("" for the core group).
    pub group: &'static str,
    /// Resources.
    pub resources: &'static [&'static str],
    /// Verbs.
    pub verbs: &'static [&'static str],
}

impl WorkloadKind {
    /// Every kind, in the order the flag lists them.
    pub const ALL: [WorkloadKind; 8] = [
        WorkloadKind::Job,
        WorkloadKind::JobSet,
        WorkloadKind::PodGroup,
        WorkloadKind::TrainJob,
        WorkloadKind::PyTorchJob,
        WorkloadKind::RayCluster,
        WorkloadKind::RayJob,
        WorkloadKind::LeaderWorkerSet,
    ];

    /// The kinds enabled when the flag is not given.
    pub(crate) const DEFAULT: [WorkloadKind; 1] = [WorkloadKind::Job];

    /// The name on the command line and in the chart's values.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Job => "job",
            WorkloadKind::JobSet => "jobset",
            WorkloadKind::PodGroup => "pod-group",
            WorkloadKind::TrainJob => "trainjob",
            WorkloadKind::PyTorchJob => "pytorchjob",
            WorkloadKind::RayCluster => "raycluster",
            WorkloadKind::RayJob => "rayjob",
            WorkloadKind::LeaderWorkerSet => "leaderworkerset",
        }
    }

    /// The kind a flag value names.
    pub fn parse(s: &str) -> Option<WorkloadKind> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s.trim())
    }

    /// What the kind allows (see the life-cycle table).
    pub fn rules(self) -> Rules {
        match self {
            WorkloadKind::Job => Rules::JOB,
            WorkloadKind::JobSet
            | WorkloadKind::TrainJob
            | WorkloadKind::PyTorchJob
            | WorkloadKind::RayCluster
            | WorkloadKind::RayJob => Rules::TEMPLATED,
            WorkloadKind::PodGroup | WorkloadKind::LeaderWorkerSet => Rules::PODS,
        }
    }

    /// The custom resource the kind is, if it is not built in.
    pub fn custom(self) -> Option<CustomKind> {
        match self {
            WorkloadKind::Job | WorkloadKind::PodGroup => None,
            WorkloadKind::JobSet => Some(jobset::KIND),
            WorkloadKind::TrainJob => Some(trainjob::KIND),
            WorkloadKind::PyTorchJob => Some(pytorchjob::KIND),
            WorkloadKind::RayCluster => Some(raycluster::KIND),
            WorkloadKind::RayJob => Some(rayjob::KIND),
            WorkloadKind::LeaderWorkerSet => Some(lws::KIND),
        }
    }

    /// Other custom resources the kind's adapter reads (a TrainJob's
    /// training runtimes), cached beside its own.
    pub(crate) fn related(self) -> &'static [Related] {
        match self {
            WorkloadKind::TrainJob => trainjob::RELATED,
            _ => &[],
        }
    }

    /// The Gang of an object of this kind named `name`: Jobs keep their own
    /// name, other kinds are prefixed so that objects of two kinds never
    /// share a Gang.
    pub(crate) fn gang_name(self, name: &str) -> String {
        match self {
            WorkloadKind::Job => name.to_string(),
            WorkloadKind::JobSet => format!("jobset-{name}"),
            WorkloadKind::PodGroup => format!("podgroup-{name}"),
            WorkloadKind::TrainJob => format!("trainjob-{name}"),
            WorkloadKind::PyTorchJob => format!("pytorchjob-{name}"),
            WorkloadKind::RayCluster => format!("raycluster-{name}"),
            WorkloadKind::RayJob => format!("rayjob-{name}"),
            WorkloadKind::LeaderWorkerSet => format!("lws-{name}"),
        }
    }

    /// What the controller must be allowed to do with the kind, beyond what
    /// every install needs (Jobs and Pods are read and written always).
    pub fn access(self) -> &'static [AccessRule] {
        match self {
            WorkloadKind::Job => &[],
            WorkloadKind::JobSet => jobset::ACCESS,
            WorkloadKind::PodGroup => pod_group::ACCESS,
            WorkloadKind::TrainJob => trainjob::ACCESS,
            WorkloadKind::PyTorchJob => pytorchjob::ACCESS,
            WorkloadKind::RayCluster => raycluster::ACCESS,
            WorkloadKind::RayJob => rayjob::ACCESS,
            WorkloadKind::LeaderWorkerSet => lws::ACCESS,
        }
    }
}

/// A custom resource an adapter reads beside its kind's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Related {
    /// The resource.
    pub kind: CustomKind,
    /// Namespaced (else cluster-scoped: watched cluster-wide).
    pub namespaced: bool,
}

/// The kind muster runs as gangs of the object `owners` names as its
/// controller, if any. Such an object (a JobSet's, TrainJob's or RayJob's
/// Jobs, the JobSet a TrainJob's Trainer builds, a RayJob's RayCluster, a
/// pod some workload's controller created) is part of that workload and
/// never a workload of its own, whatever labels it carries: muster holds
/// and pins the owner, and the owner's controller writes the child.
/// Matched by API group and kind, whether the owner's kind is enabled or
/// not.
pub(crate) fn managed_controller(owners: &[OwnerReference]) -> Option<WorkloadKind> {
    let c = owners.iter().find(|o| o.controller == Some(true))?;
    let group = c.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    WorkloadKind::ALL.into_iter().find(|k| match k.custom() {
        Some(ck) => ck.group == group && ck.kind == c.kind,
        None => *k == WorkloadKind::Job && group == "batch" && c.kind == "Job",
    })
}

/// The owner reference a Gang carries for a custom-kind object.
pub(crate) fn custom_owner(kind: CustomKind, obj: &DynamicObject) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: format!("{}/{}", kind.group, kind.version),
        kind: kind.kind.to_string(),
        name: obj.name_any(),
        uid: obj.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// A reference to a custom-kind object, for Events.
pub(crate) fn custom_object_ref(kind: CustomKind, obj: &DynamicObject) -> ObjectReference {
    ObjectReference {
        api_version: Some(format!("{}/{}", kind.group, kind.version)),
        kind: Some(kind.kind.to_string()),
        name: obj.metadata.name.clone(),
        namespace: obj.metadata.namespace.clone(),
        uid: obj.metadata.uid.clone(),
        resource_version: obj.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Parses a comma-separated list of kinds (`job,jobset,pod-group`).
pub fn parse_kinds(list: &str) -> Result<BTreeSet<WorkloadKind>, String> {
    let mut out = BTreeSet::new();
    for part in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match WorkloadKind::parse(part) {
            Some(k) => {
                out.insert(k);
            }
            None => {
                return Err(format!(
                    "unknown workload kind {part:?} (known: {})",
                    WorkloadKind::ALL.map(WorkloadKind::as_str).join(", ")
                ));
            }
        }
    }
    Ok(out)
}

/// One pod set of a workload, as submitted.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSetTemplate {
    /// Its name in the Gang (a Job's is `main`; a JobSet's is the replicated
    /// job's).
    pub name: String,
    /// Pods at full size.
    pub count: u32,
    /// The least pods it may start with (elastic), if fewer than `count`.
    pub min_count: Option<u32>,
    /// The pod template as submitted, before any pin.
    pub template: PodTemplateSpec,
}

/// What a pin writes besides the nodes: the gang's node label value, the
/// taints of each node (tolerated by the pod sets placed there), and how
/// many pods of each pod set were admitted (fewer than submitted when the
/// planner admitted an elastic gang at its least count).
#[derive(Debug, Clone, Default)]
pub(crate) struct Directives {
    /// The value of `muster.dev/gang` on the gang's nodes.
    pub gang_label: String,
    /// Taints by node name.
    pub taints: BTreeMap<String, Vec<muster_planner::Taint>>,
    /// Pods admitted by pod set.
    pub counts: BTreeMap<String, u32>,
}

impl Directives {
    /// The taints of `nodes`.
    pub(crate) fn taints_of(&self, nodes: &BTreeSet<String>) -> Vec<muster_planner::Taint> {
        nodes
            .iter()
            .filter_map(|n| self.taints.get(n))
            .flatten()
            .cloned()
            .collect()
    }
}

/// One workload object (or group of objects) behind the seam.
pub(crate) trait Workload: Send + Sync {
    /// Its kind.
    fn kind(&self) -> WorkloadKind;
    /// Its metadata (a pod group's: the first pod's).
    fn meta(&self) -> &ObjectMeta;
    /// The owner reference its Gang carries, so the Gang goes with it; `None`
    /// when the Gang has no single owner (a pod group).
    fn gang_owner(&self) -> Option<OwnerReference>;
    /// A reference for Events.
    fn object_ref(&self) -> ObjectReference;
    /// Its pod sets as submitted.
    fn pod_sets(&self) -> Result<Vec<PodSetTemplate>, WorkloadError>;
    /// What the life-cycle table needs to know of it now.
    fn observe(&self) -> TableObserved;
    /// The status says pods of it may still run (a Job's `status.active`,
    /// a RayJob's deployment state before KubeRay reports it suspended).
    fn counts_active(&self) -> bool {
        false
    }
    /// The pod sets whose pods the kind's own controller holds back until
    /// another pod set gets somewhere (a JobSet's replicated job whose
    /// `dependsOn` is not reached yet): an admitted gang runs once the pods
    /// of the others do, as their pods cannot exist yet.
    fn waiting_pod_sets(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
    /// Not yet complete enough to become a Gang (a pod group short of its
    /// size); the reason, for the log.
    fn incomplete(&self) -> Option<String> {
        None
    }
    /// The writes `step` asks of it, in order, computed from the object (or
    /// objects) in memory alone; [`writer::write`] carries them out.
    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError>;
    /// It again, from what the server stored for its writes (in their
    /// order) or returned when read again: itself, unchanged, when nothing
    /// was stored.
    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError>;
    /// The object read again after a write was refused because it changed
    /// meanwhile (its controller wrote its status), and the action naming
    /// the read ([`writer::reread`]); `None` where there is nothing to read
    /// again (a pod group is written pod by pod, without a version
    /// precondition).
    fn reread_from(&self) -> Option<(Target, &'static str)> {
        None
    }

    /// Its namespace.
    fn namespace(&self) -> String {
        self.meta().namespace.clone().unwrap_or_default()
    }
    /// Its object name (a pod group's: the group's name).
    fn name(&self) -> String {
        self.meta().name.clone().unwrap_or_default()
    }
    /// Its UID, if any.
    fn uid(&self) -> Option<String> {
        self.meta().uid.clone()
    }
    /// The name of its Gang.
    fn gang_name(&self) -> String {
        self.kind().gang_name(&self.name())
    }
    /// The queue it asks for, if labelled.
    fn queue(&self) -> Option<&str> {
        self.meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::controller::base::objects::QUEUE_LABEL))
            .map(String::as_str)
    }
    /// Being deleted.
    fn deleting(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }
}

/// The Gang (namespace, name) a pod belongs to, by its labels and owners
/// alone: a JobSet's pods carry the JobSet's name, a pod group's its group,
/// a Job's pods are owned by the Job.
pub(crate) fn pod_gang(pod: &CachedPod) -> Option<(String, String)> {
    let ns = pod.namespace().unwrap_or_default();
    // kinds whose pods carry no label naming their object are labelled by the pin
    if let Some(g) = pod.label(templated::WORKLOAD_LABEL) {
        return Some((ns, g.clone()));
    }
    if let Some(g) = lws::pod_gang_name(pod) {
        return Some((ns, g));
    }
    if let Some(g) = pytorchjob::pod_gang_name(pod) {
        return Some((ns, g));
    }
    if let Some(c) = pod.label(raycluster::CLUSTER_LABEL) {
        return Some((ns, WorkloadKind::RayCluster.gang_name(c)));
    }
    if let Some(js) = pod.label(jobset::JOBSET_NAME_LABEL) {
        return Some((ns, WorkloadKind::JobSet.gang_name(js)));
    }
    if let Some(g) = pod.label(pod_group::POD_GROUP_LABEL) {
        return Some((ns, WorkloadKind::PodGroup.gang_name(g)));
    }
    pod.owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| (ns, o.name.clone()))
}

/// A workload object of a custom kind as cached.
pub type Object = Arc<DynamicObject>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_from_the_flag() {
        assert_eq!(
            parse_kinds(
                "job, jobset,pod-group,trainjob,pytorchjob,raycluster,rayjob,leaderworkerset"
            )
            .expect("kinds"),
            WorkloadKind::ALL.into_iter().collect()
        );
        // every kind's flag name parses back to it
        for k in WorkloadKind::ALL {
            assert_eq!(WorkloadKind::parse(k.as_str()), Some(k));
        }
        assert!(
            parse_kinds("job,mpijob")
                .expect_err("unknown")
                .contains("mpijob")
        );
    }
}
