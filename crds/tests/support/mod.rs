//! Shared helpers of the integration tests: an offline stand-in for the API server's
//! admission of a custom resource — defaulting, OpenAPI v3 schema validation (with the
//! `jsonschema` crate) and CEL rules (`x-kubernetes-validations`, with kube's `cel` feature).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kube::core::cel::{Validator, apply_defaults};
use muster_crds::Kind;
use serde_json::{Map, Value, json};

/// The `crds/` folder.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository root.
pub fn repo_dir() -> PathBuf {
    crate_dir()
        .parent()
        .expect("crds/ has a parent")
        .to_path_buf()
}

/// The `openAPIV3Schema` of a kind's generated CRD, as JSON.
pub fn open_api_schema(kind: Kind) -> Value {
    let crd = kind.crd();
    let version = crd.spec.versions.first().expect("one version");
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("openAPIV3Schema");
    serde_json::to_value(schema).expect("schema to JSON")
}

/// Converts a Kubernetes structural schema into a plain JSON Schema (draft 4) that rejects
/// what the API server rejects with strict field validation (`kubectl --validate=strict`):
/// `nullable` becomes a `null` type, `x-kubernetes-int-or-string` becomes integer-or-string,
/// objects with properties and no `x-kubernetes-preserve-unknown-fields` reject unknown
/// fields, and the other `x-kubernetes-*` extensions are dropped.
pub fn to_json_schema(schema: &Value) -> Value {
    let mut out = convert(schema);
    // apiVersion, kind and metadata are always allowed at the root of an object.
    if let Some(props) = out.get_mut("properties").and_then(Value::as_object_mut) {
        props
            .entry("apiVersion")
            .or_insert_with(|| json!({"type": "string"}));
        props
            .entry("kind")
            .or_insert_with(|| json!({"type": "string"}));
        props
            .entry("metadata")
            .or_insert_with(|| json!({"type": "object"}));
    }
    out
}

fn convert(schema: &Value) -> Value {
    let Some(m) = schema.as_object() else {
        return schema.clone();
    };
    let flag = |key: &str| m.get(key) == Some(&Value::Bool(true));
    let mut out = Map::new();
    for (key, value) in m {
        match key.as_str() {
            "nullable" => {}
            k if k.starts_with("x-kubernetes-") => {}
            "properties" => {
                let props = value
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" | "not" => {
                out.insert(key.clone(), convert(value));
            }
            "additionalProperties" if value.is_object() => {
                out.insert(key.clone(), convert(value));
            }
            "allOf" | "anyOf" | "oneOf" => {
                let list = value.as_array().map(|l| l.iter().map(convert).collect());
                out.insert(key.clone(), Value::Array(list.unwrap_or_default()));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if flag("x-kubernetes-int-or-string") {
        out.insert("type".into(), json!(["integer", "string"]));
    }
    if flag("nullable") {
        let types = match out.get("type") {
            Some(Value::String(t)) => vec![json!(t), json!("null")],
            Some(Value::Array(ts)) => ts.iter().cloned().chain([json!("null")]).collect(),
            _ => vec![],
        };
        if !types.is_empty() {
            out.insert("type".into(), Value::Array(types));
        }
        if let Some(Value::Array(values)) = out.get_mut("enum") {
            values.push(Value::Null);
        }
    }
    let is_object = out.get("type").is_some_and(|t| {
        t == "object"
            || t.as_array()
                .is_some_and(|ts| ts.iter().any(|t| t == "object"))
    });
    if is_object
        && out.contains_key("properties")
        && !out.contains_key("additionalProperties")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

/// The kind of a manifest, from its `apiVersion` and `kind`.
pub fn kind_of(doc: &Value) -> Result<Kind, String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    if api_version != "muster.dev/v1alpha1" {
        return Err(format!(
            "apiVersion: {api_version:?} is not muster.dev/v1alpha1"
        ));
    }
    Kind::ALL
        .into_iter()
        .find(|k| k.name() == kind)
        .ok_or_else(|| format!("kind: {kind:?} is not a muster kind"))
}

/// Admits `doc` (a create, or an update of `old`) the way the API server would: defaults,
/// then schema validation, then CEL rules. Returns the defaulted object, or every error as
/// `field.path: message`.
pub fn admit(doc: &Value, old: Option<&Value>) -> Result<Value, Vec<String>> {
    let kind = kind_of(doc).map_err(|e| vec![e])?;
    let schema = open_api_schema(kind);
    let defaulted = apply_defaults(&schema, doc);
    let mut errors = Vec::new();

    let json_schema = to_json_schema(&schema);
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(true)
        .build(&json_schema)
        .expect("generated schema compiles as JSON Schema");
    for error in validator.iter_errors(&defaulted) {
        let path = dotted(&error.instance_path().to_string());
        errors.push(format!("{path}: {error}"));
    }

    let old = old.map(|o| apply_defaults(&schema, o));
    if let Err(cel_errors) = Validator::new().validate(&schema, &defaulted, old.as_ref()) {
        for e in cel_errors.as_slice() {
            errors.push(format!("{}: {}", e.field_path, e.message));
        }
    }
    if errors.is_empty() {
        Ok(defaulted)
    } else {
        Err(errors)
    }
}

/// `/spec/podSets/0/name` → `spec.podSets[0].name`.
pub fn dotted(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').filter(|s| !s.is_empty()) {
        if segment.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    if out.is_empty() { "<root>".into() } else { out }
}

/// Every YAML document of a file, as JSON.
pub fn read_yaml_docs(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            let value: serde_norway::Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
            serde_json::to_value(value).expect("YAML to JSON")
        })
        .filter(|v| !v.is_null())
        .collect()
}
