//! Writes that keep what muster's types do not know.
//!
//! The adapters compute a pin or a restore on typed objects (k8s-openapi's
//! `Job` and `PodTemplateSpec`, of one Kubernetes minor), and those types
//! know only that minor's fields. Writing the typed result back would drop
//! every newer field a user set (a pod field of the next release, an alpha
//! field the cluster enables): a Job's template loses it, and a JobSet's
//! webhook refuses the change as an edit of an immutable template. So a
//! typed change becomes the difference between the typed object before and
//! after it, and only that difference is written:
//!
//! - [`merge_patch`]: as a JSON merge patch (RFC 7396) that the API server
//!   applies to the object it stores, guarded by the resourceVersion the
//!   change was computed from ([`guarded`]: the server answers 409 when the
//!   object changed meanwhile, as for a replace);
//! - [`apply`]: applied here, as a JSON Patch (RFC 6902), to the object as
//!   it was read (a custom kind, held as JSON), so that a replace sends the
//!   object with everything it had.
//!
//! Fields the typed view does not know are in neither side of the
//! difference, so no write touches them.

use serde_json::{Map, Value};

/// The JSON merge patch that turns `before` into `after`: changed members
/// set, removed members `null`, arrays and other values replaced whole;
/// `None` when they are equal.
pub(crate) fn merge_patch(before: &Value, after: &Value) -> Option<Value> {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut out = Map::new();
            for (k, bv) in b {
                match a.get(k) {
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                    Some(av) => {
                        if let Some(p) = merge_patch(bv, av) {
                            out.insert(k.clone(), p);
                        }
                    }
                }
            }
            for (k, av) in a {
                if !b.contains_key(k) {
                    out.insert(k.clone(), av.clone());
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        // a member set to null in a merge patch is removed, so an object
        // that becomes null, or any other change, is sent whole
        _ if before == after => None,
        _ => Some(after.clone()),
    }
}

/// `patch` with `metadata.resourceVersion` set to `version`: the server
/// applies it only to that version of the object (409 Conflict otherwise).
pub(crate) fn guarded(patch: Option<Value>, version: &str) -> Value {
    let mut patch = match patch {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let meta = patch
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = meta {
        m.insert("resourceVersion".into(), Value::String(version.into()));
    }
    Value::Object(patch)
}

/// Applies to `raw` (the JSON an object was read as) the change from
/// `before` to `after`, both the typed view of `raw`; an error when the
/// difference does not apply (`raw` is not what `before` was read from).
pub(crate) fn apply(
    raw: &mut Value,
    before: &Value,
    after: &Value,
) -> Result<(), json_patch::PatchError> {
    json_patch::patch(raw, &json_patch::diff(before, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use serde_json::json;

    /// A template with a pod field the typed view does not know, as the
    /// server stores it.
    fn raw() -> Value {
        json!({
            "metadata": {"labels": {"app": "x"}},
            "spec": {
                "hostnameOverride": "trainer-0",
                "containers": [{"name": "c", "image": "i", "newContainerField": {"a": 1}}],
                "tolerations": [{"key": "k", "operator": "Exists"}],
            }
        })
    }

    fn typed(v: &Value) -> PodTemplateSpec {
        serde_json::from_value(v.clone()).expect("template")
    }

    #[test]
    fn a_typed_round_trip_loses_the_fields_it_does_not_know() {
        // what a typed write did: the reason for this module
        let back = serde_json::to_value(typed(&raw())).expect("json");
        assert!(back.pointer("/spec/hostnameOverride").is_none());
        assert!(
            back.pointer("/spec/containers/0/newContainerField")
                .is_none()
        );
    }

    #[test]
    fn the_difference_applied_keeps_them_and_carries_the_change() {
        let t = typed(&raw());
        let before = serde_json::to_value(&t).expect("json");
        let mut pinned = t.clone();
        let spec = pinned.spec.as_mut().expect("spec");
        spec.node_selector = Some([("muster.dev/gang".to_string(), "g".to_string())].into());
        spec.tolerations.get_or_insert_with(Vec::new).push(
            serde_json::from_value(json!({"key": "nvidia.com/gpu", "operator": "Exists"}))
                .expect("toleration"),
        );
        let after = serde_json::to_value(&pinned).expect("json");
        let mut out = raw();
        apply(&mut out, &before, &after).expect("applies");
        assert_eq!(out["spec"]["hostnameOverride"], "trainer-0");
        assert_eq!(
            out["spec"]["containers"][0]["newContainerField"],
            json!({"a": 1})
        );
        assert_eq!(out["spec"]["nodeSelector"], json!({"muster.dev/gang": "g"}));
        assert_eq!(out["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
        // and back: the restore's difference leaves the unknown fields too
        let mut restored = out.clone();
        apply(&mut restored, &after, &before).expect("applies");
        assert_eq!(restored, raw());
    }

    #[test]
    fn a_merge_patch_names_only_what_changed() {
        let before = json!({"a": {"b": 1, "c": [1, 2], "d": "x"}, "e": 1});
        let after = json!({"a": {"b": 2, "c": [1, 2]}, "e": 1, "f": {"g": true}});
        assert_eq!(
            merge_patch(&before, &after),
            Some(json!({"a": {"b": 2, "d": null}, "f": {"g": true}}))
        );
        assert_eq!(merge_patch(&before, &before), None);
        // applied by the rules of RFC 7396, it gives `after`
        let mut doc = before.clone();
        json_patch::merge(&mut doc, &merge_patch(&before, &after).expect("patch"));
        assert_eq!(doc, after);
    }

    #[test]
    fn a_guarded_patch_carries_the_version() {
        assert_eq!(
            guarded(Some(json!({"spec": {"suspend": false}})), "7"),
            json!({"spec": {"suspend": false}, "metadata": {"resourceVersion": "7"}})
        );
        assert_eq!(
            guarded(None, "7"),
            json!({"metadata": {"resourceVersion": "7"}})
        );
    }
}
