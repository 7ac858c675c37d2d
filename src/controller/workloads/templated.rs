//! What the adapters of custom kinds that hold their pod templates in their
//! own spec share (PyTorchJob, RayCluster, RayJob): where each pod set's
//! template sits (a JSON pointer), the templates as submitted (the
//! `muster.dev/original-template` record while pinned, else the current
//! ones), the object with templates replaced, and what a restore and a pin
//! make of the latest object ([`TemplatedKind`]; the other steps are those of
//! every kind held by a suspend flag, [`crate::controller::workloads::suspendable`]).
//! The kinds differ only in where the templates and the suspend flag are, so
//! an adapter is a list of [`TemplateAt`] and a suspend pointer.
//! What the table reads off such an object ([`observe`], [`condition_true`])
//! serves the JobSet and TrainJob adapters too, which write their own way.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::workload::{Observed, Pins};
use serde_json::{Map, Value, json};

use crate::controller::base::api::ActError;
use crate::controller::base::objects::{
    ADMITTED_NODES_ANNOTATION, ORIGINAL_TEMPLATE_ANNOTATION, STOPPING_ANNOTATION,
};
use crate::controller::workloads::suspendable::{Actions, Suspendable};
use crate::controller::workloads::template::{self, PinStyle, encode_pins};
use crate::controller::workloads::verbatim;
use crate::controller::workloads::writer::{Change, Target, Write};
use crate::controller::workloads::{CustomKind, Directives, WorkloadError};

/// Where one pod set's pod template is in the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateAt {
    /// The pod set's name.
    pub pod_set: String,
    /// JSON pointer to its `PodTemplateSpec` (`/spec/.../template`).
    pub pointer: String,
}

/// A JSON merge patch that sets the value at `pointer` (`/spec/suspend`).
pub(crate) fn merge_patch_at(pointer: &str, value: Value) -> Value {
    pointer
        .split('/')
        .filter(|p| !p.is_empty())
        .rev()
        .fold(value, |inner, key| {
            let mut m = Map::new();
            m.insert(key.to_string(), inner);
            Value::Object(m)
        })
}

/// The templates as submitted: the record while pinned, else the current
/// ones (a missing template is an empty one: an adapter may point at an
/// optional field, such as a RayJob's submitter template).
pub fn submitted(
    obj: &DynamicObject,
    at: &[TemplateAt],
) -> Result<BTreeMap<String, PodTemplateSpec>, WorkloadError> {
    if let Some(rec) = obj.annotations().get(ORIGINAL_TEMPLATE_ANNOTATION)
        && let Ok(m) = serde_json::from_str::<BTreeMap<String, PodTemplateSpec>>(rec)
    {
        return Ok(m);
    }
    let mut out = BTreeMap::new();
    for a in at {
        let t = match obj.data.pointer(&a.pointer) {
            None | Some(Value::Null) => PodTemplateSpec::default(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| WorkloadError::BadShape(format!("{}: {e}", a.pointer)))?,
        };
        out.insert(a.pod_set.clone(), t);
    }
    Ok(out)
}

/// Sets `value` at `pointer`, creating the objects on the way.
fn set_at(root: &mut Value, pointer: &str, value: Value) -> Result<(), ActError> {
    let parts: Vec<&str> = pointer.split('/').filter(|p| !p.is_empty()).collect();
    let Some((last, path)) = parts.split_last() else {
        return Err(ActError::Missing(format!("empty pointer {pointer:?}")));
    };
    let mut cur = root;
    for p in path {
        cur = match cur {
            Value::Object(m) => m.entry(p.to_string()).or_insert_with(|| json!({})),
            Value::Array(v) => p
                .parse::<usize>()
                .ok()
                .and_then(|i| v.get_mut(i))
                .ok_or_else(|| ActError::Missing(format!("{pointer}: no element {p}")))?,
            _ => {
                return Err(ActError::Missing(format!(
                    "{pointer}: {p} is not an object"
                )));
            }
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.to_string(), value);
            Ok(())
        }
        _ => Err(ActError::Missing(format!("{pointer}: not an object"))),
    }
}

/// The object with each pod set's template made `templates`' (by the
/// difference from its typed view, see [`set_template`]).
pub(crate) fn with_templates(
    obj: &DynamicObject,
    at: &[TemplateAt],
    templates: &BTreeMap<String, PodTemplateSpec>,
) -> Result<DynamicObject, ActError> {
    let mut next = obj.clone();
    for a in at {
        let Some(t) = templates.get(&a.pod_set) else {
            continue;
        };
        let v = set_template(next.data.pointer(&a.pointer), t, &a.pod_set)?;
        set_at(&mut next.data, &a.pointer, v)?;
    }
    Ok(next)
}

/// The template `current` (as the object holds it; `None` when it has
/// none) made `t`: only what differs between `current`'s typed view and
/// `t` is changed, so the fields the typed view does not know stay as they
/// are ([`verbatim`]); `pod_set` names it in errors.
pub(crate) fn set_template(
    current: Option<&Value>,
    t: &PodTemplateSpec,
    pod_set: &str,
) -> Result<Value, ActError> {
    let bad = |e: &dyn std::fmt::Display| ActError::Missing(format!("template of {pod_set}: {e}"));
    let after = serde_json::to_value(t).map_err(|e| bad(&e))?;
    let Some(raw) = current.filter(|v| v.is_object()) else {
        return Ok(after);
    };
    let typed: PodTemplateSpec = serde_json::from_value(raw.clone()).map_err(|e| bad(&e))?;
    let before = serde_json::to_value(typed).map_err(|e| bad(&e))?;
    let mut out = raw.clone();
    verbatim::apply(&mut out, &before, &after).map_err(|e| bad(&e))?;
    Ok(out)
}

/// What the workload table reads off the object of a custom kind that keeps
/// no start mark: its suspend flag at `suspend` (a JSON pointer), muster's
/// stopping mark and pins (`sole`: the pod set of pins recorded without
/// one), and `finished` as the kind tells it.
pub fn observe(obj: &DynamicObject, suspend: &str, finished: bool, sole: &str) -> Observed {
    let annotations = obj.annotations();
    Observed {
        finished,
        suspended: obj
            .data
            .pointer(suspend)
            .and_then(Value::as_bool)
            .unwrap_or(false),
        started: false,
        stopping: annotations
            .get(STOPPING_ANNOTATION)
            .is_some_and(|v| v == "true"),
        pinned: annotations
            .get(ADMITTED_NODES_ANNOTATION)
            .and_then(|v| template::decode_pins(v, sole)),
        releasing: false,
    }
}

/// Whether one of `obj`'s `status.conditions` of a type in `types` is
/// `True` (how most kinds say they finished).
pub(crate) fn condition_true(obj: &DynamicObject, types: &[&str]) -> bool {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| types.contains(&t))
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// How a kind that keeps its pod templates at JSON pointers is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TemplatedKind {
    /// The kind.
    pub(crate) kind: CustomKind,
    /// JSON pointer to the suspend flag (`/spec/suspend`).
    pub(crate) suspend: &'static str,
    /// How pins are written into the templates.
    pub(crate) style: PinStyle,
    /// Bounded names of the writes, for errors and metrics.
    pub(crate) actions: Actions,
    /// Fills in the templates the controller would default (a RayJob's
    /// submitter) before they are pinned; the record keeps them as
    /// submitted.
    pub(crate) complete: Option<Complete>,
}

/// Fills in defaulted templates before a pin (see [`TemplatedKind::complete`]).
pub type Complete = fn(&DynamicObject, &mut BTreeMap<String, PodTemplateSpec>);

impl TemplatedKind {
    /// `obj`, of this kind, whose pod sets' templates are at `at`. With
    /// `workload`, pinned templates also carry the [`WORKLOAD_LABEL`] with
    /// that value (the gang's name), for kinds whose pods cannot be told
    /// apart by the labels their controller gives them.
    pub(crate) fn on<'a>(
        &self,
        obj: &'a DynamicObject,
        at: Vec<TemplateAt>,
        workload: Option<String>,
    ) -> Templated<'a> {
        Templated {
            how: *self,
            obj,
            at,
            workload,
        }
    }

    /// `latest` with the templates as submitted, muster's
    /// records and stopping mark taken out.
    pub(crate) fn restored(
        &self,
        latest: &DynamicObject,
        at: &[TemplateAt],
    ) -> Result<DynamicObject, ActError> {
        let name = latest.name_any();
        let templates = submitted(latest, at)
            .map_err(|e| ActError::Missing(format!("templates of {name}: {e}")))?;
        let mut next = with_templates(latest, at, &templates)?;
        drop_absent(&mut next, latest, at);
        if let Some(a) = next.metadata.annotations.as_mut() {
            a.remove(ORIGINAL_TEMPLATE_ANNOTATION);
            a.remove(ADMITTED_NODES_ANNOTATION);
            a.remove(STOPPING_ANNOTATION);
        }
        Ok(next)
    }

    /// `latest` with each pod set's submitted template pinned to its nodes
    /// (labelled with `workload`, if given), and the records of what was
    /// submitted.
    pub(crate) fn pinned(
        &self,
        latest: &DynamicObject,
        at: &[TemplateAt],
        pins: &Pins,
        directives: &Directives,
        workload: Option<&str>,
    ) -> Result<DynamicObject, ActError> {
        let name = latest.name_any();
        let templates = submitted(latest, at)
            .map_err(|e| ActError::Missing(format!("templates of {name}: {e}")))?;
        let original = serde_json::to_string(&templates)
            .map_err(|e| ActError::Missing(format!("templates of {name}: {e}")))?;
        let mut templates = templates;
        if let Some(complete) = self.complete {
            complete(latest, &mut templates);
        }
        let pinned = template::pin_sets(&templates, pins, directives, self.style)
            .into_iter()
            .map(|(set, t)| (set, label(t, workload)))
            .collect();
        let mut next = with_templates(latest, at, &pinned)?;
        let a = next
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        a.insert(ORIGINAL_TEMPLATE_ANNOTATION.to_string(), original);
        a.insert(ADMITTED_NODES_ANNOTATION.to_string(), encode_pins(pins));
        a.remove(STOPPING_ANNOTATION);
        Ok(next)
    }
}

/// An object of a [`TemplatedKind`] in memory, as its step's writes see it.
pub(crate) struct Templated<'a> {
    how: TemplatedKind,
    obj: &'a DynamicObject,
    at: Vec<TemplateAt>,
    workload: Option<String>,
}

/// The owning controller writes the status as it stops, so the object in
/// memory is stale by the time it is restored or pinned: both replace the
/// latest object, read first, guarded by its resourceVersion (a merge patch
/// cannot take pins out: maps merge).
impl Suspendable for Templated<'_> {
    fn target(&self) -> Target {
        Target::custom(self.how.kind, self.obj)
    }

    fn suspend_flag(&self) -> &'static str {
        self.how.suspend
    }

    fn actions(&self) -> Actions {
        self.how.actions
    }

    fn restore(&self) -> Result<Write, ActError> {
        let (how, at) = (self.how, self.at.clone());
        Ok(Write {
            target: self.target(),
            change: Change::ReplaceLatest(Box::new(move |latest| {
                how.restored(latest, &at).map(Some)
            })),
            action: self.how.actions.restore,
        })
    }

    fn pin(&self, pins: &Pins, directives: &Directives) -> Result<Write, ActError> {
        let (how, at, workload) = (self.how, self.at.clone(), self.workload.clone());
        let (pins, directives) = (pins.clone(), directives.clone());
        Ok(Write {
            target: self.target(),
            change: Change::ReplaceLatest(Box::new(move |latest| {
                how.pinned(latest, &at, &pins, &directives, workload.as_deref())
                    .map(Some)
            })),
            action: self.how.actions.pin,
        })
    }
}

/// The pod label that names the gang of a workload's pods, written by the
/// pin of kinds whose controllers give their pods no label naming the
/// object (a RayJob's cluster, a TrainJob's JobSet).
pub(crate) const WORKLOAD_LABEL: &str = "muster.dev/workload";

fn label(mut t: PodTemplateSpec, workload: Option<&str>) -> PodTemplateSpec {
    if let Some(w) = workload {
        t.metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(WORKLOAD_LABEL.to_string(), w.to_string());
    }
    t
}

/// A template the submitted object did not have (an optional one the pin
/// filled in) is taken out again, so a restore gives back the object as
/// submitted.
fn drop_absent(next: &mut DynamicObject, obj: &DynamicObject, at: &[TemplateAt]) {
    let Some(rec) = obj.annotations().get(ORIGINAL_TEMPLATE_ANNOTATION) else {
        return;
    };
    let Ok(rec) = serde_json::from_str::<BTreeMap<String, Value>>(rec) else {
        return;
    };
    for a in at {
        let empty = rec
            .get(&a.pod_set)
            .is_none_or(|v| v.as_object().is_none_or(Map::is_empty));
        if !empty {
            continue;
        }
        if let Some((parent, key)) = a.pointer.rsplit_once('/')
            && let Some(Value::Object(m)) = next.data.pointer_mut(parent)
        {
            m.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(body: Value) -> DynamicObject {
        serde_json::from_value(body).expect("object")
    }

    #[test]
    fn merge_patch_nests_the_pointer() {
        assert_eq!(
            merge_patch_at("/spec/runPolicy/suspend", Value::Bool(true)),
            json!({"spec": {"runPolicy": {"suspend": true}}})
        );
    }

    #[test]
    fn templates_read_and_replaced_at_their_pointers() {
        let o = obj(json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"groups": [{"template": {"spec": {"nodeSelector": {"a": "1"}}}}]}
        }));
        let at = [
            TemplateAt {
                pod_set: "g".into(),
                pointer: "/spec/groups/0/template".into(),
            },
            TemplateAt {
                pod_set: "opt".into(),
                pointer: "/spec/optional".into(),
            },
        ];
        let t = submitted(&o, &at).expect("templates");
        assert_eq!(t["opt"], PodTemplateSpec::default());
        let sel = t["g"]
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .expect("selector");
        assert_eq!(sel["a"], "1");
        let mut changed = t.clone();
        changed
            .get_mut("g")
            .and_then(|t| t.spec.as_mut())
            .expect("spec")
            .node_selector = Some([("b".to_string(), "2".to_string())].into());
        let next = with_templates(&o, &at, &changed).expect("replaced");
        assert_eq!(
            next.data
                .pointer("/spec/groups/0/template/spec/nodeSelector/b"),
            Some(&json!("2"))
        );
        assert!(next.data.pointer("/spec/optional").is_some());
        // a missing array element is an error, not a silent skip
        let bad = [TemplateAt {
            pod_set: "g".into(),
            pointer: "/spec/groups/3/template".into(),
        }];
        assert!(with_templates(&o, &bad, &changed).is_err());
    }
}
