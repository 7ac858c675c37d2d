#![no_main]
//! `cargo +nightly fuzz run offerings_csv`: see `tests/fuzz/entries.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| muster_fuzz::entries::offerings_csv(data));
