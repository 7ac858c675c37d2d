//! Drift check: the committed generated files equal what the Rust types produce.
//!
//! Files checked: `crds/yaml/<kind>.yaml` (one CRD per kind) and `docs/reference/crds.md`.
//! After changing a type in `crds/src/`, regenerate them with
//!
//! ```sh
//! MUSTER_BLESS=1 cargo test -p muster-crds --test drift
//! ```
//!
//! and commit the result. Without `MUSTER_BLESS=1` the test only compares and fails with
//! the first differing line of each stale file.

mod support;

use std::path::PathBuf;

use muster_crds::{Kind, reference_markdown, render};
use support::{crate_dir, repo_dir};

fn generated_files() -> Vec<(PathBuf, String)> {
    let mut files: Vec<(PathBuf, String)> = Kind::ALL
        .into_iter()
        .map(|k| (crate_dir().join("yaml").join(k.file_name()), render(k)))
        .collect();
    files.push((
        repo_dir().join("docs/reference/crds.md"),
        reference_markdown(),
    ));
    files
}

/// The first line where `want` and `have` differ, for the failure message.
fn first_difference(want: &str, have: &str) -> String {
    let (mut w, mut h) = (want.lines(), have.lines());
    for line in 1.. {
        match (w.next(), h.next()) {
            (None, None) => return "only line endings differ".into(),
            (a, b) if a != b => {
                return format!(
                    "line {line}:\n    generated: {}\n    committed: {}",
                    a.unwrap_or("<end of file>"),
                    b.unwrap_or("<end of file>")
                );
            }
            _ => {}
        }
    }
    unreachable!("the loop returns")
}

#[test]
fn generated_files_are_up_to_date() {
    let bless = std::env::var("MUSTER_BLESS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for (path, want) in generated_files() {
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            continue;
        }
        if bless {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).expect("create folder");
            }
            std::fs::write(&path, &want).expect("write generated file");
            eprintln!("blessed {}", path.display());
        } else {
            stale.push(format!(
                "{} is stale ({})",
                path.display(),
                first_difference(&want, &have)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "\n{}\n\nRegenerate with: MUSTER_BLESS=1 cargo test -p muster-crds --test drift",
        stale.join("\n")
    );
}

#[test]
fn render_all_concatenates_every_kind_in_order() {
    let all = muster_crds::render_all();
    let mut at = 0;
    for kind in Kind::ALL {
        let marker = format!("  name: {}.muster.dev\n", kind.plural());
        let found = all[at..]
            .find(&marker)
            .unwrap_or_else(|| panic!("{kind} missing or out of order"));
        at += found + marker.len();
    }
    assert_eq!(all.matches("\n---\n").count() + 1, Kind::ALL.len() + 1);
    assert_eq!(muster_crds::crds().len(), Kind::ALL.len());
    assert_eq!(all, muster_crds::render_all(), "deterministic");
}
