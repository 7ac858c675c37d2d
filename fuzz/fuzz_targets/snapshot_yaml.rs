#![no_main]
//! `cargo +nightly fuzz run snapshot_yaml`: see `tests/fuzz/entries.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| muster_fuzz::entries::snapshot_yaml(data));
