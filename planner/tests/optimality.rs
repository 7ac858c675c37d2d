//! The provisioning cost equals a brute-force optimum on small instances
//! (≤ 6 pods, ≤ 5 offerings): every way of putting the pods on machines
//! bought from the offerings is tried.

use muster_planner::fixtures::{gang, offering, pod_set, pool, queue};
use muster_planner::model::*;
use muster_planner::resources::Resources;
use muster_planner::snapshot::{Policy, Snapshot};
use muster_planner::{Time, plan};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Inst {
    /// (cpu millis, gpus) per offering, price micro-dollars.
    offerings: Vec<(u64, u32, u64)>,
    /// (cpu millis, gpu millis) per pod.
    pods: Vec<(u64, u64)>,
}

fn inst() -> impl Strategy<Value = Inst> {
    let off = (1u64..=8, 0u32..=8, 1u64..=40).prop_map(|(c, g, p)| (c * 2000, g, p * 250_000));
    let shape = (
        1u64..=8,
        prop_oneof![Just(0u64), Just(500), Just(1000), Just(2000), Just(4000)],
    );
    (
        prop::collection::vec(off, 1..=5),
        prop::collection::vec(shape, 1..=2),
        prop::collection::vec(1u32..=3, 2),
    )
        .prop_map(|(offerings, shapes, counts)| {
            let mut pods = Vec::new();
            for (i, (c, g)) in shapes.iter().enumerate() {
                for _ in 0..counts[i] {
                    pods.push((*c * 1000, *g));
                }
            }
            pods.truncate(6);
            Inst { offerings, pods }
        })
}

fn brute(i: &Inst) -> Option<u64> {
    fn rec(
        i: &Inst,
        k: usize,
        bins: &mut Vec<(usize, u64, u64)>,
        cost: u64,
        best: &mut Option<u64>,
    ) {
        if best.is_some_and(|b| cost >= b) {
            return;
        }
        if k == i.pods.len() {
            *best = Some(cost);
            return;
        }
        let (c, g) = i.pods[k];
        for b in 0..bins.len() {
            let (t, uc, ug) = bins[b];
            let (oc, og, _) = i.offerings[t];
            if uc + c <= oc && ug + g <= u64::from(og) * 1000 {
                bins[b] = (t, uc + c, ug + g);
                rec(i, k + 1, bins, cost, best);
                bins[b] = (t, uc, ug);
            }
        }
        for (t, &(oc, og, p)) in i.offerings.iter().enumerate() {
            if c <= oc && g <= u64::from(og) * 1000 {
                bins.push((t, c, g));
                rec(i, k + 1, bins, cost + p, best);
                bins.pop();
            }
        }
    }
    let mut best = None;
    rec(i, 0, &mut Vec::new(), 0, &mut best);
    best
}

fn snapshot(i: &Inst) -> Snapshot {
    let offerings = i
        .offerings
        .iter()
        .enumerate()
        .map(|(k, &(c, g, p))| {
            offering(format!("t{k}"), "z")
                .price(Price(p))
                .gpu_model((g > 0).then(|| GpuModel::new("A100")))
                .gpu_count(g)
                .gpu_memory_mib(40960)
                .resources(Resources::new(c, 1 << 40, g))
                .build()
        })
        .collect();
    // Pods of equal shape form one pod set.
    let mut sets: Vec<PodSet> = Vec::new();
    for &(c, g) in &i.pods {
        let r = Resources {
            cpu_millis: c,
            memory_bytes: 1 << 20,
            gpu_millis: g,
            extended: Default::default(),
        };
        match sets.iter_mut().find(|s| s.requests == r) {
            Some(s) => s.count += 1,
            None => sets.push(pod_set(format!("s{}", sets.len()), 1, r).build()),
        }
    }
    Snapshot {
        queues: vec![queue("q").pool("p").build()],
        pools: vec![pool("p").taints(Vec::new()).build()],
        offerings,
        nodes: Vec::new(),
        gangs: vec![gang("ns/g", "q").pod_sets(sets).build()],
        gpu_utilization: Vec::new(),
        arrivals: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn provisioning_cost_is_optimal(i in inst()) {
        let p = plan(&snapshot(&i), &Policy::default(), Time(0));
        match brute(&i) {
            Some(best) => {
                prop_assert_eq!(p.launches.len(), 1, "{:?}", p.waiting);
                prop_assert_eq!(p.launches[0].price_per_hour, Price(best));
                prop_assert_eq!(p.launches[0].assignments.len(), i.pods.len());
            }
            None => {
                prop_assert!(p.launches.is_empty());
                prop_assert_eq!(p.waiting.len(), 1);
            }
        }
    }
}
