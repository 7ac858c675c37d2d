//! Renders `charts/muster` with the real `helm` (installed by
//! `scripts/test`) and picks objects out of the result.
#![allow(dead_code)]

pub mod rendered;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value;

/// The chart's folder.
pub fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/muster")
}

/// The values files the chart is tested with: the defaults (none), an AWS
/// and a GCP installation.
pub const VALUES: [Option<&str>; 3] =
    [None, Some("ci/aws-values.yaml"), Some("ci/gcp-values.yaml")];

/// Runs `helm` (Helm 4) with `args`; `Err` holds its output when it fails.
pub fn helm(args: &[&str]) -> Result<String, String> {
    run_helm("helm", args)
}

/// Runs the Helm binary `bin` (`helm`, or `helm3` for Helm 3) with `args`.
pub fn run_helm(bin: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run `{bin}` ({e}): run the tests with ./scripts/test, which installs it")
    });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// The cluster name the default values are rendered with: `clusterName`
/// has no default (a name two clusters share would let one's orphan
/// collection terminate the other's instances), and the values files of
/// `ci/` set their own.
pub const CLUSTER_NAME: &str = "clusterName=test-cluster";

/// `helm template` of the chart as release `muster` in `muster-system`, with
/// a values file of the chart (none: the defaults and [`CLUSTER_NAME`]) and
/// `--set` pairs.
pub fn template(values: Option<&str>, set: &[&str]) -> Result<String, String> {
    template_with("helm", values, set)
}

/// [`template`] with the Helm binary `bin`.
pub fn template_with(bin: &str, values: Option<&str>, set: &[&str]) -> Result<String, String> {
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    let mut args = vec!["template", "muster", chart, "--namespace", "muster-system"];
    let file;
    match values {
        Some(v) => {
            file = format!("{chart}/{v}");
            args.extend(["--values", file.as_str()]);
        }
        None => args.extend(["--set", CLUSTER_NAME]),
    }
    for s in set {
        args.extend(["--set", s]);
    }
    run_helm(bin, &args)
}

/// The objects of a rendered manifest stream.
pub fn objects(rendered: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(rendered)
        .filter_map(|d| {
            let v = Value::deserialize(d).expect("rendered YAML");
            (!v.is_null()).then_some(v)
        })
        .collect()
}

/// The first object of `kind`.
pub fn find<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

use serde::Deserialize;
