//! What a launch carries besides the instance type: tags and user data.
//!
//! Tags: `muster.dev/cluster`, `muster.dev/pool`, `muster.dev/poolnode`,
//! `muster.dev/gang` (when launched for one), `Name` (the PoolNode), then the
//! NodeClass's and the request's own tags (muster's keys win).
//!
//! User data: a MIME multi-part document whose first part is an AL2023
//! `nodeadm` `NodeConfig` registering the kubelet with the pool's labels and
//! taints, followed by the NodeClass's `userData` (which carries the
//! cluster's name, endpoint and CA for `nodeadm`, or a script of its own).

use std::collections::BTreeMap;

use muster_planner::{Taint, TaintEffect};
use muster_provider_api::{LaunchRequest, tags};

/// The tags of the instance and its volumes.
pub fn launch_tags(
    request: &LaunchRequest,
    class_tags: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = class_tags.clone();
    out.extend(request.tags.clone());
    out.insert(tags::CLUSTER.into(), request.cluster.clone());
    out.insert(tags::POOL.into(), request.pool.clone());
    out.insert(tags::POOL_NODE.into(), request.name.clone());
    if let Some(g) = &request.gang {
        out.insert(tags::GANG.into(), g.clone());
    }
    out.insert("Name".into(), request.name.clone());
    out
}

fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// The user data (not yet base64-encoded).
pub fn user_data(
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    class_user_data: Option<&str>,
) -> String {
    let labels = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let taints = taints
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value, effect(t.effect)))
        .collect::<Vec<_>>()
        .join(",");
    let mut flags = Vec::new();
    if !labels.is_empty() {
        flags.push(format!("    - --node-labels={labels}"));
    }
    if !taints.is_empty() {
        flags.push(format!("    - --register-with-taints={taints}"));
    }
    let mut out = String::from(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n\
         Content-Type: application/node.eks.aws\n\n\
         apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n",
    );
    for f in &flags {
        out.push_str(f);
        out.push('\n');
    }
    if let Some(extra) = class_user_data.filter(|u| !u.trim().is_empty()) {
        let kind = if extra.trim_start().starts_with("#!") {
            "text/x-shellscript"
        } else {
            "application/node.eks.aws"
        };
        out.push_str(&format!("\n--//\nContent-Type: {kind}\n\n{extra}\n"));
    }
    out.push_str("\n--//--\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{CapacityType, OfferingKey, Provider};

    #[test]
    fn tags_carry_ownership_and_muster_keys_win() {
        let req = LaunchRequest {
            name: "a100-x-0".into(),
            idempotency_key: "k".into(),
            offering: OfferingKey {
                provider: Provider::Aws,
                zone: "us-east-1a".into(),
                instance_type: "p4d.24xlarge".into(),
                capacity_type: CapacityType::Spot,
            },
            pool: "a100".into(),
            cluster: "prod".into(),
            gang: Some("team-a/train".into()),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            tags: [("team".to_string(), "a".to_string())].into(),
        };
        let class: BTreeMap<String, String> = [
            ("cost-center".to_string(), "42".to_string()),
            (tags::CLUSTER.to_string(), "spoofed".to_string()),
        ]
        .into();
        let t = launch_tags(&req, &class);
        assert_eq!(t[tags::CLUSTER], "prod");
        assert_eq!(t[tags::POOL], "a100");
        assert_eq!(t[tags::POOL_NODE], "a100-x-0");
        assert_eq!(t[tags::GANG], "team-a/train");
        assert_eq!(t["Name"], "a100-x-0");
        assert_eq!(t["cost-center"], "42");
        assert_eq!(t["team"], "a");
    }

    #[test]
    fn user_data_registers_labels_and_taints() {
        let labels: BTreeMap<String, String> = [
            ("muster.dev/pool".to_string(), "a100".to_string()),
            ("muster.dev/poolnode".to_string(), "a100-x-0".to_string()),
        ]
        .into();
        let taints = vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }];
        let u = user_data(&labels, &taints, Some("#!/bin/bash\necho hi"));
        assert!(u.contains("--node-labels=muster.dev/pool=a100,muster.dev/poolnode=a100-x-0"));
        assert!(u.contains("--register-with-taints=nvidia.com/gpu=true:NoSchedule"));
        assert!(u.contains("Content-Type: text/x-shellscript\n\n#!/bin/bash\necho hi"));
        assert!(u.ends_with("--//--\n"));
    }
}
