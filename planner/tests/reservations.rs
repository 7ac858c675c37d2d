//! Properties of `plan` with capacity reservations and network topologies,
//! over random synthetic snapshots: a plan never books more machines into a
//! reservation than it has left (less the machines whose intent is written
//! but not launched), never buys or places a gang on capacity that ends
//! before the gang's expected end (unless the gang opted in), drains every
//! node whose capacity ends within the drain-ahead window, and places a
//! gang that requires a network domain within one.

use std::collections::BTreeMap;

use muster_planner::model::*;
use muster_planner::plan::RemovalKind;
use muster_planner::snapshot::{Policy, Snapshot};
use muster_planner::synthetic::{self, Params, SplitMix64};
use muster_planner::{Dur, Time, plan};
use proptest::prelude::*;

/// A synthetic snapshot with reserved copies of every fourth offering
/// (a few machines each; odd ones Capacity Blocks ending within hours), some
/// nodes in those reservations (some Pending, some ending soon), network
/// layers on most nodes and network topologies on some gangs.
fn build(seed: u64) -> Snapshot {
    let mut r = SplitMix64::new(seed);
    let gangs = 4 + r.below(30) as u32;
    let p = Params {
        pods: gangs * (1 + r.below(6) as u32),
        gangs,
        nodes: 2 + r.below(25) as u32,
        offerings: 40 + r.below(80) as u32,
        seed,
    };
    let mut s = synthetic::generate(&p);
    let now = synthetic::NOW;
    let mut extra = Vec::new();
    for (i, o) in s.offerings.iter().step_by(4).enumerate() {
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
            available: r.below(4) as u32,
            starts_at: None,
            ends_at: block.then(|| Time(now.0 + 600 + r.below(6) as i64 * 3600)),
        });
        extra.push(o);
    }
    // Some existing nodes are in a reservation.
    for n in &mut s.nodes {
        if n.pool.is_some() && r.percent(25) {
            let o = &extra[r.below(extra.len() as u64) as usize];
            if let Some(k) = &mut n.offering {
                k.capacity_type = CapacityType::Reserved;
                k.reservation = o.reservation.as_ref().map(|x| x.id.clone());
                k.instance_type = o.instance_type.clone();
                k.zone = o.zone.clone();
            }
            n.capacity_ends_at = o.reservation.as_ref().and_then(|x| x.ends_at);
            if r.percent(30) {
                n.phase = NodePhase::Pending;
            }
        }
        if r.percent(80) {
            let (b, k) = (r.below(2), r.below(2));
            n.network = vec![format!("b{b}"), format!("b{b}-r{k}")];
        }
    }
    s.offerings.extend(extra);
    for pool in &mut s.pools {
        let types = &mut pool.requirements.capacity_types;
        if types.is_empty() {
            types.push(CapacityType::OnDemand);
        }
        types.push(CapacityType::Reserved);
    }
    for g in &mut s.gangs {
        g.expected_duration = Some(Dur::mins(10 + r.below(600)));
        g.may_outlive_capacity = r.percent(10);
        if r.percent(30) {
            g.network = Some(NetworkTopology {
                level: 1 + r.below(2) as u8,
                required: r.percent(50),
            });
        }
    }
    s
}

fn check(seed: u64) -> Result<(), TestCaseError> {
    let s = build(seed);
    let policy = Policy::default();
    let now = synthetic::NOW;
    let p = plan(&s, &policy, now);
    let offering = |k: &OfferingKey| s.offerings.iter().find(|o| &o.key() == k);
    let gang = |id: &GangId| s.gangs.iter().find(|g| &g.id == id);
    let end_of = |g: &Gang| {
        now + g
            .expected_duration
            .unwrap_or(policy.default_expected_duration)
    };
    // Capacity is usable until it is drained, `reservation_drain_ahead`
    // before its end.
    let usable_until = |end: Time| Time(end.0 - policy.reservation_drain_ahead.as_secs() as i64);

    // No reservation over-booked.
    let mut booked: BTreeMap<String, u32> = BTreeMap::new();
    let new_nodes = p
        .launches
        .iter()
        .flat_map(|l| l.nodes.iter().map(move |n| (Some(&l.gang), n)));
    let replacements = p.removals.iter().filter_map(|r| match &r.kind {
        RemovalKind::Replace { with } => Some((None, with)),
        _ => None,
    });
    for (g, n) in new_nodes.chain(replacements) {
        let Some(id) = &n.offering.reservation else {
            continue;
        };
        *booked.entry(id.clone()).or_default() += 1;
        let o = offering(&n.offering);
        prop_assert!(o.is_some(), "{} bought from no listed offering", n.offering);
        let r = o.and_then(|o| o.reservation.as_ref());
        // Bought only for a gang the reservation outlives.
        if let (Some(g), Some(end)) = (g.and_then(gang), r.and_then(|r| r.ends_at)) {
            let boot = Dur::secs(o.map_or(0, |o| o.boot_secs));
            prop_assert!(
                if g.may_outlive_capacity {
                    usable_until(end) > now + boot
                } else {
                    usable_until(end) >= end_of(g) + boot
                },
                "{} launched into {} ending at {:?}, before its expected end",
                g.id,
                id,
                end
            );
        }
    }
    for (id, n) in &booked {
        let o = s
            .offerings
            .iter()
            .find(|o| o.reservation.as_ref().is_some_and(|r| &r.id == id));
        let listed = o
            .and_then(|o| o.reservation.as_ref())
            .map_or(0, |r| r.available);
        let pending = s
            .nodes
            .iter()
            .filter(|x| {
                x.phase == NodePhase::Pending
                    && x.offering.as_ref().is_some_and(|k| {
                        k.reservation.as_ref() == Some(id)
                            && o.is_some_and(|o| {
                                o.instance_type == k.instance_type && o.zone == k.zone
                            })
                    })
            })
            .count() as u32;
        prop_assert!(
            *n <= listed.saturating_sub(pending),
            "{} machines booked into {}: {} listed, {} pending",
            n,
            id,
            listed,
            pending
        );
    }

    // No admission (nor launch part on existing nodes) on capacity that
    // ends before the gang would; required network domains kept.
    let placed = p
        .admissions
        .iter()
        .map(|a| (&a.gang, &a.assignments, true))
        .chain(p.launches.iter().map(|l| (&l.gang, &l.assignments, false)));
    for (id, assignments, admitted) in placed {
        let Some(g) = gang(id) else { continue };
        let mut domains = std::collections::BTreeSet::new();
        for asg in assignments {
            let Some(n) = s.nodes.iter().find(|n| n.name == asg.node) else {
                continue;
            };
            if let Some(end) = n.capacity_ends_at {
                prop_assert!(
                    if g.may_outlive_capacity {
                        usable_until(end) > now
                    } else {
                        usable_until(end) >= end_of(g)
                    },
                    "{} admitted on {} whose capacity ends before it would",
                    g.id,
                    n.name
                );
            }
            if let Some(net) = g.network.filter(|n| n.required) {
                domains.insert(
                    n.network
                        .get(..usize::from(net.level))
                        .map(<[String]>::to_vec),
                );
            }
        }
        // (A launch for a required gang uses new nodes only: none here.)
        prop_assert!(
            domains.is_empty() || (admitted && domains.len() == 1 && !domains.contains(&None)),
            "{} requires one network domain, admitted across {:?}",
            g.id,
            domains
        );
    }

    // Every node ending within the window is drained.
    for n in &s.nodes {
        if let (Some(end), Some(_)) = (n.capacity_ends_at, &n.pool)
            && !matches!(n.phase, NodePhase::Draining | NodePhase::Terminating)
            && now + policy.reservation_drain_ahead >= end
        {
            prop_assert!(
                p.removals
                    .iter()
                    .any(|r| r.node == n.name
                        && matches!(r.kind, RemovalKind::CapacityEnding { .. })),
                "{} ends at {:?} and is not drained",
                n.name,
                end
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn reservations_topology_and_capacity_ends_are_kept(seed in any::<u64>()) {
        check(seed)?;
    }
}

/// The properties above are not vacuous: over a fixed set of seeds, plans
/// do book reservations, place gangs on nodes whose capacity ends, place
/// gangs that require a network domain, and drain ending nodes.
#[test]
fn the_properties_meet_what_they_check() {
    let (mut booked, mut on_ending, mut required, mut drained) = (0, 0, 0, 0);
    for seed in 0..200 {
        let s = build(seed);
        let p = plan(&s, &Policy::default(), synthetic::NOW);
        booked += p
            .launches
            .iter()
            .flat_map(|l| &l.nodes)
            .filter(|n| n.offering.reservation.is_some())
            .count();
        for a in &p.admissions {
            let g = s.gangs.iter().find(|g| g.id == a.gang);
            if g.is_some_and(|g| g.network.is_some_and(|n| n.required)) {
                required += 1;
            }
            on_ending += a
                .assignments
                .iter()
                .filter(|x| {
                    s.nodes
                        .iter()
                        .any(|n| n.name == x.node && n.capacity_ends_at.is_some())
                })
                .count();
        }
        drained += p
            .removals
            .iter()
            .filter(|r| matches!(r.kind, RemovalKind::CapacityEnding { .. }))
            .count();
    }
    assert!(booked > 0, "no reservation booked");
    assert!(on_ending > 0, "no gang placed on capacity that ends");
    assert!(required > 0, "no gang requiring a network domain admitted");
    assert!(drained > 0, "no node drained ahead of its end");
}
