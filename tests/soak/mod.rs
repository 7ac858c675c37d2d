//! The crash soak's parts: the world (a cloud, API server, emulated
//! kubelet) over each cloud (`gcp`, `sim`, `aws`, and `karpenter`: the
//! delegate mode), the controller
//! processes, the kill windows, the workload and its checks, and the
//! summary.

#![allow(dead_code)]

#[cfg(feature = "aws-test-support")]
pub mod aws;
pub mod controllers;
pub mod gcp;
#[cfg(feature = "aws-test-support")]
pub mod karpenter;
pub mod ledger;
pub mod never_ready;
pub mod sim;
pub mod summary;
pub mod trigger;
pub mod workload;
pub mod world;

/// A small seeded generator (SplitMix64): the soak's draws are reproducible
/// from its seed.
pub struct Rng(u64);

impl Rng {
    /// From a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform duration in `[lo, hi)` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> std::time::Duration {
        std::time::Duration::from_millis(lo + self.below(hi.saturating_sub(lo).max(1)))
    }

    /// One of `items` by weight.
    pub fn weighted<T: Copy>(&mut self, items: &[(T, u32)]) -> T {
        let total: u64 = items.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut x = self.below(total);
        for (t, w) in items {
            if x < u64::from(*w) {
                return *t;
            }
            x -= u64::from(*w);
        }
        items[items.len() - 1].0
    }
}
