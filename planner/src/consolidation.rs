//! Consolidation: removing empty nodes, draining underutilized ones, and
//! replacing nodes by strictly cheaper ones — per pool, within budgets.
//!
//! Never touched: unmanaged nodes; `doNotDisrupt` nodes or nodes running a
//! `doNotDisrupt` pod; nodes reserved for a provisioning or pending gang;
//! nodes used by a decision of this cycle; nodes hosting a pod of a gang that
//! is not Admitted/Running with `disruptible: true` (a running gang is
//! never split unless it opted in).
//!
//! Budget per pool: `min(maxDisruptedNodes, ⌈maxDisruptedPercent × nodes /
//! 100⌉)` minus nodes already Draining or Terminating and nodes removed this
//! cycle. Empty nodes (only daemons, `emptySince` at least
//! `consolidateAfter` ago) go first, oldest first. With
//! `WhenUnderutilized`, nodes Ready for at least `consolidateAfter` whose
//! requested GPUs (CPU for nodes without GPUs) are below
//! `Policy::underutilized_percent` of allocatable come next, least utilized
//! first: drained when every movable pod (non-daemon pods, and pods of
//! disruptible gangs) fits on other schedulable nodes — gang pods on nodes
//! their pod set accepts, in the same zone or placement group when the
//! gang's topology asks, all on one node for `SameNode` — else replaced by
//! the cheapest usable offering of the pool that is strictly cheaper and
//! holds everything the node runs (daemons included), in the same zone and
//! placement group.

use crate::decided::Cycle;
use crate::index::World;
use crate::model::{ConsolidationPolicy, GangPhase, NodePhase, Topology};
use crate::naming;
use crate::plan::{NewNode, Removal, RemovalKind};
use crate::resources::{Resources, fit_count};

fn budget(w: &World<'_>, p: usize) -> u64 {
    let d = &w.pools[p].disruption;
    let nodes: Vec<&crate::index::NodeInfo<'_>> =
        w.nodes.iter().filter(|n| n.pool == Some(p)).collect();
    let total = nodes.len() as u64;
    let by_pct = (u64::from(d.max_disrupted_percent) * total).div_ceil(100);
    let cap = d.max_disrupted_nodes.unwrap_or(u64::MAX).min(by_pct);
    let busy = nodes
        .iter()
        .filter(|n| {
            n.removed || matches!(n.node.phase, NodePhase::Draining | NodePhase::Terminating)
        })
        .count() as u64;
    cap.saturating_sub(busy)
}

fn untouchable(w: &World<'_>, cx: &Cycle, ni: usize) -> bool {
    let n = &w.nodes[ni];
    n.removed
        || n.node.do_not_disrupt
        || n.node.pods.iter().any(|p| p.do_not_disrupt)
        || n.exclusive.is_some()
        || n.node.phase != NodePhase::Ready
        || cx.all_used.contains_key(&ni)
        || n.gangs.iter().any(|&gi| {
            let g = w.gangs[gi].gang;
            !(g.disruptible && matches!(g.phase, GangPhase::Admitted | GangPhase::Running))
        })
}

/// A pod to move: shape, the gang and pod set it belongs to (None for
/// other pods).
struct Movable {
    shape: Resources,
    gang: Option<(usize, usize)>,
}

fn movables(w: &World<'_>, ni: usize) -> Vec<Movable> {
    let n = &w.nodes[ni];
    let mut out = Vec::new();
    for p in &n.node.pods {
        if !p.daemon {
            out.push(Movable {
                shape: p.requests.clone(),
                gang: None,
            });
        }
    }
    for &gi in &n.gangs {
        let g = w.gangs[gi].gang;
        let info = &w.gangs[gi];
        for (&at, &set) in info.assigned.iter().zip(&info.assigned_sets) {
            if at == Some(ni)
                && let Some(si) = set
            {
                out.push(Movable {
                    shape: g.pod_sets[si].requests.clone(),
                    gang: Some((gi, si)),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        b.shape
            .gpu_millis
            .cmp(&a.shape.gpu_millis)
            .then(b.shape.cpu_millis.cmp(&a.shape.cpu_millis))
    });
    out
}

/// Tries to move every movable pod of `ni` elsewhere; keeps the moves on
/// success, undoes them on failure.
fn try_moves(w: &mut World<'_>, ni: usize) -> bool {
    let pods = movables(w, ni);
    let src = w.nodes[ni].node;
    let mut done: Vec<(usize, Resources)> = Vec::new();
    let mut same_node_target: std::collections::BTreeMap<usize, usize> = Default::default();
    let mut ok = true;
    for m in &pods {
        let elig = m.gang.map(|(gi, si)| w.eligible_nodes(gi, si));
        let topo = m.gang.map(|(gi, _)| w.gangs[gi].gang.topology);
        w.flush_index();
        let dest = w
            .free_index()
            .range((m.shape.gpu_millis, 0, 0)..)
            .map(|k| k.2 as usize)
            .find(|&d| {
                let dn = &w.nodes[d];
                if d == ni || !m.shape.fits_in(&dn.free) {
                    return false;
                }
                match (m.gang, &elig) {
                    (Some((gi, _)), Some(e)) => {
                        if !e[d] || !w.reservation_allows(d, gi) {
                            return false;
                        }
                        // A move stays within the gang's required network
                        // domain and on capacity that outlives the gang.
                        if let Some(net) = w.gangs[gi].gang.network
                            && net.required
                        {
                            let depth = usize::from(net.level.max(1));
                            let here = src.network.get(..depth);
                            if here.is_none() || dn.node.network.get(..depth) != here {
                                return false;
                            }
                        }
                        if !w.outlives(gi, dn.node.capacity_ends_at, crate::time::Dur::secs(0)) {
                            return false;
                        }
                        match topo.unwrap_or_default() {
                            Topology::SameZone => dn.node.zone == src.zone,
                            Topology::SamePlacementGroup => {
                                dn.node.placement_group.is_some()
                                    && dn.node.placement_group == src.placement_group
                            }
                            Topology::SameNode => same_node_target.get(&gi).is_none_or(|&t| t == d),
                            Topology::Any => true,
                        }
                    }
                    _ => {
                        dn.exclusive.is_none()
                            && dn.node.taints.iter().all(|t| src.taints.contains(t))
                    }
                }
            });
        match dest {
            Some(d) => {
                if let Some((gi, _)) = m.gang {
                    same_node_target.entry(gi).or_insert(d);
                }
                w.take(d, &m.shape, 1);
                done.push((d, m.shape.clone()));
            }
            None => {
                ok = false;
                break;
            }
        }
    }
    if !ok {
        for (d, s) in done.into_iter().rev() {
            w.give(d, &s, 1);
        }
    }
    ok
}

fn replacement(w: &World<'_>, ni: usize) -> Option<usize> {
    let n = &w.nodes[ni];
    let p = n.pool?;
    let price = n.node.price?;
    let mut used = n.node.allocatable.clone();
    used.saturating_sub(&n.free);
    let mut best: Option<(u64, usize)> = None;
    for &o in &w.pool_offerings[p] {
        let off = w.offerings[o];
        let Some(op) = off.price else { continue };
        if !off.usable_at(w.now) || op.0 >= price.0 || off.zone != n.node.zone {
            continue;
        }
        if n.node.placement_group.is_some() && !off.placement_groups {
            continue;
        }
        // Into a reservation only while it has room and outlives every
        // gang that moves over.
        if let Some(r) = &off.reservation
            && (w.reserved_left[o] == Some(0)
                || !n.gangs.iter().all(|&gi| {
                    w.outlives(gi, r.machines_end(), crate::time::Dur::secs(off.boot_secs))
                }))
        {
            continue;
        }
        if !used.fits_in(&off.resources) {
            continue;
        }
        let labels = crate::labels::new_node_labels(w.pools[p], off);
        let gangs_ok = n.gangs.iter().all(|&gi| {
            let g = w.gangs[gi].gang;
            g.assignments
                .iter()
                .filter(|a| a.node == n.node.name)
                .all(|a| {
                    g.pod_set(&a.pod_set).is_some_and(|ps| {
                        crate::index::pod_set_matches(
                            ps,
                            None,
                            &labels,
                            &w.pools[p].taints,
                            off.gpu_model.as_ref(),
                            off.gpu_memory_mib,
                        ) && fit_count(&off.resources, &ps.requests) > 0
                    })
                })
        });
        if gangs_ok && best.is_none_or(|b| op.0 < b.0) {
            best = Some((op.0, o));
        }
    }
    let (_, o) = best?;
    // Limits, counting the replacement while both run.
    let pool = w.pools[p];
    let u = &w.pool_usage[p];
    let off = w.offerings[o];
    let l = &pool.limits;
    if l.max_nodes.is_some_and(|m| u.nodes + 1 > m)
        || l.max_gpus
            .is_some_and(|m| u.gpus + u64::from(off.gpu_count) > m)
        || l.max_price_per_hour
            .is_some_and(|m| u.price + off.price.map_or(0, |p| p.0) > m.0)
    {
        return None;
    }
    Some(o)
}

fn utilization_percent(n: &crate::index::NodeInfo<'_>) -> u64 {
    let a = &n.node.allocatable;
    let (total, free) = if a.gpu_millis > 0 {
        (a.gpu_millis, n.free.gpu_millis)
    } else {
        (a.cpu_millis, n.free.cpu_millis)
    };
    if total == 0 {
        return 0;
    }
    (total.saturating_sub(free)).saturating_mul(100) / total
}

/// Adds consolidation removals.
pub(crate) fn plan(w: &mut World<'_>, cx: &mut Cycle) {
    let now = w.now;
    for p in 0..w.pools.len() {
        let warm: Vec<usize> = crate::warm::kept(w, p)
            .into_iter()
            .map(|k| {
                let n = w.nodes[k.node].node;
                cx.plan.warm.push(crate::plan::WarmNode {
                    node: n.name.clone(),
                    pool: w.pools[p].name.clone(),
                    gpus: k.class,
                    price: n.price.unwrap_or_default(),
                    demand: k.demand,
                });
                k.node
            })
            .collect();
        let mut left = budget(w, p);
        if left == 0 {
            continue;
        }
        let d = w.pools[p].disruption.clone();
        let pool_name = w.pools[p].name.clone();
        let nodes: Vec<usize> = (0..w.nodes.len())
            .filter(|&ni| w.nodes[ni].pool == Some(p))
            .collect();
        // Empty nodes, except those the pool keeps warm.
        let mut empty: Vec<(crate::time::Time, usize)> = nodes
            .iter()
            .copied()
            .filter(|&ni| {
                let n = &w.nodes[ni];
                !untouchable(w, cx, ni)
                    && n.gangs.is_empty()
                    && warm.binary_search(&ni).is_err()
                    && n.node.pods.iter().all(|p| p.daemon)
                    && n.node
                        .empty_since
                        .is_some_and(|t| now >= t + d.consolidate_after)
            })
            .map(|ni| (w.nodes[ni].node.empty_since.unwrap_or_default(), ni))
            .collect();
        empty.sort();
        for (since, ni) in empty {
            if left == 0 {
                break;
            }
            left -= 1;
            w.mark_removed(ni);
            let n = w.nodes[ni].node;
            cx.plan.removals.push(Removal {
                node: n.name.clone(),
                pool: pool_name.clone(),
                kind: RemovalKind::Empty,
                saves_per_hour: n.price.unwrap_or_default(),
                message: format!(
                    "empty since {since}, longer than consolidateAfter {}",
                    d.consolidate_after
                ),
            });
        }
        if d.consolidation != ConsolidationPolicy::WhenUnderutilized || left == 0 {
            continue;
        }
        let threshold = u64::from(w.policy.underutilized_percent);
        let mut under: Vec<(u64, usize)> = nodes
            .iter()
            .copied()
            .filter(|&ni| {
                let n = &w.nodes[ni];
                !untouchable(w, cx, ni)
                    && now >= n.node.phase_since + d.consolidate_after
                    && utilization_percent(n) < threshold
                    && !movables(w, ni).is_empty()
            })
            .map(|ni| (utilization_percent(&w.nodes[ni]), ni))
            .collect();
        under.sort();
        for (util, ni) in under {
            if left == 0 {
                break;
            }
            if w.nodes[ni].removed {
                continue;
            }
            let n = w.nodes[ni].node;
            // Keep the node out of the index while its pods look for a home.
            w.mark_removed(ni);
            if try_moves(w, ni) {
                left -= 1;
                cx.plan.removals.push(Removal {
                    node: n.name.clone(),
                    pool: pool_name.clone(),
                    kind: RemovalKind::Underutilized,
                    saves_per_hour: n.price.unwrap_or_default(),
                    message: format!(
                        "{util}% utilized (threshold {threshold}%); its movable pods fit on other nodes"
                    ),
                });
                continue;
            }
            if let Some(o) = replacement(w, ni) {
                left -= 1;
                if let Some(l) = &mut w.reserved_left[o] {
                    *l = l.saturating_sub(1);
                }
                let off = w.offerings[o];
                let price = off.price.unwrap_or_default();
                let saves = crate::Price(n.price.map_or(0, |p| p.0).saturating_sub(price.0));
                let name = naming::replacement_name(&n.name);
                let u = &mut w.pool_usage[p];
                u.nodes += 1;
                u.gpus += u64::from(off.gpu_count);
                u.price += price.0;
                cx.plan.removals.push(Removal {
                    node: n.name.clone(),
                    pool: pool_name.clone(),
                    kind: RemovalKind::Replace {
                        with: NewNode {
                            idempotency_key: naming::idempotency_key(&n.name, "", 0, 0),
                            name,
                            pool: pool_name.clone(),
                            offering: off.key(),
                            price,
                            placement_group: n.placement_group.clone(),
                            grant: None,
                        },
                    },
                    saves_per_hour: saves,
                    message: format!(
                        "{util}% utilized; replaced by {} at {}/h, saving {saves}/h",
                        off.key(),
                        price
                    ),
                });
                continue;
            }
            // Not removable: back into the index.
            w.unmark_removed(ni);
        }
    }
}
