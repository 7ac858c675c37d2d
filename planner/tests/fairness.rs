//! Multi-cycle fairness: two saturated queues share a fixed cluster in
//! proportion to their weights. Each cycle plans, applies the plan with the
//! reference driver, starts admitted gangs, finishes gangs whose run time
//! is over, and tops the queues up.

use std::collections::BTreeMap;

use muster_planner::apply::apply;
use muster_planner::fixtures::{self, node, pod_set, pool, queue};
use muster_planner::model::*;
use muster_planner::resources::Resources;
use muster_planner::snapshot::{Policy, Snapshot};
use muster_planner::synthetic::SplitMix64;
use muster_planner::{Dur, Time, plan};

fn gang(id: String, q: &str, arrival: i64, gpus: u32) -> Gang {
    fixtures::gang(id, q)
        .arrival(Time(arrival))
        .pod_set(pod_set("w", 1, Resources::new(1000, 1 << 30, gpus)))
        .build()
}

/// Runs the harness; returns GPU-seconds used per queue.
fn run(weights: &[(&str, f64)], steps: i64) -> BTreeMap<String, f64> {
    let nodes: Vec<Node> = (0..6)
        .map(|i| {
            node(format!("n{i}"))
                .pool("p")
                .provider(Provider::Sim)
                .zone("z")
                .capacity_type(CapacityType::OnDemand)
                .price(Price(32_000_000))
                .gpu_model(GpuModel::new("A100"))
                .gpu_memory_mib(40960)
                .allocatable(Resources::new(96_000, 1 << 40, 8))
                .do_not_disrupt(true)
                .build()
        })
        .collect();
    let mut s = Snapshot {
        queues: weights
            .iter()
            .map(|(n, w)| queue(*n).weight(*w).pool("p").build())
            .collect(),
        pools: vec![
            pool("p")
                .max_nodes(6)
                .consolidation(ConsolidationPolicy::WhenEmpty)
                .consolidate_after(Dur::hours(1000))
                .scale_to_zero_after(Dur::hours(1000))
                .max_disrupted_nodes(0)
                .max_disrupted_percent(0)
                .taints(Vec::new())
                .build(),
        ],
        offerings: Vec::new(),
        nodes,
        gangs: Vec::new(),
        gpu_utilization: Vec::new(),
        arrivals: Vec::new(),
    };
    let policy = Policy::default();
    let mut rng = SplitMix64::new(42);
    let mut ends: BTreeMap<GangId, i64> = BTreeMap::new();
    let mut used: BTreeMap<String, f64> = BTreeMap::new();
    let mut next_id = 0u64;
    let dt = 10;
    for step in 0..steps {
        let now = Time(step * dt);
        // Top up: every queue keeps 30 gangs waiting.
        for (q, _) in weights {
            let waiting = s
                .gangs
                .iter()
                .filter(|g| g.queue == *q && g.phase.pending())
                .count();
            for _ in waiting..30 {
                next_id += 1;
                // Equal sizes: with mixed sizes, small gangs of the
                // richer queue fill holes a blocked larger head cannot use
                // yet (measured 1.86 instead of 2.0 with 1–2 GPU gangs).
                let gpus = 2;
                s.gangs
                    .push(gang(format!("{q}/g{next_id:06}"), q, now.0, gpus));
            }
        }
        let p = plan(&s, &policy, now);
        apply(&mut s, &p, &policy, now);
        for g in &mut s.gangs {
            if g.phase == GangPhase::Admitted {
                g.phase = GangPhase::Running;
                g.started_at = Some(now);
                ends.insert(g.id.clone(), now.0 + 100 + rng.below(200) as i64);
            }
        }
        // Account usage over the next dt, then finish what is done.
        for g in &s.gangs {
            if g.phase == GangPhase::Running {
                *used.entry(g.queue.clone()).or_default() +=
                    g.total_requests().gpu_millis as f64 / 1000.0 * dt as f64;
            }
        }
        let end_t = now.0 + dt;
        s.gangs
            .retain(|g| ends.get(&g.id).is_none_or(|e| *e > end_t));
    }
    used
}

#[test]
fn equal_weights_share_equally() {
    let used = run(&[("a", 1.0), ("b", 1.0)], 2000);
    let (a, b) = (used["a"], used["b"]);
    assert!(a > 0.0 && b > 0.0);
    let diff = (a - b).abs() / a.max(b);
    assert!(diff <= 0.05, "a={a} b={b} differ by {:.1}%", diff * 100.0);
}

#[test]
fn weights_two_to_one() {
    let used = run(&[("a", 2.0), ("b", 1.0)], 2000);
    let ratio = used["a"] / used["b"];
    assert!(
        (ratio - 2.0).abs() / 2.0 <= 0.05,
        "ratio {ratio:.3}, want 2 ± 5%"
    );
}
