//! One plan of a synthetic snapshot, for counting instructions under
//! callgrind: only [`measure_one_plan`] (or [`measure_one_replan`]) is
//! counted when callgrind runs with `--toggle-collect=*measure_one_plan*`
//! (`*measure_one_replan*`); building the snapshot is not.
//!
//! `planner/benches/instructions.sh` and `planner/tests/instructions.rs`
//! run it; by hand:
//!
//! ```sh
//! cargo build --release -p muster-planner-instructions
//! valgrind --tool=callgrind --toggle-collect='*measure_one_plan*' \
//!     target/release/plan-instructions pods=10000,gangs=1000,nodes=2000,offerings=300
//! # one gang arrives in queue team-3 after a plan of the same snapshot:
//! valgrind --tool=callgrind --toggle-collect='*measure_one_replan*' \
//!     target/release/plan-instructions pods=10000,gangs=1000,nodes=2000,offerings=300 arrive=3
//! ```
//!
//! With `arrive=Q`, a [`Planner`] plans the snapshot first (not counted);
//! then the gang of `synthetic::arrival` arrives in queue `team-Q` and the
//! planner plans again: that change and that plan are counted, and the
//! program checks that the plan equals a full plan of the same snapshot.
//!
//! It links mimalloc, the allocator of the `muster` binary, so the count is
//! that of a plan in the controller.

use muster_planner::plan::Plan;
use muster_planner::snapshot::Snapshot;
use muster_planner::synthetic::{self, Params};
use muster_planner::{Gang, Planner, Policy, plan};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The counted part: one full plan.
#[inline(never)]
fn measure_one_plan(snapshot: &Snapshot, policy: &Policy) -> Plan {
    plan(std::hint::black_box(snapshot), policy, synthetic::NOW)
}

/// The counted part of `arrive=Q`: one gang arrives, one plan.
#[inline(never)]
fn measure_one_replan(planner: &mut Planner, gang: Gang) -> &Plan {
    planner.upsert_gang(std::hint::black_box(gang));
    planner.plan()
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
    let arrive = match std::env::args().nth(2) {
        None => None,
        Some(a) => match a
            .strip_prefix("arrive=")
            .and_then(|q| q.parse::<u32>().ok())
        {
            Some(q) => Some(q),
            None => {
                eprintln!("the second argument is arrive=Q (a queue number), not {a:?}");
                std::process::exit(2);
            }
        },
    };
    let snapshot = synthetic::generate(&params);
    let policy = Policy::default();
    let p = match arrive {
        None => std::hint::black_box(measure_one_plan(&snapshot, &policy)),
        Some(q) => {
            let mut planner = Planner::new(snapshot, policy.clone(), synthetic::NOW);
            let _ = std::hint::black_box(planner.plan());
            let p = measure_one_replan(&mut planner, synthetic::arrival(&params, q)).clone();
            let full = plan(planner.snapshot(), &policy, synthetic::NOW);
            if p != full {
                eprintln!("the re-plan differs from a full plan of the same snapshot");
                std::process::exit(1);
            }
            let s = planner.stats();
            println!("tries taken over: {} of {}", s.reused, s.steps);
            p
        }
    };
    println!(
        "admissions={} launches={} waiting={} removals={}",
        p.admissions.len(),
        p.launches.len(),
        p.waiting.len(),
        p.removals.len()
    );
}
