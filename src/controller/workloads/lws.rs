//! LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`) behind the workload seam:
//! each group (a leader and `size - 1` workers) is a gang of its own, held
//! and released like a pod group ([`crate::controller::workloads::pod_group`]): the admission
//! webhook adds muster's scheduling gate to the leader and worker templates
//! when the LeaderWorkerSet is created, and to every pod the LeaderWorkerSet
//! controller creates while the set is labelled with a queue (so a template
//! that lost the gate, after a re-apply, still makes gated pods), so every
//! pod waits gated until its group is admitted, then the group's pods are
//! pinned and released together. This is Kueue's
//! integration too (`pkg/controller/jobs/leaderworkerset`: one pod-group
//! workload per group, pods held by a scheduling gate).
//!
//! The upstream rules the writes follow (kubernetes-sigs/lws):
//!
//! - `api/leaderworkerset/v1/leaderworkerset_types.go`: group `g` of set
//!   `name` is the pods labelled `leaderworkerset.sigs.k8s.io/name: name`
//!   and `leaderworkerset.sigs.k8s.io/group-index: g`, `size` pods in all;
//! - a LeaderWorkerSet has no suspend; a stopped group's pods are deleted
//!   (the table's rules for pods), and with the default restart policy
//!   (RecreateGroupOnPodRestart, `pkg/controllers/pod_controller.go`) the
//!   controller recreates the whole group from the templates, gated again;
//! - the gang ends when the LeaderWorkerSet is deleted or scaled below the
//!   group (its pods go);
//! - with `startupPolicy: LeaderReady` the workers are created only once the
//!   leader pod is Ready (`pkg/controllers/pod_controller.go`), so a group
//!   is never all there while its leader is gated.
//!
//! So a group is sized and shaped from the LeaderWorkerSet's spec, not from
//! its pods: every group `spec.replicas` asks for is a gang of `size` pods
//! before any of its pods exists, as Kueue builds one workload per group
//! from the LeaderWorkerSet (`pkg/controller/jobs/leaderworkerset`).
//! Admitted, the pods that exist are pinned and released; those that come
//! later (the leader, then the workers, which a `LeaderReady` group creates
//! only once its leader runs) arrive gated and are pinned to the same nodes
//! and released as they appear (the pod-group table's `Unsuspend` of a gang
//! that runs).
//!
//! The group's one pod set (`main`, `size` pods) asks of every pod what both
//! the leader and worker templates ask (a leader template may differ from
//! the workers'): the larger requests, both templates' node selectors and
//! required node affinity, the tolerations they share.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectReference, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Step};
use serde_json::Value;

use crate::controller::base::api::ActError;
use crate::controller::base::objects::QUEUE_LABEL;
use crate::controller::workloads::pod::CachedPod;
use crate::controller::workloads::pod_group::{GROUP_SIZE_ANNOTATION, PodGroup};
use crate::controller::workloads::writer::{Stored, Write};
use crate::controller::workloads::{
    AccessRule, CustomKind, Directives, PodSetTemplate, Workload, WorkloadError, WorkloadKind,
};

/// The LeaderWorkerSet custom resource.
pub const KIND: CustomKind = CustomKind {
    group: "leaderworkerset.x-k8s.io",
    version: "v1",
    kind: "LeaderWorkerSet",
    plural: "leaderworkersets",
};

/// What the controller does with LeaderWorkerSets: read and watch them (the
/// pods are pinned, released and deleted like a pod group's).
pub(crate) const ACCESS: &[AccessRule] = &[
    AccessRule {
        group: "leaderworkerset.x-k8s.io",
        resources: &["leaderworkersets"],
        verbs: &["get", "list", "watch"],
    },
    AccessRule {
        group: "",
        resources: &["pods"],
        verbs: &["patch", "update", "delete"],
    },
];

/// The label naming a pod's LeaderWorkerSet.
pub(crate) const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// The label naming a pod's group.
pub(crate) const GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";

/// The gang annotations a LeaderWorkerSet gives each of its groups.
const GANG_ANNOTATIONS: [&str; 6] = [
    crate::controller::base::objects::PRIORITY_ANNOTATION,
    crate::controller::base::objects::GPU_MODEL_ANNOTATION,
    crate::controller::base::objects::TOPOLOGY_ANNOTATION,
    crate::controller::base::objects::REQUIRED_TOPOLOGY_ANNOTATION,
    crate::controller::base::objects::PREFERRED_TOPOLOGY_ANNOTATION,
    crate::controller::base::objects::MAY_OUTLIVE_CAPACITY_ANNOTATION,
];

/// The annotations by which a LeaderWorkerSet asks for exclusive placement
/// (`api/leaderworkerset/v1/leaderworkerset_types.go`:
/// `ExclusiveKeyAnnotationKey`, `SubGroupExclusiveKeyAnnotationKey`).
pub(crate) const EXCLUSIVE_ANNOTATIONS: [&str; 2] = [
    "leaderworkerset.sigs.k8s.io/exclusive-topology",
    "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
];

/// What a queued LeaderWorkerSet asking for exclusive placement is refused
/// with.
pub(crate) const EXCLUSIVE: &str = "muster: a queued LeaderWorkerSet cannot ask for exclusive placement (annotation leaderworkerset.sigs.k8s.io/exclusive-topology or subgroup-exclusive-topology, or a placementPolicy in spec.leaderWorkerTemplate): LeaderWorkerSet then gives each group's pods required affinity to one topology domain and anti-affinity to every other group's, and creates a group's workers only once its leader is scheduled there, while muster pins each group to the nodes it admits without keeping groups in separate domains, so a group could wait for good; remove it, or run this LeaderWorkerSet outside muster's queues";

/// Why muster cannot run `lws`'s groups as gangs, if it cannot: exclusive
/// placement, by annotation or by the typed `placementPolicy` newer
/// releases give the leader-worker template and its sub-group policy.
pub(crate) fn unsupported(lws: &DynamicObject) -> Option<&'static str> {
    let annotated = lws
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| EXCLUSIVE_ANNOTATIONS.iter().any(|k| a.contains_key(*k)));
    let typed = [
        "/spec/leaderWorkerTemplate/placementPolicy",
        "/spec/leaderWorkerTemplate/subGroupPolicy/placementPolicy",
    ]
    .iter()
    .any(|p| lws.data.pointer(p).is_some_and(|v| !v.is_null()));
    (annotated || typed).then_some(EXCLUSIVE)
}

/// The gang of group `g` of LeaderWorkerSet `name`.
pub fn group_name(name: &str, g: &str) -> String {
    format!("{name}-{g}")
}

/// The gang a pod of a LeaderWorkerSet belongs to.
pub(crate) fn pod_gang_name(pod: &CachedPod) -> Option<String> {
    let name = pod.label(NAME_LABEL)?;
    let g = pod.label(GROUP_INDEX_LABEL)?;
    Some(WorkloadKind::LeaderWorkerSet.gang_name(&group_name(name, g)))
}

/// One group of a LeaderWorkerSet.
#[derive(Debug, Clone)]
pub struct LwsGroup {
    lws: Arc<DynamicObject>,
    group: PodGroup,
}

/// The groups of `lws`, each a pod group of `size` pods queued where the
/// LeaderWorkerSet's label says: every group its spec asks for
/// (`spec.replicas`, default 1), whether its pods exist yet or not, and any
/// group beyond it whose pods are still there (scaled down, going).
pub fn groups(lws: &Arc<DynamicObject>, pods: &[Arc<CachedPod>]) -> Vec<LwsGroup> {
    let ns = lws.namespace().unwrap_or_default();
    let name = lws.name_any();
    let size = lws
        .data
        .pointer("/spec/leaderWorkerTemplate/size")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let replicas = lws
        .data
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    // by index, so group 10 comes after group 9
    let mut by: BTreeMap<u64, Vec<Arc<CachedPod>>> = (0..replicas).map(|g| (g, vec![])).collect();
    for p in pods {
        if p.metadata.deletion_timestamp.is_some()
            || p.namespace().unwrap_or_default() != ns
            || p.label(NAME_LABEL) != Some(&name)
        {
            continue;
        }
        if let Some(g) = p.label(GROUP_INDEX_LABEL).and_then(|g| g.parse().ok()) {
            by.entry(g).or_default().push(p.clone());
        }
    }
    by.into_iter()
        .map(|(g, pods)| {
            let mut labels = BTreeMap::new();
            if let Some(q) = lws.labels().get(QUEUE_LABEL) {
                labels.insert(QUEUE_LABEL.to_string(), q.clone());
            }
            // the set's own gang settings are each group's; not min-count:
            // LeaderWorkerSet always makes `size` pods of a group
            let mut annotations: BTreeMap<String, String> = lws
                .annotations()
                .iter()
                .filter(|(k, _)| GANG_ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            annotations.insert(GROUP_SIZE_ANNOTATION.to_string(), size.to_string());
            let meta = ObjectMeta {
                name: Some(group_name(&name, &g.to_string())),
                namespace: Some(ns.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                uid: lws.metadata.uid.clone(),
                ..ObjectMeta::default()
            };
            LwsGroup {
                lws: lws.clone(),
                group: PodGroup::new(meta, pods),
            }
        })
        .collect()
}

/// The requests that cover each of `each`: the larger where one fits in
/// the other, else both added (a safe over-estimate).
fn covering_requests<'r>(
    each: impl IntoIterator<Item = &'r muster_planner::Resources>,
) -> muster_planner::Resources {
    let mut r = muster_planner::Resources::zero();
    for one in each {
        if one.fits_in(&r) {
            continue;
        }
        if r.fits_in(one) {
            r = one.clone();
        } else {
            r.add(one);
        }
    }
    r
}

/// Where a LeaderWorkerSet keeps its workers' pod template.
const WORKER_TEMPLATE: &str = "/spec/leaderWorkerTemplate/workerTemplate";
/// Where it keeps its leader's, when the leader's differs.
const LEADER_TEMPLATE: &str = "/spec/leaderWorkerTemplate/leaderTemplate";

/// The pod spec of the LeaderWorkerSet's template at `pointer`: `Ok(None)`
/// when it has none there.
fn template_spec(lws: &DynamicObject, pointer: &str) -> Result<Option<PodSpec>, WorkloadError> {
    match lws.data.pointer(&format!("{pointer}/spec")) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| WorkloadError::BadShape(format!("{pointer}/spec: {e}"))),
    }
}

/// The effective requests of `spec`.
fn spec_requests(spec: &PodSpec) -> Result<muster_planner::Resources, WorkloadError> {
    let map = crate::controller::workloads::requests::pod_requests(spec)
        .map_err(|e| WorkloadError::BadShape(format!("spec.leaderWorkerTemplate: {e}")))?;
    muster_planner::Resources::parse_map(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| WorkloadError::BadShape(format!("spec.leaderWorkerTemplate: {e}")))
}

/// The required node affinity of `spec`, if it has one.
fn required_terms(spec: &PodSpec) -> Option<&NodeSelector> {
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
}

/// A node both `a` and `b` allow: each term of one ANDed with each of the
/// other (kube-scheduler ORs a selector's terms and ANDs a term's
/// requirements).
fn both(a: &NodeSelector, b: &NodeSelector) -> NodeSelector {
    if a == b {
        return a.clone();
    }
    let mut terms = Vec::new();
    for x in &a.node_selector_terms {
        for y in &b.node_selector_terms {
            let cat = |f: fn(&NodeSelectorTerm) -> &Option<Vec<NodeSelectorRequirement>>| {
                let all: Vec<NodeSelectorRequirement> =
                    f(x).iter().chain(f(y).iter()).flatten().cloned().collect();
                (!all.is_empty()).then_some(all)
            };
            terms.push(NodeSelectorTerm {
                match_expressions: cat(|t| &t.match_expressions),
                match_fields: cat(|t| &t.match_fields),
            });
        }
    }
    NodeSelector {
        node_selector_terms: terms,
    }
}

/// What every pod of a group asks of its node, from the leader's and the
/// workers' templates (one pod set holds both, and any pod may land on any
/// of the group's nodes): the larger requests (both added when neither
/// covers the other, a safe over-estimate); a node the leader's and the
/// workers' node selectors and required node affinity all allow; the
/// tolerations the two share (a taint only one of them tolerates would
/// keep the other off the node).
fn group_template(leader: &PodSpec, worker: &PodSpec) -> Result<PodSpec, WorkloadError> {
    let requests: BTreeMap<String, Quantity> =
        covering_requests([&spec_requests(leader)?, &spec_requests(worker)?])
            .to_quantities()
            .into_iter()
            .map(|(k, q)| (k, Quantity(q.to_string())))
            .collect();
    let mut selector = leader.node_selector.clone().unwrap_or_default();
    selector.extend(worker.node_selector.clone().unwrap_or_default());
    let tolerations: Vec<Toleration> = leader
        .tolerations
        .iter()
        .flatten()
        .filter(|t| worker.tolerations.iter().flatten().any(|w| w == *t))
        .cloned()
        .collect();
    let affinity = match (required_terms(leader), required_terms(worker)) {
        (Some(l), Some(w)) => Some(both(l, w)),
        (one, other) => one.or(other).cloned(),
    };
    Ok(PodSpec {
        containers: vec![Container {
            name: "pod".to_string(),
            resources: Some(ResourceRequirements {
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }],
        node_selector: (!selector.is_empty()).then_some(selector),
        tolerations: (!tolerations.is_empty()).then_some(tolerations),
        affinity: affinity.map(|required| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(required),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

impl Workload for LwsGroup {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::LeaderWorkerSet
    }

    fn meta(&self) -> &ObjectMeta {
        self.group.meta()
    }

    fn gang_owner(&self) -> Option<OwnerReference> {
        crate::controller::workloads::custom_owner(KIND, &self.lws)
    }

    fn object_ref(&self) -> ObjectReference {
        crate::controller::workloads::custom_object_ref(KIND, &self.lws)
    }

    fn pod_sets(&self) -> Result<Vec<PodSetTemplate>, WorkloadError> {
        if let Some(why) = unsupported(&self.lws) {
            return Err(WorkloadError::Unsupported(why));
        }
        // sized and shaped from the spec, so a group is a gang before its
        // pods exist
        let worker = template_spec(&self.lws, WORKER_TEMPLATE)?.ok_or_else(|| {
            WorkloadError::BadShape("spec.leaderWorkerTemplate.workerTemplate is missing".into())
        })?;
        let leader = template_spec(&self.lws, LEADER_TEMPLATE)?.unwrap_or_else(|| worker.clone());
        let size = crate::controller::workloads::pod_group::size_of(self.meta())?;
        Ok(vec![PodSetTemplate {
            name: crate::controller::workloads::pod_group::POD_SET.to_string(),
            count: size,
            min_count: None,
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(group_template(&leader, &worker)?),
            },
        }])
    }

    fn observe(&self) -> Observed {
        self.group.observe()
    }

    fn incomplete(&self) -> Option<String> {
        // sized and shaped from the spec: a gang before its pods exist, as
        // Kueue makes one workload per group from the LeaderWorkerSet
        // (`pkg/controller/jobs/leaderworkerset`); pods that come later
        // arrive gated and are pinned and released as they appear
        None
    }

    fn writes(&self, step: &Step, directives: &Directives) -> Result<Vec<Write>, ActError> {
        // the group's pods are pinned, released and deleted as a pod group's
        self.group.writes(step, directives)
    }

    fn stored(&self, stored: Vec<Stored>) -> Result<Box<dyn Workload>, ActError> {
        Ok(Box::new(LwsGroup {
            lws: self.lws.clone(),
            group: self.group.stored_group(stored)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    /// The label naming a pod's place in its group (0: the leader).
    const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";

    fn pod(name: &str, g: &str, gpus: &str) -> Arc<CachedPod> {
        // infer-<g> leads, infer-<g>-<w> is worker w
        let worker = name.split('-').nth(2).unwrap_or("0");
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name,
                "labels": {NAME_LABEL: "infer", GROUP_INDEX_LABEL: g, WORKER_INDEX_LABEL: worker}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus}}}],
                "schedulingGates": [{"name": crate::controller::workloads::pod_group::SCHEDULING_GATE}]},
            "status": {"phase": "Pending"}
        }))
        .expect("pod");
        Arc::new(CachedPod::from(p))
    }

    fn lws() -> Arc<DynamicObject> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": "infer", "namespace": "ns", "uid": "u1", "labels": {QUEUE_LABEL: "q"}},
                "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3,
                    "leaderTemplate": {"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "1"}}}]}},
                    "workerTemplate": {"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"}}}]}}}}
            }))
            .expect("lws"),
        )
    }

    #[test]
    fn each_group_is_a_gang_of_size_pods() {
        let pods = [
            pod("infer-0", "0", "0"),
            pod("infer-0-1", "0", "8"),
            pod("infer-0-2", "0", "8"),
            pod("infer-1", "1", "0"),
            pod("infer-2-1", "2", "8"),
        ];
        let gs = groups(&lws(), &pods);
        // the two groups the spec asks for, and group 2 scaled away whose
        // worker is still there
        assert_eq!(gs.len(), 3);
        assert_eq!(gs[0].gang_name(), "lws-infer-0");
        assert_eq!(gs[0].queue(), Some("q"));
        assert_eq!(gs[0].incomplete(), None);
        // a leader alone is a whole gang: with startupPolicy LeaderReady its
        // workers come only once it runs
        assert_eq!(gs[1].incomplete(), None);
        assert_eq!(gs[1].pod_sets().expect("pod sets")[0].count, 3);
        assert_eq!(gs[2].gang_name(), "lws-infer-2");
        // no pod yet: a gang all the same, shaped by the templates
        let none = groups(&lws(), &[]);
        assert_eq!(none.len(), 2);
        assert_eq!(none[1].incomplete(), None);
        let sets = none[1].pod_sets().expect("pod sets");
        assert_eq!((sets[0].name.as_str(), sets[0].count), ("main", 3));
        assert!(none[1].observe().suspended && !none[1].observe().finished);
        let sets = gs[0].pod_sets().expect("pod sets");
        assert_eq!(sets[0].count, 3);
        // the CPU leader and the GPU workers: every pod asks for the most
        let req = sets[0].template.spec.as_ref().expect("spec").containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .expect("requests");
        assert_eq!(req.get("nvidia.com/gpu").map(|q| q.0.as_str()), Some("8"));
        assert!(gs[0].observe().suspended);
        assert_eq!(pod_gang_name(&pods[1]).as_deref(), Some("lws-infer-0"));
    }

    /// A set that got past the webhook asking for exclusive placement is
    /// not queued: its groups say why (an `UnsupportedWorkload` Event).
    #[test]
    fn a_set_asking_for_exclusive_placement_is_not_queued() {
        let mut set = (*lws()).clone();
        set.metadata.annotations = Some(
            [(
                EXCLUSIVE_ANNOTATIONS[0].to_string(),
                "topology.kubernetes.io/zone".to_string(),
            )]
            .into(),
        );
        let gs = groups(&Arc::new(set), &[pod("infer-0", "0", "0")]);
        assert!(
            !gs[0]
                .meta()
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(EXCLUSIVE_ANNOTATIONS[0]))
        );
        match gs[0].pod_sets() {
            Err(WorkloadError::Unsupported(why)) => assert_eq!(why, EXCLUSIVE),
            other => panic!("{other:?}"),
        }
        assert!(
            groups(&lws(), &[pod("infer-0", "0", "0")])[0]
                .pod_sets()
                .is_ok()
        );
    }

    /// The set's priority, GPU model and topology are each group's gang's;
    /// its min-count is not (every group has `size` pods).
    #[test]
    fn each_group_takes_the_sets_gang_annotations() {
        let mut set = (*lws()).clone();
        set.metadata.annotations = Some(
            [
                ("muster.dev/priority", "7"),
                ("muster.dev/topology", "SameZone"),
                ("muster.dev/min-count", "1"),
                ("other", "x"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        );
        let gs = groups(&Arc::new(set), &[pod("infer-0", "0", "0")]);
        let a = gs[0].meta().annotations.clone().unwrap_or_default();
        assert_eq!(a.get("muster.dev/priority").map(String::as_str), Some("7"));
        assert_eq!(
            a.get("muster.dev/topology").map(String::as_str),
            Some("SameZone")
        );
        assert!(!a.contains_key("muster.dev/min-count") && !a.contains_key("other"));
        assert_eq!(a.get(GROUP_SIZE_ANNOTATION).map(String::as_str), Some("3"));
    }

    #[test]
    fn a_group_is_written_as_a_pod_group_and_stays_the_leaderworkersets() {
        use crate::controller::workloads::writer::{Stored, sketch};
        let pods = [
            pod("infer-0", "0", "0"),
            pod("infer-0-1", "0", "8"),
            pod("infer-0-2", "0", "8"),
        ];
        let g = groups(&lws(), &pods).remove(0);
        let dirs = sketch::directives("ns.lws-infer-0", &[], &[]);
        let pins = sketch::pins(&[("main", &["n1"])]);
        let writes: Vec<_> = g
            .writes(&Step::Pin(pins), &dirs)
            .expect("writes")
            .iter()
            .map(|w| {
                let (action, at, verb, _) = sketch::of(w);
                (action, at, verb)
            })
            .collect();
        assert_eq!(
            writes,
            ["infer-0", "infer-0-1", "infer-0-2"].map(|p| (
                "pin pod of group",
                format!("pods ns/{p}"),
                "patch"
            ))
        );
        let gone = Stored {
            name: "infer-0-2".into(),
            object: None,
            action: "delete pod of group",
        };
        let again = g.stored(vec![gone]).expect("stored");
        assert_eq!(again.kind(), WorkloadKind::LeaderWorkerSet);
        assert_eq!(again.gang_name(), "lws-infer-0");
        assert_eq!(again.uid().as_deref(), Some("u1"));
        assert_eq!(again.incomplete(), None, "sized from the spec");
    }

    #[test]
    fn a_groups_requests_come_from_the_leader_and_worker_templates() {
        let with_templates = |leader: Option<&str>| {
            let mut lws = (*lws()).clone();
            let t = |gpus: &str| {
                json!({"spec": {"containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": gpus}}}]}})
            };
            let lwt = &mut lws.data["spec"]["leaderWorkerTemplate"];
            lwt["workerTemplate"] = t("4");
            lwt["leaderTemplate"] = leader.map_or(Value::Null, t);
            Arc::new(lws)
        };
        let gpus = |lws: Arc<DynamicObject>| {
            // only the leader exists, asking nothing: the templates decide
            let g = groups(&lws, &[pod("infer-0", "0", "0")]).remove(0);
            let sets = g.pod_sets().expect("pod sets");
            sets[0].template.spec.as_ref().expect("spec").containers[0]
                .resources
                .as_ref()
                .and_then(|r| r.requests.clone())
                .and_then(|r| r.get("nvidia.com/gpu").map(|q| q.0.clone()))
        };
        assert_eq!(
            gpus(with_templates(None)).as_deref(),
            Some("4"),
            "the workers' template"
        );
        assert_eq!(
            gpus(with_templates(Some("8"))).as_deref(),
            Some("8"),
            "the larger leader"
        );
        assert_eq!(gpus(with_templates(Some("0"))).as_deref(), Some("4"));
    }

    /// A group's one pod set keeps every pod where both templates allow:
    /// node selectors merged, only the tolerations both share, required
    /// node affinity ANDed term by term.
    #[test]
    fn a_groups_node_constraints_are_both_templates() {
        let mut set = (*lws()).clone();
        let zone = |z: &str| {
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [z]}]}]}}})
        };
        let gpu = json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"});
        let spot = json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"});
        let lwt = &mut set.data["spec"]["leaderWorkerTemplate"];
        lwt["leaderTemplate"]["spec"]["nodeSelector"] = json!({"pool": "a"});
        lwt["leaderTemplate"]["spec"]["tolerations"] = json!([gpu, spot]);
        lwt["leaderTemplate"]["spec"]["affinity"] = zone("b");
        lwt["workerTemplate"]["spec"]["nodeSelector"] = json!({"arch": "amd64"});
        lwt["workerTemplate"]["spec"]["tolerations"] = json!([gpu]);
        lwt["workerTemplate"]["spec"]["affinity"] = zone("c");
        let g = groups(&Arc::new(set), &[]).remove(0);
        let spec = g.pod_sets().expect("pod sets")[0]
            .template
            .spec
            .clone()
            .expect("spec");
        let v = serde_json::to_value(&spec).expect("json");
        assert_eq!(v["nodeSelector"], json!({"arch": "amd64", "pool": "a"}));
        assert_eq!(v["tolerations"], json!([gpu]));
        let terms = &v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(
            terms[0]["matchExpressions"]
                .as_array()
                .map(|e| e.iter().map(|r| r["values"][0].clone()).collect::<Vec<_>>()),
            Some(vec![json!("b"), json!("c")]),
            "one term asking both zones: no node is in both, so the group never fits"
        );
        // no workers' template: refused with where
        let mut bare = (*lws()).clone();
        bare.data["spec"]["leaderWorkerTemplate"]["workerTemplate"] = Value::Null;
        match groups(&Arc::new(bare), &[]).remove(0).pod_sets() {
            Err(WorkloadError::BadShape(why)) => {
                assert!(why.contains("workerTemplate"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }
}
