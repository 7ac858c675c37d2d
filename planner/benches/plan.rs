//! `cargo bench -p muster-planner`: a full plan of synthetic snapshots of
//! 1k, 10k, 50k and 100k pending pods (10 pods per gang, 5 pods per node,
//! 300 offerings).

use muster_planner::synthetic::{self, Params};
use muster_planner::{Policy, plan};

fn main() {
    divan::main();
}

#[divan::bench(args = [1_000, 10_000, 50_000, 100_000], sample_count = 10, sample_size = 1)]
fn full_plan(bencher: divan::Bencher, pods: u32) {
    let params = Params {
        pods,
        gangs: pods / 10,
        nodes: pods / 5,
        offerings: 300,
        seed: 1,
    };
    let snapshot = synthetic::generate(&params);
    let policy = Policy::default();
    bencher.bench(|| plan(divan::black_box(&snapshot), &policy, synthetic::NOW));
}
