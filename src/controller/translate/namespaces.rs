//! Which namespaces may use which queue: a `GPUQueue`'s `namespaceSelector`
//! against the labels of the gang's namespace (plus the
//! `kubernetes.io/metadata.name` label every namespace carries). An omitted
//! selector selects no namespace; `{}` selects all.
//!
//! A gang that does not hold capacity and whose namespace its queue does
//! not select is left out of the snapshot with a `NamespaceNotAllowed`
//! issue (condition and Event on the Gang); its Job stays suspended until
//! the namespace or the queue changes. A gang already holding capacity
//! keeps it (as Kueue does when a selector changes under admitted work).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_crds::common::{LabelSelector, LabelSelectorOperator};
use muster_crds::gpuqueue::GpuQueueSpec;

use crate::controller::base::objects::Kind;
use crate::controller::translate::pool::spec;

/// True when `selector` selects a namespace with these labels.
pub(crate) fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(s) = selector else {
        return false;
    };
    s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
        && s.match_expressions.iter().all(|r| {
            let value = labels.get(&r.key);
            match r.operator {
                LabelSelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
                LabelSelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                LabelSelectorOperator::Exists => value.is_some(),
                LabelSelectorOperator::DoesNotExist => value.is_none(),
            }
        })
}

/// Queue name → its namespace selector (queues whose spec does not read are
/// absent: their own issue says why).
pub(crate) fn selectors(queues: &[Arc<DynamicObject>]) -> BTreeMap<String, Option<LabelSelector>> {
    queues
        .iter()
        .filter_map(|q| {
            let s: GpuQueueSpec = spec(Kind::GpuQueue, q).ok()?;
            Some((q.name_any(), s.namespace_selector))
        })
        .collect()
}

/// The labels of namespace `name`, with its `kubernetes.io/metadata.name`.
pub(crate) fn labels(namespaces: &[Arc<Namespace>], name: &str) -> BTreeMap<String, String> {
    let mut l = namespaces
        .iter()
        .find(|n| n.name_any() == name)
        .map(|n| n.labels().clone())
        .unwrap_or_default();
    l.insert("kubernetes.io/metadata.name".into(), name.into());
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).expect("selector")
    }

    #[test]
    fn selectors_match_like_kubernetes() {
        let labels: BTreeMap<String, String> = [
            ("team".to_string(), "a".to_string()),
            (
                "kubernetes.io/metadata.name".to_string(),
                "research".to_string(),
            ),
        ]
        .into();
        let cases = [
            (None, false),
            (Some(serde_json::json!({})), true),
            (
                Some(serde_json::json!({"matchLabels": {"team": "a"}})),
                true,
            ),
            (
                Some(serde_json::json!({"matchLabels": {"team": "b"}})),
                false,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}),
                ),
                true,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}),
                ),
                false,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}),
                ),
                true,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "team", "operator": "Exists"}]}),
                ),
                true,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}),
                ),
                false,
            ),
            (
                Some(
                    serde_json::json!({"matchLabels": {"kubernetes.io/metadata.name": "research"}}),
                ),
                true,
            ),
        ];
        for (s, want) in cases {
            let s = s.map(sel);
            assert_eq!(selects(s.as_ref(), &labels), want, "{s:?}");
        }
    }
}
