//! A [`Planner`] that plans again from changes gives exactly the plan of a
//! full [`plan`] of the same snapshot, policy and time — over random
//! sequences of changes (gangs arriving, leaving, changing priority or
//! phase, being evicted with a backoff; nodes cordoned, removed, reserved;
//! offerings made unavailable; time advancing), applied one by one or as a
//! whole new snapshot — and it does take earlier tries over when only a
//! pending gang arrives.

use muster_planner::model::*;
use muster_planner::snapshot::Policy;
use muster_planner::synthetic::{self, Params, SplitMix64};
use muster_planner::{Planner, Replanner, Time, plan};
use proptest::prelude::*;

fn small(seed: u64, r: &mut SplitMix64) -> Params {
    let gangs = 4 + r.below(30) as u32;
    Params {
        pods: gangs * (1 + r.below(6) as u32),
        gangs,
        nodes: 2 + r.below(25) as u32,
        offerings: 40 + r.below(80) as u32,
        seed,
    }
}

/// One random change, applied to the planner (one by one, or as a whole
/// new snapshot when `whole`).
fn change(planner: &mut Planner, r: &mut SplitMix64, p: &Params, step: u32, whole: bool) {
    let mut s = planner.snapshot().clone();
    let mut now = planner.now();
    let pick = |r: &mut SplitMix64, n: usize| r.below(n as u64) as usize;
    match r.below(12) {
        // A gang arrives (the most common change).
        0..=3 => {
            let mut g = synthetic::arrival(p, r.below(8) as u32);
            g.id = GangId(format!("ns-new/job-{step}"));
            g.priority = r.below(4) as i32;
            g.arrival = Time(now.0 - r.below(3) as i64 * 500_000);
            s.gangs.push(g);
        }
        // A gang leaves (finished or deleted).
        4 if !s.gangs.is_empty() => {
            let i = pick(r, s.gangs.len());
            s.gangs.remove(i);
        }
        // A gang's priority changes.
        5 if !s.gangs.is_empty() => {
            let i = pick(r, s.gangs.len());
            s.gangs[i].priority = r.below(5) as i32;
        }
        // A gang is evicted with a backoff.
        6 if !s.gangs.is_empty() => {
            let i = pick(r, s.gangs.len());
            s.gangs[i].phase = GangPhase::Evicted;
            s.gangs[i].evictions += 1;
            s.gangs[i].not_before = Some(Time(now.0 + 1 + r.below(120) as i64));
        }
        // A gang starts on a node (holds capacity).
        7 if !s.gangs.is_empty() && !s.nodes.is_empty() => {
            let i = pick(r, s.gangs.len());
            let node = s.nodes[pick(r, s.nodes.len())].name.clone();
            let g = &mut s.gangs[i];
            g.phase = GangPhase::Running;
            g.assignments = g
                .pod_sets
                .iter()
                .flat_map(|ps| {
                    let node = node.clone();
                    (0..ps.count).map(move |index| Assignment {
                        pod_set: ps.name.clone(),
                        index,
                        node: node.clone(),
                    })
                })
                .collect();
        }
        // A node is cordoned, removed, or reserved for a gang.
        8 if !s.nodes.is_empty() => {
            let i = pick(r, s.nodes.len());
            match r.below(3) {
                0 => s.nodes[i].unschedulable = !s.nodes[i].unschedulable,
                1 => {
                    s.nodes.remove(i);
                }
                _ => {
                    s.nodes[i].reserved_for = s
                        .gangs
                        .get(pick(r, s.gangs.len().max(1)))
                        .map(|g| g.id.clone());
                }
            }
        }
        // An offering runs out of capacity for a while.
        9 if !s.offerings.is_empty() => {
            let i = pick(r, s.offerings.len());
            s.offerings[i].unavailable_until = Some(Time(now.0 + 1 + r.below(200) as i64));
        }
        // Time passes (backoffs and unavailability may end).
        10 => now = Time(now.0 + r.below(150) as i64),
        // Nothing at all.
        _ => {}
    }
    planner.set_now(now);
    if whole {
        planner.replace(s);
        return;
    }
    // The same change, applied item by item.
    let before = planner.snapshot().clone();
    for g in &before.gangs {
        if !s.gangs.iter().any(|x| x.id == g.id) {
            planner.remove_gang(&g.id);
        }
    }
    for g in &s.gangs {
        planner.upsert_gang(g.clone());
    }
    for n in &before.nodes {
        if !s.nodes.iter().any(|x| x.name == n.name) {
            planner.remove_node(&n.name);
        }
    }
    for n in &s.nodes {
        planner.upsert_node(n.clone());
    }
    if s.offerings != before.offerings {
        planner.replace(s);
    }
}

/// One random change of a gang's pod-set constraints (GPU models, node
/// selector, GPU memory, required node affinity), its id kept: what a re-plan carries of a gang
/// (its pod-set signatures, and through them eligibility, machine kinds and
/// covers) must not outlive such a change.
fn constrain(planner: &mut Planner, r: &mut SplitMix64, whole: bool) {
    let mut s = planner.snapshot().clone();
    if s.gangs.is_empty() {
        return;
    }
    let models: Vec<GpuModel> = s
        .offerings
        .iter()
        .filter_map(|o| o.gpu_model.clone())
        .collect();
    let zones: Vec<String> = s.nodes.iter().map(|n| n.zone.clone()).collect();
    let gi = r.below(s.gangs.len() as u64) as usize;
    let g = &mut s.gangs[gi];
    if g.pod_sets.is_empty() {
        return;
    }
    let si = r.below(g.pod_sets.len() as u64) as usize;
    let ps = &mut g.pod_sets[si];
    match r.below(4) {
        0 => {
            ps.gpu_models = match models.get(r.below(models.len() as u64 + 1) as usize) {
                Some(m) => vec![m.clone()],
                None => Vec::new(),
            };
        }
        1 => match zones.get(r.below(zones.len() as u64 + 1) as usize) {
            Some(z) => {
                ps.node_selector
                    .insert("topology.kubernetes.io/zone".into(), z.clone());
            }
            None => ps.node_selector.clear(),
        },
        2 => ps.min_gpu_memory_mib = [0, 24_000, 80_000][r.below(3) as usize],
        _ => {
            ps.affinity = zones
                .get(r.below(zones.len() as u64 + 1) as usize)
                .map(|z| NodeAffinity {
                    required_node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: "topology.kubernetes.io/zone".into(),
                            operator: NodeSelectorOperator::NotIn,
                            values: vec![z.clone()],
                        }],
                        match_fields: Vec::new(),
                    }],
                })
        }
    }
    let g = g.clone();
    if whole {
        planner.replace(s);
    } else {
        planner.upsert_gang(g);
    }
}

/// Half the time, gangs pass idle nodes over for machines of their own
/// (`Policy::own_machine_below_percent` 50): a launch chosen so must not be
/// taken over as if the gang had had no room. (A third of the runs also
/// pass bigger machines over, `Policy::size_matched_placement`.)
fn own_machine(r: &mut SplitMix64) -> u32 {
    if r.percent(50) { 50 } else { 0 }
}

/// Like [`check_sequence`], with every other change one of [`constrain`].
fn check_constraints(seed: u64, steps: u32, whole: bool) -> Result<(), TestCaseError> {
    let mut r = SplitMix64::new(seed);
    let p = small(seed, &mut r);
    let policy = Policy {
        own_machine_below_percent: own_machine(&mut r),
        size_matched_placement: r.percent(30),
        ..Policy::default()
    };
    let mut planner = Planner::new(synthetic::generate(&p), policy.clone(), synthetic::NOW);
    let mut replanner = Replanner::with_min_tries(0);
    for step in 0..steps {
        let got = planner.plan().clone();
        let want = plan(planner.snapshot(), &policy, planner.now());
        prop_assert_eq!(&got, &want, "re-plan differs at step {}", step);
        let again = replanner.plan(planner.snapshot(), &policy, planner.now());
        prop_assert_eq!(again, &want, "Replanner's plan differs at step {}", step);
        if r.percent(50) {
            constrain(&mut planner, &mut r, whole);
        } else {
            change(&mut planner, &mut r, &p, step, whole);
        }
    }
    Ok(())
}

fn check_sequence(seed: u64, steps: u32, whole: bool) -> Result<(), TestCaseError> {
    let mut r = SplitMix64::new(seed);
    let p = small(seed, &mut r);
    let policy = Policy {
        max_new_nodes_per_cycle: r.percent(20).then_some(3),
        own_machine_below_percent: own_machine(&mut r),
        size_matched_placement: r.percent(30),
        ..Policy::default()
    };
    let mut s = synthetic::generate(&p);
    // Tight pool limits half the time, so launches meet them.
    if r.percent(50) {
        for pool in &mut s.pools {
            pool.limits.max_nodes = Some(u64::from(p.nodes) / 3 + r.below(4));
            pool.limits.max_gpus = r.percent(50).then(|| 8 + r.below(40));
        }
    }
    // Capacity reservations a third of the time: copies of some offerings
    // at price zero with a few machines each, half of them Capacity Blocks
    // that end within hours, in pools that may buy them.
    if r.percent(30) {
        let mut extra = Vec::new();
        for (i, o) in s.offerings.iter().step_by(5).enumerate() {
            let block = i % 2 == 1;
            let mut o = o.clone();
            o.capacity_type = CapacityType::Reserved;
            o.price = Some(Price(0));
            o.interruption_rate_per_hour = 0.0;
            o.reservation = Some(CapacityReservation {
                id: format!("cr-{i}"),
                kind: if block {
                    ReservationKind::CapacityBlock
                } else {
                    ReservationKind::OnDemand
                },
                available: 1 + r.below(3) as u32,
                starts_at: None,
                ends_at: block.then(|| Time(synthetic::NOW.0 + 1800 + r.below(4) as i64 * 3600)),
            });
            extra.push(o);
        }
        s.offerings.extend(extra);
        for pool in &mut s.pools {
            let types = &mut pool.requirements.capacity_types;
            if types.is_empty() {
                types.push(CapacityType::OnDemand);
            }
            types.push(CapacityType::Reserved);
        }
    }
    // Network layers on nodes and network topologies on gangs a third of
    // the time (two blocks of two racks each, some nodes unlabelled).
    if r.percent(30) {
        for n in &mut s.nodes {
            if r.percent(80) {
                let (b, k) = (r.below(2), r.below(2));
                n.network = vec![format!("b{b}"), format!("b{b}-r{k}")];
            }
        }
        for g in &mut s.gangs {
            if r.percent(40) {
                g.network = Some(NetworkTopology {
                    level: 1 + r.below(2) as u8,
                    required: r.percent(50),
                });
            }
        }
    }
    let mut planner = Planner::new(s, policy.clone(), synthetic::NOW);
    // Handed every snapshot by reference, as the controller does (here
    // fingerprinting after every plan, however small its loop).
    let mut replanner = Replanner::with_min_tries(0);
    for step in 0..steps {
        let got = planner.plan().clone();
        let want = plan(planner.snapshot(), &policy, planner.now());
        prop_assert_eq!(
            &got,
            &want,
            "re-plan differs from the full plan at step {}",
            step
        );
        let again = replanner.plan(planner.snapshot(), &policy, planner.now());
        prop_assert_eq!(
            again,
            &want,
            "Replanner's plan differs from the full plan at step {}",
            step
        );
        prop_assert_eq!(
            replanner.stats(),
            planner.stats(),
            "Replanner and Planner take over different tries at step {}",
            step
        );
        change(&mut planner, &mut r, &p, step, whole);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn replans_equal_full_plans_change_by_change(seed in any::<u64>()) {
        check_sequence(seed, 12, false)?;
    }

    #[test]
    fn replans_equal_full_plans_snapshot_by_snapshot(seed in any::<u64>()) {
        check_sequence(seed, 12, true)?;
    }

    #[test]
    fn replans_equal_full_plans_when_pod_constraints_change(seed in any::<u64>()) {
        check_constraints(seed, 12, seed % 2 == 0)?;
    }
}

/// Tries are taken over when a gang arrives late in the fair-share order,
/// none when the snapshot changed in a way that needs a plan from scratch,
/// and the plans stay equal to full plans.
#[test]
fn an_arrival_reuses_the_tries_before_it() {
    let p = Params {
        pods: 600,
        gangs: 60,
        nodes: 40,
        offerings: 300,
        seed: 3,
    };
    let policy = Policy::default();
    let mut planner = Planner::new(synthetic::generate(&p), policy.clone(), synthetic::NOW);
    planner.plan();
    let first = planner.stats();
    assert_eq!(first.reused, 0, "the first plan is made from scratch");
    assert!(first.steps >= 60);

    // Every queue in turn: the gang arrives last in it.
    let mut best = 0;
    for q in 0..8 {
        let mut g = synthetic::arrival(&p, q);
        g.priority = -1;
        planner.upsert_gang(g);
        let got = planner.plan().clone();
        assert_eq!(
            got,
            plan(planner.snapshot(), &policy, planner.now()),
            "queue {q}"
        );
        best = best.max(planner.stats().reused);
    }
    assert!(
        best * 10 >= first.steps * 9,
        "some arrival reuses at least 90 % of the tries ({best} of {})",
        first.steps
    );

    // A Replanner handed the same snapshots takes the same tries over.
    let mut replanner = Replanner::with_min_tries(60);
    replanner.plan(planner.snapshot(), &policy, planner.now());
    let mut s = planner.snapshot().clone();
    let mut g = synthetic::arrival(&p, 3);
    g.id = GangId("ns-new/late".into());
    g.priority = -1;
    s.gangs.push(g);
    let got = replanner.plan(&s, &policy, planner.now()).clone();
    assert_eq!(got, plan(&s, &policy, planner.now()));
    assert!(replanner.stats().reused > 0, "{:?}", replanner.stats());

    // A node change plans from scratch.
    let mut n = planner.snapshot().nodes[0].clone();
    n.unschedulable = !n.unschedulable;
    planner.upsert_node(n);
    planner.plan();
    assert_eq!(planner.stats().reused, 0);

    // Nothing changed, same time: every try reused.
    planner.plan();
    let s = planner.stats();
    assert_eq!(s.reused, s.steps);

    // Time moved without deciding anything differently: every try is
    // taken over, and the messages and deadlines are those of the new time.
    planner.set_now(Time(synthetic::NOW.0 + 1));
    let got = planner.plan().clone();
    let s = planner.stats();
    assert_eq!(s.reused, s.steps);
    assert_eq!(got, plan(planner.snapshot(), &policy, planner.now()));

    // An offering usable again plans from scratch.
    let mut snapshot = planner.snapshot().clone();
    let until = Time(synthetic::NOW.0 + 100);
    snapshot.offerings[0].unavailable_until = Some(until);
    planner.replace(snapshot);
    planner.plan();
    planner.set_now(until);
    let got = planner.plan().clone();
    assert_eq!(planner.stats().reused, 0);
    assert_eq!(got, plan(planner.snapshot(), &policy, planner.now()));
}

/// Launches that skip an unavailable offering say for how long it stays
/// unavailable; taken over at a later time, they say it from that time.
#[test]
fn taken_over_launch_messages_are_rendered_at_the_new_time() {
    let p = Params {
        pods: 300,
        gangs: 30,
        nodes: 4,
        offerings: 300,
        seed: 5,
    };
    let policy = Policy::default();
    let mut s = synthetic::generate(&p);
    let until = Time(synthetic::NOW.0 + 3_600);
    for (i, o) in s.offerings.iter_mut().enumerate() {
        o.unavailable_until = (i % 3 == 0).then_some(until);
    }
    let mut planner = Planner::new(s, policy.clone(), synthetic::NOW);
    let first = planner.plan().clone();
    assert!(
        first
            .launches
            .iter()
            .any(|l| l.message.contains("unavailable for another")),
        "some launch skips an unavailable offering"
    );
    planner.set_now(Time(synthetic::NOW.0 + 60));
    let got = planner.plan().clone();
    let st = planner.stats();
    assert_eq!(st.reused, st.steps, "every try taken over");
    assert_eq!(got, plan(planner.snapshot(), &policy, planner.now()));
    assert_ne!(got.launches, first.launches);
}

/// After a small fair-share loop the Replanner keeps no fingerprints: the
/// next plan is made from scratch, and is still the full plan.
#[test]
fn a_small_loop_is_planned_from_scratch_next_time() {
    let p = Params {
        pods: 60,
        gangs: 10,
        nodes: 8,
        offerings: 60,
        seed: 4,
    };
    let policy = Policy::default();
    let s = synthetic::generate(&p);
    let mut replanner = Replanner::with_min_tries(11);
    replanner.plan(&s, &policy, synthetic::NOW);
    assert!(replanner.stats().steps < 11);
    let got = replanner.plan(&s, &policy, synthetic::NOW).clone();
    assert_eq!(replanner.stats().reused, 0);
    assert_eq!(got, plan(&s, &policy, synthetic::NOW));

    let mut keeping = Replanner::with_min_tries(0);
    keeping.plan(&s, &policy, synthetic::NOW);
    keeping.plan(&s, &policy, synthetic::NOW);
    let st = keeping.stats();
    assert_eq!(st.reused, st.steps);
}
