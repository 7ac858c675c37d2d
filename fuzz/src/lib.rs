//! The fuzz entry points of `tests/fuzz/entries.rs`, one per target, for the
//! libFuzzer binaries in `fuzz_targets/`.

#[path = "../../tests/fuzz/entries.rs"]
pub mod entries;
