//! Placing a whole gang on existing capacity: best-fit packing over the free
//! capacity of Ready, schedulable nodes that match the pods' selectors,
//! tolerations, GPU model and memory, under the gang's topology.
//!
//! Preferences, in order:
//! 1. One node for the whole gang when one holds it (the smallest such node:
//!    large holes stay open for large gangs).
//! 2. Otherwise, pod set by pod set (largest pods first): first the nodes the
//!    gang already uses, then the smallest node that takes every remaining
//!    pod of the set, else the node with the most free GPU (then CPU) — so
//!    the gang touches few nodes and finishes in the tightest hole.
//! 3. `SameZone` / `SamePlacementGroup`: the above within each zone or
//!    placement group; the domain touching fewest nodes wins, then the
//!    domain name.
//!
//! Nodes held exclusively for another gang, nodes being removed, and nodes
//! of GPU models whose quota has no room are never used.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::rc::Rc;

use crate::index::{FreeKey, World};
use crate::model::{GpuModel, Topology};
use crate::resources::{Resources, fit_count};
use crate::takes::Take;

/// Pods of one pod set to place.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Index of the pod set in the gang.
    pub set: usize,
    /// Requests of one pod.
    pub shape: Resources,
    /// Pods to place.
    pub count: u32,
    /// Static eligibility per node.
    pub elig: Rc<Vec<bool>>,
}

/// The pod groups of gang `gi` at `counts` (pods per pod set), each with
/// its static eligibility per node: what a try places or launches.
pub(crate) fn groups_for(w: &mut World<'_>, gi: usize, counts: &[u32]) -> Vec<Group> {
    let g = w.gangs[gi].gang;
    g.pod_sets
        .iter()
        .enumerate()
        .map(|(si, ps)| Group {
            set: si,
            shape: ps.requests.clone(),
            count: counts.get(si).copied().unwrap_or(0),
            elig: w.eligible_nodes(gi, si),
        })
        .collect()
}

/// Where a gang may go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'s> {
    pub gang: usize,
    pub excluded_models: &'s [GpuModel],
    pub zone: Option<&'s str>,
    pub placement_group: Option<&'s str>,
    /// One network domain: the nodes whose first layers are these
    /// (`Node::network`); `None` for any.
    pub network: Option<&'s [String]>,
}

impl<'s> Scope<'s> {
    /// Gang `gang`'s pods anywhere: no zone, placement group or network
    /// domain, only the GPU models its quota excludes.
    pub fn anywhere(gang: usize, excluded_models: &'s [GpuModel]) -> Scope<'s> {
        Scope {
            gang,
            excluded_models,
            zone: None,
            placement_group: None,
            network: None,
        }
    }

    /// The scope's zone and placement group as indices into `w.zones` and
    /// `w.pgs` (`u32::MAX` when no node has it), so the per-node checks
    /// compare numbers, not names.
    pub fn ids(&self, w: &World<'_>) -> ScopeIds {
        let id = |names: &[&str], x: &str| names.binary_search(&x).map_or(u32::MAX, |i| i as u32);
        ScopeIds {
            zone: self.zone.map(|z| id(&w.zones, z)),
            placement_group: self.placement_group.map(|p| id(&w.pgs, p)),
        }
    }

    /// True when the gang may use node `ni` within this scope (`ids` from
    /// [`Scope::ids`]).
    pub fn admits(&self, w: &World<'_>, ni: usize, ids: ScopeIds) -> bool {
        let n = &w.nodes[ni];
        if !w.reservation_allows(ni, self.gang)
            || n.removed
            || w.avoid.binary_search(&ni).is_ok()
            || w.avoid_above_gpus
                .is_some_and(|c| n.pool.is_some() && crate::index::node_gpus(n.node) > c)
        {
            return false;
        }
        if let Some(m) = &n.node.gpu_model
            && self.excluded_models.iter().any(|x| m.satisfies(x))
        {
            return false;
        }
        // Capacity that ends before the gang would (a Capacity Block).
        if n.node.capacity_ends_at.is_some()
            && !w.outlives(
                self.gang,
                n.node.capacity_ends_at,
                crate::time::Dur::secs(0),
            )
        {
            return false;
        }
        if ids.zone.is_some_and(|z| w.node_zone[ni] != z) {
            return false;
        }
        if let Some(pg) = ids.placement_group
            && w.node_pg[ni] != Some(pg)
        {
            return false;
        }
        if let Some(d) = self.network
            && n.node.network.get(..d.len()) != Some(d)
        {
            return false;
        }
        true
    }
}

impl<'s> Scope<'s> {
    /// This scope narrowed to placement group `d` (`by_pg`) or zone `d`.
    fn within(&self, d: &'s str, by_pg: bool) -> Scope<'s> {
        if by_pg {
            Scope {
                placement_group: Some(d),
                ..*self
            }
        } else {
            Scope {
                zone: Some(d),
                ..*self
            }
        }
    }
}

/// The free-capacity index a search within `ids` walks: the zone's own
/// when the scope is a zone, else the whole one (nodes outside the scope
/// are then skipped by [`Scope::admits`]).
fn index_for<'w>(w: &'w World<'_>, ids: ScopeIds) -> &'w BTreeSet<FreeKey> {
    static EMPTY: BTreeSet<FreeKey> = BTreeSet::new();
    match ids.zone {
        Some(z) => w.zone_index(z as usize).unwrap_or(&EMPTY),
        None => w.free_index(),
    }
}

/// A [`Scope`]'s zone and placement group by index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScopeIds {
    zone: Option<u32>,
    placement_group: Option<u32>,
}

/// Working consumption of one trial placement.
struct Trial {
    /// (node, resources taken on it); a gang touches few nodes.
    used: Vec<(usize, Resources)>,
    touched: Vec<usize>,
    takes: Vec<Take>,
}

impl Trial {
    fn new() -> Trial {
        Trial {
            used: Vec::new(),
            touched: Vec::new(),
            takes: Vec::new(),
        }
    }

    fn fit(&self, w: &World<'_>, ni: usize, shape: &Resources) -> u32 {
        match self.used.iter().find(|(n, _)| *n == ni) {
            None => fit_count(&w.nodes[ni].free, shape),
            Some((_, u)) => {
                let mut f = w.nodes[ni].free.clone();
                f.saturating_sub(u);
                fit_count(&f, shape)
            }
        }
    }

    fn take(&mut self, ni: usize, gi: usize, shape: &Resources, n: u32) {
        if n == 0 {
            return;
        }
        let add = shape.times(u64::from(n));
        match self.used.iter_mut().find(|(m, _)| *m == ni) {
            Some((_, u)) => u.add(&add),
            None => self.used.push((ni, add)),
        }
        if !self.touched.contains(&ni) {
            self.touched.push(ni);
        }
        self.takes.push(Take {
            node: ni,
            group: gi,
            n,
        });
    }
}

fn shape_order(groups: &[Group]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&groups[a].shape, &groups[b].shape);
        y.gpu_millis
            .cmp(&x.gpu_millis)
            .then(y.cpu_millis.cmp(&x.cpu_millis))
            .then(y.memory_bytes.cmp(&x.memory_bytes))
            .then(a.cmp(&b))
    });
    order
}

/// The smallest node (by free GPU, then CPU) holding every pod of `groups`.
pub(crate) fn single_node(
    w: &World<'_>,
    groups: &[Group],
    scope: &Scope<'_>,
    extra: &[usize],
) -> Option<usize> {
    let mut total = Resources::zero();
    for g in groups {
        total.add(&g.shape.times(u64::from(g.count)));
    }
    let ids = scope.ids(w);
    let ok = |ni: usize| {
        groups.iter().all(|g| g.count == 0 || g.elig[ni])
            && total.fits_in(&w.nodes[ni].free)
            && scope.admits(w, ni, ids)
    };
    index_for(w, ids)
        .range((total.gpu_millis, 0, 0)..)
        .map(|k| k.2 as usize)
        .find(|&ni| ok(ni))
        .or_else(|| extra.iter().copied().find(|&ni| ok(ni)))
}

/// Packs `groups` onto free capacity within `scope`; `extra` nodes (in
/// flight, not in the free index) are used last. Returns the takes and the
/// pods left over per group; with `partial` false, stops at the first group
/// that does not fit.
pub(crate) fn pack(
    w: &World<'_>,
    groups: &[Group],
    scope: &Scope<'_>,
    extra: &[usize],
    partial: bool,
) -> (Vec<Take>, Vec<u32>) {
    let mut t = Trial::new();
    let ids = scope.ids(w);
    let index = index_for(w, ids);
    let mut left: Vec<u32> = groups.iter().map(|g| g.count).collect();
    // Failures are cached only for plain scopes (no own reservations, no
    // extra nodes; the excluded GPU models are part of the key) and the
    // first group of a trial.
    // Nor when a node's capacity ends: which nodes a gang may use then
    // depends on its expected duration, which the key does not hold.
    let cacheable = !partial
        && scope.network.is_none()
        && extra.is_empty()
        && w.gangs[scope.gang].reserved.is_empty()
        && !w.capacity_ends;
    let excluded = if scope.excluded_models.is_empty() {
        0
    } else {
        crate::naming::fnv1a64(format!("{:?}", scope.excluded_models).as_bytes()) | 1
    };
    let domain = match (scope.zone, scope.placement_group) {
        (Some(z), _) => 1 + w.zones.binary_search(&z).unwrap_or(0) as u32,
        (None, Some(p)) => 100_000 + w.pgs.binary_search(&p).unwrap_or(0) as u32,
        (None, None) => 0,
    };
    for gi in shape_order(groups) {
        let g = &groups[gi];
        let mut rem = g.count;
        if rem == 0 {
            continue;
        }
        let first = t.takes.is_empty();
        let key = (
            std::rc::Rc::as_ptr(&g.elig) as usize,
            g.shape.gpu_millis,
            g.shape.cpu_millis,
            g.shape.memory_bytes,
            domain,
            excluded,
            w.avoid_above_gpus.unwrap_or(u64::MAX),
        );
        if cacheable
            && first
            && g.shape.extended.is_empty()
            && let Some(&(generation, n)) = w.pack_failures.borrow().get(&key)
            && generation == w.generation
            && rem >= n
        {
            left[gi] = rem;
            return (t.takes, left);
        }
        let usable = |t: &Trial, ni: usize| {
            g.elig[ni] && scope.admits(w, ni, ids) && t.fit(w, ni, &g.shape) > 0
        };
        // 1. Nodes the gang already uses.
        for ti in 0..t.touched.len() {
            let ni = t.touched[ti];
            if rem == 0 {
                break;
            }
            if g.elig[ni] && scope.admits(w, ni, ids) {
                let k = t.fit(w, ni, &g.shape).min(rem);
                t.take(ni, gi, &g.shape, k);
                rem -= k;
            }
        }
        // 2. Smallest node for all that remains, else the largest node.
        let mut skip: Vec<usize> = t.touched.clone();
        let mut below: Option<FreeKey> = None;
        // While bigger nodes are avoided (size-matched placement), no node
        // with more free GPUs than the size class can be used: the walks
        // stop below that key instead of passing every bigger node.
        let top: Option<FreeKey> = w
            .avoid_above_gpus
            .map(|c| (c.saturating_mul(1000).saturating_add(1), 0, 0));
        while rem > 0 {
            let need = g.shape.times(u64::from(rem));
            let start = (need.gpu_millis, 0, 0);
            let upper = match top {
                Some(k) if start >= k => None,
                Some(k) => Some(Bound::Excluded(k)),
                None => Some(Bound::Unbounded),
            };
            let best = upper
                .into_iter()
                .flat_map(|u| index.range((Bound::Included(start), u)))
                .map(|k| k.2 as usize)
                .find(|&ni| {
                    g.elig[ni]
                        && !skip.contains(&ni)
                        && usable(&t, ni)
                        && t.fit(w, ni, &g.shape) >= rem
                });
            if let Some(ni) = best {
                t.take(ni, gi, &g.shape, rem);
                rem = 0;
                break;
            }
            // The walk down resumes below the node it took last: every node
            // above was taken or refused, and stays so (the trial only uses
            // more, `skip` only grows, the rest is fixed during a packing).
            let lo = (g.shape.gpu_millis, 0, 0);
            // (`below` was found under `top`, so it is the tighter bound.)
            let hi = match (below, top) {
                (Some(k), _) | (None, Some(k)) => k,
                (None, None) => (u64::MAX, u64::MAX, u32::MAX),
            };
            let unbounded = below.is_none() && top.is_none();
            if !unbounded && lo >= hi {
                break;
            }
            let hi = if unbounded {
                Bound::Unbounded
            } else {
                Bound::Excluded(hi)
            };
            let largest = index
                .range((Bound::Included(lo), hi))
                .rev()
                .find(|k| {
                    let ni = k.2 as usize;
                    g.elig[ni] && !skip.contains(&ni) && usable(&t, ni)
                })
                .copied();
            match largest {
                Some(key) => {
                    below = Some(key);
                    let ni = key.2 as usize;
                    let k = t.fit(w, ni, &g.shape).min(rem);
                    t.take(ni, gi, &g.shape, k);
                    if !skip.contains(&ni) {
                        skip.push(ni);
                    }
                    rem -= k;
                }
                None => break,
            }
        }
        // 3. Nodes in flight.
        for &ni in extra {
            if rem == 0 {
                break;
            }
            if !skip.contains(&ni) && usable(&t, ni) {
                let k = t.fit(w, ni, &g.shape).min(rem);
                t.take(ni, gi, &g.shape, k);
                rem -= k;
            }
        }
        left[gi] = rem;
        if rem > 0 && !partial {
            if cacheable && first && g.shape.extended.is_empty() {
                let mut f = w.pack_failures.borrow_mut();
                let e = f.entry(key).or_insert((w.generation, g.count));
                if e.0 != w.generation || g.count < e.1 {
                    *e = (w.generation, g.count);
                }
            }
            return (t.takes, left);
        }
    }
    (t.takes, left)
}

fn whole(w: &World<'_>, groups: &[Group], scope: &Scope<'_>) -> Option<Vec<Take>> {
    if let Some(ni) = single_node(w, groups, scope, &[]) {
        return Some(all_on(ni, groups));
    }
    let (takes, left) = pack(w, groups, scope, &[], false);
    left.iter().all(|&l| l == 0).then_some(takes)
}

/// Every pod of every group on node `ni`.
fn all_on(ni: usize, groups: &[Group]) -> Vec<Take> {
    groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.count > 0)
        .map(|(gi, g)| Take {
            node: ni,
            group: gi,
            n: g.count,
        })
        .collect()
}

fn nodes_touched(takes: &[Take]) -> usize {
    takes.iter().map(|t| t.node).collect::<BTreeSet<_>>().len()
}

/// Zones (or placement groups) of schedulable nodes eligible for any group.
pub(crate) fn domains<'w>(w: &'w World<'_>, groups: &[Group], by_pg: bool) -> Vec<&'w str> {
    let names: &[&str] = if by_pg { &w.pgs } else { &w.zones };
    let mut seen = vec![false; names.len()];
    let mut left = names.len();
    for k in w.free_index() {
        if left == 0 {
            break;
        }
        let ni = k.2 as usize;
        let id = if by_pg {
            w.node_pg[ni]
        } else {
            Some(w.node_zone[ni])
        };
        if let Some(id) = id
            && !seen[id as usize]
            && groups.iter().any(|g| g.elig[ni])
        {
            seen[id as usize] = true;
            left -= 1;
        }
    }
    names
        .iter()
        .zip(seen)
        .filter(|(_, s)| *s)
        .map(|(n, _)| *n)
        .collect()
}

/// Whether [`place`] finds room now, given that it found none at an
/// earlier point where every node but those of `changed` was as it is now.
/// For `SameZone` and `SamePlacementGroup` only the zones or placement
/// groups holding a changed node are searched again: the others are as
/// they were, and had no room.
pub(crate) fn place_finds_room_again(
    w: &World<'_>,
    groups: &[Group],
    topology: Topology,
    scope: &Scope<'_>,
    changed: &[usize],
) -> bool {
    if w.gangs[scope.gang].gang.network.is_some() {
        return place(w, groups, topology, scope).is_some();
    }
    let by_pg = match topology {
        Topology::Any | Topology::SameNode => return place(w, groups, topology, scope).is_some(),
        Topology::SameZone => false,
        Topology::SamePlacementGroup => true,
    };
    if groups.iter().all(|g| g.count == 0) {
        return true;
    }
    // The zones or placement groups of changed nodes, each once, in order
    // (a domain without a node the gang may use has no room either, as
    // `place` would not search it).
    let mut ids: Vec<u32> = changed
        .iter()
        .filter_map(|&ni| {
            if by_pg {
                w.node_pg[ni]
            } else {
                Some(w.node_zone[ni])
            }
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let names: &[&str] = if by_pg { &w.pgs } else { &w.zones };
    ids.into_iter().any(|id| {
        let Some(&d) = names.get(id as usize) else {
            return false;
        };
        whole(w, groups, &scope.within(d, by_pg)).is_some()
    })
}

/// Places every pod of `groups` on existing, Ready capacity, or returns None.
pub(crate) fn place(
    w: &World<'_>,
    groups: &[Group],
    topology: Topology,
    scope: &Scope<'_>,
) -> Option<Vec<Take>> {
    if groups.iter().all(|g| g.count == 0) {
        return Some(Vec::new());
    }
    if scope.network.is_none()
        && let Some(net) = w.gangs[scope.gang].gang.network
    {
        let found = place_in_network(w, groups, topology, scope, net);
        if found.is_some() || net.required {
            return found;
        }
    }
    match topology {
        Topology::SameNode => single_node(w, groups, scope, &[]).map(|ni| all_on(ni, groups)),
        Topology::Any => whole(w, groups, scope),
        Topology::SameZone | Topology::SamePlacementGroup => {
            let by_pg = topology == Topology::SamePlacementGroup;
            let mut best: Option<Vec<Take>> = None;
            for d in domains(w, groups, by_pg) {
                if let Some(takes) = whole(w, groups, &scope.within(d, by_pg))
                    && best
                        .as_ref()
                        .is_none_or(|b| nodes_touched(&takes) < nodes_touched(b))
                {
                    best = Some(takes);
                }
            }
            best
        }
    }
}

/// A gang with a network topology on existing nodes: within one network
/// domain, the tightest level first — from the deepest layer any node has
/// up to the gang's level when required, up to the broadest when
/// preferred (the caller then tries anywhere). At each level the domain
/// whose placement touches the fewest nodes wins, then the domain order.
/// Nodes that say nothing of their network are in no domain.
fn place_in_network(
    w: &World<'_>,
    groups: &[Group],
    topology: Topology,
    scope: &Scope<'_>,
    net: crate::model::NetworkTopology,
) -> Option<Vec<Take>> {
    let deepest = w
        .nodes
        .iter()
        .map(|n| n.node.network.len())
        .max()
        .unwrap_or(0);
    let level = usize::from(net.level.max(1));
    let lowest = if net.required { level } else { 1 };
    if deepest < lowest {
        return None;
    }
    for depth in (lowest..=deepest).rev() {
        let mut domains: Vec<&[String]> = w
            .nodes
            .iter()
            .filter_map(|n| n.node.network.get(..depth))
            .collect();
        domains.sort_unstable();
        domains.dedup();
        let mut best: Option<Vec<Take>> = None;
        for d in domains {
            let within = Scope {
                network: Some(d),
                ..*scope
            };
            if let Some(takes) = place(w, groups, topology, &within)
                && best
                    .as_ref()
                    .is_none_or(|b| nodes_touched(&takes) < nodes_touched(b))
            {
                best = Some(takes);
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}
