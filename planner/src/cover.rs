//! The cheapest multiset of machines that holds a set of pods.
//!
//! Input: a few pod shapes with counts (the pods of a gang still without a
//! place) and the machine kinds that may be bought (price, allocatable, and
//! which shapes may go on them). Output: the machines to buy and how many
//! pods of each shape go on each, minimising (price, machine count) — at
//! equal price fewer, larger machines win (NVLink beats the network).
//!
//! Method: for each machine kind, enumerate its *maximal patterns* (pod
//! counts per shape that fit together, not extendable by one more pod).
//! Then an exact dynamic programme over the vector of remaining pod counts:
//! `best(s) = min over (kind, pattern) of price + best(s − min(pattern, s))`.
//! It is exact whenever the state space (∏ (countᵢ + 1)) is small, which is
//! the common case (a gang has few distinct pod shapes). Beyond
//! [`MAX_STATES`] a greedy rule (most resource covered per dollar) is used.

use crate::resources::{Resources, fit_count};

/// Largest state space solved exactly.
pub const MAX_STATES: usize = 200_000;
/// Largest number of (state × pattern) steps in the exact search.
const MAX_WORK: usize = 30_000_000;
/// Most patterns enumerated per machine kind.
const MAX_PATTERNS: usize = 4096;

/// A machine kind that may be bought.
#[derive(Debug, Clone)]
pub struct Kind {
    /// Price per hour, micro-dollars.
    pub price: u64,
    /// What pods may use on it.
    pub capacity: Resources,
    /// Which shapes may go on it (selectors, taints, GPU model).
    pub allows: Vec<bool>,
}

/// The machines bought: `(kind index, pods per shape)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// Total price per hour.
    pub cost: u64,
    /// One entry per machine.
    pub machines: Vec<(usize, Vec<u32>)>,
}

/// Maximal patterns of one kind, capped by `counts`.
pub fn patterns(kind: &Kind, shapes: &[Resources], counts: &[u32]) -> Vec<Vec<u32>> {
    let k = shapes.len();
    if k == 1 {
        let n = if kind.allows[0] {
            fit_count(&kind.capacity, &shapes[0]).min(counts[0])
        } else {
            0
        };
        return if n > 0 { vec![vec![n]] } else { Vec::new() };
    }
    let mut out = Vec::new();
    let mut cur = vec![0u32; k];
    if shapes.iter().all(|s| s.extended.is_empty()) {
        // Only CPU, memory and GPU constrain: the same search on plain
        // numbers (what `fit_count` and `saturating_sub` compute).
        let sh: Vec<[u64; 3]> = shapes.iter().map(plain).collect();
        rec_plain(
            0,
            plain(&kind.capacity),
            kind,
            &sh,
            counts,
            &mut cur,
            &mut out,
        );
        return out;
    }
    fn rec(
        i: usize,
        free: &Resources,
        kind: &Kind,
        shapes: &[Resources],
        counts: &[u32],
        cur: &mut Vec<u32>,
        out: &mut Vec<Vec<u32>>,
    ) {
        if out.len() >= MAX_PATTERNS {
            return;
        }
        if i == shapes.len() {
            if cur.iter().all(|&c| c == 0) {
                return;
            }
            // Maximal: no shape with room left for one more pod.
            let extendable = (0..shapes.len())
                .any(|j| kind.allows[j] && cur[j] < counts[j] && fit_count(free, &shapes[j]) > 0);
            if !extendable {
                out.push(cur.clone());
            }
            return;
        }
        let max = if kind.allows[i] && counts[i] > 0 {
            fit_count(free, &shapes[i]).min(counts[i])
        } else {
            0
        };
        for n in (0..=max).rev() {
            let mut f = free.clone();
            f.saturating_sub(&shapes[i].times(u64::from(n)));
            cur[i] = n;
            rec(i + 1, &f, kind, shapes, counts, cur, out);
            cur[i] = 0;
        }
    }
    rec(0, &kind.capacity, kind, shapes, counts, &mut cur, &mut out);
    out
}

/// CPU, memory and GPU of `r`.
fn plain(r: &Resources) -> [u64; 3] {
    [r.cpu_millis, r.memory_bytes, r.gpu_millis]
}

/// [`fit_count`] without extended resources.
fn fit_plain(free: &[u64; 3], shape: &[u64; 3]) -> u32 {
    let mut n = u64::MAX;
    for (have, need) in free.iter().zip(shape) {
        if let Some(k) = have.checked_div(*need) {
            n = n.min(k);
        }
    }
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The pattern search of [`patterns`] for shapes without extended resources.
fn rec_plain(
    i: usize,
    free: [u64; 3],
    kind: &Kind,
    shapes: &[[u64; 3]],
    counts: &[u32],
    cur: &mut Vec<u32>,
    out: &mut Vec<Vec<u32>>,
) {
    if out.len() >= MAX_PATTERNS {
        return;
    }
    if i == shapes.len() {
        if cur.iter().all(|&c| c == 0) {
            return;
        }
        let extendable = (0..shapes.len())
            .any(|j| kind.allows[j] && cur[j] < counts[j] && fit_plain(&free, &shapes[j]) > 0);
        if !extendable {
            out.push(cur.clone());
        }
        return;
    }
    let max = if kind.allows[i] && counts[i] > 0 {
        fit_plain(&free, &shapes[i]).min(counts[i])
    } else {
        0
    };
    for n in (0..=max).rev() {
        let mut f = free;
        for (x, need) in f.iter_mut().zip(&shapes[i]) {
            *x = x.saturating_sub(need.saturating_mul(u64::from(n)));
        }
        cur[i] = n;
        rec_plain(i + 1, f, kind, shapes, counts, cur, out);
        cur[i] = 0;
    }
}

/// The cheapest cover of `counts` pods of `shapes` by machines of `kinds`,
/// or None when some pod fits no kind.
pub fn cheapest(shapes: &[Resources], counts: &[u32], kinds: &[Kind]) -> Option<Cover> {
    if counts.iter().all(|&c| c == 0) {
        return Some(Cover {
            cost: 0,
            machines: Vec::new(),
        });
    }
    // Kinds with the same capacity and the same allowed shapes have the same
    // patterns; only the cheapest of them (the first at equal price) can be
    // chosen, so the others are dropped before the search and the indices
    // mapped back after it.
    let reps = representatives(kinds);
    if reps.len() < kinds.len() {
        let sub: Vec<Kind> = reps.iter().map(|&i| kinds[i].clone()).collect();
        return solve(shapes, counts, &sub).map(|mut c| {
            for (k, _) in &mut c.machines {
                *k = reps[*k];
            }
            c
        });
    }
    solve(shapes, counts, kinds)
}

/// Indices of the kinds that are not dominated by an equal kind (same
/// capacity and allowed shapes) that is cheaper, or as cheap and earlier; in
/// ascending order.
fn representatives(kinds: &[Kind]) -> Vec<usize> {
    let mut reps: Vec<usize> = Vec::with_capacity(kinds.len());
    for (i, k) in kinds.iter().enumerate() {
        match reps
            .iter_mut()
            .find(|r| kinds[**r].capacity == k.capacity && kinds[**r].allows == k.allows)
        {
            Some(r) => {
                if k.price < kinds[*r].price {
                    *r = i;
                }
            }
            None => reps.push(i),
        }
    }
    reps.sort_unstable();
    reps
}

fn solve(shapes: &[Resources], counts: &[u32], kinds: &[Kind]) -> Option<Cover> {
    let pats: Vec<Vec<Vec<u32>>> = kinds.iter().map(|k| patterns(k, shapes, counts)).collect();
    for (j, &c) in counts.iter().enumerate() {
        if c > 0 && !pats.iter().flatten().any(|p| p[j] > 0) {
            return None;
        }
    }
    let mut states: usize = 1;
    for &c in counts {
        states = states.saturating_mul(c as usize + 1);
    }
    let total_pats: usize = pats.iter().map(Vec::len).sum();
    if states <= MAX_STATES && states.saturating_mul(total_pats) <= MAX_WORK {
        exact(counts, kinds, &pats, states)
    } else {
        greedy(shapes, counts, kinds, &pats)
    }
}

fn exact(counts: &[u32], kinds: &[Kind], pats: &[Vec<Vec<u32>>], states: usize) -> Option<Cover> {
    let k = counts.len();
    let mut radix = vec![1usize; k];
    for i in 1..k {
        radix[i] = radix[i - 1] * (counts[i - 1] as usize + 1);
    }
    const INF: (u64, u32) = (u64::MAX, u32::MAX);
    let mut best: Vec<(u64, u32)> = vec![INF; states];
    let mut choice: Vec<(u32, u32)> = vec![(0, 0); states];
    best[0] = (0, 0);
    let mut s_vec = vec![0u32; k];
    for s in 1..states {
        // Decode s.
        let mut rest = s;
        for i in (0..k).rev() {
            s_vec[i] = (rest / radix[i]) as u32;
            rest %= radix[i];
        }
        let mut b = INF;
        let mut c = (0u32, 0u32);
        for (ki, kp) in pats.iter().enumerate() {
            for (pi, p) in kp.iter().enumerate() {
                let mut prev = s;
                let mut any = false;
                for i in 0..k {
                    let r = p[i].min(s_vec[i]) as usize;
                    if r > 0 {
                        any = true;
                        prev -= r * radix[i];
                    }
                }
                if !any {
                    continue;
                }
                let (pc, pn) = best[prev];
                if pc == u64::MAX {
                    continue;
                }
                let cand = (pc.saturating_add(kinds[ki].price), pn + 1);
                if cand < b {
                    b = cand;
                    c = (ki as u32, pi as u32);
                }
            }
        }
        best[s] = b;
        choice[s] = c;
    }
    let last = states - 1;
    if best[last].0 == u64::MAX {
        return None;
    }
    let mut machines = Vec::new();
    let mut s = last;
    while s != 0 {
        let mut rest = s;
        for i in (0..k).rev() {
            s_vec[i] = (rest / radix[i]) as u32;
            rest %= radix[i];
        }
        let (ki, pi) = choice[s];
        let p = &pats[ki as usize][pi as usize];
        let used: Vec<u32> = (0..k).map(|i| p[i].min(s_vec[i])).collect();
        for i in 0..k {
            s -= used[i] as usize * radix[i];
        }
        machines.push((ki as usize, used));
    }
    machines.sort();
    Some(Cover {
        cost: best[last].0,
        machines,
    })
}

fn greedy(
    shapes: &[Resources],
    counts: &[u32],
    kinds: &[Kind],
    pats: &[Vec<Vec<u32>>],
) -> Option<Cover> {
    // Weight of a pod: its dominant fraction of the largest machine.
    let mut maxcap = Resources::zero();
    for k in kinds {
        maxcap.cpu_millis = maxcap.cpu_millis.max(k.capacity.cpu_millis);
        maxcap.memory_bytes = maxcap.memory_bytes.max(k.capacity.memory_bytes);
        maxcap.gpu_millis = maxcap.gpu_millis.max(k.capacity.gpu_millis);
    }
    let frac = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let weight: Vec<f64> = shapes
        .iter()
        .map(|s| {
            frac(s.gpu_millis, maxcap.gpu_millis)
                .max(frac(s.cpu_millis, maxcap.cpu_millis))
                .max(frac(s.memory_bytes, maxcap.memory_bytes))
                .max(1e-9)
        })
        .collect();
    let mut left = counts.to_vec();
    let mut machines = Vec::new();
    let mut cost = 0u64;
    while left.iter().any(|&c| c > 0) {
        let mut best: Option<(f64, usize, Vec<u32>)> = None;
        for (ki, kp) in pats.iter().enumerate() {
            for p in kp {
                let used: Vec<u32> = p.iter().zip(&left).map(|(a, b)| (*a).min(*b)).collect();
                let value: f64 = used
                    .iter()
                    .zip(&weight)
                    .map(|(u, w)| f64::from(*u) * w)
                    .sum();
                if value <= 0.0 {
                    continue;
                }
                let score = value / (kinds[ki].price as f64 + 1.0);
                if best.as_ref().is_none_or(|b| score > b.0) {
                    best = Some((score, ki, used));
                }
            }
        }
        let (_, ki, used) = best?;
        for (l, u) in left.iter_mut().zip(&used) {
            *l -= u;
        }
        cost = cost.saturating_add(kinds[ki].price);
        machines.push((ki, used));
    }
    machines.sort();
    Some(Cover { cost, machines })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(price: u64, gpus: u32) -> Kind {
        Kind {
            price,
            capacity: Resources::new(96_000, 1 << 40, gpus),
            allows: vec![true, true],
        }
    }

    #[test]
    fn prefers_one_large_node_at_equal_price_per_gpu() {
        let shapes = [
            Resources::new(1000, 1 << 30, 1),
            Resources::new(1000, 1 << 30, 2),
        ];
        let c = cheapest(&shapes, &[2, 1], &[kind(4, 4), kind(1, 1), kind(8, 8)]).expect("cover");
        assert_eq!(c.cost, 4);
        assert_eq!(c.machines.len(), 1);
    }

    #[test]
    fn none_when_a_pod_fits_nowhere() {
        let shapes = [Resources::new(1000, 1 << 30, 16)];
        assert!(cheapest(&shapes, &[1], &[kind(8, 8)]).is_none());
    }
}
