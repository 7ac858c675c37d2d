//! Reads `deploy/rbac.yaml` (and, for the simulated cloud,
//! `deploy/rbac-sim.yaml`; for Karpenter's delegate mode,
//! `deploy/rbac-karpenter.yaml`) and answers whether its rules allow a
//! request.

use serde::Deserialize;

/// One RBAC rule, with the Role's namespace (`None` for a ClusterRole).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// API groups (`""` is the core group).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource` for subresources.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Verbs.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Object names the rule is limited to (all when empty).
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// Where a Role's rule applies; filled in from the Role.
    #[serde(skip)]
    pub namespace: Option<String>,
    /// From which object the rule comes, for messages.
    #[serde(skip)]
    pub from: String,
}

#[derive(Debug, Deserialize)]
struct Doc {
    kind: String,
    #[serde(default)]
    metadata: serde_norway::Value,
    #[serde(default)]
    rules: Vec<Rule>,
}

/// The path of the RBAC manifest.
pub fn path() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/rbac.yaml")
}

/// Every rule of the ClusterRoles and Roles in the manifest.
pub fn rules() -> Vec<Rule> {
    rules_of(&path())
}

/// Every rule of `deploy/rbac.yaml` and `deploy/rbac-sim.yaml`: a
/// controller started with `--cloud sim`.
pub fn rules_with_sim_cloud() -> Vec<Rule> {
    let mut out = rules();
    out.extend(rules_of(&path().with_file_name("rbac-sim.yaml")));
    out
}

/// Every rule of `deploy/rbac.yaml` and `deploy/rbac-karpenter.yaml`: a
/// controller started with `--cloud karpenter`.
pub fn rules_with_karpenter() -> Vec<Rule> {
    let mut out = rules();
    out.extend(rules_of(&path().with_file_name("rbac-karpenter.yaml")));
    out
}

/// Every rule of the ClusterRoles and Roles in one manifest.
pub fn rules_of(path: &std::path::Path) -> Vec<Rule> {
    let text = std::fs::read_to_string(path).expect("an RBAC manifest");
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let doc = Doc::deserialize(doc).expect("an object of deploy/rbac.yaml");
        let name = doc.metadata["name"].as_str().unwrap_or("").to_string();
        let namespace = match doc.kind.as_str() {
            "ClusterRole" => None,
            "Role" => Some(
                doc.metadata["namespace"]
                    .as_str()
                    .expect("a Role has a namespace")
                    .to_string(),
            ),
            _ => continue,
        };
        for mut rule in doc.rules {
            rule.namespace = namespace.clone();
            rule.from = format!("{} {name}", doc.kind);
            out.push(rule);
        }
    }
    out
}

impl Rule {
    /// Whether this rule allows `verb` on `resource` (with `/subresource`)
    /// of `group` in `namespace` (`""` for cluster-scoped requests), on the
    /// object `name` (`""` when the request names none: a create, a list
    /// or watch without a `metadata.name` field selector). A rule limited to
    /// names allows only requests that name one of them, as the RBAC
    /// authorizer does (kubernetes/kubernetes,
    /// `plugin/pkg/auth/authorizer/rbac/rbac.go`, ResourceNameMatches; the
    /// name of a list or watch is its field selector's,
    /// `staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`).
    pub fn allows(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && self.api_groups.iter().any(|g| g == group)
            && self.resources.iter().any(|r| r == resource)
            && self.verbs.iter().any(|v| v == verb)
            && (self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name))
    }
}
