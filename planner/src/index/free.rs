//! The free-capacity indexes of the working state: schedulable nodes
//! ordered by free (GPU, CPU), for all nodes and per zone. Commits change
//! nodes and only note them; every search first brings the indexes up to
//! date with [`World::flush_index`], and the getters assert it in debug
//! builds. The indexes are first built by the first search, not with the
//! working state: a re-plan commits many tries taken over before it
//! searches, and would otherwise build them twice.

use std::collections::BTreeSet;

use super::{FreeKey, World};
use crate::resources::Resources;

impl World<'_> {
    /// Builds the free-capacity indexes from every node, in bulk (sorted,
    /// then collected): the same sets as inserting node by node, at a
    /// fraction of the cost.
    pub(super) fn rebuild_index(&mut self) {
        let mut keys: Vec<FreeKey> = Vec::with_capacity(self.nodes.len());
        for i in 0..self.nodes.len() {
            if let Some(key) = self.index_key(i) {
                keys.push(key);
            }
        }
        // The keys are distinct (the last part is the node). Sorted here
        // (unstable sorting is the cheaper), they are split by zone in
        // order, and collecting sorted input only checks the order.
        keys.sort_unstable();
        let mut per_zone: Vec<Vec<FreeKey>> = vec![Vec::new(); self.zones.len()];
        for &key in &keys {
            if let Some(z) = per_zone.get_mut(self.node_zone[key.2 as usize] as usize) {
                z.push(key);
            }
        }
        self.free_index = keys.into_iter().collect();
        self.zone_index = per_zone.into_iter().map(BTreeSet::from_iter).collect();
    }

    /// The free-capacity index of all schedulable nodes. Only read after
    /// [`World::flush_index`].
    pub fn free_index(&self) -> &BTreeSet<FreeKey> {
        debug_assert!(
            self.indexed && self.stale.is_empty(),
            "free-capacity index read while stale"
        );
        &self.free_index
    }

    /// The free-capacity index of one zone's nodes (see
    /// [`World::free_index`]).
    pub fn zone_index(&self, zone: usize) -> Option<&BTreeSet<FreeKey>> {
        debug_assert!(
            self.indexed && self.stale.is_empty(),
            "free-capacity index read while stale"
        );
        self.zone_index.get(zone)
    }

    /// The key of node `ni` in the free-capacity indexes, when it is in them.
    fn index_key(&self, ni: usize) -> Option<FreeKey> {
        let n = &self.nodes[ni];
        (n.node.schedulable() && !n.removed).then_some((
            n.free.gpu_millis,
            n.free.cpu_millis,
            ni as u32,
        ))
    }

    /// Notes that node `ni` is about to change (its key now, if first).
    fn touch(&mut self, ni: usize) {
        if !self.indexed {
            return;
        }
        if let Some(m) = self.stale_mark.get_mut(ni)
            && !*m
        {
            *m = true;
            let key = self.index_key(ni);
            self.stale.push((ni as u32, key));
        }
    }

    /// Brings the free-capacity indexes up to date with every node changed
    /// since the last call.
    pub fn flush_index(&mut self) {
        if !self.indexed {
            self.rebuild_index();
            self.indexed = true;
            return;
        }
        let mut stale = std::mem::take(&mut self.stale);
        // Past a quarter of the nodes, building the indexes again in bulk
        // (sorted keys, collected) costs less than two updates per node.
        let bulk = stale.len() * 4 > self.nodes.len();
        for &(ni, old) in &stale {
            let ni = ni as usize;
            self.stale_mark[ni] = false;
            if bulk {
                continue;
            }
            let new = self.index_key(ni);
            if old == new {
                continue;
            }
            let zone = self.zone_index.get_mut(self.node_zone[ni] as usize);
            for set in std::iter::once(&mut self.free_index).chain(zone) {
                if let Some(k) = old {
                    set.remove(&k);
                }
                if let Some(k) = new {
                    set.insert(k);
                }
            }
        }
        if bulk {
            self.rebuild_index();
        }
        stale.clear();
        self.stale = stale;
    }

    /// Takes `n` pods of `shape` from a node's free capacity.
    pub fn take(&mut self, ni: usize, shape: &Resources, n: u32) {
        self.touch(ni);
        self.nodes[ni]
            .free
            .saturating_sub(&shape.times(u64::from(n)));
    }

    /// Gives `n` pods of `shape` back to a node's free capacity.
    pub fn give(&mut self, ni: usize, shape: &Resources, n: u32) {
        self.generation += 1;
        self.touch(ni);
        self.nodes[ni].free.add(&shape.times(u64::from(n)));
    }

    /// Marks a node as removed this cycle (no longer schedulable).
    pub fn mark_removed(&mut self, ni: usize) {
        self.touch(ni);
        self.nodes[ni].removed = true;
    }

    /// Undoes [`World::mark_removed`].
    pub fn unmark_removed(&mut self, ni: usize) {
        self.generation += 1;
        self.touch(ni);
        self.nodes[ni].removed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Policy;
    use crate::synthetic::{self, Params};
    use proptest::prelude::*;

    /// What the free-capacity indexes hold when built from the nodes as
    /// they are now.
    fn fresh(w: &World<'_>) -> (BTreeSet<FreeKey>, Vec<BTreeSet<FreeKey>>) {
        let mut all = BTreeSet::new();
        let mut zones = vec![BTreeSet::new(); w.zones.len()];
        for i in 0..w.nodes.len() {
            if let Some(k) = w.index_key(i) {
                all.insert(k);
                zones[w.node_zone[i] as usize].insert(k);
            }
        }
        (all, zones)
    }

    proptest! {
        /// After any run of takes, gives and removals, bringing the indexes
        /// up to date (node by node for a few changed nodes, in bulk for
        /// many) gives the indexes built from scratch.
        #[test]
        fn flushed_indexes_equal_fresh_ones(
            ops in proptest::collection::vec((0u8..4, 0usize..1000, 1u32..4), 1..80),
            flush_every in 1usize..40,
        ) {
            let s = synthetic::generate(&Params {
                pods: 200,
                gangs: 20,
                nodes: 40,
                offerings: 40,
                seed: 3,
            });
            let policy = Policy::default();
            let mut w = World::build(&s, &policy, synthetic::NOW);
            let shape = Resources {
                gpu_millis: 500,
                cpu_millis: 1000,
                ..Resources::zero()
            };
            for (i, &(op, node, n)) in ops.iter().enumerate() {
                let ni = node % w.nodes.len();
                match op {
                    0 => w.take(ni, &shape, n),
                    1 => w.give(ni, &shape, n),
                    2 if !w.nodes[ni].removed => w.mark_removed(ni),
                    _ if w.nodes[ni].removed => w.unmark_removed(ni),
                    _ => w.take(ni, &shape, n),
                }
                if (i + 1) % flush_every == 0 {
                    w.flush_index();
                    let (all, zones) = fresh(&w);
                    prop_assert_eq!(w.free_index(), &all);
                    for (z, set) in zones.iter().enumerate() {
                        prop_assert_eq!(w.zone_index(z), Some(set));
                    }
                }
            }
            w.flush_index();
            let (all, _) = fresh(&w);
            prop_assert_eq!(w.free_index(), &all);
        }
    }
}
