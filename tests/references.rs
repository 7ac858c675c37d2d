//! Drift checks of the references generated from the controller's code:
//! `docs/reference/metrics.md` from the metric descriptions in
//! `src/controller/base/metrics.rs`, `docs/reference/events.md` from the reasons
//! described in `src/controller/base/reasons.rs`. After changing either, regenerate
//! both with
//!
//! ```sh
//! MUSTER_BLESS=1 cargo test --features controller --test references
//! ```

use std::path::PathBuf;

/// Fails, naming the first stale line, when the committed file differs from
/// `want`; with `MUSTER_BLESS=1` writes `want` instead.
fn check_generated(relative: &str, want: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var("MUSTER_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, want).unwrap_or_else(|e| panic!("write {relative}: {e}"));
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
            "{relative} is stale from line {line}; regenerate with \
             MUSTER_BLESS=1 cargo test --features controller --test references"
        );
    }
}

#[test]
fn metrics_reference_is_current() {
    check_generated(
        "docs/reference/metrics.md",
        &muster::controller::base::metrics::reference_markdown(),
    );
}

#[test]
fn events_reference_is_current() {
    check_generated(
        "docs/reference/events.md",
        &muster::controller::base::reasons::reference_markdown(),
    );
}
