//! Times the planner on a synthetic snapshot:
//! `cargo run --release -p muster-planner --example plan_synthetic -- pods=10000,gangs=1000,nodes=2000,offerings=300 20`.

use std::time::Instant;

use muster_planner::synthetic::{self, Params};
use muster_planner::{Policy, plan};

fn main() {
    let mut args = std::env::args().skip(1);
    let spec = args.next().unwrap_or_default();
    let repeat: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let params = match Params::parse(&spec) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let snap = synthetic::generate(&params);
    let policy = Policy::default();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        last = Some(plan(&snap, &policy, synthetic::NOW));
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    if let Some(p) = last {
        println!(
            "admissions={} launches={} waiting={} removals={}",
            p.admissions.len(),
            p.launches.len(),
            p.waiting.len(),
            p.removals.len()
        );
    }
    println!(
        "plan_ms p50={:.1} p99={:.1} pods={}",
        times[times.len() / 2],
        times[(times.len() - 1) * 99 / 100],
        params.pods
    );
}
