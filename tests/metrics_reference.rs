//! Drift check of `docs/reference/metrics.md` against the metric
//! descriptions in `src/controller/metrics.rs`. After changing a metric,
//! regenerate it with
//!
//! ```sh
//! MUSTER_BLESS=1 cargo test --features controller --test metrics_reference
//! ```

use std::path::PathBuf;

#[test]
fn metrics_reference_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/reference/metrics.md");
    let want = muster::controller::metrics::reference_markdown();
    if std::env::var("MUSTER_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &want).expect("write docs/reference/metrics.md");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let line = want
            .lines()
            .zip(have.lines().chain(std::iter::repeat("")))
            .position(|(w, h)| w != h)
            .map_or(want.lines().count().min(have.lines().count()) + 1, |i| {
                i + 1
            });
        panic!(
            "docs/reference/metrics.md is stale from line {line}; regenerate with \
             MUSTER_BLESS=1 cargo test --features controller --test metrics_reference"
        );
    }
}
