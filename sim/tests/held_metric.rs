//! "Ready nodes held for gangs not started" (`reserved_idle_gpu_hours`)
//! counts an empty Ready node from the moment it is held for a gang, not
//! from the moment it became empty: a warm node taken by a gang was idle,
//! not held, before.

use muster_planner::{Dur, Resources, Time};
use muster_provider_sim::cloud::SimCloud;
use muster_provider_sim::{CloudBehaviour, builtin_offerings};
use muster_sim::binder::Constraint;
use muster_sim::workload::Job;
use muster_sim::world::World;

#[test]
fn held_time_starts_when_the_node_is_held() {
    let offering = builtin_offerings()
        .into_iter()
        .find(|o| o.gpu_count == 1)
        .expect("a 1-GPU offering");
    let key = offering.key();
    let cloud = SimCloud::new(vec![offering], &CloudBehaviour::default(), 1).expect("cloud");
    let job = Job {
        id: 0,
        submit: Time(0),
        duration: Dur::mins(10),
        gpus: 1.0,
        workers: 1,
        pod_gpu_millis: 1000,
        team: "ml".into(),
        gpu_model: None,
        priority: 0,
        checkpoint: None,
        line: 0,
    };
    let mut world = World::new(
        vec![job],
        vec![Resources::new(1000, 1 << 30, 1)],
        vec![Constraint::default()],
        cloud,
        Dur::mins(1),
    );
    let node = world
        .launch("n".into(), &key, "gpu", None)
        .expect("launched");
    world.now = Time(100);
    assert!(world.node_ready(node));
    // empty and held for nothing for 300 s, then held for the job for 100 s
    world.now = Time(400);
    world.reserve(node, Some(0));
    world.now = Time(500);
    world.reserve(node, None);
    assert_eq!(world.rec.reserved_idle_gpu_secs, 100.0);
    assert_eq!(world.rec.idle_node_secs, 400.0);
    // setting the holder it has changes nothing
    world.now = Time(600);
    world.reserve(node, None);
    assert_eq!(world.rec.idle_node_secs, 400.0);
}
