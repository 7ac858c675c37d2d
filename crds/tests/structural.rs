//! The generated CRDs are what a Kubernetes 1.30+ API server accepts: structural schemas
//! (<https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema>),
//! valid defaults, list-map keys, CEL rules that compile and are bounded, printer columns that
//! point at real fields, and names that make `kubectl get muster` work.
//! `python_validate.rs` checks the CRD objects themselves with Python's `kubernetes-validate`.

mod support;

use std::collections::BTreeSet;

use kube::core::cel::{CompiledSchema, apply_defaults, compile_schema, estimate_rule_cost};
use muster_crds::Kind;
use serde_json::{Value, json};
use support::{open_api_schema, to_json_schema};

const TYPES: [&str; 6] = ["object", "array", "string", "integer", "number", "boolean"];
const FORBIDDEN: [&str; 8] = [
    "$ref",
    "$schema",
    "definitions",
    "dependencies",
    "id",
    "patternProperties",
    "additionalItems",
    "uniqueItems",
];

#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Inside `allOf`/`anyOf`/`oneOf`/`not`.
    junctor: bool,
    /// Below a list that is not `x-kubernetes-list-type: map` (transition rules cannot
    /// correlate old and new values there).
    uncorrelatable: bool,
}

/// Checks one schema node and its children; pushes `path: problem` for each violation.
fn check(node: &Value, path: &str, ctx: Ctx, errors: &mut Vec<String>) {
    let Some(m) = node.as_object() else {
        errors.push(format!("{path}: schema is not an object"));
        return;
    };
    let flag = |k: &str| m.get(k) == Some(&Value::Bool(true));
    let int_or_string = flag("x-kubernetes-int-or-string");
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let ty = m.get("type").and_then(Value::as_str);

    for key in FORBIDDEN {
        if m.contains_key(key) {
            errors.push(format!("{path}: `{key}` is not allowed in a CRD schema"));
        }
    }
    if m.get("additionalProperties") == Some(&Value::Bool(false)) {
        errors.push(format!(
            "{path}: additionalProperties: false is not allowed"
        ));
    }
    if ctx.junctor {
        for key in [
            "type",
            "description",
            "default",
            "additionalProperties",
            "nullable",
        ] {
            if m.contains_key(key) {
                errors.push(format!(
                    "{path}: `{key}` is not allowed inside allOf/anyOf/oneOf/not"
                ));
            }
        }
    } else if int_or_string {
        if ty.is_some() {
            errors.push(format!(
                "{path}: x-kubernetes-int-or-string must not set type"
            ));
        }
        if let Some(any_of) = m.get("anyOf")
            && any_of != &json!([{"type": "integer"}, {"type": "string"}])
        {
            errors.push(format!(
                "{path}: int-or-string anyOf must be exactly integer, string"
            ));
        }
    } else if !preserve {
        match ty {
            None => errors.push(format!("{path}: type is required in a structural schema")),
            Some(t) if !TYPES.contains(&t) => errors.push(format!("{path}: unknown type {t}")),
            _ => {}
        }
    }
    if m.contains_key("properties") && m.contains_key("additionalProperties") {
        errors.push(format!(
            "{path}: properties and additionalProperties are mutually exclusive"
        ));
    }
    if ty == Some("array") && !m.get("items").is_some_and(Value::is_object) {
        errors.push(format!("{path}: arrays need a single `items` schema"));
    }
    if ty == Some("object")
        && !ctx.junctor
        && path != "<root>.metadata"
        && !preserve
        && !m.contains_key("properties")
        && !m.contains_key("additionalProperties")
    {
        errors.push(format!(
            "{path}: object without properties would be pruned to {{}}"
        ));
    }
    check_list_type(m, path, errors);
    check_enum(m, path, errors);
    check_default(node, path, errors);
    check_rules(m, path, ctx, errors);

    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            let child_path = format!("{path}.{name}");
            if child
                .get("description")
                .and_then(Value::as_str)
                .is_none_or(|d| d.trim().is_empty())
            {
                errors.push(format!("{child_path}: field has no description"));
            }
            check(child, &child_path, ctx, errors);
        }
    }
    if let Some(items) = m.get("items").filter(|i| i.is_object()) {
        let map_list = m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
        let inner = Ctx {
            uncorrelatable: ctx.uncorrelatable || !map_list,
            ..ctx
        };
        check(items, &format!("{path}[]"), inner, errors);
    }
    if let Some(value) = m.get("additionalProperties").filter(|v| v.is_object()) {
        check(value, &format!("{path}{{}}"), ctx, errors);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in m
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if !(int_or_string && key == "anyOf") {
                let inner = Ctx {
                    junctor: true,
                    ..ctx
                };
                check(sub, &format!("{path}.{key}[{i}]"), inner, errors);
            }
        }
    }
}

fn check_list_type(m: &serde_json::Map<String, Value>, path: &str, errors: &mut Vec<String>) {
    let list_type = m.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys = m
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array);
    match list_type {
        Some("map") => {
            let items = &m["items"];
            if items.get("type").and_then(Value::as_str) != Some("object") {
                errors.push(format!("{path}: list-type map needs object items"));
            }
            let Some(keys) = keys.filter(|k| !k.is_empty()) else {
                errors.push(format!(
                    "{path}: list-type map needs x-kubernetes-list-map-keys"
                ));
                return;
            };
            let required: Vec<&Value> = items
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().collect())
                .unwrap_or_default();
            for key in keys {
                let has_default = key
                    .as_str()
                    .and_then(|k| items.get("properties")?.get(k)?.get("default"))
                    .is_some();
                if !required.contains(&key) && !has_default {
                    errors.push(format!(
                        "{path}: list-map key {key} must be required or defaulted"
                    ));
                }
            }
        }
        Some("set") => {
            let item_type = m["items"].get("type").and_then(Value::as_str);
            if matches!(item_type, Some("object" | "array")) {
                errors.push(format!("{path}: list-type set needs scalar items"));
            }
        }
        Some("atomic") | None => {
            if keys.is_some() {
                errors.push(format!("{path}: list-map keys without list-type map"));
            }
        }
        Some(other) => errors.push(format!("{path}: unknown list type {other}")),
    }
}

fn check_enum(m: &serde_json::Map<String, Value>, path: &str, errors: &mut Vec<String>) {
    let Some(values) = m.get("enum").and_then(Value::as_array) else {
        return;
    };
    let ty = m.get("type").and_then(Value::as_str);
    for v in values {
        let ok = match ty {
            Some("string") => v.is_string(),
            Some("integer") => v.is_i64() || v.is_u64(),
            _ => true,
        };
        let null_allowed = v.is_null() && m.get("nullable") == Some(&Value::Bool(true));
        if !(ok || null_allowed) {
            errors.push(format!("{path}: enum value {v} does not match type {ty:?}"));
        }
    }
}

/// A default must itself be valid, after its own nested defaults are applied, like the API
/// server checks when the CRD is created.
fn check_default(node: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(default) = node.get("default") else {
        return;
    };
    let defaulted = apply_defaults(node, default);
    let schema = to_json_schema_node(node);
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(&schema)
        .expect("node schema compiles");
    for e in validator.iter_errors(&defaulted) {
        errors.push(format!("{path}: default {default} is invalid: {e}"));
    }
}

/// Like [`to_json_schema`] for a non-root node (no implicit apiVersion/kind/metadata).
fn to_json_schema_node(node: &Value) -> Value {
    let mut wrapped = to_json_schema(&json!({"type": "object", "properties": {"x": node}}));
    wrapped["properties"]["x"].take()
}

fn check_rules(m: &serde_json::Map<String, Value>, path: &str, ctx: Ctx, errors: &mut Vec<String>) {
    for rule in m
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = rule["rule"].as_str().unwrap_or_default();
        let message = rule["message"].as_str().unwrap_or_default();
        if message.is_empty() {
            errors.push(format!("{path}: rule {text:?} has no message"));
        } else if !["spec", "metadata.name", "matchExpressions"]
            .iter()
            .any(|f| message.contains(f))
        {
            errors.push(format!(
                "{path}: message {message:?} does not name the field"
            ));
        }
        if message.contains('\n') {
            errors.push(format!("{path}: message must be one line"));
        }
        if text.contains("oldSelf") && ctx.uncorrelatable {
            errors.push(format!(
                "{path}: transition rule below a non-map list is never run"
            ));
        }
        if text.contains("self == oldSelf") {
            check_bounded(&Value::Object(m.clone()), path, errors);
        }
    }
}

/// Every string, list and map below a node compared as a whole has a size bound, so the API
/// server's CEL cost estimate stays small.
fn check_bounded(node: &Value, path: &str, errors: &mut Vec<String>) {
    match node.get("type").and_then(Value::as_str) {
        Some("string") if node.get("maxLength").is_none() && node.get("enum").is_none() => {
            errors.push(format!(
                "{path}: compared by a CEL rule but has no maxLength"
            ));
        }
        Some("array") if node.get("maxItems").is_none() => {
            errors.push(format!(
                "{path}: compared by a CEL rule but has no maxItems"
            ));
        }
        Some("object")
            if node.get("additionalProperties").is_some()
                && node.get("maxProperties").is_none() =>
        {
            errors.push(format!(
                "{path}: compared by a CEL rule but has no maxProperties"
            ));
        }
        _ => {}
    }
    for (name, child) in node
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        check_bounded(child, &format!("{path}.{name}"), errors);
    }
    if let Some(items) = node.get("items") {
        check_bounded(items, &format!("{path}[]"), errors);
    }
}

/// CEL rules compile and kube's cost estimate finds no unbounded or over-budget rule.
/// (kube-cel's scope analysis is not used: it mistakes comprehension variables such as the
/// `x` of `self.all(x, ...)` for free variables.)
fn check_cel(node: &CompiledSchema, path: &str, errors: &mut Vec<String>) {
    for result in &node.validations {
        match result {
            Err(e) => errors.push(format!("{path}: CEL rule does not compile: {e}")),
            Ok(compiled) => {
                for w in estimate_rule_cost(&compiled.rule.rule, node) {
                    errors.push(format!("{path}: {:?}: {} ({})", w.kind, w.message, w.rule));
                }
            }
        }
    }
    let mut children: Vec<(&String, &CompiledSchema)> = node.properties.iter().collect();
    children.sort_by_key(|(name, _)| *name);
    for (name, child) in children {
        check_cel(child, &format!("{path}.{name}"), errors);
    }
    if let Some(items) = &node.items {
        check_cel(items, &format!("{path}[]"), errors);
    }
    if let Some(value) = &node.additional_properties {
        check_cel(value, &format!("{path}{{}}"), errors);
    }
}

#[test]
fn schemas_are_structural() {
    let mut errors = Vec::new();
    for kind in Kind::ALL {
        let schema = open_api_schema(kind);
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            errors.push(format!("{kind}: root must be an object"));
        }
        if let Some(meta) = schema.get("properties").and_then(|p| p.get("metadata")) {
            let names: BTreeSet<&str> = meta
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            if !names.is_subset(&BTreeSet::from(["name", "generateName"])) {
                errors.push(format!(
                    "{kind}: metadata may only restrict name and generateName"
                ));
            }
        }
        check(
            &schema,
            &format!("{kind}:<root>"),
            Ctx::default(),
            &mut errors,
        );
    }
    // The root path prefix is per kind; the metadata exception is checked above.
    errors.retain(|e| !e.contains("<root>.metadata: object without properties"));
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn cel_rules_compile_and_are_bounded() {
    let mut errors = Vec::new();
    let mut count = 0;
    for kind in Kind::ALL {
        let schema = open_api_schema(kind);
        count += schema.to_string().matches("\"rule\":").count();
        check_cel(&compile_schema(&schema), &kind.to_string(), &mut errors);
    }
    assert!(
        count >= 20,
        "expected the CEL rules to be in the schemas, found {count}"
    );
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

/// Resolves a printer-column JSONPath (`.status.conditions[?(@.type=="Ready")].status`)
/// to the schema node it reads.
fn resolve<'a>(schema: &'a Value, json_path: &str) -> Option<&'a Value> {
    let mut node = schema;
    let mut rest = json_path.strip_prefix('.')?;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            node = node.get("items")?;
            rest = after[end + 1..].trim_start_matches('.');
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        node = node.get("properties")?.get(&rest[..end])?;
        rest = rest[end..].strip_prefix('.').unwrap_or(&rest[end..]);
    }
    Some(node)
}

#[test]
fn printer_columns_point_at_fields_of_their_type() {
    let mut errors = Vec::new();
    for kind in Kind::ALL {
        let crd = kind.crd();
        let version = &crd.spec.versions[0];
        let schema = open_api_schema(kind);
        let columns = version
            .additional_printer_columns
            .clone()
            .unwrap_or_default();
        if columns.last().map(|c| c.name.as_str()) != Some("Age") {
            errors.push(format!("{kind}: last column should be Age"));
        }
        for column in columns {
            if column.json_path == ".metadata.creationTimestamp" {
                continue;
            }
            let Some(node) = resolve(&schema, &column.json_path) else {
                errors.push(format!(
                    "{kind}: column {} reads missing {}",
                    column.name, column.json_path
                ));
                continue;
            };
            let field_type = node.get("type").and_then(Value::as_str);
            let ok = match column.type_.as_str() {
                "integer" => field_type == Some("integer"),
                "string" => {
                    field_type == Some("string") || node.get("x-kubernetes-int-or-string").is_some()
                }
                "date" => node.get("format").and_then(Value::as_str) == Some("date-time"),
                _ => false,
            };
            if !ok {
                errors.push(format!(
                    "{kind}: column {} is {} but {} is {field_type:?}",
                    column.name, column.type_, column.json_path
                ));
            }
        }
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn names_scopes_and_subresources() {
    let mut short_names = BTreeSet::new();
    for kind in Kind::ALL {
        let crd = kind.crd();
        let names = &crd.spec.names;
        assert_eq!(crd.spec.group, muster_crds::GROUP);
        assert_eq!(names.kind, kind.name());
        assert_eq!(names.plural, kind.plural());
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(&*format!("{}.muster.dev", kind.plural()))
        );
        assert_eq!(
            names.categories.as_deref(),
            Some(&["muster".to_string()][..]),
            "{kind}"
        );
        let expected_scope = if kind == Kind::Gang {
            "Namespaced"
        } else {
            "Cluster"
        };
        assert_eq!(crd.spec.scope, expected_scope, "{kind}");
        for short in names.short_names.clone().unwrap_or_default() {
            assert!(
                short_names.insert(short.clone()),
                "short name {short} used twice"
            );
        }
        assert!(
            !names.short_names.clone().unwrap_or_default().is_empty(),
            "{kind}: no short name"
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, muster_crds::VERSION);
        assert!(version.served && version.storage);
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{kind}: no status subresource"
        );
    }
}

#[test]
fn the_checker_catches_non_structural_schemas() {
    let bad = json!({
        "type": "object",
        "properties": {
            "untyped": {"description": "no type"},
            "both": {
                "description": "properties and additionalProperties",
                "type": "object",
                "properties": {"a": {"type": "string", "description": "a"}},
                "additionalProperties": {"type": "string"}
            },
            "badDefault": {"description": "default off its pattern", "type": "string", "pattern": "^[0-9]+$", "default": "x"},
            "conditions": {
                "description": "list-map key not required",
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string", "description": "t"}}}
            },
            "list": {
                "description": "transition rule under an atomic list",
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"a": {"type": "string", "description": "a", "maxLength": 3}},
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec.list[] is immutable"}]
                }
            },
            "undocumented": {"type": "string"}
        }
    });
    let mut errors = Vec::new();
    check(&bad, "<root>", Ctx::default(), &mut errors);
    let all = errors.join("\n");
    for expected in [
        "untyped: type is required",
        "both: properties and additionalProperties are mutually exclusive",
        "badDefault: default \"x\" is invalid",
        "conditions: list-map key \"type\" must be required or defaulted",
        "list[]: transition rule below a non-map list",
        "undocumented: field has no description",
    ] {
        assert!(all.contains(expected), "missing {expected:?} in:\n{all}");
    }
}
