//! Drift check of `docs/reference/events.md` against the reasons described
//! in `src/controller/reasons.rs`. After changing a reason, regenerate it
//! with
//!
//! ```sh
//! MUSTER_BLESS=1 cargo test --features controller --test events_reference
//! ```

use std::path::PathBuf;

#[test]
fn events_reference_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/reference/events.md");
    let want = muster::controller::reasons::reference_markdown();
    if std::env::var("MUSTER_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &want).expect("write docs/reference/events.md");
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
            "docs/reference/events.md is stale from line {line}; regenerate with \
             MUSTER_BLESS=1 cargo test --features controller --test events_reference"
        );
    }
}
