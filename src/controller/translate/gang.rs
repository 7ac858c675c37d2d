//! Gang objects → planner gangs.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::record::GangRecord;
use muster_planner::{
    Arrival, Assignment, Gang, GangPhase, GpuModel, NodeAffinity, NodeSelectorOperator,
    NodeSelectorRequirement, NodeSelectorTerm, PodSet, Resources, Time, Toleration,
    TolerationOperator, Topology,
};

use crate::controller::base::objects::{GangSpec, Kind};
use crate::controller::base::time;
use crate::controller::translate::pool::spec;
use crate::controller::translate::{Issue, IssueReason, gang_id};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KubeTime;

/// Gangs in every phase but Finished. Unreadable ones become issues.
pub(crate) fn gangs(objs: &[Arc<DynamicObject>], issues: &mut Vec<Issue>) -> Vec<Gang> {
    let mut out = Vec::new();
    for obj in objs {
        match gang(obj) {
            Ok(Some(g)) => out.push(g),
            Ok(None) => {}
            Err(i) => issues.push(i),
        }
    }
    out
}

/// The arrivals since `since` (`Snapshot::arrivals`): every Gang created
/// then, Finished ones included, one per pod set asking for GPUs. A Gang
/// that cannot be read is left out here; `gangs` reports it.
pub(crate) fn arrivals(objs: &[Arc<DynamicObject>], since: Time) -> Vec<Arrival> {
    let mut out = Vec::new();
    for obj in objs {
        let Some(at) = obj
            .metadata
            .creation_timestamp
            .as_ref()
            .map(time::from_kube)
        else {
            continue;
        };
        if at < since {
            continue;
        }
        let Ok(s) = spec::<GangSpec>(Kind::Gang, obj) else {
            continue;
        };
        for ps in &s.pod_sets {
            let Ok(r) =
                Resources::parse_map(ps.requests.iter().map(|(a, b)| (a.as_str(), b.as_str())))
            else {
                continue;
            };
            let gpus = u32::try_from(r.gpus_ceil()).unwrap_or(u32::MAX);
            let pods = u32::try_from(ps.count).unwrap_or(0);
            if gpus > 0 && pods > 0 {
                out.push(Arrival {
                    queue: s.queue.clone(),
                    at,
                    gpus_per_pod: gpus,
                    pods,
                    gpu_models: ps.gpu_model.iter().map(|m| GpuModel::new(m)).collect(),
                });
            }
        }
    }
    out.sort_by(|a, b| (a.at, &a.queue).cmp(&(b.at, &b.queue)));
    out
}

/// A Gang's status as the planner's record of it (typed; times in the
/// planner's seconds). Unreadable parts read as absent.
pub(crate) fn record_of(obj: &DynamicObject) -> GangRecord {
    let (crd, has_phase) = typed_status(obj);
    let t = |x: &Option<KubeTime>| x.as_ref().map(time::from_kube);
    GangRecord {
        phase: has_phase.then(|| phase_from_crd(crd.phase)),
        position: crd.position.and_then(|p| u32::try_from(p).ok()),
        reason: crd.reason.clone(),
        message: crd.message.clone(),
        reserved_nodes: crd.reserved_nodes.clone(),
        assignments: crd
            .assignments
            .iter()
            .map(|a| Assignment {
                pod_set: a.pod_set.clone(),
                index: u32::try_from(a.index).unwrap_or(0),
                node: a.node.clone(),
            })
            .collect(),
        provisioning_deadline: t(&crd.provisioning_deadline),
        admitted_at: t(&crd.admitted_at),
        started_at: t(&crd.started_at),
        finished_at: t(&crd.finished_at),
        launch_attempts: u32::try_from(crd.launch_attempts).unwrap_or(0),
        evictions: u32::try_from(crd.evictions).unwrap_or(0),
        requeue_after: t(&crd.requeue_after),
    }
}

/// The Gang's `status` as the CRD's typed `GangStatus` (the default when
/// absent or unreadable; the phase read on its own, so one bad field does
/// not lose it), and whether it names a phase it can be read as.
fn typed_status(obj: &DynamicObject) -> (muster_crds::GangStatus, bool) {
    let status = obj.data.get("status");
    let mut crd: muster_crds::GangStatus = status
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default();
    let phase = status
        .and_then(|s| s.get("phase"))
        .and_then(|p| serde_json::from_value(p.clone()).ok());
    if let Some(p) = phase {
        crd.phase = p;
    }
    (crd, phase.is_some())
}

/// The CRD's phase as the planner's.
fn phase_from_crd(p: muster_crds::gang::GangPhase) -> GangPhase {
    use muster_crds::gang::GangPhase as Crd;
    match p {
        Crd::Queued => GangPhase::Queued,
        Crd::Provisioning => GangPhase::Provisioning,
        Crd::Admitted => GangPhase::Admitted,
        Crd::Running => GangPhase::Running,
        Crd::Finished => GangPhase::Finished,
        Crd::Evicted => GangPhase::Evicted,
        Crd::Unsatisfiable => GangPhase::Unsatisfiable,
    }
}

/// The planner's phase as the CRD's.
fn phase_to_crd(p: GangPhase) -> muster_crds::gang::GangPhase {
    use muster_crds::gang::GangPhase as Crd;
    match p {
        GangPhase::Queued => Crd::Queued,
        GangPhase::Provisioning => Crd::Provisioning,
        GangPhase::Admitted => Crd::Admitted,
        GangPhase::Running => Crd::Running,
        GangPhase::Finished => Crd::Finished,
        GangPhase::Evicted => Crd::Evicted,
        GangPhase::Unsatisfiable => Crd::Unsatisfiable,
    }
}

/// The merge patch of `status` that takes the Gang from `before` (its
/// record as read, [`record_of`]) to `after`: the typed `GangStatus` as
/// stored, with each field the record changed set anew (fields that went
/// away are nulled, fields the record does not hold are left alone); `None`
/// when nothing changes. A status without a phase gets one written, even
/// the default.
pub(crate) fn write_record(
    obj: &DynamicObject,
    before: &GangRecord,
    after: &GangRecord,
) -> Option<serde_json::Value> {
    let (stored, _) = typed_status(obj);
    let mut next = stored.clone();
    let kube_time = |t: Option<muster_planner::Time>| t.map(time::to_kube);
    if after.phase != before.phase {
        next.phase = phase_to_crd(after.phase.unwrap_or_default());
    }
    if after.position != before.position {
        next.position = after.position.and_then(|p| i32::try_from(p).ok());
    }
    if after.reason != before.reason {
        next.reason.clone_from(&after.reason);
    }
    if after.message != before.message {
        next.message.clone_from(&after.message);
    }
    if after.reserved_nodes != before.reserved_nodes {
        next.reserved_nodes.clone_from(&after.reserved_nodes);
    }
    if after.assignments != before.assignments {
        next.assignments = after
            .assignments
            .iter()
            .map(|a| muster_crds::gang::PodAssignment {
                pod_set: a.pod_set.clone(),
                index: i32::try_from(a.index).unwrap_or(i32::MAX),
                node: a.node.clone(),
            })
            .collect();
    }
    if after.provisioning_deadline != before.provisioning_deadline {
        next.provisioning_deadline = kube_time(after.provisioning_deadline);
    }
    if after.admitted_at != before.admitted_at {
        next.admitted_at = kube_time(after.admitted_at);
    }
    if after.started_at != before.started_at {
        next.started_at = kube_time(after.started_at);
    }
    if after.finished_at != before.finished_at {
        next.finished_at = kube_time(after.finished_at);
    }
    if after.launch_attempts != before.launch_attempts {
        next.launch_attempts = i32::try_from(after.launch_attempts).unwrap_or(i32::MAX);
    }
    if after.evictions != before.evictions {
        next.evictions = i32::try_from(after.evictions).unwrap_or(i32::MAX);
    }
    if after.requeue_after != before.requeue_after {
        next.requeue_after = kube_time(after.requeue_after);
    }
    let mut b = serde_json::to_value(&stored).ok()?;
    let a = serde_json::to_value(&next).ok()?;
    if before.phase.is_none() {
        // an absent phase reads as the typed default: written out all the same
        if let Some(o) = b.as_object_mut() {
            o.remove("phase");
        }
    }
    let patch = crate::controller::base::api::merge_patch(&b, &a);
    (patch.as_object().is_some_and(|o| !o.is_empty())).then_some(patch)
}

/// The identity of the workload behind a Gang: the UID of the workload that
/// owns it (its controller owner), else the Gang's own UID.
pub(crate) fn workload_uid(obj: &DynamicObject) -> String {
    obj.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
        .or_else(|| obj.metadata.uid.clone())
        .unwrap_or_default()
}

/// Gang id (`namespace/name`) → [`workload_uid`], for every Gang.
pub(crate) fn workload_uids(
    objs: &[std::sync::Arc<DynamicObject>],
) -> std::collections::BTreeMap<String, String> {
    objs.iter()
        .map(|g| {
            (
                format!("{}/{}", g.namespace().unwrap_or_default(), g.name_any()),
                workload_uid(g),
            )
        })
        .collect()
}

/// One Gang object as a planner gang; `None` when Finished or being deleted.
pub(crate) fn gang(obj: &DynamicObject) -> Result<Option<Gang>, Issue> {
    let k = Kind::Gang;
    let s: GangSpec = spec(k, obj)?;
    let st = record_of(obj);
    let phase = st.phase.unwrap_or_default();
    if phase == GangPhase::Finished || obj.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let bad = |m: String| Issue::new(k, obj, IssueReason::InvalidSpec, m);
    let mut pod_sets = Vec::new();
    for ps in &s.pod_sets {
        let requests =
            Resources::parse_map(ps.requests.iter().map(|(a, b)| (a.as_str(), b.as_str())))
                .map_err(|e| bad(format!("spec.podSets[{}].requests: {e}", ps.name)))?;
        let count = u32::try_from(ps.count).map_err(|_| {
            bad(format!(
                "spec.podSets[{}].count must not be negative",
                ps.name
            ))
        })?;
        pod_sets.push(PodSet {
            name: ps.name.clone(),
            count,
            min_count: ps.min_count.and_then(|m| u32::try_from(m).ok()),
            requests,
            node_selector: ps.node_selector.clone(),
            tolerations: ps.tolerations.iter().map(crd_toleration).collect(),
            affinity: ps.affinity.as_ref().map(crd_affinity),
            gpu_models: ps.gpu_model.iter().map(|m| GpuModel::new(m)).collect(),
            min_gpu_memory_mib: 0,
        });
    }
    let topology = match s.topology {
        muster_crds::Topology::Any => Topology::Any,
        muster_crds::Topology::SameZone => Topology::SameZone,
        muster_crds::Topology::SamePlacementGroup => Topology::SamePlacementGroup,
        muster_crds::Topology::SameNode => Topology::SameNode,
    };
    let ns = obj.namespace().unwrap_or_default();
    Ok(Some(Gang {
        id: gang_id(&ns, &obj.name_any()),
        queue: s.queue,
        priority: s.priority,
        arrival: obj
            .metadata
            .creation_timestamp
            .as_ref()
            .map(time::from_kube)
            .unwrap_or_default(),
        pod_sets,
        topology,
        network: s.network_topology.as_ref().and_then(network),
        may_outlive_capacity: s.may_outlive_capacity,
        phase,
        assignments: st.assignments,
        provisioning_deadline: st.provisioning_deadline,
        admitted_at: st.admitted_at,
        started_at: st.started_at,
        expected_duration: s
            .expected_duration
            .as_ref()
            .and_then(|d| d.to_std().ok())
            .map(|d| muster_planner::Dur(d.as_secs())),
        not_before: st.requeue_after,
        evictions: st.evictions,
        launch_attempts: st.launch_attempts,
        disruptible: s.disruptible,
        uid: workload_uid(obj),
    }))
}

/// A network topology of a Gang or GPUPool → the planner's: the label's
/// place among its cloud's layers ([`muster_planner::labels::NETWORK_LAYERS`],
/// 1 the broadest) is the level. `None` for a label that is not a layer
/// (the CRDs refuse one).
pub(crate) fn network(
    t: &muster_crds::gang::NetworkTopology,
) -> Option<muster_planner::NetworkTopology> {
    let level = muster_planner::labels::NETWORK_LAYERS
        .iter()
        .find_map(|keys| keys.iter().position(|k| *k == t.level))?;
    Some(muster_planner::NetworkTopology {
        level: u8::try_from(level + 1).ok()?,
        required: t.mode == muster_crds::gang::NetworkTopologyMode::Required,
    })
}

/// A Gang's required node affinity → the planner's, term for term.
pub(crate) fn crd_affinity(a: &muster_crds::gang::PodSetAffinity) -> NodeAffinity {
    use muster_crds::common::NodeSelectorOperator as O;
    let requirement = |r: &muster_crds::common::NodeSelectorRequirement| NodeSelectorRequirement {
        key: r.key.clone(),
        operator: match r.operator {
            O::In => NodeSelectorOperator::In,
            O::NotIn => NodeSelectorOperator::NotIn,
            O::Exists => NodeSelectorOperator::Exists,
            O::DoesNotExist => NodeSelectorOperator::DoesNotExist,
            O::Gt => NodeSelectorOperator::Gt,
            O::Lt => NodeSelectorOperator::Lt,
        },
        values: r.values.clone(),
    };
    NodeAffinity {
        required_node_selector_terms: a
            .required_node_selector_terms
            .iter()
            .map(|t| NodeSelectorTerm {
                match_expressions: t.match_expressions.iter().map(requirement).collect(),
                match_fields: t.match_fields.iter().map(requirement).collect(),
            })
            .collect(),
    }
}

/// A Gang's toleration → planner toleration.
pub(crate) fn crd_toleration(t: &muster_crds::common::Toleration) -> Toleration {
    use muster_crds::common::{TaintEffect as E, TolerationOperator as O};
    Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator: match t.operator {
            Some(O::Exists) => TolerationOperator::Exists,
            _ => TolerationOperator::Equal,
        },
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.map(|e| match e {
            E::NoSchedule => muster_planner::TaintEffect::NoSchedule,
            E::PreferNoSchedule => muster_planner::TaintEffect::PreferNoSchedule,
            E::NoExecute => muster_planner::TaintEffect::NoExecute,
        }),
    }
}
