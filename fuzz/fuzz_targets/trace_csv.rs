#![no_main]
//! `cargo +nightly fuzz run trace_csv`: see `tests/fuzz/entries.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| muster_fuzz::entries::trace_csv(data));
