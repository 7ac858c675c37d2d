//! AL2023 user data: a MIME multi-part document (boundary `//`) whose parts
//! are the NodeClass's `userData` followed by muster's nodeadm `NodeConfig`
//! (`application/node.eks.aws`). The user's parts are read as Karpenter reads
//! them (aws/karpenter-provider-aws `pkg/providers/amifamily/bootstrap/
//! nodeadm.go` `parseUserData`, `mime/mime.go`): a `userData` that is itself a
//! MIME document contributes its parts; one that is not becomes one part, a
//! `NodeConfig` when it reads as YAML and a shell script otherwise.
//!
//! Order matters: nodeadm merges every `NodeConfig` part in document order,
//! the later part winning for single values, and appends `kubelet.flags`, where
//! pflag lets a later `--node-labels` / `--register-with-taints` override an
//! earlier one (awslabs/amazon-eks-ami `nodeadm/internal/api/merge.go`;
//! "the value in the lattermost configuration object will take precedence",
//! nodeadm docs, "Merging multiple configuration objects"). Karpenter puts its
//! own `NodeConfig` first, so a user part can override it; muster puts its
//! own last, because its cluster details, labels and taints are what the
//! planner pins gangs to and what the device plugin selects on: a user part
//! may add kubelet settings, never replace those.

use std::collections::BTreeMap;

use muster_planner::{Taint, TaintEffect};
use serde_json::{Value, json};

use crate::eks::ClusterInfo;

/// Content type of a nodeadm `NodeConfig` part.
pub const NODE_CONFIG: &str = "application/node.eks.aws";
/// Content type of a shell script part.
pub const SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";
const BOUNDARY: &str = "//";

/// One part of a MIME multi-part document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its `Content-Type`.
    pub content_type: String,
    /// Its body.
    pub content: String,
}

/// Why the NodeClass's `userData` could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// It claims to be MIME but has no multipart boundary.
    #[error("spec.aws.userData is a MIME document without a multipart boundary")]
    NoBoundary,
}

/// A taint effect as Kubernetes spells it.
pub fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// `key=value,...` for `--node-labels`.
pub fn label_flag(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `key=value:Effect,...` for `--register-with-taints`.
pub fn taint_flag(taints: &[Taint]) -> String {
    taints
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value, effect(t.effect)))
        .collect::<Vec<_>>()
        .join(",")
}

/// muster's `NodeConfig`: the cluster's details (when known), max pods, and
/// the kubelet flags that register the node with its labels and taints.
pub fn node_config(
    cluster: Option<&ClusterInfo>,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    max_pods: Option<i32>,
) -> String {
    let mut spec = serde_json::Map::new();
    if let Some(c) = cluster {
        spec.insert(
            "cluster".into(),
            json!({
                "name": c.name,
                "apiServerEndpoint": c.endpoint,
                "certificateAuthority": c.certificate_authority,
                "cidr": c.service_cidr,
            }),
        );
    }
    let mut kubelet = serde_json::Map::new();
    if let Some(n) = max_pods {
        kubelet.insert("config".into(), json!({ "maxPods": n }));
    }
    let mut flags = Vec::new();
    if !labels.is_empty() {
        flags.push(Value::String(format!(
            "--node-labels={}",
            label_flag(labels)
        )));
    }
    if !taints.is_empty() {
        flags.push(Value::String(format!(
            "--register-with-taints={}",
            taint_flag(taints)
        )));
    }
    if !flags.is_empty() {
        kubelet.insert("flags".into(), Value::Array(flags));
    }
    if !kubelet.is_empty() {
        spec.insert("kubelet".into(), Value::Object(kubelet));
    }
    let doc = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": spec,
    });
    // a JSON value always renders as YAML
    serde_norway::to_string(&doc).unwrap_or_default()
}

fn is_mime(s: &str) -> bool {
    let t = s.trim_start();
    t.starts_with("MIME-Version:") || t.starts_with("Content-Type:")
}

/// Splits header lines from a body at the first empty line.
fn headers_and_body(s: &str) -> (BTreeMap<String, String>, &str) {
    let mut headers = BTreeMap::new();
    let mut rest = s;
    loop {
        let (line, after) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            return (headers, after);
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
        if after.is_empty() {
            return (headers, "");
        }
        rest = after;
    }
}

fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        (k.trim().eq_ignore_ascii_case("boundary")).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The parts of the NodeClass's `userData`.
pub fn user_parts(user_data: &str) -> Result<Vec<Part>, UserDataError> {
    if user_data.trim().is_empty() {
        return Ok(Vec::new());
    }
    if !is_mime(user_data) {
        let content_type = if user_data.trim_start().starts_with("#!") {
            SHELL
        } else if serde_norway::from_str::<BTreeMap<String, serde_norway::Value>>(user_data).is_ok()
        {
            NODE_CONFIG
        } else {
            SHELL
        };
        return Ok(vec![Part {
            content_type: content_type.into(),
            content: user_data.to_string(),
        }]);
    }
    let (headers, body) = headers_and_body(user_data.trim_start());
    let b = headers
        .get("content-type")
        .and_then(|ct| boundary(ct))
        .ok_or(UserDataError::NoBoundary)?;
    let delimiter = format!("--{b}");
    let mut parts = Vec::new();
    for chunk in body.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break; // the closing delimiter
        }
        let chunk = chunk
            .strip_prefix("\r\n")
            .or_else(|| chunk.strip_prefix('\n'))
            .unwrap_or(chunk);
        let (h, content) = headers_and_body(chunk);
        parts.push(Part {
            content_type: h
                .get("content-type")
                .cloned()
                .unwrap_or_else(|| "text/plain".into()),
            content: content.trim_end_matches(['\r', '\n']).to_string() + "\n",
        });
    }
    Ok(parts)
}

/// The MIME document of `parts`, in order.
pub fn archive(parts: &[Part]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {}\n\n{}",
            p.content_type, p.content
        ));
        if !p.content.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

/// The AL2023 user data of one node.
pub fn user_data(
    cluster: Option<&ClusterInfo>,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    max_pods: Option<i32>,
    class_user_data: Option<&str>,
) -> Result<String, UserDataError> {
    let mut parts = user_parts(class_user_data.unwrap_or(""))?;
    parts.push(Part {
        content_type: NODE_CONFIG.into(),
        content: node_config(cluster, labels, taints, max_pods),
    });
    Ok(archive(&parts))
}

/// What a kubelet started by nodeadm registers with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registered {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
}

/// What the kubelet of a node booted with `user_data` registers with:
/// nodeadm appends the `kubelet.flags` of every `NodeConfig` part in
/// document order (`merge.go`), and the kubelet parses them with pflag:
/// repeated `--node-labels` merge, a later value winning per key
/// (k8s.io/component-base `cli/flag/map_string_string.go`), and the last
/// `--register-with-taints` replaces the list (kubelet `taintsVar.Set`,
/// k8s.io/kubernetes `pkg/util/taints`). A taint with an unknown effect is
/// left out, as the kubelet refuses to start with it.
pub fn registered(user_data: &str) -> Result<Registered, UserDataError> {
    let mut out = Registered::default();
    for part in user_parts(user_data)? {
        if part.content_type != NODE_CONFIG {
            continue;
        }
        let Ok(doc) = serde_norway::from_str::<serde_norway::Value>(&part.content) else {
            continue;
        };
        let flags = doc["spec"]["kubelet"]["flags"]
            .as_sequence()
            .cloned()
            .unwrap_or_default();
        for flag in flags.iter().filter_map(|f| f.as_str()) {
            if let Some(v) = flag.strip_prefix("--node-labels=") {
                for kv in v.split(',').filter(|kv| !kv.is_empty()) {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    out.labels.insert(k.to_string(), v.to_string());
                }
            } else if let Some(v) = flag.strip_prefix("--register-with-taints=") {
                out.taints = v
                    .split(',')
                    .filter_map(|t| {
                        let (kv, effect) = t.rsplit_once(':')?;
                        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
                        let effect = match effect {
                            "NoSchedule" => TaintEffect::NoSchedule,
                            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
                            "NoExecute" => TaintEffect::NoExecute,
                            _ => return None,
                        };
                        Some(Taint {
                            key: key.into(),
                            value: value.into(),
                            effect,
                        })
                    })
                    .collect();
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eks::IpFamily;

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "prod".into(),
            endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            certificate_authority: "LS0tLS1CRUdJTg==".into(),
            service_cidr: "172.20.0.0/16".into(),
            ip_family: IpFamily::Ipv4,
            version: "1.31".into(),
        }
    }

    fn labels() -> BTreeMap<String, String> {
        [
            ("muster.dev/pool".to_string(), "a100".to_string()),
            ("muster.dev/poolnode".to_string(), "a100-x-0".to_string()),
        ]
        .into()
    }

    fn taints() -> Vec<Taint> {
        vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }]
    }

    #[test]
    fn the_node_config_carries_the_cluster_max_pods_labels_and_taints() {
        let doc = node_config(Some(&cluster()), &labels(), &taints(), Some(110));
        let v: serde_norway::Value = serde_norway::from_str(&doc).expect("YAML");
        assert_eq!(v["kind"], "NodeConfig");
        assert_eq!(v["apiVersion"], "node.eks.aws/v1alpha1");
        let c = &v["spec"]["cluster"];
        assert_eq!(c["name"], "prod");
        assert_eq!(
            c["apiServerEndpoint"],
            "https://ABC.gr7.us-east-1.eks.amazonaws.com"
        );
        assert_eq!(c["certificateAuthority"], "LS0tLS1CRUdJTg==");
        assert_eq!(c["cidr"], "172.20.0.0/16");
        assert_eq!(v["spec"]["kubelet"]["config"]["maxPods"], 110);
        let flags = &v["spec"]["kubelet"]["flags"];
        assert_eq!(
            flags[0],
            "--node-labels=muster.dev/pool=a100,muster.dev/poolnode=a100-x-0"
        );
        assert_eq!(
            flags[1],
            "--register-with-taints=nvidia.com/gpu=true:NoSchedule"
        );
        // without a cluster, only the kubelet settings
        let bare: serde_norway::Value =
            serde_norway::from_str(&node_config(None, &labels(), &[], None)).expect("YAML");
        assert!(bare["spec"].get("cluster").is_none());
        assert!(bare["spec"]["kubelet"].get("config").is_none());
        assert_eq!(
            bare["spec"]["kubelet"]["flags"].as_sequence().map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn a_user_part_cannot_replace_musters_labels_or_taints() {
        let user = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=muster.dev/pool=other,team=a\n    - --register-with-taints=dedicated=x:NoSchedule\n";
        let doc = user_data(None, &labels(), &taints(), None, Some(user)).expect("doc");
        let r = registered(&doc).expect("registered");
        assert_eq!(
            r.labels["muster.dev/pool"], "a100",
            "muster's part is last and wins"
        );
        assert_eq!(r.labels["team"], "a", "the user's other labels stay");
        assert_eq!(
            r.taints,
            taints(),
            "the last --register-with-taints replaces the list"
        );
    }

    #[test]
    fn plain_user_data_becomes_one_part_of_its_kind() {
        let script = user_parts("#!/bin/bash\necho hi\n").expect("parts");
        assert_eq!(script[0].content_type, SHELL);
        let config = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  instance:\n    localStorage:\n      strategy: RAID0\n";
        assert_eq!(
            user_parts(config).expect("parts")[0].content_type,
            NODE_CONFIG
        );
        assert_eq!(
            user_parts("echo hi; : not yaml: {").expect("parts")[0].content_type,
            SHELL
        );
        assert!(user_parts("  \n").expect("parts").is_empty());
    }

    #[test]
    fn a_mime_user_data_contributes_its_parts_before_musters_node_config() {
        let user = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n\
                    --BOUNDARY\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho one\n\n\
                    --BOUNDARY\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n\n\
                    --BOUNDARY--\n";
        let doc = user_data(Some(&cluster()), &labels(), &taints(), None, Some(user)).expect("doc");
        // read it back the way cloud-init / nodeadm split it
        let parts = user_parts(&doc).expect("parts");
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].content_type, "text/x-shellscript");
        assert_eq!(parts[0].content, "#!/bin/bash\necho one\n");
        assert_eq!(parts[1].content, "kind: NodeConfig\n");
        // muster's NodeConfig is last, so nodeadm's in-order merge lets it win
        assert_eq!(parts[2].content_type, NODE_CONFIG);
        assert!(parts[2].content.contains("apiServerEndpoint"));
        assert!(
            doc.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n")
        );
        assert!(doc.ends_with("--//--\n"));
        assert_eq!(
            user_parts("Content-Type: multipart/mixed\n\nbody"),
            Err(UserDataError::NoBoundary)
        );
    }
}
