//! The GPUPool CRD refuses pool labels a kubelet may not set on its own Node
//! (`muster_crds::kubelet_labels`, the upstream NodeRestriction rule): the CEL rule on
//! `spec.labels`, evaluated offline, agrees with `kubelet_may_set` key by key, refusing with
//! its message and accepting the keys a kubelet may set.

mod support;

use muster_crds::kubelet_labels::{self, KUBELET_LABELS, MESSAGE, kubelet_may_set};
use serde_json::{Value, json};
use support::{admit, read_yaml_docs, repo_dir};

/// The example pool with `spec.labels` set to one key.
fn pool_with_label(key: &str) -> Value {
    let docs = read_yaml_docs(&repo_dir().join("docs/examples/gpupool-a100-spot.yaml"));
    let mut pool = docs.into_iter().next().expect("one document");
    pool["spec"]["labels"] = json!({ key: "x" });
    pool
}

/// Keys on both sides of every branch of the rule: outside the restricted namespaces, in
/// them and their subdomains, in the kubelet's own namespaces, and the well-known labels.
fn keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "example.com/team",
        "team",
        "nvidia.com/gpu.present",
        "node.kubernetes.io/foo",
        "a.node.kubernetes.io/foo",
        "kubelet.kubernetes.io/x",
        "notkubernetes.io/x",
        "kubernetes.io.example.com/x",
        "kubernetes.io/foo",
        "node-role.kubernetes.io/worker",
        "app.kubernetes.io/name",
        "k8s.io/x",
        "x.k8s.io/y",
        "node-restriction.kubernetes.io/pool",
        "topology.kubernetes.io/rack",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    keys.extend(KUBELET_LABELS.iter().map(|k| k.to_string()));
    keys
}

#[test]
fn restricted_labels_are_refused_and_allowed_ones_accepted() {
    for key in ["node.kubernetes.io/foo", "example.com/team"] {
        assert!(admit(&pool_with_label(key), None).is_ok(), "{key} refused");
    }
    for key in ["node-role.kubernetes.io/worker", "k8s.io/x"] {
        let errors = admit(&pool_with_label(key), None).expect_err(key);
        assert!(
            errors.iter().any(|e| e.contains(MESSAGE)),
            "{key}: no error names the rule: {errors:?}"
        );
    }
}

#[test]
fn the_cel_rule_agrees_with_the_rust_rule() {
    for key in keys() {
        let admitted = admit(&pool_with_label(&key), None);
        assert_eq!(
            admitted.is_ok(),
            kubelet_may_set(&key),
            "{key}: CEL rule {} gave {admitted:?}",
            kubelet_labels::cel_rule()
        );
    }
}
