//! Same seed, same inputs → byte-identical `summary.json` (wall-clock
//! timings zeroed); another seed → a different one.

mod common;

use common::{SMALL, run, scenario};

#[test]
fn same_seed_same_summary() {
    let (_, _, a) = run(scenario(SMALL), None, 7);
    let (_, _, b) = run(scenario(SMALL), None, 7);
    let (ja, jb) = (a.to_json(), b.to_json());
    assert_eq!(ja, jb, "summary.json differs between identical runs");
    for p in a.policies.values() {
        assert_eq!(p.planner_ms_p50, 0.0);
        assert_eq!(p.wall_s, 0.0);
    }
    let (_, _, c) = run(scenario(SMALL), None, 8);
    assert_ne!(ja, c.to_json(), "another seed gives another run");
}

#[test]
fn summary_has_the_documented_shape() {
    let (_, _, s) = run(scenario(SMALL), None, 3);
    let v: serde_json::Value = serde_json::from_str(&s.to_json()).expect("json");
    assert!(v["lower_bound_usd"].as_f64().is_some_and(|x| x > 0.0));
    assert!(v["jobs_total"].as_u64().is_some_and(|x| x > 0));
    for name in ["muster", "default-ca", "kueue-karpenter"] {
        let p = &v["policies"][name];
        for key in [
            "cost_usd",
            "gpu_hours_allocated",
            "gpu_hours_busy",
            "idle_node_hours",
            "wait_p50_s",
            "wait_p95_s",
            "wait_p99_s",
            "partial_gang_gpu_hours",
            "fairness_jain",
            "planner_ms_p50",
            "planner_ms_p99",
        ] {
            assert!(
                p[key].is_f64() || p[key].is_u64(),
                "{name}.{key} = {}",
                p[key]
            );
        }
        for key in ["jobs_completed", "preemptions", "interruptions"] {
            assert!(p[key].is_u64(), "{name}.{key} = {}", p[key]);
        }
    }
}
