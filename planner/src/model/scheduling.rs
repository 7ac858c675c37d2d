//! Kubernetes scheduling vocabulary: taints, tolerations and label selectors,
//! with the matching rules kube-scheduler applies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// New pods are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node; muster treats it as schedulable.
    PreferNoSchedule,
    /// New pods are not scheduled and running ones are evicted.
    NoExecute,
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    #[serde(default)]
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// How a toleration matches a taint's value.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum TolerationOperator {
    /// Key and value must match.
    #[default]
    Equal,
    /// Key must match (an empty key matches every taint).
    Exists,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// Taint key to match; empty with `Exists` matches all taints.
    #[serde(default)]
    pub key: String,
    /// Match operator.
    #[serde(default)]
    pub operator: TolerationOperator,
    /// Value to match with `Equal`.
    #[serde(default)]
    pub value: String,
    /// Effect to match; `None` matches every effect.
    #[serde(default)]
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Kubernetes' `ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.operator == TolerationOperator::Exists;
        }
        if self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// True when every taint that forbids scheduling (`NoSchedule`, `NoExecute`)
/// is tolerated.
pub fn tolerates_all(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .all(|t| tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// True when `labels` carries every `key: value` of `selector`.
pub fn selector_matches(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector_matches_by(selector, |k| labels.get(k).map(String::as_str))
}

/// [`selector_matches`] with each label looked up by `label` (a node
/// selector names a few keys; building a node's whole label map for them
/// costs more than looking them up one by one).
#[inline]
pub fn selector_matches_by<'l>(
    selector: &BTreeMap<String, String>,
    label: impl Fn(&str) -> Option<&'l str>,
) -> bool {
    selector.iter().all(|(k, v)| label(k) == Some(v.as_str()))
}

/// Operator of a node-selector requirement (Kubernetes
/// `NodeSelectorOperator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeSelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent, or its value is none of `values`.
    NotIn,
    /// The label is present (`values` empty).
    Exists,
    /// The label is absent (`values` empty).
    DoesNotExist,
    /// The label, read as an integer, is greater than the one value.
    Gt,
    /// The label, read as an integer, is less than the one value.
    Lt,
}

/// One requirement of a node-selector term: on a node label
/// (`matchExpressions`) or on a node field (`matchFields`, where only
/// `metadata.name` exists).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSelectorRequirement {
    /// Label key, or field path (`metadata.name`).
    pub key: String,
    /// How the value is compared with `values`.
    pub operator: NodeSelectorOperator,
    /// Values compared with the label's or field's value.
    #[serde(default)]
    pub values: Vec<String>,
}

/// A node-selector term: every requirement of `match_expressions` and of
/// `match_fields` must hold. A term with neither matches no node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    #[serde(default)]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Requirements on node fields (`metadata.name`, `In` or `NotIn`, one
    /// value).
    #[serde(default)]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// A pod's required node affinity
/// (`affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeAffinity {
    /// The terms, ORed: a node fits when it matches one of them. No term
    /// matches no node.
    #[serde(default)]
    pub required_node_selector_terms: Vec<NodeSelectorTerm>,
}

/// The node field `matchFields` may name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

impl NodeSelectorRequirement {
    /// True when the requirement holds for a label whose value is `value`
    /// (`None`: the node has no such label), by the rules of
    /// `k8s.io/apimachinery/pkg/labels` `Requirement.Matches`, which
    /// kube-scheduler's node affinity applies
    /// (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`,
    /// `nodeSelectorRequirementsAsSelector`). A requirement that selector
    /// could not be built from (`In`/`NotIn` with no values, `Exists`/
    /// `DoesNotExist` with values, `Gt`/`Lt` without exactly one integer)
    /// holds for no node: the scheduler counts its whole term as matching
    /// nothing.
    pub fn matches_label(&self, value: Option<&str>) -> bool {
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            NodeSelectorOperator::In => !self.values.is_empty() && value.is_some_and(listed),
            NodeSelectorOperator::NotIn => {
                !self.values.is_empty() && value.is_none_or(|v| !listed(v))
            }
            NodeSelectorOperator::Exists => self.values.is_empty() && value.is_some(),
            NodeSelectorOperator::DoesNotExist => self.values.is_empty() && value.is_none(),
            NodeSelectorOperator::Gt | NodeSelectorOperator::Lt => {
                // Go's strconv.ParseInt(s, 10, 64): an optional sign, then
                // decimal digits; so does i64's FromStr.
                let [bound] = self.values.as_slice() else {
                    return false;
                };
                let (Ok(bound), Some(Ok(v))) = (bound.parse::<i64>(), value.map(str::parse::<i64>))
                else {
                    return false;
                };
                if self.operator == NodeSelectorOperator::Gt {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }

    /// True when the requirement holds as a `matchFields` requirement on a
    /// node named `name` (`None`: a node not launched yet, whose name is
    /// not known), by `nodeSelectorRequirementsAsFieldSelector` of
    /// `nodeaffinity.go`: exactly one value, `In` (the field equals it) or
    /// `NotIn` (it does not); the node's only field is `metadata.name`
    /// (another key reads as empty, as a `fields.Set` without it). A node
    /// without a name yet is taken to be none of the names listed: `In`
    /// holds only for an existing node of that name.
    pub fn matches_field(&self, name: Option<&str>) -> bool {
        let [want] = self.values.as_slice() else {
            return false;
        };
        let field = if self.key == NODE_NAME_FIELD {
            name
        } else {
            Some("")
        };
        match self.operator {
            NodeSelectorOperator::In => field == Some(want.as_str()),
            NodeSelectorOperator::NotIn => field != Some(want.as_str()),
            _ => false,
        }
    }
}

impl NodeSelectorTerm {
    /// True when the term has no requirement (it then matches no node).
    pub fn is_empty(&self) -> bool {
        self.match_expressions.is_empty() && self.match_fields.is_empty()
    }

    /// True when the node named `name` (`None`: not known yet) with labels
    /// read by `label` matches the term: every expression and every field
    /// requirement holds, and the term is not empty.
    pub fn matches<'l>(&self, name: Option<&str>, label: impl Fn(&str) -> Option<&'l str>) -> bool {
        !self.is_empty()
            && self
                .match_expressions
                .iter()
                .all(|r| r.matches_label(label(&r.key)))
            && self.match_fields.iter().all(|r| r.matches_field(name))
    }
}

impl NodeAffinity {
    /// True when a node named `name` (`None`: not launched yet) with labels
    /// read by `label` satisfies the required node affinity, as
    /// kube-scheduler decides it
    /// (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`,
    /// `NodeSelector.Match`): the terms are ORed, an empty term matches
    /// nothing (`newNodeSelectorTerms` skips it), so no terms at all match
    /// no node. (The API server refuses an empty list in a pod,
    /// `pkg/apis/core/validation/validation.go`, `ValidateNodeSelector`:
    /// "must have at least one node selector term".)
    pub fn matches<'l>(
        &self,
        name: Option<&str>,
        label: impl Fn(&str) -> Option<&'l str> + Copy,
    ) -> bool {
        self.required_node_selector_terms
            .iter()
            .any(|t| t.matches(name, label))
    }
}

/// True when a pod set with required node affinity `affinity` may go on a
/// node named `name` with labels read by `label`; no affinity allows every
/// node.
#[inline]
pub fn affinity_matches_by<'l>(
    affinity: Option<&NodeAffinity>,
    name: Option<&str>,
    label: impl Fn(&str) -> Option<&'l str> + Copy,
) -> bool {
    affinity.is_none_or(|a| a.matches(name, label))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    #[test]
    fn toleration_rules() {
        let gpu = taint("nvidia.com/gpu", "true", TaintEffect::NoSchedule);
        let equal = Toleration {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            ..Default::default()
        };
        let exists = Toleration {
            key: "nvidia.com/gpu".into(),
            operator: TolerationOperator::Exists,
            ..Default::default()
        };
        let all = Toleration {
            operator: TolerationOperator::Exists,
            ..Default::default()
        };
        let wrong_effect = Toleration {
            effect: Some(TaintEffect::NoExecute),
            ..exists.clone()
        };
        let wrong_value = Toleration {
            value: "false".into(),
            ..equal.clone()
        };
        assert!(equal.tolerates(&gpu));
        assert!(exists.tolerates(&gpu));
        assert!(all.tolerates(&gpu));
        assert!(!wrong_effect.tolerates(&gpu));
        assert!(!wrong_value.tolerates(&gpu));
        assert!(!Toleration::default().tolerates(&gpu));
        let soft = taint("x", "", TaintEffect::PreferNoSchedule);
        assert!(tolerates_all(&[], &[soft]));
        assert!(!tolerates_all(&[], std::slice::from_ref(&gpu)));
        assert!(tolerates_all(&[exists], &[gpu]));
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]
        .into();
        let mut sel = BTreeMap::new();
        assert!(selector_matches(&sel, &labels));
        sel.insert("a".to_string(), "1".to_string());
        assert!(selector_matches(&sel, &labels));
        sel.insert("c".to_string(), "3".to_string());
        assert!(!selector_matches(&sel, &labels));
    }

    fn req(key: &str, operator: NodeSelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn term(exprs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: exprs,
            match_fields: Vec::new(),
        }
    }

    /// `k8s.io/apimachinery/pkg/labels` `Requirement.Matches`, operator by
    /// operator, including the requirements that selector refuses to build.
    #[test]
    fn requirement_operators() {
        use NodeSelectorOperator::*;
        let r = |op, values: &[&str]| req("k", op, values);
        assert!(r(In, &["a", "b"]).matches_label(Some("b")));
        assert!(!r(In, &["a"]).matches_label(Some("c")));
        assert!(!r(In, &["a"]).matches_label(None));
        assert!(!r(In, &[]).matches_label(Some("")));
        assert!(r(NotIn, &["a"]).matches_label(Some("c")));
        assert!(r(NotIn, &["a"]).matches_label(None), "absent is not in");
        assert!(!r(NotIn, &["a"]).matches_label(Some("a")));
        assert!(!r(NotIn, &[]).matches_label(None), "refused: no values");
        assert!(r(Exists, &[]).matches_label(Some("")));
        assert!(!r(Exists, &[]).matches_label(None));
        assert!(
            !r(Exists, &["a"]).matches_label(Some("a")),
            "refused: values"
        );
        assert!(r(DoesNotExist, &[]).matches_label(None));
        assert!(!r(DoesNotExist, &[]).matches_label(Some("x")));
        assert!(r(Gt, &["4"]).matches_label(Some("8")));
        assert!(!r(Gt, &["8"]).matches_label(Some("8")));
        assert!(r(Gt, &["-1"]).matches_label(Some("+0")));
        assert!(r(Lt, &["8"]).matches_label(Some("4")));
        assert!(!r(Lt, &["4"]).matches_label(Some("4")));
        assert!(!r(Gt, &["4"]).matches_label(None), "absent label");
        assert!(!r(Gt, &["4"]).matches_label(Some("8Gi")), "not an integer");
        assert!(!r(Gt, &["4"]).matches_label(Some(" 8")), "not an integer");
        assert!(
            !r(Lt, &["x"]).matches_label(Some("1")),
            "bound not an integer"
        );
        assert!(!r(Lt, &["1", "2"]).matches_label(Some("0")), "two bounds");
        assert!(!r(Lt, &[]).matches_label(Some("0")), "no bound");
    }

    /// `nodeSelectorRequirementsAsFieldSelector`: `metadata.name` with
    /// `In` or `NotIn` and one value; a node without a name yet is none of
    /// the names.
    #[test]
    fn field_requirements() {
        use NodeSelectorOperator::*;
        let f = |op, values: &[&str]| req(NODE_NAME_FIELD, op, values);
        assert!(f(In, &["n1"]).matches_field(Some("n1")));
        assert!(!f(In, &["n1"]).matches_field(Some("n2")));
        assert!(!f(In, &["n1"]).matches_field(None));
        assert!(f(NotIn, &["n1"]).matches_field(Some("n2")));
        assert!(!f(NotIn, &["n1"]).matches_field(Some("n1")));
        assert!(f(NotIn, &["n1"]).matches_field(None));
        assert!(
            !f(In, &["n1", "n2"]).matches_field(Some("n1")),
            "one value only"
        );
        assert!(
            !f(Exists, &[]).matches_field(Some("n1")),
            "In and NotIn only"
        );
        // another field reads as empty
        assert!(req("spec.x", NotIn, &["a"]).matches_field(Some("n1")));
        assert!(!req("spec.x", In, &["a"]).matches_field(Some("n1")));
    }

    /// Terms are ORed, requirements within a term ANDed (expressions and
    /// fields); an empty term matches nothing, and so does no term at all;
    /// no affinity matches everything.
    #[test]
    fn affinity_terms() {
        use NodeSelectorOperator::*;
        let labels: BTreeMap<String, String> = [
            ("zone".to_string(), "a".to_string()),
            ("gpus".to_string(), "8".to_string()),
        ]
        .into();
        let label = |k: &str| labels.get(k).map(String::as_str);
        let aff = |terms: Vec<NodeSelectorTerm>| NodeAffinity {
            required_node_selector_terms: terms,
        };
        let zone_b = term(vec![req("zone", In, &["b"])]);
        let zone_a_big = term(vec![req("zone", In, &["a"]), req("gpus", Gt, &["4"])]);
        let zone_a_small = term(vec![req("zone", In, &["a"]), req("gpus", Lt, &["4"])]);
        assert!(!aff(vec![zone_b.clone()]).matches(Some("n"), label));
        assert!(aff(vec![zone_b.clone(), zone_a_big.clone()]).matches(Some("n"), label));
        assert!(!aff(vec![zone_b.clone(), zone_a_small]).matches(Some("n"), label));
        assert!(!aff(vec![NodeSelectorTerm::default()]).matches(Some("n"), label));
        assert!(!aff(vec![]).matches(Some("n"), label));
        assert!(affinity_matches_by(None, Some("n"), label));
        assert!(affinity_matches_by(None, None, |_| None));
        let named = |n: &str| NodeSelectorTerm {
            match_fields: vec![req(NODE_NAME_FIELD, In, &[n])],
            ..zone_a_big.clone()
        };
        assert!(aff(vec![named("n")]).matches(Some("n"), label));
        assert!(!aff(vec![named("m")]).matches(Some("n"), label));
        assert!(
            !aff(vec![named("n")]).matches(None, label),
            "not launched yet"
        );
        let only_fields = NodeSelectorTerm {
            match_fields: vec![req(NODE_NAME_FIELD, NotIn, &["m"])],
            ..Default::default()
        };
        assert!(aff(vec![only_fields.clone()]).matches(None, label));
        assert!(!aff(vec![only_fields]).matches(Some("m"), label));
    }
}
