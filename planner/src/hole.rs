//! A hole in an idle node against a machine of the gang's own.
//!
//! Placing a gang on the free GPUs of a node that runs nothing else keeps
//! that whole node alive for the gang's life: without the gang it would be
//! consolidated after its pool's `consolidateAfter`. When a launch without
//! such nodes costs, over the gang's expected duration plus the new
//! machines' boot, below `Policy::own_machine_below_percent` of keeping them
//! up for that duration, the gang gets the launch instead and waits the
//! boot. A node that runs other work stays up for it anyway, so a hole in it
//! costs nothing more and is always taken.
//!
//! Only facts of the snapshot are read (prices, boot times, who runs where,
//! the expected duration), never the time, so the choice is a function of
//! the state like every other try. A launch chosen this way is marked
//! (`LaunchChoice::passed_over`): a re-plan may not read it as "no room".
//!
//! With `Policy::size_matched_placement`, a gang first looks only at nodes
//! no bigger than the smallest machine its pools may buy for it
//! ([`size_class`]), as a layout of node groups split by GPU count would
//! have it: it takes a hole there, or gets a machine of that size, and
//! takes a hole in a bigger machine only when no such launch is possible.
//! Reserved machines are the exception ([`paid_above`]): paid for whole,
//! used or not, a hole in one keeps up nothing that is not paid already,
//! so a gang of at least half such a machine may take it first.

use crate::index::{World, node_gpus};
use crate::placement::Group;
use crate::provisioning::LaunchChoice;
use crate::resources::fit_count;
use crate::takes::Take;
use crate::time::Dur;

/// The nodes of `takes` that run nothing but daemons (no gang, no other
/// pod) and have a known price: a gang placed there alone keeps them up.
/// Sorted, each once.
pub(crate) fn idle_hosts(w: &World<'_>, takes: &[Take]) -> Vec<usize> {
    let mut out: Vec<usize> = takes
        .iter()
        .map(|t| t.node)
        .filter(|&ni| {
            let n = &w.nodes[ni];
            n.gangs.is_empty()
                && n.exclusive.is_none()
                && n.node.pool.is_some()
                && n.node.price.is_some_and(|p| p.0 > 0)
                && n.node.pods.iter().all(|p| p.daemon)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The GPU count of the smallest machine the gang's pools may buy for each
/// of its groups, the largest over the groups: the size a split layout
/// (node groups by GPU count) would give the gang. `None` when no offering
/// holds a pod of some group.
pub(crate) fn size_class(w: &mut World<'_>, gi: usize, groups: &[Group]) -> Option<u64> {
    let mut sigs = Vec::with_capacity(groups.len());
    for g in groups {
        let sig = w.gang_sig_list(gi).get(g.set).copied()?;
        let s = &g.shape;
        sigs.push((sig, s.gpu_millis, s.cpu_millis, s.memory_bytes));
    }
    let key = (w.gangs[gi].queue, sigs);
    if let Some(&c) = w.size_classes.get(&key) {
        return c;
    }
    let c = size_class_uncached(w, gi, groups);
    w.size_classes.insert(key, c);
    c
}

fn size_class_uncached(w: &mut World<'_>, gi: usize, groups: &[Group]) -> Option<u64> {
    let pools = w.queue_pools(w.gangs[gi].queue);
    let mut class = 0;
    for g in groups {
        let mut smallest: Option<u64> = None;
        for &p in &pools {
            for i in 0..w.pool_offerings[p].len() {
                let o = w.pool_offerings[p][i];
                let off = w.offerings[o];
                if fit_count(&off.resources, &g.shape) == 0 || !w.eligible_new(gi, g.set, p, o) {
                    continue;
                }
                let gpus = u64::from(off.gpu_count);
                smallest = Some(smallest.map_or(gpus, |s| s.min(gpus)));
            }
        }
        class = class.max(smallest?);
    }
    Some(class)
}

/// True when a pool has a node with more GPUs than `class`: a machine a
/// gang of that size would keep up beyond its share if it took a hole in it.
pub(crate) fn has_bigger(w: &World<'_>, class: u64) -> bool {
    w.nodes
        .iter()
        .any(|n| n.pool.is_some() && node_gpus(n.node) > class)
}

/// With a reserved node (paid for whole, whether used or not) of more GPUs
/// than `class`, and at most twice as many, in some pool: the nodes of
/// more GPUs than `class` other than those, sorted, which size-matched
/// placement avoids by name so that a gang may take a hole in such a
/// reserved machine, as it keeps up nothing that is not paid for already.
/// `None` when there is no such reserved node (bigger nodes are then
/// avoided by size).
///
/// Gangs of less than half a reserved machine stay off it: they would
/// take its GPUs one by one and keep off it the bigger gangs, whose own
/// machines cost more per GPU (on the AWS catalog a 4-GPU p3.8xlarge
/// against a 1-GPU g4dn.xlarge), so the reservation would save less. On
/// the reservations row of `muster simulate --matrix` this rule cost less
/// than opening reserved machines to gangs of any size, or of a quarter
/// of one and more (the commit that made the rule gives the figures).
pub(crate) fn paid_above(w: &World<'_>, class: u64) -> Option<Vec<usize>> {
    let bigger = |n: &crate::index::NodeInfo<'_>| {
        n.pool.is_some() && !n.removed && node_gpus(n.node) > class
    };
    let reserved = |n: &crate::index::NodeInfo<'_>| {
        n.node.capacity_type == Some(crate::model::CapacityType::Reserved)
            && class.saturating_mul(2) >= node_gpus(n.node)
    };
    if w.reserved_max_gpus.is_none_or(|m| m <= class)
        || !w.nodes.iter().any(|n| bigger(n) && reserved(n))
    {
        return None;
    }
    Some(
        (0..w.nodes.len())
            .filter(|&ni| bigger(&w.nodes[ni]) && !reserved(&w.nodes[ni]))
            .collect(),
    )
}

/// The size class size-matched placement holds the gang to: `None` when
/// the policy is off, no offering holds a group, or no pool node is bigger
/// (there is nothing to keep it off).
pub(crate) fn matched_class(w: &mut World<'_>, gi: usize, groups: &[Group]) -> Option<u64> {
    if !w.policy.size_matched_placement {
        return None;
    }
    size_class(w, gi, groups).filter(|&c| has_bigger(w, c))
}

/// Runs `f` as size-matched placement searches for a gang of size class
/// `class`: pool nodes with more GPUs are not taken, except the reserved
/// machines [`paid_above`] leaves open. Admission and freed room both
/// search through this, so a gang finds the same room either way.
pub(crate) fn size_matched<R>(
    w: &mut World<'_>,
    class: u64,
    f: impl FnOnce(&mut World<'_>) -> R,
) -> R {
    match paid_above(w, class) {
        Some(paid) => w.with_avoided(&paid, f),
        None => {
            w.avoid_above_gpus = Some(class);
            let out = f(w);
            // (packing failures found without the bigger nodes are cached
            // under their own key, `World::avoid_above_gpus`)
            w.avoid_above_gpus = None;
            out
        }
    }
}

/// Micro-dollars of keeping `hosts` up for `d`.
pub(crate) fn keep_cost(w: &World<'_>, hosts: &[usize], d: Dur) -> u64 {
    hosts
        .iter()
        .map(|&ni| w.nodes[ni].node.price.map_or(0, |p| p.0))
        .map(|per_hour| per_hour_for(per_hour, d.as_secs()))
        .fold(0u64, u64::saturating_add)
}

/// Micro-dollars of the launch `c` over `d`: its expected cost (spot risk
/// included) plus its machines during the longest boot among them, plus
/// keeping any idle node it also takes a hole in.
pub(crate) fn launch_cost(w: &World<'_>, c: &LaunchChoice, d: Dur) -> u64 {
    let boot = c
        .new
        .iter()
        .map(|n| w.offerings[n.offering].boot_secs)
        .max()
        .unwrap_or(0);
    c.expected
        .saturating_add(per_hour_for(c.price, boot))
        .saturating_add(keep_cost(w, &idle_hosts(w, &c.existing), d))
}

/// True when `launch` (micro-dollars) is below `percent` % of `keep`.
pub(crate) fn own_machine_wins(launch: u64, keep: u64, percent: u32) -> bool {
    u128::from(launch) * 100 < u128::from(keep) * u128::from(percent)
}

fn per_hour_for(per_hour: u64, secs: u64) -> u64 {
    let v = u128::from(per_hour) * u128::from(secs) / 3600;
    u64::try_from(v).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_must_be_below_the_share_of_keeping() {
        assert!(own_machine_wins(49, 100, 50));
        assert!(!own_machine_wins(50, 100, 50));
        assert!(!own_machine_wins(0, 100, 0), "0 % never launches");
        assert!(own_machine_wins(u64::MAX / 2, u64::MAX, 100));
    }

    #[test]
    fn prices_per_hour_scale_with_seconds() {
        assert_eq!(per_hour_for(3_600_000, 1800), 1_800_000);
        assert_eq!(per_hour_for(u64::MAX, u64::MAX), u64::MAX);
    }
}
