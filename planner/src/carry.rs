//! Caches of one cycle's working state that a re-plan carries over to the
//! next cycle ([`crate::incremental`]).
//!
//! A cycle fills these caches as it goes: the pod-set signatures and their
//! ids, the static eligibility of every node for each (queue, signature),
//! node labels, the eligibility of new machines, the machine kinds of a
//! launch domain and the cheapest covers found. Each is a function of the
//! nodes, pools, queues and offerings (and which offerings are usable now)
//! and of pod-set constraints, which enter every key as a signature id.
//! A re-plan takes earlier tries over only when the nodes, pools, queues,
//! offerings, policy and what the time decides are those of the last plan;
//! exactly then it starts from these caches instead of empty ones. A gang's
//! signature ids are carried by its id, and dropped for every gang that
//! changed. Whenever the next plan is made from scratch, nothing is carried.
//!
//! The launch domains are carried too (by queue, topology and the GPU
//! models the quota excludes): a few per queue, dropped whenever more than
//! [`CARRY_SLACK`] are kept.
//!
//! Carried caches keep the entries of gangs that have left, so over a long
//! run of re-plans in which gangs with new signatures or demands keep
//! arriving (and nothing forces a plan from scratch) they would only grow.
//! They are bounded by what a plan from scratch used: [`Sizes::within`].

use std::collections::BTreeSet;
use std::rc::Rc;

use crate::cover::{Cover, Kind};
use crate::index::{FastMap, World};
use crate::launch_domain::Domain;
use crate::model::GangId;

/// How many times (per gang) the entries a plan from scratch left the
/// carried caches may hold. A long-running controller must not grow
/// without bound; a few times leaves room for the arrivals between plans
/// from scratch, so the caches are seldom dropped.
const CARRY_GROWTH: usize = 4;

/// Entries every carried cache may hold whatever the plan from scratch
/// left (for small snapshots, where a few times nearly nothing is too
/// tight).
const CARRY_SLACK: usize = 256;

/// The number of gangs and the entries of the caches that grow with what
/// is planned. The eligibility of new machines is indexed by signature id,
/// so it is bounded with the signatures; node labels are bounded by the
/// nodes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub gangs: usize,
    pub sigs: usize,
    pub elig: usize,
    pub covers: usize,
    pub kinds: usize,
}

impl Sizes {
    /// True when no cache holds more than [`CARRY_GROWTH`] times what
    /// `scratch` (a plan from scratch) held per gang, for the larger of the
    /// two gang counts, plus [`CARRY_SLACK`].
    pub fn within(&self, scratch: &Sizes) -> bool {
        let per = scratch.gangs.max(1);
        let gangs = self.gangs.max(per);
        let limit =
            |n: usize| CARRY_GROWTH.saturating_mul(n).saturating_mul(gangs) / per + CARRY_SLACK;
        self.sigs <= limit(scratch.sigs)
            && self.elig <= limit(scratch.elig)
            && self.covers <= limit(scratch.covers)
            && self.kinds <= limit(scratch.kinds)
    }
}

/// A queue's launch domains and the offerings skipped as unavailable, as
/// carried (owned: what a driver keeps between cycles may move between
/// threads).
type Domains = (Vec<Domain>, Vec<usize>);

/// The caches a cycle leaves for the next (see the module comment).
#[derive(Debug, Default)]
pub(crate) struct Carried {
    /// What the last plan from scratch left, the measure of the bound.
    pub scratch: Sizes,
    /// Pod-set signature → id.
    pub sig_ids: FastMap<String, u32>,
    /// The signature id of each pod set, by gang.
    pub gang_sigs: FastMap<GangId, Vec<u32>>,
    /// Static eligibility of every node, by (queue, signature id).
    pub elig: FastMap<(Option<usize>, u32), Vec<bool>>,
    /// Eligibility on new machines, by signature id (pool-major).
    pub new_elig: Vec<Vec<u8>>,
    /// Cheapest covers, by domain and demand.
    pub covers: FastMap<Vec<u64>, Option<Cover>>,
    /// Machine kinds, by domain and pod-set signatures.
    pub kinds: FastMap<Vec<u64>, (Vec<usize>, Vec<Kind>)>,
    /// Launch domains, by (queue, topology, excluded GPU models).
    pub domains: FastMap<(Option<usize>, u8, u64), Domains>,
    /// How many new node names the cycle gave: room reserved for the next
    /// cycle's, which are mostly the same.
    pub new_names: usize,
}

impl Carried {
    /// The sizes of the bounded caches carried, for `gangs` gangs.
    #[cfg(test)]
    pub fn sizes(&self, gangs: usize) -> Sizes {
        Sizes {
            gangs,
            sigs: self.sig_ids.len(),
            elig: self.elig.len(),
            covers: self.covers.len(),
            kinds: self.kinds.len(),
        }
    }

    /// Drops what is carried of gangs that changed since.
    pub fn forget(&mut self, changed: &BTreeSet<GangId>) {
        for id in changed {
            self.gang_sigs.remove(id);
        }
    }
}

impl World<'_> {
    /// Starts this cycle's caches from those an earlier cycle left (see the
    /// module comment for when that is allowed); returns what the last plan
    /// from scratch left, for [`World::carry_out`].
    pub fn carry_in(&mut self, mut c: Carried) -> Sizes {
        self.sig_ids = c.sig_ids;
        for (gi, g) in self.gangs.iter().enumerate() {
            if let Some(v) = c.gang_sigs.remove(&g.gang.id) {
                self.gang_sigs[gi] = Some(v);
            }
        }
        self.elig_cache = c.elig.into_iter().map(|(k, v)| (k, Rc::new(v))).collect();
        self.new_elig_cache = c.new_elig;
        self.cover_cache = c.covers;
        self.kinds_cache = c.kinds.into_iter().map(|(k, v)| (k, Rc::new(v))).collect();
        self.domain_cache = c
            .domains
            .into_iter()
            .map(|(k, v)| (k, Rc::new(v)))
            .collect();
        self.new_names.reserve(c.new_names);
        c.scratch
    }

    /// The sizes of this cycle's bounded caches.
    fn sizes(&self) -> Sizes {
        Sizes {
            gangs: self.gangs.len(),
            sigs: self.sig_ids.len(),
            elig: self.elig_cache.len(),
            covers: self.cover_cache.len(),
            kinds: self.kinds_cache.len(),
        }
    }

    /// What this cycle's caches leave for the next cycle. `scratch` is what
    /// the last plan from scratch left (`None`: this cycle is one, and
    /// becomes the measure). Caches that outgrew the bound
    /// ([`Sizes::within`]) are all dropped — they share the signature ids —
    /// and the next cycle starts them empty.
    pub fn carry_out(&mut self, scratch: Option<Sizes>) -> Carried {
        let now = self.sizes();
        let scratch = scratch.unwrap_or(now);
        if !now.within(&scratch) {
            return Carried {
                scratch,
                new_names: self.new_names.len(),
                ..Carried::default()
            };
        }
        let mut gang_sigs = FastMap::default();
        gang_sigs.reserve(self.gangs.len());
        for (g, sigs) in self.gangs.iter().zip(&mut self.gang_sigs) {
            if let Some(v) = sigs.take() {
                gang_sigs.insert(g.gang.id.clone(), v);
            }
        }
        Carried {
            scratch,
            sig_ids: std::mem::take(&mut self.sig_ids),
            gang_sigs,
            elig: std::mem::take(&mut self.elig_cache)
                .into_iter()
                .map(|(k, v)| (k, Rc::unwrap_or_clone(v)))
                .collect(),
            new_elig: std::mem::take(&mut self.new_elig_cache),
            covers: std::mem::take(&mut self.cover_cache),
            kinds: std::mem::take(&mut self.kinds_cache)
                .into_iter()
                .map(|(k, v)| (k, Rc::unwrap_or_clone(v)))
                .collect(),
            domains: if self.domain_cache.len() <= CARRY_SLACK {
                std::mem::take(&mut self.domain_cache)
                    .into_iter()
                    .map(|(k, v)| (k, Rc::unwrap_or_clone(v)))
                    .collect()
            } else {
                FastMap::default()
            },
            new_names: self.new_names.len(),
        }
    }
}
