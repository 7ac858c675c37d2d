//! With `MUSTER_PY_VALIDATE=1` (set by `.ci/run`), the generated CRD objects
//! (`apiextensions.k8s.io/v1` `CustomResourceDefinition`) and the example Job are validated
//! against the Kubernetes 1.30 OpenAPI schema by the PyPI tool `kubernetes-validate`
//! (`pip install kubernetes-validate`), run as `python3 -m kubernetes_validate --strict`
//! (`MUSTER_PYTHON` overrides the interpreter). Without the variable the test passes with a
//! note, so a plain `cargo test` needs no Python.

mod support;

use muster_crds::Kind;
use support::repo_dir;

#[test]
fn python_kubernetes_validate_accepts_crds() {
    if std::env::var("MUSTER_PY_VALIDATE").ok().as_deref() != Some("1") {
        eprintln!("skipped: set MUSTER_PY_VALIDATE=1 (needs `pip install kubernetes-validate`)");
        return;
    }
    let mut files: Vec<String> = Kind::ALL
        .into_iter()
        .map(|k| format!("crds/yaml/{}", k.file_name()))
        .collect();
    files.push("docs/examples/job-labelled.yaml".into());
    // `python3 -m kubernetes_validate` rather than the console script, which may not be on
    // PATH; MUSTER_PYTHON picks another interpreter.
    let python = std::env::var("MUSTER_PYTHON").unwrap_or_else(|_| "python3".into());
    let output = std::process::Command::new(&python)
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "--kubernetes-version",
            "1.30.0",
        ])
        .args(&files)
        .current_dir(repo_dir())
        .output()
        .unwrap_or_else(|e| panic!("run {python}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "kubernetes-validate failed:\n{text}"
    );
    for file in &files {
        assert!(
            text.lines()
                .any(|l| l.contains(file.as_str()) && l.contains("passed")),
            "{file} not validated:\n{text}"
        );
    }
}
