//! Nodes and PoolNodes → planner nodes.
//!
//! A PoolNode whose Node registered is that Node (named as the Node), with
//! the pool, offering and price of the PoolNode and the phase the PoolNode
//! records; a PoolNode not yet registered is an in-flight node named as the
//! PoolNode, with the resources of its offering. Nodes muster did not launch
//! are Ready (Draining when cordoned) when their Ready condition is True.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node as KubeNode;

use crate::controller::workloads::pod::CachedPod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use muster_planner::{
    GangId, Node, NodePhase, Offering, OfferingKey, OtherPod, Price, Provider, Resources, Taint,
    TaintEffect, Time,
};

use crate::controller::base::objects::node_ready;
use crate::controller::base::objects::{
    GANG_LABEL, Kind, POOLNODE_LABEL, PoolNodePhase, PoolNodeSpec, PoolNodeStatus,
};
use crate::controller::base::time;
use crate::controller::observe::Observed;
use crate::controller::translate::Issue;
use crate::controller::translate::pool::spec;

/// Nodes plus the PoolNode → Node name map.
pub(crate) struct Nodes {
    /// Planner nodes.
    pub(crate) nodes: Vec<Node>,
    /// PoolNode name → Node name.
    pub(crate) registered: BTreeMap<String, String>,
}

/// A PoolNode's offering as a planner key.
pub(crate) fn offering_key(s: &PoolNodeSpec) -> OfferingKey {
    OfferingKey {
        provider: match s.offering.provider {
            muster_crds::common::Provider::Aws => Provider::Aws,
            muster_crds::common::Provider::Gcp => Provider::Gcp,
            muster_crds::common::Provider::Sim => Provider::Sim,
        },
        zone: s.offering.zone.clone(),
        instance_type: s.offering.instance_type.clone(),
        capacity_type: crate::controller::translate::pool::capacity_type(s.offering.capacity_type),
        reservation: s.offering.reservation.clone(),
    }
}

/// The gang a PoolNode is held for, as `namespace/name`.
pub(crate) fn poolnode_gang(s: &PoolNodeSpec) -> Option<String> {
    s.gang
        .as_ref()
        .map(|g| format!("{}/{}", g.namespace, g.name))
}

/// The gang a PoolNode is held for, unless the reservation names another
/// Job of the same name (a UID other than the gang's now, in `uids`): that
/// reservation belonged to a Job that is gone, and the node is free.
pub(crate) fn current_reservation(
    s: &PoolNodeSpec,
    uids: &BTreeMap<String, String>,
) -> Option<String> {
    let id = poolnode_gang(s)?;
    let reserved_uid = s.gang.as_ref().and_then(|g| g.uid.as_deref());
    match (reserved_uid, uids.get(&id)) {
        (Some(r), Some(now)) if !now.is_empty() && r != now => None,
        _ => Some(id),
    }
}

/// The status of a PoolNode object (default when absent or unreadable).
pub(crate) fn poolnode_status(obj: &kube::api::DynamicObject) -> PoolNodeStatus {
    obj.data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

/// A PoolNode phase → planner phase.
pub(crate) fn node_phase(p: PoolNodePhase) -> NodePhase {
    match p {
        PoolNodePhase::Pending => NodePhase::Pending,
        PoolNodePhase::Launched => NodePhase::Launched,
        PoolNodePhase::Registered => NodePhase::Registered,
        PoolNodePhase::Ready => NodePhase::Ready,
        PoolNodePhase::Draining => NodePhase::Draining,
        PoolNodePhase::Terminating => NodePhase::Terminating,
    }
}

/// When a PoolNode entered its current phase (its newest timestamp), or `created`.
pub(crate) fn phase_since(st: &PoolNodeStatus, created: Time) -> Time {
    [&st.ready_at, &st.registered_at, &st.launched_at]
        .into_iter()
        .flatten()
        .map(time::from_kube)
        .next()
        .unwrap_or(created)
}

/// Allocatable resources of a Node.
pub(crate) fn allocatable(node: &KubeNode) -> Resources {
    let map = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    Resources::parse_map(
        map.into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
    )
    .unwrap_or_default()
}

/// Karpenter's label on every Node it launched (the NodePool's name), from
/// its NodeClaim's labels (kubernetes-sigs/karpenter `pkg/apis/v1/labels.go`).
pub(crate) const KARPENTER_NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// Karpenter's label on a Node once its NodeClaim registered it.
pub(crate) const KARPENTER_REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// The taint a Karpenter node registers with and Karpenter removes when it
/// registers the node.
pub(crate) const KARPENTER_UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";

/// True when Karpenter manages the Node: it carries Karpenter's NodePool or
/// registered label, its start-up taint, or an owner reference to a
/// `karpenter.sh` NodeClaim (Karpenter's registration sets the last three:
/// kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/registration.go`).
pub(crate) fn karpenter_managed(node: &KubeNode) -> bool {
    let labels = node.labels();
    labels.contains_key(KARPENTER_NODEPOOL_LABEL)
        || labels.contains_key(KARPENTER_REGISTERED_LABEL)
        || node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == KARPENTER_UNREGISTERED_TAINT))
        || node.owner_references().iter().any(|o| {
            o.kind == "NodeClaim" && o.api_version.split('/').next() == Some("karpenter.sh")
        })
}

/// When the Node's Ready condition last turned True (its
/// `lastTransitionTime`); `None` when the Node is not Ready, `Some(None)`
/// when it is Ready but the kubelet wrote no time.
pub(crate) fn ready_since(node: &KubeNode) -> Option<Option<Time>> {
    let c = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(c.last_transition_time.as_ref().map(time::from_kube))
}

/// Requests of a running pod (sum over containers, limits standing in for
/// missing requests).
pub(crate) fn pod_resources(pod: &CachedPod) -> Resources {
    pod.requests.clone()
}

/// True when the pod still holds its node's resources.
pub(crate) fn pod_active(pod: &CachedPod) -> bool {
    !matches!(pod.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// The Job (namespace, name) that owns a pod, from its owner reference (for
/// the Gang a pod belongs to, see [`crate::controller::workloads::pod_gang`]).
pub(crate) fn pod_job(pod: &CachedPod) -> Option<(String, String)> {
    pod.owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| (pod.namespace().unwrap_or_default(), o.name.clone()))
}

/// When each Job completed or failed (`status.completionTime`, else the
/// newest transition of a `Complete`/`Failed` condition).
fn job_completions(observed: &Observed) -> BTreeMap<(String, String), Time> {
    let mut out = BTreeMap::new();
    for job in &observed.jobs {
        let Some(st) = job.status.as_ref() else {
            continue;
        };
        let done = st
            .completion_time
            .as_ref()
            .map(time::from_kube)
            .or_else(|| {
                st.conditions
                    .iter()
                    .flatten()
                    .filter(|c| {
                        (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"
                    })
                    .filter_map(|c| c.last_transition_time.as_ref().map(time::from_kube))
                    .max()
            });
        if let Some(t) = done {
            out.insert((job.namespace().unwrap_or_default(), job.name_any()), t);
        }
    }
    out
}

/// When a finished pod finished: its containers' newest `finishedAt`, else
/// its Job's completion; rounded up to the next whole second.
pub(crate) fn pod_finished_at(
    pod: &CachedPod,
    completions: &BTreeMap<(String, String), Time>,
) -> Option<Time> {
    let containers = pod.finished_at.as_ref().map(time::from_kube);
    // stamps have whole seconds: count from the next one, so a node is never
    // taken for empty longer than it has been
    containers
        .or_else(|| pod_job(pod).and_then(|j| completions.get(&j).copied()))
        .map(|t| Time(t.0 + 1))
}

/// True when a PodDisruptionBudget selecting the pod allows no disruption
/// now (`status.disruptionsAllowed == 0`). Selectors: `matchLabels` and
/// `matchExpressions` (In, NotIn, Exists, DoesNotExist).
pub(crate) fn blocked_by_pdb(
    pod: &CachedPod,
    pdbs: &[std::sync::Arc<PodDisruptionBudget>],
) -> bool {
    pdbs.iter()
        .filter(|b| b.namespace() == pod.namespace())
        .filter(|b| {
            b.status
                .as_ref()
                .is_some_and(|s| s.disruptions_allowed == 0)
        })
        .filter_map(|b| b.spec.as_ref()?.selector.as_ref())
        .any(|sel| {
            let by_labels = sel
                .match_labels
                .iter()
                .flatten()
                .all(|(k, v)| pod.label(k) == Some(v));
            let by_exprs = sel.match_expressions.iter().flatten().all(|e| {
                let values = e.values.clone().unwrap_or_default();
                match e.operator.as_str() {
                    "In" => pod.label(&e.key).is_some_and(|v| values.contains(v)),
                    "NotIn" => pod.label(&e.key).is_none_or(|v| !values.contains(v)),
                    "Exists" => pod.label(&e.key).is_some(),
                    "DoesNotExist" => pod.label(&e.key).is_none(),
                    _ => false,
                }
            });
            // an empty selector selects every pod of the namespace (policy/v1)
            by_labels && by_exprs
        })
}

/// The Node's taints as planner taints (unknown effects left out).
pub(crate) fn taints(node: &KubeNode) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let effect = match t.effect.as_str() {
                "NoSchedule" => TaintEffect::NoSchedule,
                "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
                "NoExecute" => TaintEffect::NoExecute,
                _ => return None,
            };
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect()
}

/// Builds the planner nodes.
pub(crate) fn nodes(
    observed: &Observed,
    offerings: &[Offering],
    gang_jobs: &BTreeSet<(String, String)>,
    now: Time,
    issues: &mut Vec<Issue>,
) -> Nodes {
    // pods not belonging to a gang, per node
    let mut others: BTreeMap<String, Vec<OtherPod>> = BTreeMap::new();
    let mut busy: BTreeSet<String> = BTreeSet::new();
    // when each node's last finished pod finished: a node is empty from then
    let mut last_finished: BTreeMap<String, Time> = BTreeMap::new();
    let completions = job_completions(observed);
    // nodes muster launched: the planner may consolidate them, so it sees
    // their pods one by one; on any other node it only needs what the pods
    // use, so they are summed (one entry per kind), which keeps a cycle's
    // memory proportional to nodes rather than pods
    let mut managed: BTreeSet<String> = observed
        .of(Kind::PoolNode)
        .iter()
        .filter_map(|pn| poolnode_status(pn).node_name)
        .collect();
    managed.extend(
        observed
            .nodes
            .iter()
            .filter(|n| n.labels().contains_key(POOLNODE_LABEL))
            .map(|n| n.name_any()),
    );
    for pod in &observed.pods {
        let Some(node) = pod.node_name.as_ref() else {
            continue;
        };
        if !pod_active(pod) {
            if let Some(t) = pod_finished_at(pod, &completions) {
                let e = last_finished.entry(node.clone()).or_insert(t);
                *e = (*e).max(t);
            }
            continue;
        }
        let daemon = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
        if !daemon && !busy.contains(node) {
            busy.insert(node.clone());
        }
        if crate::controller::workloads::pod_gang(pod).is_some_and(|j| gang_jobs.contains(&j)) {
            continue;
        }
        if !managed.contains(node) {
            let list = match others.get_mut(node) {
                Some(l) => l,
                None => others.entry(node.clone()).or_default(),
            };
            match list.iter_mut().find(|o| o.daemon == daemon) {
                Some(sum) => sum.requests.add(&pod.requests),
                None => list.push(OtherPod {
                    name: if daemon {
                        "(daemon pods)"
                    } else {
                        "(other pods)"
                    }
                    .to_string(),
                    requests: pod.requests.clone(),
                    daemon,
                    do_not_disrupt: false,
                }),
            }
            continue;
        }
        let do_not_disrupt = pod.annotations().contains_key("muster.dev/do-not-disrupt")
            || blocked_by_pdb(pod, &observed.pdbs);
        others.entry(node.clone()).or_default().push(OtherPod {
            name: format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
            requests: pod_resources(pod),
            daemon,
            do_not_disrupt,
        });
    }
    let by_provider_id: BTreeMap<String, &KubeNode> = observed
        .nodes
        .iter()
        .filter_map(|n| Some((n.spec.as_ref()?.provider_id.clone()?, n.as_ref())))
        .collect();
    let by_name: BTreeMap<String, &KubeNode> = observed
        .nodes
        .iter()
        .map(|n| (n.name_any(), n.as_ref()))
        .collect();
    let mut out = Vec::new();
    let mut registered = BTreeMap::new();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let uids = crate::controller::translate::gang::workload_uids(observed.of(Kind::Gang));
    for pn in observed.of(Kind::PoolNode) {
        let s: PoolNodeSpec = match spec(Kind::PoolNode, pn) {
            Ok(s) => s,
            Err(i) => {
                issues.push(i);
                continue;
            }
        };
        let st = poolnode_status(pn);
        let key = Some(offering_key(&s));
        let offering = key
            .as_ref()
            .and_then(|k| offerings.iter().find(|o| &o.key() == k));
        let kube_node = st
            .node_name
            .as_ref()
            .and_then(|n| by_name.get(n))
            .or_else(|| st.provider_id.as_ref().and_then(|p| by_provider_id.get(p)))
            .copied();
        let mut phase = node_phase(st.phase);
        if pn.metadata.deletion_timestamp.is_some() {
            phase = NodePhase::Terminating;
        } else if kube_node.is_none() && matches!(phase, NodePhase::Registered | NodePhase::Ready) {
            // its Node is gone: lost, and the PoolNode step drains it
            // (`NodeLost`) this cycle, so the planner neither places pods on
            // it nor removes it as empty (with `consolidateAfter: 0s` that
            // removal would come first, under the wrong reason)
            phase = NodePhase::Draining;
        }
        let created = pn
            .metadata
            .creation_timestamp
            .as_ref()
            .map(time::from_kube)
            .unwrap_or(now);
        let since = phase_since(&st, created);
        let price = s
            .offering
            .price_per_hour
            .as_str()
            .parse::<f64>()
            .ok()
            .and_then(Price::from_usd)
            .or(offering.and_then(|o| o.price));
        let mut node = Node {
            name: pn.name_any(),
            pool: Some(s.pool.clone()),
            offering: key.clone(),
            provider: key.as_ref().map(|k| k.provider),
            zone: key.as_ref().map(|k| k.zone.clone()).unwrap_or_default(),
            placement_group: s.placement_group.clone(),
            capacity_type: key.as_ref().map(|k| k.capacity_type),
            price,
            gpu_model: offering.and_then(|o| o.gpu_model.clone()),
            gpu_memory_mib: offering.map(|o| o.gpu_memory_mib).unwrap_or(0),
            allocatable: offering.map(|o| o.resources.clone()).unwrap_or_default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            phase,
            unschedulable: false,
            reserved_for: current_reservation(&s, &uids).map(GangId::new),
            pods: Vec::new(),
            created_at: created,
            phase_since: since,
            empty_since: None,
            do_not_disrupt: false,
            capacity_ends_at: s.offering.capacity_ends_at.as_ref().map(time::from_kube),
            network: Vec::new(),
        };
        if let Some(kn) = kube_node {
            let name = kn.name_any();
            claimed.insert(name.clone());
            registered.insert(pn.name_any(), name.clone());
            node.name = name.clone();
            node.labels = kn.labels().clone();
            node.network = muster_planner::labels::network_of(&node.labels);
            node.taints = taints(kn);
            node.unschedulable = kn
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            let alloc = allocatable(kn);
            if !alloc.is_zero() {
                node.allocatable = alloc;
            }
            node.pods = others.remove(&name).unwrap_or_default();
        }
        let since = last_finished
            .get(&node.name)
            .map_or(since, |t| since.max(*t));
        node.empty_since = (!busy.contains(&node.name) && !node.phase.in_flight()).then_some(since);
        out.push(node);
    }
    for kn in &observed.nodes {
        let name = kn.name_any();
        // Karpenter's nodes are Karpenter's: never capacity muster places
        // gangs on (Karpenter could consolidate them away under a gang), and
        // never muster's to consolidate or drain
        if claimed.contains(&name) || karpenter_managed(kn) {
            continue;
        }
        let unschedulable = kn
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        let phase = match (node_ready(kn), unschedulable) {
            (true, false) => NodePhase::Ready,
            (true, true) => NodePhase::Draining,
            (false, _) => NodePhase::Registered,
        };
        let labels = kn.labels().clone();
        let created = kn
            .metadata
            .creation_timestamp
            .as_ref()
            .map(time::from_kube)
            .unwrap_or(now);
        out.push(Node {
            name: name.clone(),
            pool: None,
            offering: None,
            provider: None,
            zone: labels
                .get("topology.kubernetes.io/zone")
                .cloned()
                .unwrap_or_default(),
            placement_group: None,
            capacity_type: None,
            price: None,
            gpu_model: labels
                .get("nvidia.com/gpu.product")
                .or_else(|| labels.get("muster.dev/gpu-model"))
                .map(|m| muster_planner::GpuModel::new(m)),
            gpu_memory_mib: 0,
            allocatable: allocatable(kn),
            reserved_for: labels
                .get(GANG_LABEL)
                .map(|g| GangId::new(g.replacen('.', "/", 1))),
            labels,
            taints: taints(kn),
            phase,
            unschedulable,
            pods: others.remove(&name).unwrap_or_default(),
            created_at: created,
            phase_since: created,
            empty_since: (!busy.contains(&name)).then_some(
                last_finished
                    .get(&name)
                    .map_or(created, |t| created.max(*t)),
            ),
            do_not_disrupt: kn.annotations().contains_key("muster.dev/do-not-disrupt"),
            capacity_ends_at: None,
            network: muster_planner::labels::network_of(kn.labels()),
        });
    }
    Nodes {
        nodes: out,
        registered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn karpenter_nodes_are_recognised_by_each_mark_karpenter_sets() {
        let cases = [
            (json!({"metadata": {"name": "n"}}), false),
            (
                json!({"metadata": {"name": "n", "labels": {"karpenter.sh/nodepool": "gpu"}}}),
                true,
            ),
            (
                json!({"metadata": {"name": "n", "labels": {"karpenter.sh/registered": "true"}}}),
                true,
            ),
            (
                json!({"metadata": {"name": "n"}, "spec": {"taints": [
                    {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
                ]}}),
                true,
            ),
            (
                json!({"metadata": {"name": "n", "ownerReferences": [{
                    "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "gpu-abc", "uid": "u"
                }]}}),
                true,
            ),
            // look-alikes are not Karpenter's
            (
                json!({"metadata": {"name": "n", "labels": {"muster.dev/poolnode": "pn", "karpenter.sh/capacity-type": "spot"}}}),
                false,
            ),
            (
                json!({"metadata": {"name": "n", "ownerReferences": [{
                    "apiVersion": "example.com/v1", "kind": "NodeClaim", "name": "x", "uid": "u"
                }]}}),
                false,
            ),
        ];
        for (i, (node, want)) in cases.into_iter().enumerate() {
            let kn: KubeNode = serde_json::from_value(node.clone()).expect("node");
            assert_eq!(karpenter_managed(&kn), want, "case {i}: {node}");
        }
    }
}
