//! Temporary diagnostics.
use muster_sim::policies::muster::{MusterConfig, MusterPolicy};
use muster_sim::world::World;
use muster_sim::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cfg = RunConfig { scenario: Scenario::default(), trace: Some(args[1].clone().into()), offerings: args.get(2).map(|s| s.into()), seed: Some(1), policies: vec![] };
    let p = prepare(&cfg).unwrap();
    let mut world = World::new(p.jobs.clone(), p.requests.clone(), p.constraints.clone(), p.cloud.clone(), p.sample_every);
    let sc = &p.scenario;
    let mut pol = MusterPolicy::new(MusterConfig { policy: sc.policy.clone(), queues: p.queues.clone(), pools: p.pools.clone(), team_queue: p.team_queue.clone(), debounce: sc.driver.debounce, tick: sc.driver.tick, expected_durations: false }, &world);
    engine::run(&mut world, &mut pol, &mut |_| {});
    let snap = pol.snapshot();
    for g in &snap.gangs { println!("{:?} {:?} {:?} {:?}", g.id, g.phase, g.assignments.len(), g.pod_sets[0]); }
    let plan = muster_planner::plan(snap, &sc.policy, world.now);
    println!("{}", serde_yaml::to_string(&plan).unwrap());
    for n in &snap.nodes { println!("node {} {:?} {:?} {:?}", n.name, n.phase, n.reserved_for, n.offering); }
}
