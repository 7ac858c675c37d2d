//! Provisioning: the cheapest set of new nodes that, with what existing
//! capacity can take, holds every pod of a gang.
//!
//! Candidates are *launch domains*: (pool, capacity type) for topology
//! `Any` and `SameNode` (zones may mix for `Any`), (pool, zone, capacity
//! type) for `SameZone`, and (pool, zone, capacity type) restricted to
//! offerings that support placement groups for `SamePlacementGroup`. For each
//! domain:
//! 1. Existing capacity first (it is already paid for): Ready nodes and
//!    unreserved nodes in flight take what they can, within the zone for
//!    `SameZone`. `SameNode` and `SamePlacementGroup` launches use new nodes
//!    only (one new node; one new placement group).
//! 2. The rest goes on the cheapest multiset of offerings ([`crate::cover`])
//!    of the domain that are usable now, allowed by the pool's requirements,
//!    and whose node labels and taints the pods accept.
//! 3. Pool limits (nodes, GPUs, $/h), counting every node of the pool that
//!    exists or is in flight and every launch planned earlier this cycle. If
//!    the cheapest set breaks a limit, offerings larger than the headroom
//!    are dropped and the search repeated once.
//!
//! Domains are ranked by expected cost (price × expected duration, with the
//! gang-aware spot risk of [`crate::spot`]), then the queue's pool order,
//! pool weight (higher first), the pool's capacity-type preference order,
//! fewer new nodes, and the domain's name.

use std::collections::{BTreeMap, BTreeSet};

use crate::cover::{self, Cover, Kind};
use crate::index::{DomainSet, World};
use crate::launch_domain::Domain;
use crate::model::{CapacityType, GpuModel, Topology};
use crate::naming;
use crate::placement::{Group, Scope, groups_for, pack, place_finds_room_again};
use crate::resources::{Resources, fit_count};
use crate::spot;
use crate::takes::{ExistingParts, KnownExisting, Take};
use crate::time::Dur;

/// A new node to buy and the pods (per group) it will hold.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewPlanned {
    pub offering: usize,
    pub pods: Vec<u32>,
}

/// The chosen launch for a gang. Two choices are equal when they launch
/// and take the same; what their searches read is not compared.
#[derive(Debug, Clone)]
pub(crate) struct LaunchChoice {
    pub existing: Vec<Take>,
    pub new: Vec<NewPlanned>,
    pub pool: usize,
    pub capacity_type: CapacityType,
    pub price: u64,
    pub expected: u64,
    pub placement_group: bool,
    /// An offering skipped because it is unavailable for now (message).
    pub skipped: Option<usize>,
    /// Everything the search read of existing capacity ([`ExistingParts`],
    /// encoded): the search over new capacity reads nothing else of the
    /// nodes, so on other nodes' free capacity a search that reads the same
    /// parts makes the same choice (`replay.rs` relies on it).
    pub existing_read: Vec<u32>,
    /// Chosen over a placement the gang had (on idle nodes, see `hole`),
    /// not for want of room: a re-plan cannot infer from it that existing
    /// capacity had no room for the gang (`reads_same_nodes`).
    pub passed_over: bool,
    /// Searched without the pool nodes bigger than this (size-matched
    /// placement, `hole`): a re-plan checks the same nodes without them.
    pub avoid_above: Option<u64>,
}

impl PartialEq for LaunchChoice {
    fn eq(&self, other: &Self) -> bool {
        // Every field but `existing_read`.
        let LaunchChoice {
            existing,
            new,
            pool,
            capacity_type,
            price,
            expected,
            placement_group,
            skipped,
            existing_read: _,
            passed_over,
            avoid_above,
        } = self;
        *existing == other.existing
            && *new == other.new
            && *pool == other.pool
            && *capacity_type == other.capacity_type
            && *price == other.price
            && *expected == other.expected
            && *placement_group == other.placement_group
            && *skipped == other.skipped
            && *passed_over == other.passed_over
            && *avoid_above == other.avoid_above
    }
}

/// Why no launch was planned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LaunchFail {
    /// Nothing any allowed pool can buy (or any node) ever holds it.
    Unsatisfiable(String),
    /// Offerings that would hold it are unavailable or unpriced now.
    NoOffering { skipped: Option<usize> },
    /// A launch set exists but breaks a pool limit.
    PoolLimit { pool: usize, what: String },
    /// The cycle's new-node budget is spent.
    LaunchBudget { need: u32 },
}

/// Added to every machine's price to minimise the node count first.
const NODE_PENALTY: u64 = 1 << 50;

/// Plans a launch for the pods of `groups` that existing capacity cannot
/// take. `excluded` GPU models are not bought (quota).
pub(crate) fn plan_launch(
    w: &mut World<'_>,
    gi: usize,
    groups: &[Group],
    topology: Topology,
    excluded: &[GpuModel],
    duration: Dur,
) -> Result<LaunchChoice, LaunchFail> {
    let c = plan_launch_as(w, gi, groups, topology, excluded, duration)?;
    // A gang that prefers one network domain and is bought entirely new
    // goes into one placement group when that costs no more: new machines
    // launched apart may land in different racks or blocks.
    let prefers = w.gangs[gi].gang.network.is_some_and(|n| !n.required);
    if prefers
        && topology == Topology::Any
        && c.existing.is_empty()
        && c.new.len() > 1
        && !c.placement_group
        && let Ok(mut pg) = plan_launch_as(
            w,
            gi,
            groups,
            Topology::SamePlacementGroup,
            excluded,
            duration,
        )
        && pg.existing.is_empty()
        && pg.expected <= c.expected
    {
        // It was chosen for what the search of existing capacity found:
        // a re-plan checks that, as for the launch it replaced.
        pg.existing_read = c.existing_read.clone();
        return Ok(pg);
    }
    Ok(c)
}

/// [`plan_launch`] under one topology.
fn plan_launch_as(
    w: &mut World<'_>,
    gi: usize,
    groups: &[Group],
    topology: Topology,
    excluded: &[GpuModel],
    duration: Dur,
) -> Result<LaunchChoice, LaunchFail> {
    let q = w.gangs[gi].queue;
    let gang = w.gangs[gi].gang;
    // A gang that requires one network domain is bought into one placement
    // group (cluster placement group, compact placement policy), new nodes
    // only: nodes not launched yet have no known place in the network.
    let topology = match (gang.network, topology) {
        (Some(n), Topology::Any | Topology::SameZone) if n.required => Topology::SamePlacementGroup,
        _ => topology,
    };
    let pools = w.queue_pools(q);
    let shapes: Vec<Resources> = groups.iter().map(|g| g.shape.clone()).collect();
    let model_ok = |o: &crate::model::Offering| model_allowed(o, excluded);
    let excluded_hash = excluded_key(excluded);
    let cached = domains_for(w, gi, topology, excluded);
    let (domains, skipped_all) = (&cached.0, &cached.1);
    let offerings = w.offerings.clone();
    let counts: Vec<u32> = groups.iter().map(|g| g.count).collect();

    // Existing capacity first.
    let parts = match w.known_existing.take() {
        Some(k) if k.is_for(gi, &counts, excluded) => k.parts,
        _ => existing_parts(w, gi, groups, topology, excluded, domains),
    };
    let existing_read = parts.encode();
    let ExistingParts {
        any: any_part,
        zones: zone_parts,
    } = parts;

    let sigs = w.gang_sigs(gi);
    let ext_hash: Vec<u64> = groups
        .iter()
        .map(|g| naming::fnv1a64(format!("{:?}", g.shape.extended).as_bytes()))
        .collect();
    let mut best: Option<(Vec<u64>, LaunchChoice)> = None;
    let mut limit_fail: Option<LaunchFail> = None;
    let mut budget_fail: Option<LaunchFail> = None;
    for d in domains {
        let (existing, left) = match topology {
            Topology::Any => any_part.clone().unwrap_or((Vec::new(), counts.clone())),
            Topology::SameZone => zone_parts
                .get(d.zone.as_deref().unwrap_or_default())
                .cloned()
                .unwrap_or((Vec::new(), counts.clone())),
            _ => (Vec::new(), counts.clone()),
        };
        // Quick check: every pod left has some offering of the domain.
        let feasible = groups.iter().zip(&left).all(|(g, l)| {
            *l == 0
                || d.offerings.iter().any(|&o| {
                    w.eligible_new(gi, g.set, d.pool, o)
                        && fit_count(&offerings[o].resources, &g.shape) > 0
                })
        });
        if !feasible {
            continue;
        }
        // A domain whose cheapest conceivable cover (its GPUs at the
        // domain's lowest price per GPU, no interruption risk) already costs
        // more than the best launch so far cannot win: skip the search.
        if let Some((best_key, _)) = &best
            && let Some((p, g)) = d.gpu_price
        {
            let gpus: u128 = groups
                .iter()
                .zip(&left)
                .map(|(gr, l)| u128::from(gr.shape.gpu_millis) * u128::from(*l))
                .sum();
            let lower = u64::try_from(gpus * u128::from(p) / u128::from(g)).unwrap_or(u64::MAX);
            if spot::expected_cost(lower, &[], duration) > best_key[0] {
                continue;
            }
        }
        let price_of = |k: usize| {
            offerings[d.offerings[k]]
                .price
                .map_or(u64::MAX / 4, |p| p.0)
        };
        // `fewest`: minimise the node count first (a node limit binds).
        let solve = |w: &mut World<'_>, allowed: &[bool], fewest: bool| -> Option<Cover> {
            let real = |c: Option<Cover>| {
                c.map(|mut c| {
                    c.cost = c.machines.iter().map(|(k, _)| price_of(*k)).sum();
                    c
                })
            };
            let mut key: Vec<u64> = vec![
                d.pool as u64,
                d.ct_rank as u64,
                d.zone
                    .as_deref()
                    .map_or(0, |z| naming::fnv1a64(z.as_bytes())),
                u64::from(fewest),
                topology as u64,
                excluded_hash,
                d.offerings.len() as u64,
            ];
            key.extend(
                allowed
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| !**a)
                    .map(|(i, _)| i as u64),
            );
            key.push(u64::MAX);
            let prefix = key.len();
            for (k, (g, l)) in groups.iter().zip(&left).enumerate() {
                key.extend([
                    u64::from(sigs.get(g.set).copied().unwrap_or(0)),
                    g.shape.cpu_millis,
                    g.shape.memory_bytes,
                    g.shape.gpu_millis,
                    ext_hash[k],
                    u64::from(*l),
                ]);
            }
            if let Some(c) = w.cover_cache.get(&key) {
                return c.clone();
            }
            // The machine kinds depend on the domain, the allowed offerings
            // and the pod sets' signatures, not on the pod counts: cached.
            let any_left = left.iter().any(|&l| l > 0);
            let mut kkey: Vec<u64> = key[..prefix].to_vec();
            kkey.extend(
                groups
                    .iter()
                    .map(|g| u64::from(sigs.get(g.set).copied().unwrap_or(0))),
            );
            kkey.push(u64::from(any_left));
            let kinds = match w.kinds_cache.get(&kkey) {
                Some(k) => k.clone(),
                None => {
                    let k = std::rc::Rc::new(alike_kinds(
                        w, gi, groups, d, allowed, fewest, any_left, &price_of,
                    ));
                    w.kinds_cache.insert(kkey, k.clone());
                    k
                }
            };
            let (reps, ks) = (&kinds.0, &kinds.1);
            let back = |c: Option<Cover>| {
                c.map(|mut c| {
                    for (k, _) in &mut c.machines {
                        *k = reps[*k];
                    }
                    c
                })
            };
            let c = if topology == Topology::SameNode {
                real(back(single_machine(&shapes, &left, ks)))
            } else {
                real(back(cover::cheapest(&shapes, &left, ks)))
            };
            w.cover_cache.insert(key, c.clone());
            c
        };
        // A reserved domain's offerings are bought only while their
        // reservations have machines left, and only for a gang they outlive.
        let mut base_allowed: Vec<bool> = match d.ct {
            CapacityType::Reserved => d
                .offerings
                .iter()
                .map(|&o| reservation_takes(w, gi, o, 1))
                .collect(),
            CapacityType::FlexStart => d
                .offerings
                .iter()
                .map(|&o| flex_start_fits(w, gi, o, duration))
                .collect(),
            _ => vec![true; d.offerings.len()],
        };
        let mut found = solve(w, &base_allowed, false);
        // A cover needing more machines of a reservation than it has left
        // is searched again without that offering.
        while d.ct == CapacityType::Reserved
            && let Some(c) = &found
            && let Some(k) = overbooked(w, gi, d, c)
        {
            base_allowed[k] = false;
            found = solve(w, &base_allowed, false);
        }
        let Some(mut cov) = found else {
            continue;
        };
        // Pool limits.
        let pool = w.pools[d.pool];
        let usage = w.pool_usage[d.pool].clone();
        let over = |cov: &Cover| -> Option<String> {
            let nodes = usage.nodes + cov.machines.len() as u64;
            let gpus = usage.gpus
                + cov
                    .machines
                    .iter()
                    .map(|(k, _)| u64::from(offerings[d.offerings[*k]].gpu_count))
                    .sum::<u64>();
            let price = usage.price + cov.cost;
            if let Some(m) = pool.limits.max_nodes
                && nodes > m
            {
                return Some(format!("{nodes} nodes > limit {m}"));
            }
            if let Some(m) = pool.limits.max_gpus
                && gpus > m
            {
                return Some(format!("{gpus} GPUs > limit {m}"));
            }
            if let Some(m) = pool.limits.max_price_per_hour
                && price > m.0
            {
                return Some(format!("{} per hour > limit {}", crate::Price(price), m));
            }
            None
        };
        if over(&cov).is_some() {
            let gpu_room = pool
                .limits
                .max_gpus
                .map_or(u64::MAX, |m| m.saturating_sub(usage.gpus));
            let price_room = pool
                .limits
                .max_price_per_hour
                .map_or(u64::MAX, |m| m.0.saturating_sub(usage.price));
            let allowed: Vec<bool> = d
                .offerings
                .iter()
                .zip(&base_allowed)
                .map(|(&o, &base)| {
                    base && u64::from(offerings[o].gpu_count) <= gpu_room
                        && offerings[o].price.is_some_and(|p| p.0 <= price_room)
                })
                .collect();
            let mut retry = solve(w, &allowed, false);
            if retry.as_ref().is_none_or(|c| over(c).is_some())
                && pool.limits.max_nodes.is_some()
                && let Some(c) = solve(w, &allowed, true)
            {
                retry = Some(c);
            }
            match retry {
                Some(c) if over(&c).is_none() && overbooked(w, gi, d, &c).is_none() => cov = c,
                other => {
                    let what = over(other.as_ref().unwrap_or(&cov)).unwrap_or_default();
                    if limit_fail.is_none() {
                        limit_fail = Some(LaunchFail::PoolLimit { pool: d.pool, what });
                    }
                    continue;
                }
            }
        }
        let n_new = cov.machines.len() as u32;
        if let Some(max) = w.policy.max_new_nodes_per_cycle
            && w.new_nodes_planned.saturating_add(n_new) > max
        {
            budget_fail.get_or_insert(LaunchFail::LaunchBudget { need: n_new });
            continue;
        }
        let rates: Vec<f64> = cov
            .machines
            .iter()
            .map(|(k, _)| offerings[d.offerings[*k]].interruption_rate_per_hour)
            .collect();
        let expected = spot::expected_cost(cov.cost, &rates, duration);
        let key = vec![
            expected,
            d.pool_rank as u64,
            (i64::from(i32::MAX) - i64::from(pool.weight)) as u64,
            d.ct_rank as u64,
            u64::from(n_new),
        ];
        let better = match &best {
            None => true,
            Some((k, _)) => key < *k,
        };
        if better {
            let skipped = skipped_all
                .iter()
                .copied()
                .filter(|&o| w.pool_offerings[d.pool].contains(&o))
                .min_by_key(|&o| (offerings[o].price.map_or(u64::MAX, |p| p.0), o));
            best = Some((
                key,
                LaunchChoice {
                    existing,
                    new: cov
                        .machines
                        .iter()
                        .map(|(k, pods)| NewPlanned {
                            offering: d.offerings[*k],
                            pods: pods.clone(),
                        })
                        .collect(),
                    pool: d.pool,
                    capacity_type: d.ct,
                    price: cov.cost,
                    expected,
                    placement_group: topology == Topology::SamePlacementGroup,
                    skipped,
                    passed_over: false,
                    avoid_above: w.avoid_above_gpus,
                    existing_read: existing_read.clone(),
                },
            ));
        }
    }
    if let Some((_, c)) = best {
        return Ok(c);
    }
    if let Some(f) = limit_fail {
        return Err(f);
    }
    if let Some(f) = budget_fail {
        return Err(f);
    }
    // Unsatisfiable: some pod set fits no offering of any allowed pool and no
    // node at all (whatever its state); SameNode: no single machine holds all.
    let mut any_static = vec![false; groups.len()];
    let mut any_static_whole = false;
    for &p in &pools {
        for oi in 0..w.pool_offerings[p].len() {
            let o = w.pool_offerings[p][oi];
            let off = offerings[o];
            if !model_ok(off) {
                continue;
            }
            let mut all = true;
            for (k, g) in groups.iter().enumerate() {
                let ok = w.eligible_new(gi, g.set, p, o) && fit_count(&off.resources, &g.shape) > 0;
                any_static[k] |= ok;
                all &= ok;
            }
            if all {
                let mut total = Resources::zero();
                for g in groups {
                    total.add(&g.shape.times(u64::from(g.count)));
                }
                any_static_whole |= total.fits_in(&off.resources);
            }
        }
    }
    let node_fits = |k: usize, g: &Group| {
        let _ = k;
        w.nodes
            .iter()
            .enumerate()
            .any(|(ni, n)| g.elig[ni] && fit_count(&n.node.allocatable, &g.shape) > 0)
    };
    let mut total = Resources::zero();
    for g in groups {
        total.add(&g.shape.times(u64::from(g.count)));
    }
    let whole_node = w
        .nodes
        .iter()
        .enumerate()
        .any(|(ni, n)| groups.iter().all(|g| g.elig[ni]) && total.fits_in(&n.node.allocatable));
    for (k, g) in groups.iter().enumerate() {
        if g.count > 0 && !any_static[k] && !node_fits(k, g) {
            let ps = &gang.pod_sets[g.set];
            // Only the pod set's required node affinity keeps it off an
            // offering that would hold it: say so.
            let by_affinity = pools.iter().any(|&p| {
                w.pool_offerings[p].iter().any(|&o| {
                    model_ok(offerings[o])
                        && fit_count(&offerings[o].resources, &g.shape) > 0
                        && w.excluded_by_affinity(gi, g.set, p, o)
                })
            });
            return Err(LaunchFail::Unsatisfiable(format!(
                "pod set {} ({}) fits no offering of pools [{}] and no node{}",
                ps.name,
                ps.requests,
                pools
                    .iter()
                    .map(|&p| w.pools[p].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if by_affinity {
                    ": its required node affinity excludes every offering that would hold it"
                } else {
                    ""
                }
            )));
        }
    }
    if topology == Topology::SameNode && !any_static_whole && !whole_node {
        return Err(LaunchFail::Unsatisfiable(
            "no single machine any allowed pool can buy holds the whole gang (SameNode)".into(),
        ));
    }
    let skipped = skipped_all
        .iter()
        .copied()
        .min_by_key(|&o| (offerings[o].price.map_or(u64::MAX, |p| p.0), o));
    Err(LaunchFail::NoOffering { skipped })
}

/// The launch domains of gang `gi`'s queue for `topology` and the GPU
/// models the quota excludes (the same for every gang of the queue with
/// this topology and these excluded models: cached for the cycle), and the
/// offerings skipped as unavailable for now.
fn domains_for(
    w: &mut World<'_>,
    gi: usize,
    topology: Topology,
    excluded: &[GpuModel],
) -> DomainSet {
    let q = w.gangs[gi].queue;
    let dkey = (q, topology as u8, excluded_key(excluded));
    if let Some(d) = w.domain_cache.get(&dkey) {
        return d.clone();
    }
    let model_ok = |o: &crate::model::Offering| model_allowed(o, excluded);
    let pools = w.queue_pools(q);
    let d = std::rc::Rc::new(build_domains(w, &pools, topology, &model_ok));
    w.domain_cache.insert(dkey, d.clone());
    d
}

/// True when an offering's GPU model is none of those the quota excludes.
fn model_allowed(o: &crate::model::Offering, excluded: &[GpuModel]) -> bool {
    o.gpu_model
        .as_ref()
        .is_none_or(|m| !excluded.iter().any(|x| m.satisfies(x)))
}

/// The excluded GPU models as part of a cache key.
fn excluded_key(excluded: &[GpuModel]) -> u64 {
    naming::fnv1a64(format!("{excluded:?}").as_bytes())
}

/// What existing capacity (Ready nodes, and nodes in flight the gang may
/// use) takes of gang `gi`'s launch before new nodes are bought: one
/// packing for `Any`, one per zone of `domains` for `SameZone`, nothing
/// for `SameNode` and `SamePlacementGroup` (new nodes only).
fn existing_parts(
    w: &World<'_>,
    gi: usize,
    groups: &[Group],
    topology: Topology,
    excluded: &[GpuModel],
    domains: &[Domain],
) -> ExistingParts {
    let mut parts = ExistingParts {
        any: None,
        zones: BTreeMap::new(),
    };
    if !matches!(topology, Topology::Any | Topology::SameZone) {
        return parts;
    }
    let extras = extras(w, gi, groups);
    if topology == Topology::Any {
        let scope = Scope::anywhere(gi, excluded);
        parts.any = Some(pack(w, groups, &scope, &extras, true));
    } else {
        for z in zone_names(domains) {
            let part = zone_part(w, gi, groups, excluded, z, &extras);
            parts.zones.insert(z.to_string(), part);
        }
    }
    parts
}

/// Nodes in flight gang `gi` may use.
fn extras(w: &World<'_>, gi: usize, groups: &[Group]) -> Vec<usize> {
    w.inflight
        .iter()
        .copied()
        .filter(|&ni| {
            let n = &w.nodes[ni];
            !n.removed
                && !n.given_up
                && w.reservation_allows(ni, gi)
                && groups.iter().any(|g| g.elig[ni])
        })
        .collect()
}

/// The zones of launch domains, in order.
fn zone_names(domains: &[Domain]) -> Vec<&str> {
    let zones: BTreeSet<&str> = domains.iter().filter_map(|d| d.zone.as_deref()).collect();
    zones.into_iter().collect()
}

/// What existing capacity in zone `z` takes of a `SameZone` launch.
fn zone_part(
    w: &World<'_>,
    gi: usize,
    groups: &[Group],
    excluded: &[GpuModel],
    z: &str,
    extras: &[usize],
) -> (Vec<Take>, Vec<u32>) {
    let scope = Scope {
        gang: gi,
        excluded_models: excluded,
        zone: Some(z),
        placement_group: None,
        network: None,
    };
    pack(w, groups, &scope, extras, true)
}

/// True when a launch search for gang `gi` (pod sets at `counts`, GPU
/// models `excluded` by the quota) would, on the current nodes, read what
/// an earlier search read: `place` still finds no room for the whole gang,
/// and existing capacity takes the same pods ([`LaunchChoice::existing_read`]).
/// Only the nodes of `changed` may differ from what the earlier search
/// saw. The pool usage and launch budget the search also reads are checked
/// by the caller.
pub(crate) fn reads_same_nodes(
    w: &mut World<'_>,
    gi: usize,
    counts: &[u32],
    excluded: &[GpuModel],
    earlier: &LaunchChoice,
    changed: &[usize],
) -> bool {
    if earlier.passed_over {
        // It was chosen while the gang had room: the search below would
        // assume it had none, so the try is computed again in full.
        return false;
    }
    let topology = w.gangs[gi].gang.topology;
    w.flush_index();
    let groups = groups_for(w, gi, counts);
    let scope = Scope::anywhere(gi, excluded);
    // A size-matched search read the nodes no bigger than its class only.
    w.avoid_above_gpus = earlier.avoid_above;
    let again = place_finds_room_again(w, &groups, topology, &scope, changed);
    let parts = (!again).then(|| {
        if topology == Topology::SameZone {
            let cached = domains_for(w, gi, topology, excluded);
            existing_parts(w, gi, &groups, topology, excluded, &cached.0)
        } else {
            // (The domains are read for their zones only.)
            existing_parts(w, gi, &groups, topology, excluded, &[])
        }
    });
    w.avoid_above_gpus = None;
    let Some(parts) = parts else {
        return false;
    };
    if parts.encode() == earlier.existing_read {
        return true;
    }
    if earlier.avoid_above.is_some() {
        // read without the bigger nodes: not what the full try's search
        // over every node would read
        return false;
    }
    w.known_existing = Some(KnownExisting {
        gang: gi,
        counts: counts.to_vec(),
        excluded: excluded.to_vec(),
        parts,
    });
    false
}

/// The machine kinds of a domain's allowed offerings for `groups`: only
/// kinds some pod may use (all of them when no pod is left), and of kinds
/// alike (capacity and allowed pod sets) only the cheapest, the first at
/// equal price — no other can be chosen. Returns, in domain order, each
/// kind's index in the domain's offerings and the kinds.
#[allow(clippy::too_many_arguments)]
fn alike_kinds(
    w: &mut World<'_>,
    gi: usize,
    groups: &[Group],
    d: &Domain,
    allowed: &[bool],
    fewest: bool,
    any_left: bool,
    price_of: &dyn Fn(usize) -> u64,
) -> (Vec<usize>, Vec<Kind>) {
    let mut reps: Vec<usize> = Vec::new();
    let mut ks: Vec<Kind> = Vec::new();
    for (k, (&o, a)) in d.offerings.iter().zip(allowed).enumerate() {
        let allows: Vec<bool> = groups
            .iter()
            .map(|g| *a && w.eligible_new(gi, g.set, d.pool, o))
            .collect();
        if !allows.iter().any(|&x| x) && any_left {
            continue;
        }
        let price = price_of(k);
        let price = if fewest {
            price.saturating_add(NODE_PENALTY)
        } else {
            price
        };
        let capacity = &w.offerings[o].resources;
        match ks
            .iter()
            .position(|x| x.capacity == *capacity && x.allows == allows)
        {
            Some(i) => {
                if price < ks[i].price {
                    ks[i].price = price;
                    reps[i] = k;
                }
            }
            None => {
                reps.push(k);
                ks.push(Kind {
                    price,
                    capacity: capacity.clone(),
                    allows,
                });
            }
        }
    }
    let mut order: Vec<usize> = (0..ks.len()).collect();
    order.sort_unstable_by_key(|&i| reps[i]);
    let reps_sorted: Vec<usize> = order.iter().map(|&i| reps[i]).collect();
    let mut slots: Vec<Option<Kind>> = ks.into_iter().map(Some).collect();
    let ks: Vec<Kind> = order.iter().filter_map(|&i| slots[i].take()).collect();
    (reps_sorted, ks)
}

/// True when `n` more machines of offering `o` may be launched for gang
/// `gi`: an offering without a reservation always; a reserved one while its
/// reservation has `n` machines left and ends after the gang's expected end
/// plus the machine's boot (or the gang may be cut short).
fn reservation_takes(w: &World<'_>, gi: usize, o: usize, n: u32) -> bool {
    let off = w.offerings[o];
    let Some(r) = &off.reservation else {
        return true;
    };
    w.reserved_left[o].unwrap_or(0) >= n
        && w.outlives(gi, r.machines_end(), crate::time::Dur::secs(off.boot_secs))
}

/// True when gang `gi` may be bought flex-start offering `o`: its queue
/// waits long enough for a grant (`Queue::flex_start_max_wait` at least
/// the offering's expected wait) and it runs no longer than a flex-start
/// machine may (`duration` within `max_run`).
fn flex_start_fits(w: &World<'_>, gi: usize, o: usize, duration: Dur) -> bool {
    let Some(f) = w.offerings[o].flex_start else {
        return false;
    };
    let max_wait = w.gangs[gi]
        .queue
        .and_then(|q| w.queues[q].flex_start_max_wait);
    max_wait.is_some_and(|m| m >= f.expected_wait) && duration <= f.max_run
}

/// The position in `d.offerings` of the first offering `cov` buys more
/// machines of than its reservation has left, if any.
fn overbooked(w: &World<'_>, gi: usize, d: &Domain, cov: &Cover) -> Option<usize> {
    let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
    for (k, _) in &cov.machines {
        *counts.entry(*k).or_default() += 1;
    }
    counts
        .into_iter()
        .find(|&(k, n)| !reservation_takes(w, gi, d.offerings[k], n))
        .map(|(k, _)| k)
}

/// The launch domains of a gang of a queue with `pools`, `topology` and
/// offerings allowed by `model_ok`, and the offerings skipped because they
/// are unavailable now. They depend on nothing else within a cycle, so
/// [`plan_launch`] caches them.
fn build_domains(
    w: &World<'_>,
    pools: &[usize],
    topology: Topology,
    model_ok: &dyn Fn(&crate::model::Offering) -> bool,
) -> (Vec<Domain>, Vec<usize>) {
    let now = w.now;
    let mut domains: Vec<Domain> = Vec::new();
    let mut skipped_all: Vec<usize> = Vec::new();
    let offerings = &w.offerings;
    for (pool_rank, &p) in pools.iter().enumerate() {
        let pool = w.pools[p];
        let cts: Vec<CapacityType> = if pool.requirements.capacity_types.is_empty() {
            vec![CapacityType::OnDemand]
        } else {
            let mut v = Vec::new();
            for c in &pool.requirements.capacity_types {
                if !v.contains(c) {
                    v.push(*c);
                }
            }
            v
        };
        let pool_offs = &w.pool_offerings[p];
        for (ct_rank, ct) in cts.iter().enumerate() {
            let mut usable = Vec::new();
            for &o in pool_offs {
                let off = offerings[o];
                if off.capacity_type != *ct || !model_ok(off) {
                    continue;
                }
                if topology == Topology::SamePlacementGroup && !off.placement_groups {
                    continue;
                }
                if off.usable_at(now) {
                    usable.push(o);
                } else if off.available && off.price.is_some() {
                    skipped_all.push(o);
                }
            }
            match topology {
                Topology::SameZone | Topology::SamePlacementGroup => {
                    let zones: BTreeSet<&str> =
                        usable.iter().map(|&o| offerings[o].zone.as_str()).collect();
                    for z in zones {
                        domains.push(Domain {
                            pool: p,
                            pool_rank,
                            ct: *ct,
                            ct_rank,
                            zone: Some(Box::from(z)),
                            offerings: usable
                                .iter()
                                .copied()
                                .filter(|&o| offerings[o].zone == z)
                                .collect(),
                            gpu_price: None,
                        });
                    }
                }
                _ => domains.push(Domain {
                    pool: p,
                    pool_rank,
                    ct: *ct,
                    ct_rank,
                    zone: None,
                    offerings: usable,
                    gpu_price: None,
                }),
            }
        }
    }

    for d in &mut domains {
        d.gpu_price = lowest_gpu_price(offerings, &d.offerings);
    }
    (domains, skipped_all)
}

/// (price, GPU millis) of the offering with the lowest price per GPU among
/// `offs` (unpriced ones at the price the cover search gives them).
fn lowest_gpu_price(offerings: &[&crate::model::Offering], offs: &[usize]) -> Option<(u64, u64)> {
    let mut best: Option<(u64, u64)> = None;
    for &o in offs {
        let g = offerings[o].resources.gpu_millis;
        if g == 0 {
            continue;
        }
        let p = offerings[o].price.map_or(u64::MAX / 4, |p| p.0);
        if best
            .is_none_or(|(bp, bg)| u128::from(p) * u128::from(bg) < u128::from(bp) * u128::from(g))
        {
            best = Some((p, g));
        }
    }
    best
}

/// The cheapest single machine holding every pod (SameNode).
fn single_machine(shapes: &[Resources], counts: &[u32], kinds: &[Kind]) -> Option<Cover> {
    let mut total = Resources::zero();
    for (s, c) in shapes.iter().zip(counts) {
        total.add(&s.times(u64::from(*c)));
    }
    let mut best: Option<(u64, usize)> = None;
    for (ki, k) in kinds.iter().enumerate() {
        let allowed = counts.iter().zip(&k.allows).all(|(c, a)| *c == 0 || *a);
        if allowed && total.fits_in(&k.capacity) && best.is_none_or(|b| k.price < b.0) {
            best = Some((k.price, ki));
        }
    }
    best.map(|(price, ki)| Cover {
        cost: price,
        machines: vec![(ki, counts.to_vec())],
    })
}
