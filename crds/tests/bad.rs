//! Bad manifests are rejected with a message that names the offending field.
//!
//! Data-driven: every `tests/bad/*.yaml` is one case. Its header comments hold the
//! expectations, one `# expect: <substring>` per error that must be reported (each names a
//! field path). A file with two documents is an update: the first is the stored object, the
//! second the new one (transition rules with `oldSelf`). Every case must also be accepted
//! when the defect is absent — that is checked by the good examples and by
//! `updates_without_changes_are_admitted` below. `MUSTER_SHOW_ERRORS=1` prints every error.

mod support;

use std::path::PathBuf;

use support::{admit, crate_dir, read_yaml_docs};

struct Case {
    file: PathBuf,
    expect: Vec<String>,
}

fn cases() -> Vec<Case> {
    let dir = crate_dir().join("tests/bad");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/bad exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("read case");
            let expect = text
                .lines()
                .filter_map(|l| l.strip_prefix("# expect: "))
                .map(str::to_owned)
                .collect();
            Case { file, expect }
        })
        .collect()
}

#[test]
fn bad_manifests_are_rejected_naming_the_field() {
    let cases = cases();
    assert!(cases.len() >= 30, "expected the full table of bad cases");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?");
        assert!(!case.expect.is_empty(), "{name}: no `# expect:` line");
        for expected in &case.expect {
            assert!(
                ["spec", "metadata.name", "matchExpressions"]
                    .iter()
                    .any(|f| expected.contains(f)),
                "{name}: expectation {expected:?} does not name a field path"
            );
        }
        let docs = read_yaml_docs(&case.file);
        let (old, new) = match docs.as_slice() {
            [new] => (None, new),
            [old, new] => (Some(old), new),
            _ => panic!("{name}: one or two documents expected"),
        };
        match admit(new, old) {
            Ok(_) => failures.push(format!("{name}: accepted, expected {:?}", case.expect)),
            Err(errors) => {
                if std::env::var_os("MUSTER_SHOW_ERRORS").is_some() {
                    eprintln!("{name}:\n    {}", errors.join("\n    "));
                }
                for expected in &case.expect {
                    if !errors.iter().any(|e| e.contains(expected.as_str())) {
                        failures.push(format!(
                            "{name}: no error contains {expected:?}; got:\n    {}",
                            errors.join("\n    ")
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn updates_without_changes_are_admitted() {
    // The stored object of every update case, updated to itself, passes the transition
    // rules: they reject changes, not objects.
    for case in cases() {
        let docs = read_yaml_docs(&case.file);
        if let [old, _] = docs.as_slice() {
            admit(old, Some(old)).unwrap_or_else(|e| {
                panic!("{}: unchanged update rejected: {e:?}", case.file.display())
            });
        }
    }
}
