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
//! The launch domains are not carried: they borrow from the snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::cover::{Cover, Kind};
use crate::index::{FastMap, World};
use crate::model::GangId;

/// The caches a cycle leaves for the next (see the module comment).
#[derive(Debug, Default)]
pub(crate) struct Carried {
    /// Pod-set signature → id.
    pub sig_ids: FastMap<String, u32>,
    /// The signature id of each pod set, by gang.
    pub gang_sigs: FastMap<GangId, Vec<u32>>,
    /// Static eligibility of every node, by (queue, signature id).
    pub elig: FastMap<(Option<usize>, u32), Vec<bool>>,
    /// Node labels built so far.
    pub node_labels: Vec<Option<BTreeMap<String, String>>>,
    /// Eligibility on new machines, by signature id (pool-major).
    pub new_elig: Vec<Vec<u8>>,
    /// Cheapest covers, by domain and demand.
    pub covers: FastMap<Vec<u64>, Option<Cover>>,
    /// Machine kinds, by domain and pod-set signatures.
    pub kinds: FastMap<Vec<u64>, (Vec<usize>, Vec<Kind>)>,
    /// How many new node names the cycle gave: room reserved for the next
    /// cycle's, which are mostly the same.
    pub new_names: usize,
}

impl Carried {
    /// Drops what is carried of gangs that changed since.
    pub fn forget(&mut self, changed: &BTreeSet<GangId>) {
        for id in changed {
            self.gang_sigs.remove(id);
        }
    }
}

impl World<'_> {
    /// Starts this cycle's caches from those an earlier cycle left (see the
    /// module comment for when that is allowed).
    pub fn carry_in(&mut self, mut c: Carried) {
        self.sig_ids = c.sig_ids;
        for (gi, g) in self.gangs.iter().enumerate() {
            if let Some(v) = c.gang_sigs.remove(&g.gang.id) {
                self.gang_sigs[gi] = Some(v);
            }
        }
        self.elig_cache = c.elig.into_iter().map(|(k, v)| (k, Rc::new(v))).collect();
        if c.node_labels.len() == self.nodes.len() {
            self.node_labels = c.node_labels;
        }
        self.new_elig_cache = c.new_elig;
        self.cover_cache = c.covers;
        self.kinds_cache = c.kinds.into_iter().map(|(k, v)| (k, Rc::new(v))).collect();
        self.new_names.reserve(c.new_names);
    }

    /// What this cycle's caches leave for the next cycle.
    pub fn carry_out(&mut self) -> Carried {
        let mut gang_sigs = FastMap::default();
        gang_sigs.reserve(self.gangs.len());
        for (g, sigs) in self.gangs.iter().zip(&mut self.gang_sigs) {
            if let Some(v) = sigs.take() {
                gang_sigs.insert(g.gang.id.clone(), v);
            }
        }
        Carried {
            sig_ids: std::mem::take(&mut self.sig_ids),
            gang_sigs,
            elig: std::mem::take(&mut self.elig_cache)
                .into_iter()
                .map(|(k, v)| (k, Rc::unwrap_or_clone(v)))
                .collect(),
            node_labels: std::mem::take(&mut self.node_labels),
            new_elig: std::mem::take(&mut self.new_elig_cache),
            covers: std::mem::take(&mut self.cover_cache),
            kinds: std::mem::take(&mut self.kinds_cache)
                .into_iter()
                .map(|(k, v)| (k, Rc::unwrap_or_clone(v)))
                .collect(),
            new_names: self.new_names.len(),
        }
    }
}
