//! One plan of a synthetic snapshot, for counting instructions under
//! callgrind: only [`measure_one_plan`] is counted when callgrind runs with
//! `--toggle-collect=*measure_one_plan*` (building the snapshot is not).
//!
//! `planner/benches/instructions.sh` and `planner/tests/instructions.rs`
//! run it; by hand:
//!
//! ```sh
//! cargo build --release -p muster-planner-instructions
//! valgrind --tool=callgrind --toggle-collect='*measure_one_plan*' \
//!     target/release/plan-instructions pods=10000,gangs=1000,nodes=2000,offerings=300
//! ```
//!
//! It links mimalloc, the allocator of the `muster` binary, so the count is
//! that of a plan in the controller.

use muster_planner::plan::Plan;
use muster_planner::snapshot::Snapshot;
use muster_planner::synthetic::{self, Params};
use muster_planner::{Policy, plan};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The counted part: one full plan.
#[inline(never)]
fn measure_one_plan(snapshot: &Snapshot, policy: &Policy) -> Plan {
    plan(std::hint::black_box(snapshot), policy, synthetic::NOW)
}

fn main() {
    let spec = std::env::args().nth(1).unwrap_or_default();
    let params = match Params::parse(&spec) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let snapshot = synthetic::generate(&params);
    let policy = Policy::default();
    let p = std::hint::black_box(measure_one_plan(&snapshot, &policy));
    println!(
        "admissions={} launches={} waiting={} removals={}",
        p.admissions.len(),
        p.launches.len(),
        p.waiting.len(),
        p.removals.len()
    );
}
