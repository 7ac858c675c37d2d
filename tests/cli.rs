//! The `muster` binary as users call it: output and exit codes.

use std::process::Command;

fn muster(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("muster runs")
}

#[test]
fn crds_prints_the_committed_yaml() {
    let out = muster(&["crds"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/yaml");
    let mut kinds = 0;
    for file in ["nodeclass", "gpupool", "gpuqueue", "gang", "poolnode"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}.yaml")).expect("committed CRD");
        let body = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            printed.contains(body.trim()),
            "`muster crds` differs from crds/yaml/{file}.yaml"
        );
        kinds += 1;
    }
    assert_eq!(printed.matches("kind: CustomResourceDefinition").count(), kinds);
}

#[test]
fn crds_rejects_an_unknown_kind() {
    let out = muster(&["crds", "--kind", "Widget"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--kind \"Widget\": unknown kind"), "{err}");
    let out = muster(&["crds", "--kind", "gpupools"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("name: gpupools.muster.dev"));
}
