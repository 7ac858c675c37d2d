//! GKE's `kube-env` instance metadata: `KEY: value` lines that the node
//! image's bootstrap (`configure.sh`, `configure-helper.sh`) reads. The
//! kubelet's flags are in `KUBELET_ARGS` (continuation lines indented);
//! muster merges its node labels into `--node-labels` (its own win over the
//! template's) and its taints into `--register-with-taints`, and points
//! `ZONE` at the machine's zone, as production GCP providers for Karpenter
//! do (cloudpilot-ai/karpenter-provider-gcp `pkg/providers/metadata/`
//! `kubelet_args.go`, `kube_env.go`). `NODE_LABELS` and `NODE_TAINTS`,
//! from which older images compose the same flags, get the same values.

use std::collections::BTreeMap;

use muster_planner::{Taint, TaintEffect};

/// Why a template's `kube-env` could not be patched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeEnvError {
    /// It has no `KUBELET_ARGS` line: not a GKE node template.
    #[error("the node pool's kube-env has no KUBELET_ARGS line")]
    NoKubeletArgs,
}

fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// `k=v,...` read into a map (later entries win).
fn read_labels(raw: &str) -> BTreeMap<String, String> {
    raw.split(',')
        .filter_map(|kv| {
            let kv = kv.trim();
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn write_labels(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The template's taints plus muster's, without repeats, in a stable order.
fn merged_taints(existing: &str, taints: &[Taint]) -> String {
    let mut all: Vec<String> = existing
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect();
    for t in taints {
        all.push(format!("{}={}:{}", t.key, t.value, effect(t.effect)));
    }
    all.sort();
    all.dedup();
    all.join(",")
}

fn unquote(v: &str) -> &str {
    let v = v.trim();
    v.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
        .unwrap_or(v)
}

/// What muster changes in a node's registration: labels set (over the
/// template's), label keys of the template dropped (those that describe the
/// source pool's machines, not this one), taints added.
#[derive(Debug, Clone, Copy)]
pub struct Registration<'a> {
    /// Node labels to set.
    pub labels: &'a BTreeMap<String, String>,
    /// Template label keys to drop.
    pub drop: &'a [&'a str],
    /// Taints to add.
    pub taints: &'a [Taint],
}

impl Registration<'_> {
    fn apply(&self, labels: &mut BTreeMap<String, String>) {
        labels.retain(|k, _| !self.drop.contains(&k.as_str()));
        labels.extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// `KUBELET_ARGS` with muster's labels and taints merged in.
pub fn kubelet_args(raw: &str, reg: Registration<'_>) -> String {
    let mut other = Vec::new();
    let mut node_labels = BTreeMap::new();
    let mut node_taints = String::new();
    for field in raw.split_whitespace() {
        if let Some(v) = field.strip_prefix("--node-labels=") {
            node_labels.extend(read_labels(v));
        } else if let Some(v) = field.strip_prefix("--register-with-taints=") {
            node_taints = [node_taints.as_str(), v]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(",");
        } else {
            other.push(field.to_string());
        }
    }
    reg.apply(&mut node_labels);
    let taints = merged_taints(&node_taints, reg.taints);
    if !node_labels.is_empty() {
        other.push(format!("--node-labels={}", write_labels(&node_labels)));
    }
    if !taints.is_empty() {
        other.push(format!("--register-with-taints={taints}"));
    }
    other.join(" ")
}

/// The `kube-env` of one machine: labels and taints in the kubelet's
/// flags, `ZONE` set to `zone`.
pub fn patch(kube_env: &str, reg: Registration<'_>, zone: &str) -> Result<String, KubeEnvError> {
    let lines: Vec<&str> = kube_env.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 1);
    let mut seen_args = false;
    let mut seen_zone = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("KUBELET_ARGS:") {
            let mut raw = vec![unquote(rest).to_string()];
            // continuation lines: indented flags
            while i + 1 < lines.len()
                && lines[i + 1].starts_with([' ', '\t'])
                && lines[i + 1].trim_start().starts_with("--")
            {
                i += 1;
                raw.push(lines[i].trim().to_string());
            }
            out.push(format!(
                "KUBELET_ARGS: {}",
                kubelet_args(&raw.join(" "), reg)
            ));
            seen_args = true;
        } else if let Some(rest) = line.strip_prefix("NODE_LABELS:") {
            let mut merged = read_labels(unquote(rest));
            reg.apply(&mut merged);
            out.push(format!("NODE_LABELS: {}", write_labels(&merged)));
        } else if let Some(rest) = line.strip_prefix("NODE_TAINTS:") {
            out.push(format!(
                "NODE_TAINTS: {}",
                merged_taints(unquote(rest), reg.taints)
            ));
        } else if line.starts_with("ZONE:") {
            out.push(format!("ZONE: {zone}"));
            seen_zone = true;
        } else {
            out.push(line.to_string());
        }
        i += 1;
    }
    if !seen_args {
        return Err(KubeEnvError::NoKubeletArgs);
    }
    if !seen_zone {
        out.push(format!("ZONE: {zone}"));
    }
    Ok(out.join("\n") + "\n")
}

/// The value of one `KEY: value` line.
pub fn get<'a>(kube_env: &'a str, key: &str) -> Option<&'a str> {
    kube_env.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .map(unquote)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBE_ENV: &str = "CLUSTER_NAME: prod\n\
        ZONE: us-central1-b\n\
        KUBELET_ARGS: --v=2 --cloud-provider=external --max-pods=110\n  \
        --node-labels=cloud.google.com/gke-nodepool=default-pool,cloud.google.com/gke-os-distribution=cos\n\
        NODE_LABELS: cloud.google.com/gke-nodepool=default-pool,cloud.google.com/gke-os-distribution=cos\n\
        NODE_TAINTS: \n\
        KUBERNETES_MASTER_NAME: 10.0.0.2\n";

    fn labels() -> BTreeMap<String, String> {
        [
            ("muster.dev/pool".to_string(), "l4".to_string()),
            (
                "cloud.google.com/gke-accelerator".to_string(),
                "nvidia-l4".to_string(),
            ),
        ]
        .into()
    }

    fn gpu_taint() -> Vec<Taint> {
        vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: "present".into(),
            effect: TaintEffect::NoSchedule,
        }]
    }

    #[test]
    fn labels_and_taints_join_the_kubelet_flags_and_the_zone_is_the_machines() {
        let (labels, taints) = (labels(), gpu_taint());
        let reg = Registration {
            labels: &labels,
            drop: &["cloud.google.com/gke-os-distribution"],
            taints: &taints,
        };
        let env = patch(KUBE_ENV, reg, "us-central1-a").expect("patched");
        let args = get(&env, "KUBELET_ARGS").expect("args");
        assert!(
            args.starts_with("--v=2 --cloud-provider=external --max-pods=110 "),
            "{args}"
        );
        assert!(
            args.contains(
                "--node-labels=cloud.google.com/gke-accelerator=nvidia-l4,\
                 cloud.google.com/gke-nodepool=default-pool,muster.dev/pool=l4"
            ),
            "{args}"
        );
        assert!(
            args.ends_with("--register-with-taints=nvidia.com/gpu=present:NoSchedule"),
            "{args}"
        );
        // the continuation line was folded into the one line
        assert!(!env.contains("\n  --node-labels"), "{env}");
        assert_eq!(get(&env, "ZONE"), Some("us-central1-a"));
        assert!(get(&env, "NODE_LABELS").is_some_and(|l| l.contains("muster.dev/pool=l4")));
        // a dropped label is gone from both
        assert!(!env.contains("gke-os-distribution"), "{env}");
        assert_eq!(
            get(&env, "NODE_TAINTS"),
            Some("nvidia.com/gpu=present:NoSchedule")
        );
        // everything else is kept as it was
        assert_eq!(get(&env, "KUBERNETES_MASTER_NAME"), Some("10.0.0.2"));
        assert_eq!(get(&env, "CLUSTER_NAME"), Some("prod"));
    }

    #[test]
    fn muster_labels_win_and_taints_are_not_repeated() {
        let (labels, taints) = (labels(), gpu_taint());
        let args = kubelet_args(
            "--node-labels=muster.dev/pool=other,team=a --register-with-taints=nvidia.com/gpu=present:NoSchedule",
            Registration {
                labels: &labels,
                drop: &[],
                taints: &taints,
            },
        );
        assert!(args.contains("muster.dev/pool=l4"), "{args}");
        assert!(args.contains("team=a"), "{args}");
        assert!(
            args.ends_with("--register-with-taints=nvidia.com/gpu=present:NoSchedule"),
            "{args}"
        );
    }

    #[test]
    fn a_kube_env_without_kubelet_args_is_refused_and_a_missing_zone_added() {
        let (labels, none) = (labels(), BTreeMap::new());
        let reg = |labels| Registration {
            labels,
            drop: &[],
            taints: &[],
        };
        assert_eq!(
            patch("CLUSTER_NAME: prod\n", reg(&labels), "us-central1-a"),
            Err(KubeEnvError::NoKubeletArgs)
        );
        let env = patch("KUBELET_ARGS: --v=2\n", reg(&none), "us-central1-c").expect("ok");
        assert_eq!(env, "KUBELET_ARGS: --v=2\nZONE: us-central1-c\n");
    }
}
