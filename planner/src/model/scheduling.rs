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
}
