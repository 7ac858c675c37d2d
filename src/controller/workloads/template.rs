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

use crate::controller::base::objects::GANG_LABEL;
use crate::controller::workloads::Directives;

/// The prefix of the node labels that name the pod sets a node is reserved
/// for: `pod-set.muster.dev/<pod set>: <gang label>`.
pub(crate) const POD_SET_LABEL_PREFIX: &str = "pod-set.muster.dev/";

/// The node label that reserves a node for one pod set of a gang.
pub(crate) fn pod_set_label(pod_set: &str) -> String {
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
///
/// A pod set placed on no node (admitted with no pods, or absent from the
/// pins) is pinned to nowhere: its node selector names the pod set's node
/// label, which no node carries for the gang, so none of its pods can land
/// anywhere — least of all on the gang's GPU nodes, which a selector on the
/// gang's label alone would allow. An empty `metadata.name In []` would say
/// the same but is refused by the API server (Kubernetes
/// `pkg/apis/core/validation/validation.go`,
/// `validateNodeFieldSelectorRequirement`: `In` on a node field takes
/// exactly one value), which is also why a pin on several nodes is one
/// term per node, each with the user's own requirements.
///
/// The pin never contradicts the user's terms: the planner puts a pod set
/// only on nodes that match one of its required node affinity terms (the
/// Gang carries them, and they are part of the pod set's eligibility), so
/// for each node of the pin, the user's term that node matches, with the
/// node's name added, still matches it.
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
    if style == PinStyle::NodeSelector || nodes.is_empty() {
        selector.insert(pod_set_label(pod_set), label.to_string());
    }
    if style == PinStyle::Affinity && !nodes.is_empty() {
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
        // terms are ORed: each of the user's alternatives, once per node
        let mut terms = Vec::new();
        for term in &required.node_selector_terms {
            let mut own = term.clone();
            let fields = own.match_fields.get_or_insert_with(Vec::new);
            fields.retain(|f| f.key != "metadata.name");
            for n in nodes {
                let mut t = own.clone();
                t.match_fields
                    .get_or_insert_with(Vec::new)
                    .push(NodeSelectorRequirement {
                        key: "metadata.name".to_string(),
                        operator: "In".to_string(),
                        values: Some(vec![n.clone()]),
                    });
                terms.push(t);
            }
        }
        required.node_selector_terms = terms;
    }
    // nowhere to tolerate
    let taints = if nodes.is_empty() { &[][..] } else { taints };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let planner_tols: Vec<muster_planner::Toleration> =
        tolerations.iter().map(toleration).collect();
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

/// The template of pod set `pod_set` pinned to its nodes in `pins` (none:
/// pinned to nowhere), with the gang's node label and its nodes' taints
/// from `directives`.
pub(crate) fn pin_set(
    template: PodTemplateSpec,
    pod_set: &str,
    pins: &Pins,
    directives: &Directives,
    style: PinStyle,
) -> PodTemplateSpec {
    let nodes = pins.get(pod_set).cloned().unwrap_or_default();
    pin(
        template,
        pod_set,
        &nodes,
        &directives.gang_label,
        &directives.taints_of(&nodes),
        style,
    )
}

/// Each pod set's template pinned (see [`pin_set`]).
pub(crate) fn pin_sets(
    templates: &BTreeMap<String, PodTemplateSpec>,
    pins: &Pins,
    directives: &Directives,
    style: PinStyle,
) -> BTreeMap<String, PodTemplateSpec> {
    templates
        .iter()
        .map(|(set, t)| {
            (
                set.clone(),
                pin_set(t.clone(), set, pins, directives, style),
            )
        })
        .collect()
}

/// The pin record: the nodes alone for a workload of one pod set (`a,b`),
/// else `set=a,b;other=c`.
pub(crate) fn encode_pins(pins: &Pins) -> String {
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
pub(crate) fn decode_pins(value: &str, sole: &str) -> Option<Pins> {
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

/// A Kubernetes toleration → planner toleration.
pub fn toleration(t: &k8s_openapi::api::core::v1::Toleration) -> muster_planner::Toleration {
    muster_planner::Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator: match t.operator.as_deref() {
            Some("Exists") => muster_planner::TolerationOperator::Exists,
            _ => muster_planner::TolerationOperator::Equal,
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
        // each of the user's two alternatives, once per node, one name each
        // (the API server takes exactly one value for `In` on a node field)
        let named: Vec<(String, String)> = terms
            .iter()
            .map(|t| {
                let f = t.match_fields.as_ref().expect("fields");
                assert_eq!(f.len(), 1, "{f:?}");
                let v = f[0].values.clone().unwrap_or_default();
                assert_eq!(v.len(), 1, "{v:?}");
                let e = t
                    .match_expressions
                    .as_ref()
                    .expect("the user's requirement");
                let zone = e[0].values.clone().unwrap_or_default().join(",");
                (zone, v[0].clone())
            })
            .collect();
        let pairs = |z: &str, n: &str| (z.to_string(), n.to_string());
        assert_eq!(
            named,
            [
                pairs("a", "n1"),
                pairs("a", "n2"),
                pairs("b", "n1"),
                pairs("b", "n2")
            ]
        );
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

    /// A pod set the pins place on no node (a CPU driver beside GPU
    /// workers that the admission left out) runs nowhere: it is not pinned
    /// to the gang's nodes at large, which are GPU nodes, and it is given
    /// no toleration and no empty (invalid) node-name requirement.
    #[test]
    fn a_pod_set_on_no_node_is_pinned_to_nowhere_in_either_style() {
        let template: PodTemplateSpec = serde_json::from_value(json!({"spec": {
            "containers": [{"name": "driver", "resources": {"requests": {"cpu": "1"}}}]
        }}))
        .expect("template");
        let gpu_taint = muster_planner::Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        };
        for style in [PinStyle::Affinity, PinStyle::NodeSelector] {
            let pinned = pin(
                template.clone(),
                "master",
                &BTreeSet::new(),
                "ns.g",
                std::slice::from_ref(&gpu_taint),
                style,
            );
            let spec = pinned.spec.expect("spec");
            let selector = spec.node_selector.expect("selector");
            assert_eq!(
                selector.get(&pod_set_label("master")).map(String::as_str),
                Some("ns.g"),
                "{style:?}: selects the pod set's own node label, which no node has"
            );
            let named = spec
                .affinity
                .and_then(|a| a.node_affinity)
                .and_then(|n| n.required_during_scheduling_ignored_during_execution)
                .map(|r| r.node_selector_terms)
                .unwrap_or_default();
            assert!(named.is_empty(), "{style:?}: {named:?}");
            assert!(
                spec.tolerations.unwrap_or_default().is_empty(),
                "{style:?}: no taint tolerated"
            );
        }
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
