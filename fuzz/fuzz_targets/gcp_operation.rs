#![no_main]
//! `cargo +nightly fuzz run gcp_operation`: see `tests/fuzz/entries.rs`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| muster_fuzz::entries::gcp_operation(data));
