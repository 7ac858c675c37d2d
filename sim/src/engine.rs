//! The discrete-event loop: pops events in order, lets the world apply the
//! mechanics, hands the event to the policy, and stops when every job has
//! completed (or at the horizon).

use crate::events::Event;
use crate::policies::Policy;
use crate::world::World;

/// Runs `policy` on `world` to the end. `progress` is called now and then
/// with the fraction of the workload's submit span covered.
pub fn run(world: &mut World, policy: &mut dyn Policy, progress: &mut dyn FnMut(f64)) {
    let span = world
        .jobs
        .last()
        .map(|j| j.submit.0.max(1) as f64)
        .unwrap_or(1.0);
    policy.start(world);
    let mut steps: u64 = 0;
    while let Some((t, event)) = world.pop() {
        if t > world.horizon {
            world.now = world.horizon;
            break;
        }
        world.now = t;
        steps += 1;
        if steps % 65_536 == 0 {
            progress((t.0 as f64 / span).min(1.0));
        }
        let deliver = match event {
            Event::Arrival(j) => {
                world.arrive(j);
                true
            }
            Event::NodeRegistered(n) => world.node_registered(n),
            Event::NodeReady(n) => world.node_ready(n),
            Event::JobFinished { job, run } => world.finish(job, run),
            Event::Interrupt(n) => world.interrupt(n),
            Event::Sample => {
                world.sample();
                false
            }
            Event::Timer(_) => true,
        };
        if deliver {
            policy.on_event(world, event);
        }
        if world.all_done() {
            break;
        }
    }
    world.finalize();
    progress(1.0);
}
