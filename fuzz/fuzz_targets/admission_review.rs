#![no_main]
//! `cargo +nightly fuzz run admission_review`: see `tests/fuzz/entries.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| muster_fuzz::entries::admission_review(data));
