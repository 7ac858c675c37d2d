//! Bottlerocket user data: TOML settings read by the Bottlerocket API server
//! (not MIME). The NodeClass's `userData`, when given, is read as TOML and
//! muster's settings are written over it, the way Karpenter's AWS provider
//! does (aws/karpenter-provider-aws
//! `pkg/providers/amifamily/bootstrap/bottlerocket.go`): under
//! `settings.kubernetes`, `cluster-name`, `api-server`,
//! `cluster-certificate` and `cluster-dns-ip` from the cluster, `max-pods`,
//! the node labels merged into `node-labels` (muster's win), and
//! `node-taints` replaced by the pool's taints (`key = ["value:Effect"]`).

use std::collections::BTreeMap;

use muster_planner::Taint;
use toml::{Table, Value};

use crate::eks::ClusterInfo;
use crate::nodeadm::effect;

/// Why the NodeClass's `userData` could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// It does not read as TOML.
    #[error("spec.aws.userData is not valid Bottlerocket TOML: {0}")]
    NotToml(String),
    /// `settings` or `settings.kubernetes` is not a table.
    #[error("spec.aws.userData: {0} must be a table")]
    NotATable(&'static str),
}

fn table<'a>(
    parent: &'a mut Table,
    key: &str,
    what: &'static str,
) -> Result<&'a mut Table, SettingsError> {
    parent
        .entry(key)
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or(SettingsError::NotATable(what))
}

/// The Bottlerocket user data of one node.
pub fn user_data(
    cluster: Option<&ClusterInfo>,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    max_pods: Option<i32>,
    class_user_data: Option<&str>,
) -> Result<String, SettingsError> {
    let mut doc: Table = match class_user_data.filter(|u| !u.trim().is_empty()) {
        Some(u) => u
            .parse::<Table>()
            .map_err(|e| SettingsError::NotToml(e.message().to_string()))?,
        None => Table::new(),
    };
    let settings = table(&mut doc, "settings", "settings")?;
    let k8s = table(settings, "kubernetes", "settings.kubernetes")?;
    if let Some(c) = cluster {
        k8s.insert("cluster-name".into(), Value::String(c.name.clone()));
        k8s.insert("api-server".into(), Value::String(c.endpoint.clone()));
        k8s.insert(
            "cluster-certificate".into(),
            Value::String(c.certificate_authority.clone()),
        );
        if let Some(dns) = c.dns_ip() {
            k8s.insert("cluster-dns-ip".into(), Value::String(dns));
        }
    }
    if let Some(n) = max_pods {
        k8s.insert("max-pods".into(), Value::Integer(i64::from(n)));
    }
    let node_labels = table(k8s, "node-labels", "settings.kubernetes.node-labels")?;
    for (k, v) in labels {
        node_labels.insert(k.clone(), Value::String(v.clone()));
    }
    let mut node_taints = Table::new();
    for t in taints {
        let entry = node_taints
            .entry(t.key.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.push(Value::String(format!("{}:{}", t.value, effect(t.effect))));
        }
    }
    k8s.insert("node-taints".into(), Value::Table(node_taints));
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eks::IpFamily;
    use muster_planner::TaintEffect;

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "prod".into(),
            endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            certificate_authority: "LS0tLS1CRUdJTg==".into(),
            service_cidr: "10.100.0.0/16".into(),
            ip_family: IpFamily::Ipv4,
            version: "1.31".into(),
        }
    }

    #[test]
    fn settings_carry_the_cluster_labels_and_taints_over_the_users() {
        let user = "[settings.kubernetes]\ncluster-name = \"spoofed\"\n\
                    [settings.kubernetes.node-labels]\nteam = \"a\"\n\"muster.dev/pool\" = \"other\"\n\
                    [settings.kubernetes.node-taints]\nold = [\"x:NoSchedule\"]\n\
                    [settings.host-containers.admin]\nenabled = true\n";
        let labels: BTreeMap<String, String> =
            [("muster.dev/pool".to_string(), "a100".to_string())].into();
        let taints = vec![
            Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            },
            Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoExecute,
            },
        ];
        let out =
            user_data(Some(&cluster()), &labels, &taints, Some(58), Some(user)).expect("toml");
        let doc: Table = out.parse().expect("reads back");
        let k = &doc["settings"]["kubernetes"];
        assert_eq!(k["cluster-name"].as_str(), Some("prod"));
        assert_eq!(
            k["api-server"].as_str(),
            Some("https://ABC.gr7.us-east-1.eks.amazonaws.com")
        );
        assert_eq!(k["cluster-certificate"].as_str(), Some("LS0tLS1CRUdJTg=="));
        assert_eq!(k["cluster-dns-ip"].as_str(), Some("10.100.0.10"));
        assert_eq!(k["max-pods"].as_integer(), Some(58));
        assert_eq!(k["node-labels"]["team"].as_str(), Some("a"));
        assert_eq!(k["node-labels"]["muster.dev/pool"].as_str(), Some("a100"));
        let gpu: Vec<&str> = k["node-taints"]["nvidia.com/gpu"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(gpu, ["true:NoSchedule", "true:NoExecute"]);
        assert!(k["node-taints"].get("old").is_none());
        assert_eq!(
            doc["settings"]["host-containers"]["admin"]["enabled"].as_bool(),
            Some(true)
        );
    }

    #[test]
    fn user_data_that_is_not_toml_is_refused() {
        let err = user_data(None, &BTreeMap::new(), &[], None, Some("#!/bin/bash\necho"));
        assert!(matches!(err, Err(SettingsError::NotToml(_))));
        let err = user_data(None, &BTreeMap::new(), &[], None, Some("settings = 3"));
        assert_eq!(err, Err(SettingsError::NotATable("settings")));
    }
}
