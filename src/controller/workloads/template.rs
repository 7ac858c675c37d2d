//! Pod templates pinned to a gang's nodes, and the records an adapter keeps
//! on its object so that the pin can be read back and undone: the nodes of
//! each pod set (`muster.dev/admitted-nodes`) and the templates as submitted
//! (`muster.dev/original-template`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodTemplateSpec, Toleration,
};
use muster_planner::TaintEffect;
use muster_planner::lifecycle::workload::Pins;

use crate::controller::objects::GANG_LABEL;
use crate::controller::translate::gang;

/// The prefix of the node labels that name the pod sets a node is reserved
/// for: `pod-set.muster.dev/<pod set>: <gang label>`.
pub const POD_SET_LABEL_PREFIX: &str = "pod-set.muster.dev/";

/// The node label that reserves a node for one pod set of a gang.
pub fn pod_set_label(pod_set: &str) -> String {
    format!("{POD_SET_LABEL_PREFIX}{pod_set}")
}

/// How a pin is written into a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinStyle {
    /// Required node affinity on the node names, the gang's node selector
    /// and tolerations (a Job's template, where affinity may change while
    /// suspended).
    Affinity,
    /// Node selector and tolerations only: the node selector names the pod
    /// set's node label (a JobSet's templates, whose affinity is immutable
    /// and whose controller carries only node selector, tolerations, labels,
    /// annotations and scheduling gates to its child Jobs on resume).
    NodeSelector,
}

/// The pod template pinned to `nodes` for pod set `pod_set`.
pub fn pin(
    mut template: PodTemplateSpec,
    pod_set: &str,
    nodes: &BTreeSet<String>,
    label: &str,
    taints: &[muster_planner::Taint],
    style: PinStyle,
) -> PodTemplateSpec {
    let spec = template.spec.get_or_insert_with(Default::default);
    let selector = spec.node_selector.get_or_insert_with(Default::default);
    selector.insert(GANG_LABEL.to_string(), label.to_string());
    if style == PinStyle::NodeSelector {
        selector.insert(pod_set_label(pod_set), label.to_string());
    }
    if style == PinStyle::Affinity {
        let by_name = NodeSelectorRequirement {
            key: "metadata.name".to_string(),
            operator: "In".to_string(),
            values: Some(nodes.iter().cloned().collect()),
        };
        let affinity = spec.affinity.get_or_insert_with(Affinity::default);
        let na = affinity
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        let required = na
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(|| NodeSelector {
                node_selector_terms: Vec::new(),
            });
        if required.node_selector_terms.is_empty() {
            required
                .node_selector_terms
                .push(NodeSelectorTerm::default());
        }
        // terms are ORed: every term must carry the pin
        for term in &mut required.node_selector_terms {
            let fields = term.match_fields.get_or_insert_with(Vec::new);
            fields.retain(|f| f.key != "metadata.name");
            fields.push(by_name.clone());
        }
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let planner_tols: Vec<muster_planner::Toleration> =
        tolerations.iter().map(gang::toleration).collect();
    for t in taints {
        if t.effect == TaintEffect::PreferNoSchedule || planner_tols.iter().any(|x| x.tolerates(t))
        {
            continue;
        }
        let effect = match t.effect {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        };
        let tol = Toleration {
            key: Some(t.key.clone()),
            operator: Some("Equal".to_string()),
            value: Some(t.value.clone()),
            effect: Some(effect.to_string()),
            toleration_seconds: None,
        };
        if !tolerations.contains(&tol) {
            tolerations.push(tol);
        }
    }
    template
}

/// The pin record: the nodes alone for a workload of one pod set (`a,b`),
/// else `set=a,b;other=c`.
pub fn encode_pins(pins: &Pins) -> String {
    if pins.len() == 1 {
        return pins
            .values()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join(",");
    }
    pins.iter()
        .map(|(set, nodes)| {
            format!(
                "{set}={}",
                nodes.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Reads a pin record back; entries without a pod set name belong to `sole`
/// (the one pod set of the workload). `None` when it names no node.
pub fn decode_pins(value: &str, sole: &str) -> Option<Pins> {
    let mut out: Pins = BTreeMap::new();
    for entry in value.split(';').filter(|e| !e.trim().is_empty()) {
        let (set, nodes) = match entry.split_once('=') {
            Some((s, n)) => (s.trim().to_string(), n),
            None => (sole.to_string(), entry),
        };
        let nodes: BTreeSet<String> = nodes
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if !nodes.is_empty() {
            out.entry(set).or_default().extend(nodes);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pin_adds_to_every_term_and_tolerates_each_taint_once() {
        let template: PodTemplateSpec = serde_json::from_value(json!({"spec": {
            "containers": [{"name": "c"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
            ]}}}
        }}))
        .expect("template");
        let nodes: BTreeSet<String> = ["n1".to_string(), "n2".to_string()].into();
        let taint = |k: &str, v: &str, e| muster_planner::Taint {
            key: k.into(),
            value: v.into(),
            effect: e,
        };
        let taints = vec![
            taint("nvidia.com/gpu", "true", TaintEffect::NoSchedule),
            taint("pool", "a100", TaintEffect::NoSchedule),
            taint("pool", "a100", TaintEffect::NoSchedule),
            taint("soft", "", TaintEffect::PreferNoSchedule),
        ];
        let pinned = pin(
            template.clone(),
            "main",
            &nodes,
            "ns.g",
            &taints,
            PinStyle::Affinity,
        );
        let spec = pinned.spec.expect("spec");
        let selector = spec.node_selector.expect("selector");
        assert_eq!(selector.get(GANG_LABEL).map(String::as_str), Some("ns.g"));
        assert!(!selector.contains_key(&pod_set_label("main")));
        let terms = spec
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .expect("required")
            .node_selector_terms;
        assert_eq!(terms.len(), 2, "the user's alternatives are kept");
        for t in &terms {
            let f = t.match_fields.as_ref().expect("fields");
            assert_eq!(
                f[0].values.as_deref(),
                Some(&["n1".to_string(), "n2".to_string()][..])
            );
            assert_eq!(t.match_expressions.as_ref().map(Vec::len), Some(1));
        }
        let tols = spec.tolerations.expect("tolerations");
        // the existing Exists toleration covers nvidia.com/gpu; one new for pool; none for soft
        assert_eq!(tols.len(), 2, "{tols:?}");
        assert_eq!(tols[1].key.as_deref(), Some("pool"));

        // node-selector style: the affinity is left as submitted
        let pinned = pin(
            template.clone(),
            "workers",
            &nodes,
            "ns.g",
            &taints,
            PinStyle::NodeSelector,
        );
        let spec = pinned.spec.expect("spec");
        assert_eq!(
            spec.affinity,
            template.spec.as_ref().and_then(|s| s.affinity.clone())
        );
        assert_eq!(
            spec.node_selector
                .expect("selector")
                .get(&pod_set_label("workers"))
                .map(String::as_str),
            Some("ns.g")
        );
    }

    #[test]
    fn pin_records_round_trip() {
        let one: Pins = [("main".to_string(), ["b".into(), "a".into()].into())].into();
        assert_eq!(encode_pins(&one), "a,b");
        assert_eq!(decode_pins("a,b", "main"), Some(one));
        let two: Pins = [
            ("driver".to_string(), ["cpu-1".into()].into()),
            ("workers".to_string(), ["g1".into(), "g2".into()].into()),
        ]
        .into();
        let v = encode_pins(&two);
        assert_eq!(v, "driver=cpu-1;workers=g1,g2");
        assert_eq!(decode_pins(&v, "x"), Some(two));
        assert_eq!(decode_pins("", "main"), None);
        assert_eq!(decode_pins("workers=", "main"), None);
    }
}
