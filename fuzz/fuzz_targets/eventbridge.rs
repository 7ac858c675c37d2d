#![no_main]
//! `cargo +nightly fuzz run eventbridge`: see `tests/fuzz/entries.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| muster_fuzz::entries::eventbridge(data));
