//! Gang objects → planner gangs.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::{
    Assignment, Gang, GangPhase, GpuModel, PodSet, Resources, Toleration, TolerationOperator,
    Topology,
};

use super::pool::spec;
use super::{Issue, IssueReason, gang_id, time};
use crate::controller::objects::{GangSpec, GangStatus, Kind};

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

/// The status of a Gang object (default when absent or unreadable).
pub fn status_of(obj: &DynamicObject) -> GangStatus {
    obj.data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

/// A phase name → phase.
pub fn phase(name: Option<&str>) -> Option<GangPhase> {
    name.and_then(|p| serde_json::from_value(serde_json::Value::String(p.to_string())).ok())
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
        pod_sets.push(PodSet {
            name: ps.name.clone(),
            count: ps.count,
            min_count: ps.min_count,
            requests,
            node_selector: ps.node_selector.clone(),
            tolerations: ps.tolerations.iter().map(toleration).collect(),
            gpu_models: ps.gpu_models.iter().map(|m| GpuModel::new(m)).collect(),
            min_gpu_memory_mib: 0,
        });
    }
    let topology = match s.topology.as_deref() {
        None | Some("Any") => Topology::Any,
        Some("SameZone") => Topology::SameZone,
        Some("SamePlacementGroup") => Topology::SamePlacementGroup,
        Some("SameNode") => Topology::SameNode,
        Some(other) => return Err(bad(format!("spec.topology: unknown value {other:?}"))),
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
        expected_duration: None,
        not_before: st.requeue_after.as_deref().and_then(time::parse),
        evictions: st.evictions,
        launch_attempts: st.launch_attempts,
        disruptible: false,
    }))
}

/// A Kubernetes toleration → planner toleration.
pub fn toleration(t: &k8s_openapi::api::core::v1::Toleration) -> Toleration {
    Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator: match t.operator.as_deref() {
            Some("Exists") => TolerationOperator::Exists,
            _ => TolerationOperator::Equal,
        },
        value: t.value.clone().unwrap_or_default(),
        effect: match t.effect.as_deref() {
            Some("NoSchedule") => Some(muster_planner::TaintEffect::NoSchedule),
            Some("PreferNoSchedule") => Some(muster_planner::TaintEffect::PreferNoSchedule),
            Some("NoExecute") => Some(muster_planner::TaintEffect::NoExecute),
            _ => None,
        },
    }
}
