//! Enforces the dependency invariants stated in ARCHITECTURE.md by reading
//! `cargo metadata`: the planner knows no Kubernetes, async runtime or cloud
//! crate; only provider crates know a cloud SDK; only the root package (and
//! the CRD type definitions, without a client) know kube; the simulator never
//! depends on the root package.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[path = "architecture/layers.rs"]
mod layers;

/// Package name → names of its normal (non-dev, non-build) dependencies.
fn graph() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().expect("id"),
                p["name"].as_str().expect("name"),
            )
        })
        .collect();
    let mut g = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let id = node["id"].as_str().expect("node id");
        let deps = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
            })
            .map(|d| names[d["pkg"].as_str().expect("pkg")].to_string())
            .collect();
        g.insert(names[id].to_string(), deps);
    }
    g
}

/// Every package `root` depends on, directly or not (normal dependencies).
fn closure(g: &BTreeMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root.to_string()];
    while let Some(p) = stack.pop() {
        for d in g.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

/// Like [`closure`], but without descending into `skip`: what `root` pulls
/// in other than through `skip`.
fn closure_except(g: &BTreeMap<String, Vec<String>>, root: &str, skip: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root.to_string()];
    while let Some(p) = stack.pop() {
        for d in g.get(&p).into_iter().flatten() {
            if d != skip && seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

fn is_kube(name: &str) -> bool {
    name == "kube" || name.starts_with("kube-") || name == "k8s-openapi"
}
fn is_kube_client(name: &str) -> bool {
    matches!(name, "kube-client" | "kube-runtime")
}
fn is_cloud_sdk(name: &str) -> bool {
    name.starts_with("aws-") || name.starts_with("google-cloud-")
}
fn is_async_runtime(name: &str) -> bool {
    matches!(name, "tokio" | "async-std" | "smol")
}

fn offenders(deps: &BTreeSet<String>, bad: fn(&str) -> bool) -> Vec<&String> {
    deps.iter().filter(|d| bad(d)).collect()
}

#[test]
fn planner_is_pure() {
    let g = graph();
    let deps = closure(&g, "muster-planner");
    for (what, check) in [
        ("Kubernetes", is_kube as fn(&str) -> bool),
        ("cloud SDK", is_cloud_sdk),
        ("async runtime", is_async_runtime),
    ] {
        let bad = offenders(&deps, check);
        assert!(
            bad.is_empty(),
            "muster-planner must not depend on a {what} crate: {bad:?}"
        );
    }
}

#[test]
fn only_providers_know_a_cloud_sdk() {
    let g = graph();
    for pkg in g.keys().filter(|p| p.starts_with("muster")) {
        if pkg.starts_with("muster-provider-") || pkg == "muster" {
            // The binary links providers behind features; providers own their SDKs.
            continue;
        }
        let deps = closure(&g, pkg);
        let bad = offenders(&deps, is_cloud_sdk);
        assert!(
            bad.is_empty(),
            "{pkg} must not depend on a cloud SDK: {bad:?}"
        );
    }
    for api in ["muster-provider-api", "muster-provider-sim"] {
        if g.contains_key(api) {
            let deps = closure(&g, api);
            let bad = offenders(&deps, is_cloud_sdk);
            assert!(
                bad.is_empty(),
                "{api} must not depend on a cloud SDK: {bad:?}"
            );
        }
    }
}

#[test]
fn only_the_binary_knows_the_kube_client() {
    let g = graph();
    for pkg in g
        .keys()
        .filter(|p| p.starts_with("muster") && *p != "muster")
    {
        let deps = closure(&g, pkg);
        let bad = offenders(&deps, is_kube_client);
        assert!(
            bad.is_empty(),
            "{pkg} must not depend on a Kubernetes client: {bad:?}"
        );
        if pkg != "muster-crds" {
            // Cloud providers read their NodeClass spec types from muster-crds,
            // which carries the Kubernetes type crates; nothing else may.
            let deps = if pkg.starts_with("muster-provider-") {
                closure_except(&g, pkg, "muster-crds")
            } else {
                deps
            };
            let bad = offenders(&deps, is_kube);
            assert!(
                bad.is_empty(),
                "{pkg} must not depend on Kubernetes crates: {bad:?}"
            );
        }
    }
}

#[test]
fn simulator_never_depends_on_the_binary() {
    let g = graph();
    for pkg in ["muster-sim", "muster-provider-sim"] {
        let deps = closure(&g, pkg);
        assert!(
            !deps.contains("muster"),
            "{pkg} must not depend on the muster binary crate"
        );
        assert!(
            !deps.contains("muster-crds"),
            "{pkg} must not depend on muster-crds"
        );
    }
}

#[test]
fn the_graph_is_what_we_think_it_is() {
    // Guards the checks above against passing vacuously.
    let g = graph();
    for pkg in [
        "muster",
        "muster-planner",
        "muster-crds",
        "muster-provider-api",
    ] {
        assert!(g.contains_key(pkg), "{pkg} missing from cargo metadata");
    }
    assert!(closure(&g, "muster").contains("muster-planner"));
    assert!(closure(&g, "muster-provider-api").contains("muster-planner"));
}

/// The layer check itself: a tree whose lower module imports a higher one
/// (directly, in a `{..}` group, and through `super::`) is refused, a
/// comment naming a higher module is not an import, and a cycle is found.
#[test]
fn the_layer_check_refuses_an_upward_import() {
    let dir = std::env::temp_dir().join(format!("muster-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("low")).expect("temp dir");
    let write = |p: &str, s: &str| std::fs::write(dir.join(p), s).expect("write");
    write("mod.rs", "pub mod low; pub mod mid; pub mod high;");
    write(
        "low/mod.rs",
        "// crate::m::high is named in a comment only\npub mod inner;",
    );
    write("low/inner.rs", "use super::super::high::Thing;");
    write("mid.rs", "use crate::m::{low, high::Other};");
    write("high.rs", "use crate::m::low::X; use crate::m::mid;");
    let edges = layers::edges(&dir, "crate::m");
    let layers_table: &[(&str, &[&str])] =
        &[("base", &["low"]), ("middle", &["mid"]), ("top", &["high"])];
    let found = layers::violations(&edges, layers_table);
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(
        found,
        vec![
            "`low` (layer base) imports the higher `high` (layer top) in low/inner.rs".to_string(),
            "`mid` (layer middle) imports the higher `high` (layer top) in mid.rs".to_string(),
        ]
    );
    assert_eq!(
        layers::cycles(&edges),
        vec![vec![
            "high".to_string(),
            "low".to_string(),
            "mid".to_string()
        ]]
    );
}

/// The controller's layers, lowest first: a module imports only modules of
/// lower layers (ARCHITECTURE.md draws the same table).
const CONTROLLER_LAYERS: &[(&str, &[&str])] = &[
    // objects, API helpers, client, conditions, reasons, Events, metrics
    ("plumbing", &["base"]),
    // clouds behind the provider seam; workload adapters; the Lease election
    (
        "clouds, adapters, election",
        &["cloud", "leader", "workloads"],
    ),
    // watch caches, CRD checks, the Prometheus read, one cycle's observation
    ("observation", &["observe"]),
    // pure: kube objects -> planner snapshot
    ("translation", &["translate"]),
    // the handles every step is given
    ("context", &["ctx"]),
    // one folder per concern, siblings never importing each other
    ("steps", &["steps"]),
    // the only code that orders steps and passes data between them
    ("cycle", &["cycle"]),
    // `muster explain`, `muster uninstall`, the admission webhook
    ("entry points", &["explain", "uninstall", "webhook"]),
    // the one HTTP stack: metrics, health, the webhook's endpoint
    // who may read /metrics (TokenReview, SubjectAccessReview)
    ("metrics access", &["metrics_auth"]),
    ("serving", &["http"]),
];

fn controller_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controller")
}

#[test]
fn controller_modules_import_down_the_layers() {
    let edges = layers::edges(&controller_root(), "crate::controller");
    let bad = layers::violations(&edges, CONTROLLER_LAYERS);
    assert!(
        bad.is_empty(),
        "layering of src/controller:\n{}",
        bad.join("\n")
    );
    let cycles = layers::cycles(&edges);
    assert!(
        cycles.is_empty(),
        "import cycles in src/controller: {cycles:?}"
    );
}

#[test]
fn controller_steps_never_import_each_other() {
    let root = controller_root().join("steps");
    let edges = layers::edges(&root, "crate::controller::steps");
    let steps: Vec<&str> = edges.keys().map(String::as_str).collect();
    assert!(steps.len() >= 4, "steps found: {steps:?}");
    let table: &[(&str, &[&str])] = &[("steps", &steps)];
    let bad = layers::violations(&edges, table);
    assert!(
        bad.is_empty(),
        "steps import each other:\n{}",
        bad.join("\n")
    );
}

/// The layers of `muster-planner`'s modules (the direct children of
/// `planner/src`), lowest first: a module imports only modules of lower
/// layers, so the planner's modules import one way.
const PLANNER_LAYERS: &[(&str, &[&str])] = &[
    // Plain values that import nothing of the planner.
    (
        "primitives",
        &["quantity", "time", "naming", "by_index", "orphans"],
    ),
    // Resource vectors; spot risk over a duration.
    ("resources", &["resources", "spot"]),
    // The domain types; the cheapest-cover solver (resources only).
    ("model", &["model", "cover"]),
    // What a plan reads and writes; model builders; a launch search's plain types.
    (
        "input and output",
        &["snapshot", "plan", "fixtures", "launch_domain", "takes"],
    ),
    // Read off the input before deciding: labels, life cycles, the time; generated snapshots.
    ("facts", &["labels", "lifecycle", "time_facts", "synthetic"]),
    // The indexed working state of a cycle; snapshot fingerprints for re-plans.
    ("working state", &["index", "prints"]),
    // Over the working state: quota, placement on existing nodes, caches a re-plan carries.
    ("quota and placement", &["quota", "placement", "carry"]),
    // The launch search: new machines under pool limits.
    ("provisioning", &["provisioning"]),
    // A launch weighed against a hole in an idle node.
    ("holes", &["hole"]),
    // Messages for waiting gangs, launches and idle gangs.
    ("reasons", &["reasons"]),
    // What the cycle decided so far; idle verdicts.
    ("decisions", &["decided", "idle", "warm"]),
    // One gang's try and its commit; steps that decide without a try.
    (
        "admission",
        &[
            "admission",
            "scale_to_zero",
            "consolidation",
            "capacity_end",
        ],
    ),
    // Built on tries: fair-share order, preemption, taking earlier tries over.
    ("tries", &["order", "preemption", "replay"]),
    // Ready nodes handed to the earlier of two provisioning gangs (queue order).
    ("handover", &["handover"]),
    // A provisioning gang started on room freed on Ready nodes, its nodes in
    // flight handed over.
    ("freed room", &["freed_room"]),
    // One planning cycle, every step in order.
    ("cycle", &["cycle"]),
    // What drivers call: re-planning, quota usage, the reference driver.
    ("drivers", &["incremental", "usage", "apply"]),
];

#[test]
fn planner_modules_import_down_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("planner/src");
    let edges = layers::edges(&root, "crate");
    let found = layers::violations(&edges, PLANNER_LAYERS);
    assert!(
        found.is_empty(),
        "planner modules must import down PLANNER_LAYERS; {} do not:\n{}",
        found.len(),
        found.join("\n")
    );
    let cycles = layers::cycles(&edges);
    assert!(
        cycles.is_empty(),
        "planner modules import in cycles: {cycles:?}"
    );
}
