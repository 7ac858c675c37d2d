//! The `muster` binary.

fn main() {}
