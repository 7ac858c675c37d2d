//! Snapshot → indexed working state.
//!
//! [`World`] holds references into the snapshot (nothing is cloned but
//! labels and free capacity), sorted and de-duplicated so that the order of
//! input lists never matters, plus everything the decisions need to be fast:
//! free capacity per node, an ordered index of schedulable nodes by free
//! (GPU, CPU), per-pool usage for limits, and caches of static eligibility.
//!
//! Reservations: a node whose `reservedFor` names a gang that is
//! Provisioning (or still pending, after an interrupted launch) is held
//! *exclusively* for that gang. A node reserved for an Admitted or Running
//! gang is shared: that gang's pods are counted through its assignments and
//! the rest of the node is free for others. A node reserved for a gang that
//! is not in the snapshot is an orphan reservation: it is free, and the plan
//! releases it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use crate::labels;

mod build;
mod free;
mod sorting;

use crate::cover::{Cover, Kind};
use crate::launch_domain::Domain;
use crate::model::scheduling::{
    affinity_matches_by, selector_matches, selector_matches_by, tolerates_all,
};
use crate::model::{Gang, Node, NodePhase, Offering, PodSet, Pool, Queue};
use crate::resources::Resources;
use crate::snapshot::Policy;
use crate::takes::KnownExisting;
use crate::time::{Dur, Time};

/// A hash map with a fixed, fast hash (the multiply-rotate hash of rustc's
/// `FxHasher`): the planner's maps are keyed by small numbers and names it
/// made itself, so no protection against chosen collisions is needed, and
/// the work per plan stays the same from run to run. Nothing iterates these
/// maps, so their order never reaches a plan.
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A hash set with the hash of [`FastMap`]; nothing iterates these sets.
pub(crate) type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<FastHasher>>;

/// See [`FastMap`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// What the planner does with a Provisioning gang this cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProvState {
    /// Not provisioning.
    None,
    /// Still waiting for its nodes.
    Waiting,
    /// Every node it holds is Ready: admit.
    AllReady,
    /// A node it was promised is gone: plan the whole gang again.
    Replan,
    /// Past its deadline: release everything.
    TimedOut,
}

/// A node and its working state.
#[derive(Debug)]
pub(crate) struct NodeInfo<'a> {
    pub node: &'a Node,
    pub pool: Option<usize>,
    /// Allocatable minus every pod counted on it.
    pub free: Resources,
    /// The gang holding the node exclusively.
    pub exclusive: Option<usize>,
    /// Gangs with pods (assignments) on it.
    pub gangs: Vec<usize>,
    /// Set when the node was reserved for a gang whose provisioning timed out
    /// (offered to the next gang that fits) or for a gang that is gone.
    pub released_from: Option<ReleasedFrom>,
    /// A machine not Ready yet (`Pending`, `Launched`, or `Registered`: no
    /// Node, or a Node not Ready with its GPUs) although launched longer ago
    /// than its pool's provisioning timeout, or held for a gang past its
    /// provisioning deadline: never offered to a gang as capacity to come
    /// (nor handed over), so its release has no heir and cancels it. Without
    /// this, a machine that never joins, or joins but never turns Ready (a
    /// kubelet whose network plugin never starts), is handed from gang to
    /// gang until its `registrationTimeout` or `initializationTimeout`, each
    /// gang waiting out its own timeout on it.
    pub given_up: bool,
    /// Chosen for removal this cycle.
    pub removed: bool,
}

/// Why a node's reservation is given up this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReleasedFrom {
    /// The gang (index) timed out.
    Timeout(usize),
    /// The named gang no longer exists or holds nothing.
    Orphan(String),
}

/// A gang and its working state.
#[derive(Debug)]
pub(crate) struct GangInfo<'a> {
    pub gang: &'a Gang,
    pub queue: Option<usize>,
    /// Pods per pod set it holds (counted against quota and nodes).
    pub held: Vec<u32>,
    /// True when it holds quota and capacity.
    pub holds: bool,
    pub prov: ProvState,
    /// Nodes reserved for it (`reservedFor`).
    pub reserved: Vec<usize>,
    /// The node of each of its assignments (same order as
    /// `gang.assignments`; `None` when no node has that name), looked up
    /// once per cycle.
    pub assigned: Vec<Option<usize>>,
    /// The pod set of each of its assignments (same order; `None` when no
    /// pod set has that name), looked up once per cycle.
    pub assigned_sets: Vec<Option<usize>>,
}

/// A node's key in the free-capacity indexes: (free GPU millis, free CPU
/// millis, node index).
pub(crate) type FreeKey = (u64, u64, u32);

/// (eligibility vector, shape GPU, CPU, memory, domain, excluded GPU
/// models) of a cached packing failure.
pub(crate) type PackKey = (usize, u64, u64, u64, u32, u64, u64);

/// Launch domains and the offerings skipped as unavailable now.
pub(crate) type DomainSet = Rc<(Vec<Domain>, Vec<usize>)>;

/// Machine kinds of a domain, with each kind's position in the domain's
/// offerings.
pub(crate) type KindSet = Rc<(Vec<usize>, Vec<Kind>)>;

/// Usage of a pool, for its limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolUsage {
    pub nodes: u64,
    pub gpus: u64,
    pub price: u64,
}

/// The indexed working state of one planning cycle.
pub(crate) struct World<'a> {
    pub now: Time,
    pub policy: &'a Policy,
    /// Recent arrivals (`Snapshot::arrivals`), in the driver's order.
    pub arrivals: &'a [crate::snapshot::Arrival],
    pub queues: Vec<&'a Queue>,
    pub pools: Vec<&'a Pool>,
    pub offerings: Vec<&'a Offering>,
    pub nodes: Vec<NodeInfo<'a>>,
    pub gangs: Vec<GangInfo<'a>>,
    pub pool_ix: BTreeMap<&'a str, usize>,
    pub node_ix: FastMap<&'a str, usize>,
    /// Offerings each pool may buy (ignoring availability), in offering order.
    pub pool_offerings: Vec<Vec<usize>>,
    pub pool_usage: Vec<PoolUsage>,
    /// Schedulable nodes by (free GPU millis, free CPU millis, index); read
    /// through [`World::free_index`].
    free_index: BTreeSet<FreeKey>,
    /// The same, per zone (`node_zone`): a zone-scoped search visits only
    /// its zone's nodes, in the order of `free_index`.
    zone_index: Vec<BTreeSet<FreeKey>>,
    /// Nodes changed since the indexes were last brought up to date, each
    /// with its key in them then (`None`: not in them). A commit changes
    /// nodes without touching the indexes; the next search brings them up
    /// to date ([`World::flush_index`]), once per node however many
    /// commits changed it — so a run of commits taken over from an earlier
    /// plan costs no index updates until a try reads them.
    stale: Vec<(u32, Option<FreeKey>)>,
    /// Per node: it is in `stale`.
    stale_mark: Vec<bool>,
    /// The indexes have been built (by the first [`World::flush_index`]);
    /// until then no change is noted.
    indexed: bool,
    /// 64-bit hashes ([`name_hash`]) of the names given to new nodes this
    /// cycle: a name whose hash is not here is free; one whose hash is
    /// here is looked up in the cycle's launches. Hashing is cheaper than
    /// copying every name of every launch a re-plan takes over.
    pub new_names: FastSet<u64>,
    /// New nodes planned this cycle.
    pub new_nodes_planned: u32,
    /// Nodes in flight (Pending, Launched, Registered), by index.
    pub inflight: Vec<usize>,
    /// Per offering: machines still to be launched into its capacity
    /// reservation this cycle (`None`: not a reserved offering). Starts at
    /// what the cloud reports less the machines whose intent is written but
    /// not yet launched (the cloud has not counted them); each launch
    /// committed this cycle takes its machines.
    pub reserved_left: Vec<Option<u32>>,
    /// Some node has a capacity end (`Node::capacity_ends_at`): placements
    /// then depend on each gang's expected duration.
    pub capacity_ends: bool,
    /// Distinct zones of nodes, sorted; `node_zone[i]` indexes it.
    pub zones: Vec<&'a str>,
    /// Zone id of every node.
    pub node_zone: Vec<u32>,
    /// Distinct placement groups, sorted; `node_pg[i]` indexes it.
    pub pgs: Vec<&'a str>,
    /// Placement-group id of every node.
    pub node_pg: Vec<Option<u32>>,
    /// Bumped whenever free capacity grows (so cached failures expire).
    pub generation: u64,
    /// Smallest pod count of a shape that failed to pack, by (eligibility
    /// vector, shape, domain, excluded GPU models), with the generation it
    /// was seen at. Free
    /// capacity only shrinks between generations, so a failure stays valid.
    pub pack_failures: std::cell::RefCell<FastMap<PackKey, (u64, u32)>>,
    /// What a re-plan's check of an earlier launch found existing capacity
    /// gives a gang's launch search, when the check failed and the try is
    /// computed next, on the same state (`provisioning::reads_same_nodes`).
    pub known_existing: Option<KnownExisting>,
    /// Cheapest covers already computed this cycle, by domain and demand.
    pub cover_cache: FastMap<Vec<u64>, Option<Cover>>,
    /// Launch domains by (queue, topology, excluded GPU models), see
    /// `provisioning::build_domains`.
    pub domain_cache: FastMap<(Option<usize>, u8, u64), DomainSet>,
    /// Machine kinds of a domain for a list of pod-set signatures (see
    /// `provisioning::alike_kinds`), with their offering positions.
    pub kinds_cache: FastMap<Vec<u64>, KindSet>,
    pub(crate) elig_cache: FastMap<(Option<usize>, u32), Rc<Vec<bool>>>,
    /// Per signature: eligibility on new nodes, pool-major (0 unknown, 1
    /// no, 2 yes).
    pub(crate) new_elig_cache: Vec<Vec<u8>>,
    pub(crate) sig_ids: FastMap<String, u32>,
    /// Per gang: the signature id of each pod set.
    pub(crate) gang_sigs: Vec<Option<Vec<u32>>>,
    /// Nodes no gang may take while a try weighs a launch against them
    /// (`hole`), sorted; empty otherwise.
    pub(crate) avoid: Vec<usize>,
    /// While a size-matched try runs (`hole`): pool nodes with more GPUs
    /// than this are not taken. Part of the key of cached packing
    /// failures, so failures found without those nodes stay apart.
    pub(crate) avoid_above_gpus: Option<u64>,
    /// The most GPUs of a reserved pool node (`hole::paid_above`); `None`
    /// without reserved nodes.
    pub(crate) reserved_max_gpus: Option<u64>,
    /// Size classes (`hole::size_class`) computed this cycle, by queue and
    /// the (signature, shape) of each group: they read only what a cycle
    /// does not change.
    pub(crate) size_classes: FastMap<SizeClassKey, Option<u64>>,
}

/// Key of [`World::size_classes`].
pub(crate) type SizeClassKey = (Option<usize>, Vec<(u32, u64, u64, u64)>);

fn offering_cmp(a: &Offering, b: &Offering) -> Ordering {
    (
        a.provider,
        &a.zone,
        &a.instance_type,
        a.capacity_type,
        &a.node_class,
    )
        .cmp(&(
            b.provider,
            &b.zone,
            &b.instance_type,
            b.capacity_type,
            &b.node_class,
        ))
}

/// True when an offering may be bought by a pool (requirements only, not
/// availability).
pub(crate) fn pool_allows(pool: &Pool, o: &Offering) -> bool {
    if o.provider != pool.provider {
        return false;
    }
    if !o.node_class.is_empty() && !pool.node_class.is_empty() && o.node_class != pool.node_class {
        return false;
    }
    pool.requirements.admits(o)
}

/// Static fit of a pod set on a node's name (`None` for a node not
/// launched yet), labels, taints, GPU model and memory.
pub(crate) fn pod_set_matches(
    ps: &PodSet,
    name: Option<&str>,
    labels: &BTreeMap<String, String>,
    taints: &[crate::model::Taint],
    gpu_model: Option<&crate::model::GpuModel>,
    gpu_memory_mib: u64,
) -> bool {
    selector_matches(&ps.node_selector, labels)
        && affinity_matches_by(ps.affinity.as_ref(), name, |k| {
            labels.get(k).map(String::as_str)
        })
        && tolerates_all(&ps.tolerations, taints)
        && model_matches(ps, gpu_model, gpu_memory_mib)
}

/// Fit of a pod set on a GPU model and its memory.
pub(crate) fn model_matches(
    ps: &PodSet,
    gpu_model: Option<&crate::model::GpuModel>,
    gpu_memory_mib: u64,
) -> bool {
    if !ps.gpu_models.is_empty()
        && !gpu_model.is_some_and(|m| ps.gpu_models.iter().any(|w| m.satisfies(w)))
    {
        return false;
    }
    if ps.min_gpu_memory_mib > 0 && gpu_memory_mib < ps.min_gpu_memory_mib {
        return false;
    }
    true
}

/// A text that identifies a pod set's static constraints.
pub(crate) fn pod_set_signature(ps: &PodSet) -> String {
    format!(
        "{:?}|{:?}|{:?}|{:?}|{}|{}",
        ps.node_selector,
        ps.affinity,
        ps.tolerations,
        ps.gpu_models,
        ps.min_gpu_memory_mib,
        requests_accelerator(ps)
    )
}

/// True when a pod set requests GPUs or another device (an extended
/// resource such as a MIG profile). Only such pod sets get the pool's
/// taints tolerated by muster's pin: a pool's taint (by default
/// `nvidia.com/gpu=true:NoSchedule`) is there to keep other pods off, so a
/// CPU launcher beside GPU workers goes on a GPU node only when its own
/// tolerations say so.
pub(crate) fn requests_accelerator(ps: &PodSet) -> bool {
    ps.requests.gpu_millis > 0
        || ps.requests.extended.iter().any(|(k, v)| {
            *v > 0 && k != "ephemeral-storage" && k != "pods" && !k.starts_with("hugepages-")
        })
}

/// Node allocatable GPUs, whole.
pub(crate) fn node_gpus(n: &Node) -> u64 {
    n.allocatable.gpus_ceil()
}

impl<'a> World<'a> {
    /// Runs `f` with `nodes` avoided as well as what is avoided already
    /// ([`World::avoid`]), then avoids again only what was avoided before.
    /// Capacity grows back then, so packing failures found meanwhile
    /// expire (a new generation); those found before hold throughout.
    pub(crate) fn with_avoided<R>(&mut self, nodes: &[usize], f: impl FnOnce(&mut Self) -> R) -> R {
        if nodes.is_empty() {
            return f(self);
        }
        let mut all = self.avoid.clone();
        all.extend_from_slice(nodes);
        all.sort_unstable();
        all.dedup();
        let before = std::mem::replace(&mut self.avoid, all);
        let out = f(self);
        self.avoid = before;
        self.generation += 1;
        out
    }

    /// Pools a queue may use, in its order (all pools by weight then name
    /// when the queue lists none).
    pub fn queue_pools(&self, q: Option<usize>) -> Vec<usize> {
        let Some(q) = q else { return Vec::new() };
        let queue = self.queues[q];
        if queue.pools.is_empty() {
            let mut all: Vec<usize> = (0..self.pools.len()).collect();
            all.sort_by(|&a, &b| {
                self.pools[b]
                    .weight
                    .cmp(&self.pools[a].weight)
                    .then(self.pools[a].name.cmp(&self.pools[b].name))
            });
            return all;
        }
        let mut out = Vec::new();
        for name in &queue.pools {
            if let Some(&p) = self.pool_ix.get(name.as_str())
                && !out.contains(&p)
            {
                out.push(p);
            }
        }
        out
    }

    /// The signature id of a pod set's static constraints.
    pub fn sig_of(&mut self, ps: &PodSet) -> u32 {
        let key = pod_set_signature(ps);
        let next = self.sig_ids.len() as u32;
        *self.sig_ids.entry(key).or_insert(next)
    }

    /// Signature ids of every pod set of gang `gi` (cached).
    pub fn gang_sigs(&mut self, gi: usize) -> Vec<u32> {
        self.gang_sig_list(gi).to_vec()
    }

    /// Signature ids of every pod set of gang `gi`, computed once.
    pub(crate) fn gang_sig_list(&mut self, gi: usize) -> &[u32] {
        if self.gang_sigs[gi].is_none() {
            let g = self.gangs[gi].gang;
            let v: Vec<u32> = g.pod_sets.iter().map(|ps| self.sig_of(ps)).collect();
            self.gang_sigs[gi] = Some(v);
        }
        self.gang_sigs[gi].as_deref().unwrap_or(&[])
    }

    /// The signature id of pod set `si` of gang `gi`.
    fn gang_sig(&mut self, gi: usize, si: usize) -> Option<u32> {
        self.gang_sig_list(gi).get(si).copied()
    }

    /// Static eligibility of every node for pod set `si` of gang `gi`:
    /// labels (node selector and required node affinity, which also reads
    /// the node's name), taints, GPU model and memory, the queue's pools (unmanaged
    /// nodes are open to every queue), and the node not terminating.
    pub fn eligible_nodes(&mut self, gi: usize, si: usize) -> Rc<Vec<bool>> {
        let q = self.gangs[gi].queue;
        let Some(sig) = self.gang_sig(gi, si) else {
            return Rc::new(vec![false; self.nodes.len()]);
        };
        if let Some(v) = self.elig_cache.get(&(q, sig)) {
            return v.clone();
        }
        let ps = &self.gangs[gi].gang.pod_sets[si];
        let accelerated = requests_accelerator(ps);
        let pools = self.queue_pools(q);
        let explicit = q.is_some_and(|q| !self.queues[q].pools.is_empty());
        let mut v: Vec<bool> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let pool_ok = match n.pool {
                Some(p) => !explicit || pools.contains(&p),
                None => true,
            };
            // The pool's own taints are tolerated for pod sets that request
            // an accelerator: muster adds those tolerations when it pins the
            // gang (see `plan.rs`).
            let pool_taints: &[crate::model::Taint] = match n.pool {
                Some(p) if accelerated => &self.pools[p].taints,
                _ => &[],
            };
            let taints_ok = n
                .node
                .taints
                .iter()
                .filter(|t| !pool_taints.contains(t))
                .all(|t| tolerates_all(&ps.tolerations, std::slice::from_ref(t)));
            if !(pool_ok && n.node.phase != NodePhase::Terminating && taints_ok) {
                v.push(false);
                continue;
            }
            let pool = n.pool.map(|p| self.pools[p]);
            let label = |k: &str| labels::node_label(n.node, pool, k);
            let selected = selector_matches_by(&ps.node_selector, label)
                && affinity_matches_by(ps.affinity.as_ref(), Some(&n.node.name), label);
            v.push(selected && model_matches(ps, n.node.gpu_model.as_ref(), n.node.gpu_memory_mib));
        }
        let v = Rc::new(v);
        self.elig_cache.insert((q, sig), v.clone());
        v
    }

    /// Static eligibility of pod set `si` of gang `gi` on a new node of
    /// `pool` bought as offering `o`.
    pub fn eligible_new(&mut self, gi: usize, si: usize, pool: usize, o: usize) -> bool {
        let Some(sig) = self.gang_sig(gi, si) else {
            return false;
        };
        let sig = sig as usize;
        let per_sig = self.pools.len() * self.offerings.len();
        if self.new_elig_cache.len() <= sig {
            self.new_elig_cache.resize(sig + 1, Vec::new());
        }
        if self.new_elig_cache[sig].is_empty() {
            self.new_elig_cache[sig] = vec![0; per_sig];
        }
        let slot = pool * self.offerings.len() + o;
        match self.new_elig_cache[sig].get(slot) {
            Some(1) => return false,
            Some(2) => return true,
            _ => {}
        }
        let ps = &self.gangs[gi].gang.pod_sets[si];
        let p = self.pools[pool];
        let off = self.offerings[o];
        let lbl = if ps.node_selector.is_empty() && ps.affinity.is_none() {
            BTreeMap::new()
        } else {
            labels::new_node_labels(p, off)
        };
        // A new node carries only its pool's taints, which muster tolerates
        // for the pod sets that request an accelerator it pins there.
        let taints: &[crate::model::Taint] = if requests_accelerator(ps) {
            &[]
        } else {
            &p.taints
        };
        let v = pod_set_matches(
            ps,
            None,
            &lbl,
            taints,
            off.gpu_model.as_ref(),
            off.gpu_memory_mib,
        );
        if let Some(x) = self.new_elig_cache[sig].get_mut(slot) {
            *x = if v { 2 } else { 1 };
        }
        v
    }

    /// True when pod set `si` of gang `gi` has a required node affinity
    /// and, without it, would go on a new node of `pool` bought as
    /// offering `o` (for the reason of a gang that fits nowhere; not
    /// cached).
    pub fn excluded_by_affinity(&self, gi: usize, si: usize, pool: usize, o: usize) -> bool {
        let ps = &self.gangs[gi].gang.pod_sets[si];
        if ps.affinity.is_none() {
            return false;
        }
        let plain = PodSet {
            affinity: None,
            ..ps.clone()
        };
        let (p, off) = (self.pools[pool], self.offerings[o]);
        let taints: &[crate::model::Taint] = if requests_accelerator(ps) {
            &[]
        } else {
            &p.taints
        };
        pod_set_matches(
            &plain,
            None,
            &labels::new_node_labels(p, off),
            taints,
            off.gpu_model.as_ref(),
            off.gpu_memory_mib,
        )
    }

    /// True when gang `gi` may put pods on node `ni` now (reservations).
    pub fn reservation_allows(&self, ni: usize, gi: usize) -> bool {
        self.nodes[ni].exclusive.is_none_or(|o| o == gi)
    }

    /// True when some offering draws on a capacity reservation.
    pub fn has_reservations(&self) -> bool {
        self.reserved_left.iter().any(Option::is_some)
    }

    /// When gang `gi` is expected to end if it starts now: now plus its
    /// expected duration (the policy's default when it declares none).
    pub fn expected_end(&self, gi: usize) -> Time {
        let g = self.gangs[gi].gang;
        self.now
            + g.expected_duration
                .unwrap_or(self.policy.default_expected_duration)
    }

    /// True when gang `gi` may run on capacity ending at `end` (`None`: no
    /// end), of a machine ready after `boot`. The capacity is usable until
    /// `reservation_drain_ahead` before its end, when its nodes are drained:
    /// that must come after the gang's expected end, or, for a gang that
    /// may be cut short, after the machine is ready (else it would be
    /// drained as soon as it is placed on).
    pub fn outlives(&self, gi: usize, end: Option<Time>, boot: Dur) -> bool {
        end.is_none_or(|e| {
            let ahead =
                i64::try_from(self.policy.reservation_drain_ahead.as_secs()).unwrap_or(i64::MAX);
            let usable_until = Time(e.0.saturating_sub(ahead));
            if self.gangs[gi].gang.may_outlive_capacity {
                usable_until > self.now + boot
            } else {
                usable_until >= self.expected_end(gi) + boot
            }
        })
    }

    /// A node's index by name.
    pub fn node_by_name(&self, name: &str) -> Option<usize> {
        self.node_ix.get(name).copied()
    }
}

/// The hash of a new node's name kept in [`World::new_names`].
pub(crate) fn name_hash(name: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(name.as_bytes())
}

/// The index of the pod set each of `g`'s assignments names (assignments
/// of one pod set mostly come together: the last match is tried first).
fn pod_set_of_each(g: &Gang) -> Vec<Option<usize>> {
    let mut last = 0;
    g.assignments
        .iter()
        .map(|a| {
            if g.pod_sets.get(last).is_some_and(|p| p.name == a.pod_set) {
                return Some(last);
            }
            let si = g.pod_sets.iter().position(|p| p.name == a.pod_set)?;
            last = si;
            Some(si)
        })
        .collect()
}
