//! Quota: nominal, borrowing and lending within a cohort, and the usage
//! fair share is computed from.
//!
//! Every amount is in milli-units of its resource: GPU millis, CPU
//! millicores, memory bytes × 1000, extended resources in milli-units — the
//! unit of [`Quantity::millis`](crate::Quantity::millis).
//!
//! Rules (per resource `r` that the queue has a quota entry for; a resource
//! without an entry is not limited for that queue):
//! - A queue without a cohort may use up to its nominal quota.
//! - In a cohort each queue keeps `guaranteed = nominal − lendable` to
//!   itself, where `lendable = min(lendingLimit, nominal)` (all of nominal
//!   when no lending limit is set). The lendable parts of all members form
//!   the cohort pool; a queue's usage above its guaranteed part is drawn from
//!   the pool. A gang fits when the queue stays within
//!   `nominal + borrowingLimit` (no limit: unbounded) and the pool's total
//!   draw stays within the pool.
//! - Borrowed amount of a queue = usage above nominal.
//! - GPU-model quotas (`nvidia.com/gpu:A100`) count GPUs on nodes whose model
//!   satisfies the quota's model; they are checked by excluding models
//!   without room from placement and provisioning.

use std::collections::BTreeMap;

use crate::index::World;
use crate::model::{GpuModel, QuotaResource};
use crate::resources::Resources;

/// One quota entry in milli-units.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub nominal: u64,
    pub borrow: Option<u64>,
    pub lend: Option<u64>,
}

impl Entry {
    fn lendable(&self) -> u64 {
        self.lend.unwrap_or(self.nominal).min(self.nominal)
    }
    fn guaranteed(&self) -> u64 {
        self.nominal - self.lendable()
    }
}

/// Why a gang does not fit its quota.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Short {
    pub resource: QuotaResource,
    pub need: u64,
    pub nominal: u64,
    pub used: u64,
    /// What the cohort pool has left to lend (None without a cohort).
    pub cohort_free: Option<u64>,
    /// The queue's borrowing limit, when that is what binds.
    pub borrow_limit: Option<u64>,
}

/// Quota entries, usage and cohort membership for every queue.
#[derive(Debug)]
pub(crate) struct QuotaBook {
    pub entries: Vec<BTreeMap<QuotaResource, Entry>>,
    pub usage: Vec<BTreeMap<QuotaResource, u64>>,
    /// Members of each queue's cohort (just the queue without a cohort).
    pub cohort_members: Vec<Vec<usize>>,
    pub tracked: Vec<Vec<QuotaResource>>,
    pub totals: Vec<BTreeMap<QuotaResource, u64>>,
    pub weight: Vec<f64>,
    /// `weighted_share` of every queue, kept up to date by `add` and `sub`
    /// (a queue's share depends on its own usage only).
    shares: Vec<f64>,
}

/// Amount of resource `r` in `req`, for pods on a node of `model`.
pub(crate) fn amount(req: &Resources, r: &QuotaResource, model: Option<&GpuModel>) -> u64 {
    match r {
        QuotaResource::Gpu => req.gpu_millis,
        QuotaResource::GpuModel(m) => {
            if model.is_some_and(|x| x.satisfies(m)) {
                req.gpu_millis
            } else {
                0
            }
        }
        QuotaResource::Cpu => req.cpu_millis,
        QuotaResource::Memory => req.memory_bytes.saturating_mul(1000),
        QuotaResource::Other(n) => req.extended.get(n).copied().unwrap_or(0),
    }
}

fn millis(q: crate::Quantity) -> u64 {
    u64::try_from(q.millis()).unwrap_or(0)
}

impl QuotaBook {
    /// Builds the book from the world: entries, cohorts and current usage of
    /// every gang that holds capacity.
    pub fn build(w: &World<'_>) -> QuotaBook {
        let nq = w.queues.len();
        let mut entries = Vec::with_capacity(nq);
        for q in &w.queues {
            let mut m = BTreeMap::new();
            for quota in &q.quotas {
                m.entry(quota.resource.clone()).or_insert(Entry {
                    nominal: millis(quota.nominal),
                    borrow: quota.borrowing_limit.map(millis),
                    lend: quota.lending_limit.map(millis),
                });
            }
            entries.push(m);
        }
        let mut cohorts: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, q) in w.queues.iter().enumerate() {
            if let Some(c) = &q.cohort {
                cohorts.entry(c.as_str()).or_default().push(i);
            }
        }
        let cohort_members: Vec<Vec<usize>> = (0..nq)
            .map(|i| match &w.queues[i].cohort {
                Some(c) => cohorts.get(c.as_str()).cloned().unwrap_or_default(),
                None => vec![i],
            })
            .collect();
        let base = [
            QuotaResource::Gpu,
            QuotaResource::Cpu,
            QuotaResource::Memory,
        ];
        let tracked: Vec<Vec<QuotaResource>> = (0..nq)
            .map(|i| {
                let mut t: Vec<QuotaResource> = base.to_vec();
                for &m in &cohort_members[i] {
                    for r in entries[m].keys() {
                        if !t.contains(r) {
                            t.push(r.clone());
                        }
                    }
                }
                t.sort();
                t
            })
            .collect();
        // Totals for shares: the cohort's nominal, or every queue's without a
        // cohort; the cluster's allocatable when no nominal is set.
        let mut cluster = Resources::zero();
        for n in &w.nodes {
            if n.node.phase == crate::model::NodePhase::Ready {
                cluster.add(&n.node.allocatable);
            }
        }
        let totals = (0..nq)
            .map(|i| {
                let members: Vec<usize> = if w.queues[i].cohort.is_some() {
                    cohort_members[i].clone()
                } else {
                    (0..nq).collect()
                };
                tracked[i]
                    .iter()
                    .map(|r| {
                        let mut t: u64 = members
                            .iter()
                            .filter_map(|&m| entries[m].get(r))
                            .map(|e| e.nominal)
                            .sum();
                        if t == 0 {
                            t = amount(&cluster, r, None);
                        }
                        (r.clone(), t)
                    })
                    .collect()
            })
            .collect();
        let weight = w
            .queues
            .iter()
            .map(|q| {
                if q.weight.is_finite() && q.weight > 0.0 {
                    q.weight
                } else {
                    1.0
                }
            })
            .collect();
        let mut book = QuotaBook {
            entries,
            usage: vec![BTreeMap::new(); nq],
            cohort_members,
            tracked,
            totals,
            weight,
            shares: vec![0.0; nq],
        };
        for q in 0..nq {
            book.shares[q] = book.compute_share(q);
        }
        // What the holding gangs use, summed per queue first and added once
        // (the same usage as adding gang by gang: saturating sums of
        // amounts, whatever the grouping).
        let mut held: Vec<Option<BTreeMap<QuotaResource, u64>>> = vec![None; nq];
        for g in &w.gangs {
            let (Some(q), true) = (g.queue, g.holds) else {
                continue;
            };
            book.held_amounts(w, q, g, held[q].get_or_insert_with(BTreeMap::new));
        }
        for (q, amounts) in held.into_iter().enumerate() {
            if let Some(a) = amounts {
                book.add(q, &a);
            }
        }
        book
    }

    /// What holding gang `gi` of queue `q` counts in the book.
    pub fn held_of(&self, w: &World<'_>, q: usize, gi: usize) -> BTreeMap<QuotaResource, u64> {
        let mut out = BTreeMap::new();
        self.held_amounts(w, q, &w.gangs[gi], &mut out);
        out
    }

    /// Adds to `out` what a holding gang uses, by its assignments (GPU
    /// models from the nodes), or by its full size when it has no
    /// assignments.
    fn held_amounts(
        &self,
        w: &World<'_>,
        q: usize,
        g: &crate::index::GangInfo<'_>,
        out: &mut BTreeMap<QuotaResource, u64>,
    ) {
        let mut put = |r: &QuotaResource, v: u64| match out.get_mut(r) {
            Some(e) => *e = e.saturating_add(v),
            None => {
                out.insert(r.clone(), v);
            }
        };
        let gang = g.gang;
        if gang.assignments.is_empty() {
            for (si, ps) in gang.pod_sets.iter().enumerate() {
                let n = u64::from(g.held.get(si).copied().unwrap_or(0));
                for r in &self.tracked[q] {
                    put(r, amount(&ps.requests, r, None).saturating_mul(n));
                }
            }
            return;
        }
        // Pods counted per (pod set, GPU model of their node) first: a gang
        // has many assignments but few such pairs, and the book's map is
        // then written once per tracked resource.
        let mut counts: Vec<(usize, Option<&GpuModel>, u64)> = Vec::new();
        for (&si, &at) in g.assigned_sets.iter().zip(&g.assigned) {
            let Some(si) = si else {
                continue;
            };
            let model = at.and_then(|ni| w.nodes[ni].node.gpu_model.as_ref());
            match counts.iter_mut().find(|c| c.0 == si && c.1 == model) {
                Some(c) => c.2 += 1,
                None => counts.push((si, model, 1)),
            }
        }
        if counts.is_empty() {
            return;
        }
        for r in &self.tracked[q] {
            let total = counts
                .iter()
                .map(|&(si, model, n)| {
                    amount(&gang.pod_sets[si].requests, r, model).saturating_mul(n)
                })
                .fold(0u64, u64::saturating_add);
            put(r, total);
        }
    }

    /// Adds usage to a queue.
    pub fn add(&mut self, q: usize, amounts: &BTreeMap<QuotaResource, u64>) {
        for (r, v) in amounts {
            // (Cloned only when new: most commits add to what is there.)
            match self.usage[q].get_mut(r) {
                Some(e) => *e = e.saturating_add(*v),
                None => {
                    self.usage[q].insert(r.clone(), *v);
                }
            }
        }
        self.shares[q] = self.compute_share(q);
    }

    /// Removes usage from a queue.
    pub fn sub(&mut self, q: usize, amounts: &BTreeMap<QuotaResource, u64>) {
        for (r, v) in amounts {
            let e = self.usage[q].entry(r.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
        }
        self.shares[q] = self.compute_share(q);
    }

    /// Usage of `r` by queue `q`.
    pub fn used(&self, q: usize, r: &QuotaResource) -> u64 {
        self.usage[q].get(r).copied().unwrap_or(0)
    }

    /// The amounts a set of pods (shape, count, node model) adds to queue `q`.
    pub fn amounts<'m>(
        &self,
        q: usize,
        pods: impl IntoIterator<Item = (&'m Resources, u32, Option<&'m GpuModel>)>,
    ) -> BTreeMap<QuotaResource, u64> {
        let mut out = BTreeMap::new();
        for (shape, n, model) in pods {
            for r in &self.tracked[q] {
                let a = amount(shape, r, model).saturating_mul(u64::from(n));
                if a > 0 {
                    *out.entry(r.clone()).or_insert(0u64) += a;
                }
            }
        }
        out
    }

    fn pool_state(&self, q: usize, r: &QuotaResource) -> (u64, u64) {
        let mut cap = 0u64;
        let mut used = 0u64;
        for &m in &self.cohort_members[q] {
            if let Some(e) = self.entries[m].get(r) {
                cap += e.lendable();
                used += self.used(m, r).saturating_sub(e.guaranteed());
            }
        }
        (cap, used)
    }

    /// Checks that adding `add` of `r` keeps queue `q` within its quota.
    pub fn check_one(&self, q: usize, r: &QuotaResource, add: u64) -> Result<(), Short> {
        let Some(e) = self.entries[q].get(r).copied() else {
            return Ok(());
        };
        if add == 0 {
            return Ok(());
        }
        let u = self.used(q, r);
        let short = |cohort_free, borrow_limit| Short {
            resource: r.clone(),
            need: add,
            nominal: e.nominal,
            used: u,
            cohort_free,
            borrow_limit,
        };
        let in_cohort = self.cohort_members[q].len() > 1;
        if !in_cohort {
            if u.saturating_add(add) > e.nominal {
                return Err(short(None, None));
            }
            return Ok(());
        }
        let (cap, pool_used) = self.pool_state(q, r);
        let g = e.guaranteed();
        let before = u.saturating_sub(g);
        // What the other members can lend: the pool's room minus this
        // queue's own unused lendable part.
        let own_unused = e.lendable().saturating_sub(before);
        let others_free = cap.saturating_sub(pool_used).saturating_sub(own_unused);
        if let Some(b) = e.borrow
            && u.saturating_add(add) > e.nominal.saturating_add(b)
        {
            return Err(short(Some(others_free), Some(b)));
        }
        let after = u.saturating_add(add).saturating_sub(g);
        let new_used = pool_used - before.min(pool_used) + after;
        if new_used > cap {
            return Err(short(Some(others_free), None));
        }
        Ok(())
    }

    /// Checks every amount; the first resource short is returned.
    pub fn check(&self, q: usize, amounts: &BTreeMap<QuotaResource, u64>) -> Result<(), Short> {
        for (r, v) in amounts {
            if matches!(r, QuotaResource::GpuModel(_)) {
                continue;
            }
            self.check_one(q, r, *v)?;
        }
        Ok(())
    }

    /// GPU models whose quota has no room for `gpu_millis` more GPUs: nodes
    /// and offerings of these models are excluded for the gang.
    pub fn excluded_models(&self, q: usize, gpu_millis: u64) -> Vec<GpuModel> {
        let mut out = Vec::new();
        for r in self.entries[q].keys() {
            if let QuotaResource::GpuModel(m) = r
                && self.check_one(q, r, gpu_millis).is_err()
            {
                out.push(m.clone());
            }
        }
        out
    }

    /// True when the queue is at or within its nominal quota for every
    /// resource after adding `amounts` (reclaim precondition).
    pub fn within_nominal(&self, q: usize, amounts: &BTreeMap<QuotaResource, u64>) -> bool {
        amounts.iter().all(|(r, v)| {
            self.entries[q]
                .get(r)
                .is_none_or(|e| self.used(q, r).saturating_add(*v) <= e.nominal)
        })
    }

    /// True when queue `q` uses more than its nominal of a resource `r` that
    /// appears (non-zero) in `amounts`.
    pub fn borrowing_any(&self, q: usize, amounts: &BTreeMap<QuotaResource, u64>) -> bool {
        amounts.iter().any(|(r, v)| {
            *v > 0
                && self.entries[q]
                    .get(r)
                    .is_some_and(|e| self.used(q, r) > e.nominal)
        })
    }

    /// Dominant-resource share of queue `q` divided by its weight.
    pub fn weighted_share(&self, q: usize) -> f64 {
        self.shares[q]
    }

    fn compute_share(&self, q: usize) -> f64 {
        let mut share: f64 = 0.0;
        for (r, total) in &self.totals[q] {
            if *total > 0 {
                share = share.max(self.used(q, r) as f64 / *total as f64);
            }
        }
        share / self.weight[q]
    }
}

/// Formats a milli-unit amount of a resource for people.
pub(crate) fn show(r: &QuotaResource, v: u64) -> String {
    match r {
        QuotaResource::Memory => crate::resources::format_bytes(v / 1000),
        _ => {
            if v.is_multiple_of(1000) {
                format!("{}", v / 1000)
            } else {
                format!("{}", v as f64 / 1000.0)
            }
        }
    }
}
