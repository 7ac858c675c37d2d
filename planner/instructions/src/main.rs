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
//! `cycle=Q` does the same as the controller does it: a [`Replanner`] is
//! handed a new snapshot with the gang, one second later; counted are the
//! comparison of the snapshot with the last one's fingerprints and the plan
//! (`--toggle-collect='*measure_one_cycle*'`).
//!
//! It links mimalloc, the allocator of the `muster` binary, so the count is
//! that of a plan in the controller.

use muster_planner::plan::Plan;
use muster_planner::snapshot::Snapshot;
use muster_planner::synthetic::{self, Params};
use muster_planner::{Gang, Planner, Policy, Replanner, Time, plan};

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

/// The counted part of `cycle=Q`: the next cycle's snapshot, with one gang
/// more, planned a second later as the controller plans it.
#[inline(never)]
fn measure_one_cycle<'a>(
    replanner: &'a mut Replanner,
    snapshot: &Snapshot,
    policy: &Policy,
) -> &'a Plan {
    replanner.plan(std::hint::black_box(snapshot), policy, later())
}

/// The time of the cycle after the first.
fn later() -> Time {
    Time(synthetic::NOW.0 + 1)
}

/// What is counted, from the second argument.
enum Mode {
    /// One full plan of the snapshot (no second argument).
    Full,
    /// `arrive=Q`: a gang arrives in queue `team-Q`, a [`Planner`] plans.
    Arrive(u32),
    /// `cycle=Q`: the same, planned by a [`Replanner`] handed a new
    /// snapshot one second later, as the controller plans.
    Cycle(u32),
    /// `steady=Q`: the snapshot's plan is carried out first
    /// (`muster_planner::apply`), a [`Replanner`] plans the result; then a
    /// gang arrives in queue `team-Q` and it plans again.
    Steady(u32),
    /// `steady-full`: one full plan of the snapshot after its plan was
    /// carried out.
    SteadyFull,
}

impl Mode {
    fn parse(arg: Option<String>) -> Result<Mode, String> {
        let Some(a) = arg else {
            return Ok(Mode::Full);
        };
        if a == "steady-full" {
            return Ok(Mode::SteadyFull);
        }
        let (kind, q) = a.split_once('=').ok_or_else(|| a.clone())?;
        let q: u32 = q.parse().map_err(|_| a.clone())?;
        match kind {
            "arrive" => Ok(Mode::Arrive(q)),
            "cycle" => Ok(Mode::Cycle(q)),
            "steady" => Ok(Mode::Steady(q)),
            _ => Err(a),
        }
    }
}

/// The snapshot after its plan was carried out, one second later.
fn steady(snapshot: &Snapshot, policy: &Policy) -> Snapshot {
    let first = plan(snapshot, policy, synthetic::NOW);
    let mut s = snapshot.clone();
    muster_planner::apply::apply(&mut s, &first, policy, synthetic::NOW);
    s
}

/// Plans `next` with `replanner` (counted), checks it against a full plan
/// and prints how many tries were taken over.
fn counted_cycle(replanner: &mut Replanner, next: &Snapshot, policy: &Policy) -> Plan {
    let p = measure_one_cycle(replanner, next, policy).clone();
    if p != plan(next, policy, later()) {
        eprintln!("the re-plan differs from a full plan of the same snapshot");
        std::process::exit(1);
    }
    let s = replanner.stats();
    println!("tries taken over: {} of {}", s.reused, s.steps);
    p
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
    let mode = match Mode::parse(std::env::args().nth(2)) {
        Ok(m) => m,
        Err(a) => {
            eprintln!(
                "the second argument is arrive=Q, cycle=Q, steady=Q (a queue number) or steady-full, not {a:?}"
            );
            std::process::exit(2);
        }
    };
    let snapshot = synthetic::generate(&params);
    let policy = Policy::default();
    let p = match mode {
        Mode::Full => std::hint::black_box(measure_one_plan(&snapshot, &policy)),
        Mode::SteadyFull => {
            let s = steady(&snapshot, &policy);
            std::hint::black_box(measure_one_plan(&s, &policy))
        }
        Mode::Cycle(q) => {
            let mut replanner = Replanner::new();
            let _ = std::hint::black_box(replanner.plan(&snapshot, &policy, synthetic::NOW));
            let mut next = snapshot.clone();
            next.gangs.push(synthetic::arrival(&params, q));
            counted_cycle(&mut replanner, &next, &policy)
        }
        Mode::Steady(q) => {
            let s = steady(&snapshot, &policy);
            let mut replanner = Replanner::new();
            let _ = std::hint::black_box(replanner.plan(&s, &policy, synthetic::NOW));
            let mut next = s.clone();
            next.gangs.push(synthetic::arrival(&params, q));
            counted_cycle(&mut replanner, &next, &policy)
        }
        Mode::Arrive(q) => {
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
