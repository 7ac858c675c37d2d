//! One cycle's observation: what the caches hold, read once, as plain
//! lists that translation and every step read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node as KubeNode;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::DynamicObject;

use crate::controller::base::objects::Kind;
use crate::controller::workloads::WorkloadKind;
use crate::controller::workloads::pod::CachedPod;

/// What the caches hold, as plain lists.
#[derive(Default, Clone)]
pub struct Observed {
    /// Jobs.
    pub jobs: Vec<Arc<Job>>,
    /// Pods.
    pub pods: Vec<Arc<CachedPod>>,
    /// Nodes.
    pub nodes: Vec<Arc<KubeNode>>,
    /// Namespaces.
    pub namespaces: Vec<Arc<k8s_openapi::api::core::v1::Namespace>>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// muster objects by kind.
    pub objects: BTreeMap<Kind, Vec<Arc<DynamicObject>>>,
    /// The workload kinds enabled and served.
    pub kinds: BTreeSet<WorkloadKind>,
    /// Objects of the enabled custom workload kinds (JobSets, ...).
    pub workloads: BTreeMap<WorkloadKind, Vec<Arc<DynamicObject>>>,
    /// Objects the adapters of enabled kinds read besides their own (a
    /// TrainJob's training runtimes), by CRD name.
    pub related: BTreeMap<String, Vec<Arc<DynamicObject>>>,
}

impl Observed {
    /// The cached objects of one kind.
    pub fn of(&self, kind: Kind) -> &[Arc<DynamicObject>] {
        self.objects.get(&kind).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The cached objects of one custom workload kind.
    pub(crate) fn workload_objects(&self, kind: WorkloadKind) -> &[Arc<DynamicObject>] {
        self.workloads.get(&kind).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The cached objects of a related custom resource.
    pub(crate) fn related_objects(
        &self,
        kind: crate::controller::workloads::CustomKind,
    ) -> &[Arc<DynamicObject>] {
        self.related
            .get(&kind.crd_name())
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}
