//! Gang objects → planner gangs.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::{
    Assignment, Gang, GangPhase, GpuModel, PodSet, Resources, Toleration, TolerationOperator,
    Topology,
};

use crate::controller::base::objects::{AssignmentStatus, GangSpec, GangView, Kind};
use crate::controller::base::time;
use crate::controller::translate::pool::spec;
use crate::controller::translate::{Issue, IssueReason, gang_id};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KubeTime;

/// Gangs in every phase but Finished. Unreadable ones become issues.
pub fn gangs(objs: &[Arc<DynamicObject>], issues: &mut Vec<Issue>) -> Vec<Gang> {
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

/// The controller's view of a Gang's status (times as RFC 3339 strings,
/// counts unsigned). Unreadable parts read as absent.
pub fn status_of(obj: &DynamicObject) -> GangView {
    let status = obj.data.get("status");
    let crd: muster_crds::GangStatus = status
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default();
    let t = |x: &Option<KubeTime>| x.as_ref().map(|t| time::format(time::from_kube(t)));
    GangView {
        phase: status
            .and_then(|s| s.get("phase"))
            .and_then(|p| p.as_str())
            .map(String::from),
        position: crd.position.and_then(|p| u32::try_from(p).ok()),
        reason: crd.reason.clone(),
        message: crd.message.clone(),
        reserved_nodes: crd.reserved_nodes.clone(),
        assignments: crd
            .assignments
            .iter()
            .map(|a| AssignmentStatus {
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
        conditions: status
            .and_then(|s| s.get("conditions"))
            .cloned()
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default(),
    }
}

/// `view` as the CRD's typed `GangStatus`.
pub fn typed_status(view: &GangView) -> muster_crds::GangStatus {
    let t = |x: &Option<String>| {
        x.as_deref()
            .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(KubeTime)
    };
    muster_crds::GangStatus {
        phase: view
            .phase
            .as_deref()
            .and_then(|p| serde_json::from_value(serde_json::Value::String(p.to_string())).ok())
            .unwrap_or_default(),
        position: view.position.and_then(|p| i32::try_from(p).ok()),
        reason: view.reason.clone(),
        message: view.message.clone(),
        reserved_nodes: view.reserved_nodes.clone(),
        assignments: view
            .assignments
            .iter()
            .map(|a| muster_crds::gang::PodAssignment {
                pod_set: a.pod_set.clone(),
                index: i32::try_from(a.index).unwrap_or(i32::MAX),
                node: a.node.clone(),
            })
            .collect(),
        launch_attempts: i32::try_from(view.launch_attempts).unwrap_or(i32::MAX),
        provisioning_deadline: t(&view.provisioning_deadline),
        admitted_at: t(&view.admitted_at),
        started_at: t(&view.started_at),
        finished_at: t(&view.finished_at),
        evictions: i32::try_from(view.evictions).unwrap_or(i32::MAX),
        requeue_after: t(&view.requeue_after),
        conditions: view.conditions.clone(),
        ..Default::default()
    }
}

/// The merge patch of `status` that turns `before` into `view`, built from
/// the typed `GangStatus` of each (fields that went away are nulled, fields
/// the view does not hold are left alone); `None` when nothing changes.
pub fn write_view(before: &GangView, view: &GangView) -> Option<serde_json::Value> {
    let mut b = serde_json::to_value(typed_status(before)).ok()?;
    let a = serde_json::to_value(typed_status(view)).ok()?;
    if before.phase.is_none() {
        // an absent phase reads as the typed default: written out all the same
        if let Some(o) = b.as_object_mut() {
            o.remove("phase");
        }
    }
    let patch = crate::controller::base::api::merge_patch(&b, &a);
    (patch.as_object().is_some_and(|o| !o.is_empty())).then_some(patch)
}

/// A phase name → phase.
pub fn phase(name: Option<&str>) -> Option<GangPhase> {
    name.and_then(|p| serde_json::from_value(serde_json::Value::String(p.to_string())).ok())
}

/// The identity of the workload behind a Gang: the UID of the workload that
/// owns it (its controller owner), else the Gang's own UID.
pub fn workload_uid(obj: &DynamicObject) -> String {
    obj.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
        .or_else(|| obj.metadata.uid.clone())
        .unwrap_or_default()
}

/// Gang id (`namespace/name`) → [`workload_uid`], for every Gang.
pub fn workload_uids(
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
pub fn gang(obj: &DynamicObject) -> Result<Option<Gang>, Issue> {
    let k = Kind::Gang;
    let s: GangSpec = spec(k, obj)?;
    let st = status_of(obj);
    let phase = phase(st.phase.as_deref()).unwrap_or_default();
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
        phase,
        assignments: st
            .assignments
            .iter()
            .map(|a| Assignment {
                pod_set: a.pod_set.clone(),
                index: a.index,
                node: a.node.clone(),
            })
            .collect(),
        provisioning_deadline: st.provisioning_deadline.as_deref().and_then(time::parse),
        admitted_at: st.admitted_at.as_deref().and_then(time::parse),
        started_at: st.started_at.as_deref().and_then(time::parse),
        expected_duration: s
            .expected_duration
            .as_ref()
            .and_then(|d| d.to_std().ok())
            .map(|d| muster_planner::Dur(d.as_secs())),
        not_before: st.requeue_after.as_deref().and_then(time::parse),
        evictions: st.evictions,
        launch_attempts: st.launch_attempts,
        disruptible: s.disruptible,
        uid: workload_uid(obj),
    }))
}

/// A Gang's toleration → planner toleration.
pub fn crd_toleration(t: &muster_crds::common::Toleration) -> Toleration {
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
