//! Properties of `plan` over random, valid-ish snapshots: no partial gang,
//! no node over capacity, pool limits and quotas kept, order of input lists
//! irrelevant, running gangs never split by consolidation, no panics.

use std::collections::{BTreeMap, BTreeSet};

use muster_planner::fixtures::{gang, gpu_quota, node, offering, pod_set, pool, queue};
use muster_planner::model::*;
use muster_planner::plan::{Plan, RemovalKind};
use muster_planner::resources::Resources;
use muster_planner::snapshot::{Policy, Snapshot};
use muster_planner::synthetic::SplitMix64;
use muster_planner::{Dur, Quantity, Time, plan};
use proptest::prelude::*;

const NOW: Time = Time(10_000);
const TYPES: &[(&str, &str, u32, u64, u64)] = &[
    ("big", "A100", 8, 96_000, 32_000_000),
    ("mid", "A10G", 4, 48_000, 5_600_000),
    ("small", "A10G", 1, 8_000, 1_000_000),
    ("cpu", "", 0, 32_000, 700_000),
];

fn pick<'a, T>(r: &mut SplitMix64, v: &'a [T]) -> &'a T {
    &v[r.below(v.len() as u64) as usize]
}

/// A valid-ish snapshot from a seed: gangs that hold capacity fit their
/// nodes; everything else is random.
fn build(seed: u64) -> Snapshot {
    let mut r = SplitMix64::new(seed);
    let zones = ["a", "b"];
    let nq = 1 + r.below(3) as usize;
    let cohort = r.percent(50);
    let queues: Vec<Queue> = (0..nq)
        .map(|i| {
            queue(format!("q{i}"))
                .cohort(cohort.then_some("c"))
                .weight(1.0 + r.below(3) as f64)
                .quotas(if r.percent(70) {
                    vec![
                        gpu_quota(r.below(24) as i64)
                            .borrowing_limit(
                                r.percent(40)
                                    .then(|| Quantity::from_units(r.below(8) as i64)),
                            )
                            .lending_limit(
                                r.percent(40)
                                    .then(|| Quantity::from_units(r.below(8) as i64)),
                            )
                            .build(),
                    ]
                } else {
                    Vec::new()
                })
                .preemption(if r.percent(50) {
                    PreemptionPolicy::LowerPriority
                } else {
                    PreemptionPolicy::Never
                })
                .reclaim(*pick(
                    &mut r,
                    &[
                        ReclaimPolicy::Never,
                        ReclaimPolicy::LowerPriority,
                        ReclaimPolicy::Any,
                    ],
                ))
                .pools(if r.percent(30) {
                    vec!["p0".into()]
                } else {
                    Vec::new()
                })
                .strategy(if r.percent(50) {
                    QueueingStrategy::StrictFifo
                } else {
                    QueueingStrategy::BestEffortFifo
                })
                .stopped(r.percent(5))
                .build()
        })
        .collect();
    let pools: Vec<Pool> = (0..1 + r.below(2))
        .map(|i| {
            pool(format!("p{i}"))
                .weight(r.below(3) as i32)
                .capacity_types(if r.percent(50) {
                    vec![CapacityType::Spot, CapacityType::OnDemand]
                } else {
                    Vec::new()
                })
                .max_gpus(r.percent(40).then(|| r.below(40)))
                .max_nodes(r.percent(40).then(|| r.below(8)))
                .max_price_per_hour(r.percent(20).then(|| Price(r.below(100) * 1_000_000)))
                .consolidation(if r.percent(50) {
                    ConsolidationPolicy::WhenEmpty
                } else {
                    ConsolidationPolicy::WhenUnderutilized
                })
                .consolidate_after(Dur(r.below(600)))
                .scale_to_zero_after(Dur(r.below(2000)))
                .max_disrupted_nodes(r.percent(50).then(|| r.below(3)))
                .max_disrupted_percent(r.below(101) as u32)
                .taints(Vec::new())
                .build()
        })
        .collect();
    let mut offerings = Vec::new();
    for _ in 0..2 + r.below(5) {
        let (t, m, g, c, p) = *pick(&mut r, TYPES);
        let ct = if r.percent(30) {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        };
        let zone = *pick(&mut r, &zones);
        if offerings
            .iter()
            .any(|o: &Offering| o.instance_type == t && o.zone == zone && o.capacity_type == ct)
        {
            continue;
        }
        offerings.push(
            offering(t, zone)
                .capacity_type(ct)
                .price(Price(if ct == CapacityType::Spot { p / 3 } else { p }))
                .gpu_model((!m.is_empty()).then(|| GpuModel::new(m)))
                .gpu_count(g)
                .gpu_memory_mib(24_000)
                .resources(Resources::new(c, 1 << 40, g))
                .available(r.percent(90))
                .unavailable_until(
                    r.percent(20)
                        .then(|| Time(NOW.0 + r.below(200) as i64 - 100)),
                )
                .interruption_rate_per_hour(if ct == CapacityType::Spot { 0.1 } else { 0.0 })
                .placement_groups(r.percent(50))
                .boot_secs(60)
                .build(),
        );
    }
    let mut nodes = Vec::new();
    let mut free: Vec<Resources> = Vec::new();
    for i in 0..r.below(7) {
        let (t, m, g, c, p) = *pick(&mut r, TYPES);
        let zone = *pick(&mut r, &zones);
        let phase = *pick(
            &mut r,
            &[
                NodePhase::Ready,
                NodePhase::Ready,
                NodePhase::Ready,
                NodePhase::Launched,
                NodePhase::Registered,
                NodePhase::Draining,
            ],
        );
        let alloc = Resources::new(c, 1 << 40, g);
        let mut pods = Vec::new();
        let mut f = alloc.clone();
        if r.percent(30) {
            let req = Resources::new(1000, 1 << 30, 0);
            f.saturating_sub(&req);
            pods.push(OtherPod {
                name: format!("o/{i}"),
                requests: req,
                daemon: r.percent(50),
                do_not_disrupt: r.percent(20),
            });
        }
        free.push(f);
        nodes.push(
            node(format!("n{i}"))
                .pool(if r.percent(85) {
                    Some(format!("p{}", r.below(pools.len() as u64)))
                } else {
                    None
                })
                .offering(OfferingKey {
                    provider: Provider::Sim,
                    zone: zone.into(),
                    instance_type: t.into(),
                    capacity_type: CapacityType::OnDemand,
                    reservation: None,
                })
                .provider(Provider::Sim)
                .zone(zone)
                .placement_group(r.percent(30).then_some("pg"))
                .capacity_type(CapacityType::OnDemand)
                .price(Price(p))
                .gpu_model((!m.is_empty()).then(|| GpuModel::new(m)))
                .gpu_memory_mib(24_000)
                .allocatable(alloc)
                .phase(phase)
                .pods(pods)
                .phase_since(Time(r.below(10_000) as i64))
                .empty_since(r.percent(50).then(|| Time(r.below(10_000) as i64)))
                .do_not_disrupt(r.percent(10))
                .build(),
        );
    }
    let mut gangs = Vec::new();
    for i in 0..r.below(9) {
        let q = format!("q{}", r.below(nq as u64 + 1)); // sometimes unknown
        let nsets = 1 + r.below(2) as usize;
        let mut sets = Vec::new();
        for s in 0..nsets {
            let count = 1 + r.below(4) as u32;
            let gpu = *pick(&mut r, &[0u64, 500, 1000, 2000, 4000, 8000]);
            let min_count = r.percent(20).then(|| 1 + r.below(u64::from(count)) as u32);
            let requests = Resources {
                cpu_millis: 1000 + r.below(4) * 1000,
                memory_bytes: 1 << 30,
                gpu_millis: gpu,
                extended: BTreeMap::new(),
            };
            sets.push(
                pod_set(format!("s{s}"), count, requests)
                    .min_count(min_count)
                    .gpu_models(if r.percent(20) {
                        vec![GpuModel::new("A10G")]
                    } else {
                        Vec::new()
                    })
                    .build(),
            );
        }
        let topology = *pick(
            &mut r,
            &[
                Topology::Any,
                Topology::Any,
                Topology::SameZone,
                Topology::SameNode,
                Topology::SamePlacementGroup,
            ],
        );
        let mut g = gang(format!("ns/g{i}"), q)
            .priority(r.below(3) as i32)
            .arrival(Time(r.below(1000) as i64))
            .pod_sets(sets)
            .topology(topology)
            .launch_attempts(r.below(3) as u32)
            .disruptible(r.percent(40))
            .build();
        // Try to make it hold capacity: first-fit on nodes.
        if r.percent(50) && !nodes.is_empty() {
            let mut trial = free.clone();
            let mut asg = Vec::new();
            let mut ok = true;
            for ps in &g.pod_sets {
                for k in 0..ps.count {
                    match (0..nodes.len()).find(|&n| {
                        nodes[n].phase != NodePhase::Draining && ps.requests.fits_in(&trial[n])
                    }) {
                        Some(n) => {
                            trial[n].saturating_sub(&ps.requests);
                            asg.push(Assignment {
                                pod_set: ps.name.clone(),
                                index: k,
                                node: nodes[n].name.clone(),
                            });
                        }
                        None => ok = false,
                    }
                }
            }
            if ok {
                free = trial;
                let inflight = asg.iter().any(|a| {
                    nodes
                        .iter()
                        .any(|n| n.name == a.node && n.phase.in_flight())
                });
                g.phase = if inflight {
                    GangPhase::Provisioning
                } else {
                    *pick(
                        &mut r,
                        &[
                            GangPhase::Running,
                            GangPhase::Admitted,
                            GangPhase::Provisioning,
                        ],
                    )
                };
                g.assignments = asg;
                g.started_at = Some(Time(r.below(10_000) as i64));
                g.admitted_at = g.started_at;
                if g.phase == GangPhase::Provisioning {
                    g.provisioning_deadline = Some(Time(NOW.0 + r.below(400) as i64 - 200));
                    let names: BTreeSet<String> =
                        g.assignments.iter().map(|a| a.node.clone()).collect();
                    for n in nodes.iter_mut().filter(|n| names.contains(&n.name)) {
                        if n.reserved_for.is_none() {
                            n.reserved_for = Some(g.id.clone());
                        }
                    }
                    if r.percent(30) {
                        // A node of the launch set failed and was deleted.
                        g.assignments.push(Assignment {
                            pod_set: g.pod_sets[0].name.clone(),
                            index: 99,
                            node: "gone".into(),
                        });
                    }
                }
            }
        } else if r.percent(20) {
            g.phase = GangPhase::Evicted;
            g.not_before = Some(Time(NOW.0 + r.below(200) as i64 - 100));
        }
        gangs.push(g);
    }
    Snapshot {
        queues,
        pools,
        offerings,
        nodes,
        gangs,
        gpu_utilization: Vec::new(),
        arrivals: Vec::new(),
    }
}

fn permuted(s: &Snapshot, k: usize) -> Snapshot {
    fn rot<T: Clone>(v: &[T], k: usize) -> Vec<T> {
        let mut v: Vec<T> = v.iter().rev().cloned().collect();
        if !v.is_empty() {
            let n = k % v.len();
            v.rotate_left(n);
        }
        v
    }
    let mut s = s.clone();
    s.queues = rot(&s.queues, k);
    s.pools = rot(&s.pools, k + 1);
    s.offerings = rot(&s.offerings, k + 2);
    s.nodes = rot(&s.nodes, k + 3);
    s.gangs = rot(&s.gangs, k + 4);
    for g in &mut s.gangs {
        g.assignments = rot(&g.assignments, k);
    }
    for n in &mut s.nodes {
        n.pods = rot(&n.pods, k);
    }
    s
}

/// Per node: requests of everything on it after the plan.
fn usage_after(s: &Snapshot, p: &Plan) -> BTreeMap<String, Resources> {
    let mut u: BTreeMap<String, Resources> = BTreeMap::new();
    for n in &s.nodes {
        u.insert(n.name.clone(), n.other_requests());
    }
    let decided: BTreeMap<&GangId, &Vec<Assignment>> = p
        .admissions
        .iter()
        .map(|a| (&a.gang, &a.assignments))
        .chain(p.launches.iter().map(|l| (&l.gang, &l.assignments)))
        .collect();
    let released: BTreeSet<&GangId> = p.releases.iter().map(|r| &r.gang).collect();
    for g in &s.gangs {
        let asg: &Vec<Assignment> = match decided.get(&g.id) {
            Some(a) => a,
            None if g.phase.holds_capacity() && !released.contains(&g.id) => &g.assignments,
            None => continue,
        };
        for a in asg {
            if let Some(ps) = g.pod_set(&a.pod_set) {
                u.entry(a.node.clone()).or_default().add(&ps.requests);
            }
        }
    }
    u
}

fn check(s: &Snapshot, p: &Plan) -> Result<(), TestCaseError> {
    // Each gang at most once across admissions, launches, waiting.
    let mut seen = BTreeSet::new();
    for g in p
        .admissions
        .iter()
        .map(|a| &a.gang)
        .chain(p.launches.iter().map(|l| &l.gang))
        .chain(p.waiting.iter().map(|w| &w.gang))
    {
        prop_assert!(seen.insert(g.clone()), "{g} decided twice");
    }
    // No partial gang.
    for (gid, asg) in p
        .admissions
        .iter()
        .map(|a| (&a.gang, &a.assignments))
        .chain(p.launches.iter().map(|l| (&l.gang, &l.assignments)))
    {
        let g = s
            .gangs
            .iter()
            .find(|g| &g.id == gid)
            .ok_or_else(|| TestCaseError::fail("unknown gang"))?;
        let full = g
            .pod_sets
            .iter()
            .all(|ps| asg.iter().filter(|a| a.pod_set == ps.name).count() == ps.count as usize);
        let min = g
            .pod_sets
            .iter()
            .all(|ps| asg.iter().filter(|a| a.pod_set == ps.name).count() == ps.min() as usize);
        prop_assert!(full || min, "partial gang {gid}: {asg:?}");
        let idx: BTreeSet<(&str, u32)> =
            asg.iter().map(|a| (a.pod_set.as_str(), a.index)).collect();
        prop_assert_eq!(idx.len(), asg.len(), "duplicate pod index in {}", gid);
    }
    // No node over capacity (existing nodes and new ones).
    let usage = usage_after(s, p);
    let before = usage_after(s, &Plan::default());
    for n in &s.nodes {
        let was_ok = before
            .get(&n.name)
            .is_none_or(|u| u.fits_in(&n.allocatable));
        if was_ok {
            prop_assert!(
                usage.get(&n.name).is_none_or(|u| u.fits_in(&n.allocatable)),
                "node {} over capacity",
                n.name
            );
        }
    }
    for l in &p.launches {
        for nn in &l.nodes {
            let o = s
                .offerings
                .iter()
                .find(|o| o.key() == nn.offering)
                .ok_or_else(|| TestCaseError::fail("unknown offering"))?;
            prop_assert!(
                usage.get(&nn.name).is_none_or(|u| u.fits_in(&o.resources)),
                "new node {} over capacity",
                nn.name
            );
            prop_assert!(o.usable_at(NOW), "unusable offering {}", nn.offering);
            prop_assert!(
                nn.name.len() <= 63
                    && nn
                        .name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            );
        }
    }
    // Pool limits, when the snapshot kept them.
    for pool in &s.pools {
        let existing: Vec<&Node> = s
            .nodes
            .iter()
            .filter(|n| {
                n.pool.as_deref() == Some(pool.name.as_str()) && n.phase != NodePhase::Terminating
            })
            .collect();
        let new: Vec<(u64, u64)> = p
            .launches
            .iter()
            .flat_map(|l| &l.nodes)
            .chain(p.removals.iter().filter_map(|r| match &r.kind {
                RemovalKind::Replace { with } => Some(with),
                _ => None,
            }))
            .filter(|n| n.pool == pool.name)
            .map(|n| {
                (
                    s.offerings
                        .iter()
                        .find(|o| o.key() == n.offering)
                        .map_or(0, |o| u64::from(o.gpu_count)),
                    n.price.0,
                )
            })
            .collect();
        let nodes0 = existing.len() as u64;
        let gpus0: u64 = existing.iter().map(|n| n.allocatable.gpus_ceil()).sum();
        let price0: u64 = existing.iter().map(|n| n.price.map_or(0, |p| p.0)).sum();
        let l = &pool.limits;
        if let Some(m) = l.max_nodes
            && nodes0 <= m
        {
            prop_assert!(nodes0 + new.len() as u64 <= m, "pool {} nodes", pool.name);
        }
        if let Some(m) = l.max_gpus
            && gpus0 <= m
        {
            prop_assert!(
                gpus0 + new.iter().map(|x| x.0).sum::<u64>() <= m,
                "pool {} gpus",
                pool.name
            );
        }
        if let Some(m) = l.max_price_per_hour
            && price0 <= m.0
        {
            prop_assert!(
                price0 + new.iter().map(|x| x.1).sum::<u64>() <= m.0,
                "pool {} price",
                pool.name
            );
        }
    }
    // GPU quota (+ borrowing) per queue and per cohort, when kept before.
    let gpu_of = |q: &str, plan: &Plan| -> u64 {
        let decided: BTreeMap<&GangId, &Vec<Assignment>> = plan
            .admissions
            .iter()
            .map(|a| (&a.gang, &a.assignments))
            .chain(plan.launches.iter().map(|l| (&l.gang, &l.assignments)))
            .collect();
        s.gangs
            .iter()
            .filter(|g| g.queue == q)
            .map(|g| {
                let asg = match decided.get(&g.id) {
                    Some(a) => Some(*a),
                    None if g.phase.holds_capacity() => Some(&g.assignments),
                    None => None,
                };
                match asg {
                    Some(a) if !a.is_empty() => a
                        .iter()
                        .filter_map(|x| g.pod_set(&x.pod_set))
                        .map(|ps| ps.requests.gpu_millis)
                        .sum(),
                    Some(_) => g.total_requests().gpu_millis,
                    None => 0,
                }
            })
            .sum()
    };
    let replanned: BTreeSet<&GangId> = p.releases.iter().map(|r| &r.gang).collect();
    let mut cohort_before = 0u64;
    let mut cohort_after = 0u64;
    let mut cohort_nominal = 0u64;
    for q in &s.queues {
        let Some(quota) = q.quotas.iter().find(|x| x.resource == QuotaResource::Gpu) else {
            continue;
        };
        let nominal = quota.nominal.millis() as u64;
        let (b, a) = (gpu_of(&q.name, &Plan::default()), gpu_of(&q.name, p));
        cohort_before += b;
        cohort_after += a;
        cohort_nominal += nominal;
        // Re-planned gangs keep their quota: skip queues with one.
        if s.gangs
            .iter()
            .any(|g| g.queue == q.name && replanned.contains(&g.id))
        {
            continue;
        }
        let limit = if q.cohort.is_some() {
            quota
                .borrowing_limit
                .map_or(u64::MAX, |bl| nominal + bl.millis() as u64)
        } else {
            nominal
        };
        if b <= limit {
            prop_assert!(a <= limit, "queue {} over quota: {} > {}", q.name, a, limit);
        }
    }
    let all_quota = s
        .queues
        .iter()
        .all(|q| q.quotas.iter().any(|x| x.resource == QuotaResource::Gpu));
    if all_quota
        && s.queues.iter().all(|q| q.cohort.is_some())
        && cohort_before <= cohort_nominal
        && replanned.is_empty()
    {
        prop_assert!(cohort_after <= cohort_nominal, "cohort over quota");
    }
    // A machine not Ready (not registered, or registered but not Ready)
    // although launched longer ago than its pool's provisioning timeout, or
    // held for a gang past its deadline, is never capacity to come for a
    // gang: no launch reserves or assigns it, no release hands it on
    // (released to no gang, it is cancelled).
    let given_up: BTreeSet<&str> = s
        .nodes
        .iter()
        .filter(|n| n.phase.in_flight())
        .filter(|n| {
            let timeout = s
                .pools
                .iter()
                .find(|p| n.pool.as_deref() == Some(p.name.as_str()))
                .and_then(|p| p.provisioning_timeout)
                .unwrap_or(Policy::default().provisioning_timeout);
            let owner_late = s.gangs.iter().any(|g| {
                n.reserved_for.as_ref() == Some(&g.id)
                    && g.phase == GangPhase::Provisioning
                    && g.provisioning_deadline.is_some_and(|d| NOW >= d)
            });
            n.pool.is_some() && (owner_late || NOW >= n.created_at + timeout)
        })
        .map(|n| n.name.as_str())
        .collect();
    for l in &p.launches {
        for name in l
            .reserve
            .iter()
            .chain(l.assignments.iter().map(|a| &a.node))
        {
            prop_assert!(
                !given_up.contains(name.as_str()),
                "{} takes {name}, which was not Ready in time",
                l.gang
            );
        }
    }
    for r in p.releases.iter().filter(|r| r.handed_to.is_some()) {
        for name in &r.nodes {
            prop_assert!(
                !given_up.contains(name.as_str()),
                "{name}, not Ready in time, handed from {} to another gang",
                r.gang
            );
        }
    }
    // Consolidation never touches a node hosting a running, non-disruptible gang.
    for r in &p.removals {
        for g in &s.gangs {
            if matches!(g.phase, GangPhase::Running | GangPhase::Admitted) && !g.disruptible {
                prop_assert!(
                    !g.assignments.iter().any(|a| a.node == r.node),
                    "removal of {} splits {}",
                    r.node,
                    g.id
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn plan_properties(seed in any::<u64>(), k in 0usize..7) {
        let s = build(seed);
        let policy = Policy { max_new_nodes_per_cycle: (seed % 3 == 0).then_some(3), ..Policy::default() };
        let p = plan(&s, &policy, NOW);
        check(&s, &p)?;
        let q = plan(&permuted(&s, k), &policy, NOW);
        prop_assert_eq!(&p, &q, "plan depends on input order");
    }
}
