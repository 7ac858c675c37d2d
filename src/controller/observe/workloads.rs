//! The workloads of one observation: every labelled workload of the
//! enabled kinds behind the [`Workload`] seam, one looked up by its Gang,
//! and a workload's pods.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;

use crate::controller::observe::Observed;
use crate::controller::workloads::pod::CachedPod;
use crate::controller::workloads::{
    Workload, WorkloadKind, job, jobset, lws, managed_controller, pod_gang, pod_group, pytorchjob,
    raycluster, rayjob, trainjob, trainjob_jobset,
};

/// False for an object whose controller is an object of a kind muster runs
/// (a TrainJob's JobSet, a RayJob's RayCluster): part of that workload.
fn own(o: &DynamicObject) -> bool {
    managed_controller(o.owner_references()).is_none()
}

/// Every workload of the enabled kinds that asks for a queue, not being
/// deleted. Objects created by another workload kind (a JobSet's child
/// Jobs, a TrainJob's JobSet, a RayJob's RayCluster; see
/// [`managed_controller`]) are that workload's, not workloads of their own.
pub(crate) fn all(observed: &Observed) -> Vec<Box<dyn Workload>> {
    let mut out: Vec<Box<dyn Workload>> = Vec::new();
    if observed.kinds.contains(&WorkloadKind::Job) {
        for j in &observed.jobs {
            if job::owned_by_other_kind(j) {
                continue;
            }
            out.push(Box::new(job::JobWorkload(j.clone())));
        }
    }
    if observed.kinds.contains(&WorkloadKind::JobSet) {
        for o in observed.workload_objects(WorkloadKind::JobSet) {
            if !own(o) {
                continue;
            }
            out.push(Box::new(jobset::JobSetWorkload(o.clone())));
        }
    }
    if observed.kinds.contains(&WorkloadKind::PodGroup) {
        for g in pod_group::groups(&observed.pods) {
            out.push(Box::new(g));
        }
    }
    if observed.kinds.contains(&WorkloadKind::TrainJob) {
        for o in observed.workload_objects(WorkloadKind::TrainJob) {
            if !own(o) {
                continue;
            }
            let (kind, ns, name) = trainjob::runtime_ref(o);
            let runtime = observed
                .related_objects(kind)
                .iter()
                .find(|r| r.namespace().unwrap_or_default() == ns && r.name_any() == name)
                .cloned();
            let jobset = observed
                .related_objects(jobset::KIND)
                .iter()
                .find(|js| trainjob_jobset::is_child_of(js, o))
                .cloned();
            out.push(Box::new(trainjob::TrainJobWorkload {
                job: o.clone(),
                runtime,
                jobset,
            }));
        }
    }
    if observed.kinds.contains(&WorkloadKind::PyTorchJob) {
        for o in observed.workload_objects(WorkloadKind::PyTorchJob) {
            if !own(o) {
                continue;
            }
            out.push(Box::new(pytorchjob::PyTorchJobWorkload(o.clone())));
        }
    }
    if observed.kinds.contains(&WorkloadKind::RayCluster) {
        for o in observed.workload_objects(WorkloadKind::RayCluster) {
            if !own(o) {
                continue;
            }
            out.push(Box::new(raycluster::RayClusterWorkload(o.clone())));
        }
    }
    if observed.kinds.contains(&WorkloadKind::RayJob) {
        for o in observed.workload_objects(WorkloadKind::RayJob) {
            if !own(o) {
                continue;
            }
            // a RayJob on an existing cluster runs on that cluster's gang
            if o.data
                .pointer("/spec/clusterSelector")
                .and_then(serde_json::Value::as_object)
                .is_some_and(|m| !m.is_empty())
            {
                continue;
            }
            out.push(Box::new(rayjob::RayJobWorkload(o.clone())));
        }
    }
    if observed.kinds.contains(&WorkloadKind::LeaderWorkerSet) {
        for o in observed.workload_objects(WorkloadKind::LeaderWorkerSet) {
            if !own(o) {
                continue;
            }
            for g in lws::groups(o, &observed.pods) {
                out.push(Box::new(g));
            }
        }
    }
    out.retain(|w| w.queue().is_some() && !w.deleting());
    out
}

/// The workload whose Gang is `namespace/gang`, looked up by the Gang's
/// name (a Job of that name, a JobSet or pod group its prefix names)
/// rather than by listing every workload.
pub(crate) fn find(observed: &Observed, namespace: &str, gang: &str) -> Option<Box<dyn Workload>> {
    let wanted = |w: &dyn Workload| {
        w.namespace() == namespace && w.gang_name() == gang && w.queue().is_some() && !w.deleting()
    };
    if observed.kinds.contains(&WorkloadKind::Job) {
        let hit = observed.jobs.iter().find(|j| {
            j.metadata.name.as_deref() == Some(gang)
                && j.metadata.namespace.as_deref() == Some(namespace)
                && !job::owned_by_other_kind(j)
        });
        if let Some(w) = hit.map(|j| job::JobWorkload(j.clone()))
            && wanted(&w)
        {
            return Some(Box::new(w));
        }
    }
    if let Some(name) = gang.strip_prefix("jobset-")
        && observed.kinds.contains(&WorkloadKind::JobSet)
    {
        let hit = observed
            .workload_objects(WorkloadKind::JobSet)
            .iter()
            .find(|o| {
                o.metadata.name.as_deref() == Some(name)
                    && o.metadata.namespace.as_deref() == Some(namespace)
                    && own(o)
            });
        if let Some(w) = hit.map(|o| jobset::JobSetWorkload(o.clone()))
            && wanted(&w)
        {
            return Some(Box::new(w));
        }
    }
    if let Some(name) = gang.strip_prefix("podgroup-")
        && observed.kinds.contains(&WorkloadKind::PodGroup)
    {
        let pods: Vec<Arc<CachedPod>> = observed
            .pods
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.label(pod_group::POD_GROUP_LABEL).map(String::as_str) == Some(name)
            })
            .cloned()
            .collect();
        if let Some(g) = pod_group::groups(&pods).into_iter().next()
            && wanted(&g)
        {
            return Some(Box::new(g));
        }
    }
    // the other kinds: by their gang name's prefix, from every workload of
    // the kinds that name gangs so
    let others = [
        WorkloadKind::TrainJob,
        WorkloadKind::PyTorchJob,
        WorkloadKind::RayCluster,
        WorkloadKind::RayJob,
        WorkloadKind::LeaderWorkerSet,
    ];
    if others
        .iter()
        .any(|k| observed.kinds.contains(k) && gang.starts_with(&k.gang_name("")))
    {
        return all(observed).into_iter().find(|w| wanted(w.as_ref()));
    }
    None
}

/// The pods of a workload that have not finished.
pub(crate) fn live_pods<'a>(observed: &'a Observed, w: &dyn Workload) -> Vec<&'a Arc<CachedPod>> {
    let key = (w.namespace(), w.gang_name());
    observed
        .pods
        .iter()
        .filter(|p| !matches!(p.phase.as_deref(), Some("Succeeded") | Some("Failed")))
        .filter(|p| pod_gang(p).as_ref() == Some(&key))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::workloads::pod_gang;
    use serde_json::json;

    fn observed() -> Observed {
        let mut o = Observed {
            kinds: WorkloadKind::ALL.into_iter().collect(),
            ..Observed::default()
        };
        let labels = json!({"muster.dev/queue": "q"});
        o.jobs = vec![
            Arc::new(serde_json::from_value(json!({"metadata": {"name": "train", "namespace": "ns", "labels": labels}, "spec": {"template": {}}})).expect("job")),
            // a JobSet's child Job: not a workload of its own
            Arc::new(serde_json::from_value(json!({"metadata": {"name": "js-w-0", "namespace": "ns", "labels": labels,
                "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": true}]},
                "spec": {"template": {}}})).expect("job")),
            // no queue: not muster's
            Arc::new(serde_json::from_value(json!({"metadata": {"name": "other", "namespace": "ns"}, "spec": {"template": {}}})).expect("job")),
        ];
        o.workloads.insert(
            WorkloadKind::JobSet,
            vec![Arc::new(serde_json::from_value(json!({
                "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "js", "namespace": "ns", "labels": labels},
                "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {}}}}]}
            })).expect("jobset"))],
        );
        let pod = |name: &str| -> Arc<CachedPod> {
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "labels": {"muster.dev/queue": "q", "muster.dev/pod-group": "ring"},
                    "annotations": {"muster.dev/pod-group-size": "2"}},
                "spec": {"containers": [], "schedulingGates": [{"name": pod_group::SCHEDULING_GATE}]}
            }))
            .expect("pod");
            Arc::new(CachedPod::from(p))
        };
        o.pods = vec![pod("a"), pod("b")];
        o
    }

    #[test]
    fn every_workload_is_found_by_its_gang_and_pods_by_their_labels() {
        let o = observed();
        let names: Vec<(WorkloadKind, String)> =
            all(&o).iter().map(|w| (w.kind(), w.gang_name())).collect();
        assert_eq!(
            names,
            [
                (WorkloadKind::Job, "train".to_string()),
                (WorkloadKind::JobSet, "jobset-js".to_string()),
                (WorkloadKind::PodGroup, "podgroup-ring".to_string()),
            ]
        );
        for (kind, gang) in &names {
            let w = find(&o, "ns", gang).expect("found");
            assert_eq!((w.kind(), w.gang_name()), (*kind, gang.clone()));
        }
        assert!(find(&o, "ns", "other").is_none(), "unlabelled");
        assert!(find(&o, "ns", "js-w-0").is_none(), "a JobSet's child");
        assert!(find(&o, "elsewhere", "train").is_none());
        assert_eq!(
            pod_gang(&o.pods[0]),
            Some(("ns".to_string(), "podgroup-ring".to_string()))
        );
        // a kind not enabled is not a workload
        let mut only_jobs = o.clone();
        only_jobs.kinds = [WorkloadKind::Job].into();
        assert_eq!(all(&only_jobs).len(), 1);
        assert!(find(&only_jobs, "ns", "jobset-js").is_none());
    }

    /// A custom-kind object of `kind` (`apiVersion`, `kind`) named `name`,
    /// labelled with a queue, controlled by `owner` (`apiVersion`, `kind`).
    fn child(
        api_kind: (&str, &str),
        name: &str,
        owner: Option<(&str, &str)>,
    ) -> Arc<DynamicObject> {
        let owners = owner.map_or(json!([]), |(v, k)| {
            json!([{"apiVersion": v, "kind": k, "name": "parent", "uid": "p", "controller": true}])
        });
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": api_kind.0, "kind": api_kind.1,
                "metadata": {"name": name, "namespace": "ns", "uid": name,
                    "labels": {"muster.dev/queue": "q"}, "ownerReferences": owners},
                "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {}}}}],
                    "runtimeRef": {"name": "torch"}}
            }))
            .expect("object"),
        )
    }

    #[test]
    fn children_of_managed_owners_are_never_workloads_of_their_own() {
        let trainjob = ("trainer.kubeflow.org/v1alpha1", "TrainJob");
        let jobset = ("jobset.x-k8s.io/v1alpha2", "JobSet");
        let rayjob = ("ray.io/v1", "RayJob");
        let cases = [
            // the JobSet a TrainJob's Trainer builds, labelled by its runtime
            (WorkloadKind::JobSet, jobset, trainjob),
            (
                WorkloadKind::RayCluster,
                ("ray.io/v1", "RayCluster"),
                rayjob,
            ),
            (WorkloadKind::TrainJob, trainjob, jobset),
            (
                WorkloadKind::PyTorchJob,
                ("kubeflow.org/v1", "PyTorchJob"),
                jobset,
            ),
            (WorkloadKind::RayJob, rayjob, trainjob),
            (
                WorkloadKind::LeaderWorkerSet,
                ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
                jobset,
            ),
        ];
        for (kind, api_kind, owner) in cases {
            let mut o = Observed {
                kinds: WorkloadKind::ALL.into_iter().collect(),
                ..Observed::default()
            };
            o.workloads.insert(
                kind,
                vec![
                    child(api_kind, "child", Some(owner)),
                    // owned by a kind muster does not run: its own workload
                    child(api_kind, "free", Some(("apps/v1", "Deployment"))),
                ],
            );
            let found: Vec<String> = all(&o)
                .iter()
                .filter(|w| w.kind() == kind)
                .map(|w| w.name())
                .collect();
            assert!(
                !found.iter().any(|n| n.starts_with("child")),
                "{kind:?}: {found:?}"
            );
            assert!(
                kind == WorkloadKind::LeaderWorkerSet || found.contains(&"free".to_string()),
                "{kind:?}: {found:?}"
            );
            assert!(
                find(&o, "ns", &kind.gang_name("child")).is_none(),
                "{kind:?} found by its gang"
            );
        }
        // the pods a Job made that name a pod group belong to the Job
        let mut o = observed();
        let pods: Vec<Arc<CachedPod>> = o
            .pods
            .iter()
            .map(|p| {
                let mut p = (**p).clone();
                p.metadata.owner_references = Some(vec![
                    serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
                        "name": "train", "uid": "u", "controller": true}))
                    .expect("owner"),
                ]);
                Arc::new(p)
            })
            .collect();
        o.pods = pods;
        assert!(
            all(&o).iter().all(|w| w.kind() != WorkloadKind::PodGroup),
            "no pod group of a Job's pods"
        );
        assert!(find(&o, "ns", "podgroup-ring").is_none());
    }
}
