//! Which node labels a kubelet may set on its own Node, the one statement of
//! the upstream rule muster checks pool labels against (the GPUPool CRD's CEL
//! rule on `spec.labels` and the controller's translation of a pool).
//!
//! A pool's labels reach the Node through the kubelet's `--node-labels`. A
//! kubelet refuses to start with a label in the `kubernetes.io` or `k8s.io`
//! namespaces (or a subdomain of them) unless the key is one of its
//! well-known labels or lies in one of its own namespaces
//! (kubernetes/kubernetes `cmd/kubelet/app/options/options.go`
//! `ValidateKubeletFlags`), and the NodeRestriction admission plugin refuses
//! the same keys when a kubelet writes its Node
//! (`plugin/pkg/admission/noderestriction/admission.go`,
//! `getForbiddenLabels`). The allowed set is `kubeletLabels` and
//! `kubeletLabelNamespaces` of
//! `staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go`
//! (`IsKubeletLabel`), with the `v1.Label*` constants it names spelled out.
//! Keys outside those namespaces (`example.com/team`,
//! `nvidia.com/gpu.present`) are allowed.

/// Namespaces whose labels (and those of their subdomains) a kubelet may not
/// set unless [`KUBELET_LABELS`] or [`KUBELET_LABEL_NAMESPACES`] allow them
/// (`isKubernetesLabel` in the files above).
pub const RESTRICTED_NAMESPACES: [&str; 2] = ["kubernetes.io", "k8s.io"];

/// Namespaces (with their subdomains) whose labels a kubelet may set:
/// `kubeletLabelNamespaces` (`v1.LabelNamespaceSuffixKubelet`,
/// `v1.LabelNamespaceSuffixNode`).
pub const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The well-known labels a kubelet may set although their namespace is
/// restricted: `kubeletLabels`.
pub const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// The message of the CRD rule and of the controller's issue.
pub const MESSAGE: &str = "spec.labels: a kubelet may not set labels in the kubernetes.io or k8s.io namespaces other than kubelet.kubernetes.io/*, node.kubernetes.io/* and its well-known labels (NodeRestriction); a node with such a label never starts its kubelet";

/// The namespace of a label key: what comes before the first `/`, empty
/// without one (`getLabelNamespace`).
fn namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

/// `ns` is `domain` or a subdomain of it.
fn within(ns: &str, domain: &str) -> bool {
    ns.strip_suffix(domain)
        .is_some_and(|rest| rest.is_empty() || rest.ends_with('.'))
}

/// Whether a kubelet may set a label with this key on its own Node.
pub fn kubelet_may_set(key: &str) -> bool {
    let ns = namespace(key);
    !RESTRICTED_NAMESPACES.iter().any(|d| within(ns, d))
        || KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES.iter().any(|d| within(ns, d))
}

/// A CEL regular expression matching keys whose namespace is one of
/// `domains` or a subdomain of one (`[.]` for a dot, so the rule needs no
/// escapes).
fn namespace_regex(domains: &[&str]) -> String {
    let alternatives: Vec<String> = domains.iter().map(|d| d.replace('.', "[.]")).collect();
    format!("^([^/]*[.])?({})/", alternatives.join("|"))
}

/// The CEL rule on a label map that holds [`kubelet_may_set`] for every key.
pub fn cel_rule() -> String {
    let well_known: Vec<String> = KUBELET_LABELS.iter().map(|k| format!("'{k}'")).collect();
    format!(
        "self.all(k, !k.matches('{}') || k in [{}] || k.matches('{}'))",
        namespace_regex(&RESTRICTED_NAMESPACES),
        well_known.join(", "),
        namespace_regex(&KUBELET_LABEL_NAMESPACES),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_rule() {
        for allowed in [
            "example.com/team",
            "team",
            "nvidia.com/gpu.present",
            "node.kubernetes.io/foo",
            "a.node.kubernetes.io/foo",
            "kubelet.kubernetes.io/x",
            "kubernetes.io/arch",
            "topology.kubernetes.io/zone",
            "kubernetes.io.example.com/x",
            "notkubernetes.io/x",
        ] {
            assert!(kubelet_may_set(allowed), "{allowed}");
        }
        for refused in [
            "kubernetes.io/foo",
            "node-role.kubernetes.io/worker",
            "app.kubernetes.io/name",
            "k8s.io/x",
            "x.k8s.io/y",
            "node-restriction.kubernetes.io/pool",
            "topology.kubernetes.io/rack",
        ] {
            assert!(!kubelet_may_set(refused), "{refused}");
        }
    }
}
