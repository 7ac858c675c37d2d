//! Warm capacity: empty nodes a pool keeps past `consolidateAfter` for the
//! gangs that arrive next (`Disruption::keep_warm`).
//!
//! Demand is read from the snapshot's `arrivals` (the driver keeps each
//! gang's arrival for the window, finished gangs included, since a burst's
//! short jobs are what leaves empty nodes behind): the arrivals in the
//! queues that may use the pool within the pool's window. Each pod set asks for
//! machines of its *size class*, the smallest GPU count among the machines
//! the pool may buy with a GPU model it accepts that holds one of its pods,
//! and warm nodes of such a model; it fills its share of
//! one: arrivals smaller than a machine of their class share machines, as
//! size-matched placement packs them (eight 1-GPU jobs whose smallest
//! machine has 8 GPUs ask for one machine, not eight). A burst of small
//! jobs thus keeps, once its jobs end, as many empty machines of their
//! size as it filled, for the window; quiet periods keep none. An arrival
//! that filled more than one machine (a multi-node gang) asks for none: it
//! waits for the slowest of its machines whatever is kept, and keeping its
//! machines costs a whole gang's worth for an arrival that seldom repeats
//! within the window.
//!
//! Nor, unless the pool says `allSizes`, does an arrival whose size class
//! is not the smallest machine the pool buys with its GPU models (a 4-GPU
//! job in a pool that sells 1-GPU machines it accepts): every job that
//! starts on a warm node saves the same one boot of waiting, so a dollar
//! kept warm starts the most jobs on the smallest machines. On the Philly
//! replay, warm nodes of the bigger classes cost about a third of all warm
//! capacity and started few jobs; `docs/benchmarks.md` ("Size-matched
//! placement and warm capacity") has the command that measures it.
//!
//! Per class, arrivals that name GPU models take their nodes before those
//! that accept any, which take what is left; the youngest empty nodes are
//! kept first, then by price and name; the kept nodes of all classes
//! together cost at most
//! `maxPricePerHour`. Only Ready nodes of
//! the pool with GPUs count; nodes kept count against nothing else.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::index::{World, node_gpus};
use crate::model::{GpuModel, KeepWarm};
use crate::time::{Dur, Time};

/// One node kept warm, with the demand that keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    pub node: usize,
    /// GPUs of the node (its size class).
    pub class: u64,
    /// Machines of that class the window's arrivals used.
    pub demand: u64,
}

/// The smallest of `sizes` (sorted ascending) holding `gpus`.
fn class_of(sizes: &[u64], gpus: u64) -> Option<u64> {
    sizes.iter().copied().find(|&s| s >= gpus)
}

/// True when a GPU of `model` is one of `models` (empty: any).
fn model_ok(models: &[GpuModel], model: Option<&GpuModel>) -> bool {
    models.is_empty() || model.is_some_and(|m| models.iter().any(|w| m.satisfies(w)))
}

/// What arrivals ask warm nodes of: a size class and the GPU models
/// accepted. Sorted so that, per class, arrivals of named models come
/// before those of any model, which take the nodes left.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Want {
    class: u64,
    any_model: bool,
    models: Vec<GpuModel>,
}

/// Machines per size class (and GPU models) that the gangs arriving within
/// the pool's window filled.
fn demand(w: &World<'_>, p: usize, kw: &KeepWarm) -> BTreeMap<Want, u64> {
    let mut out = BTreeMap::new();
    let (since, burst) = (w.now - kw.window, kw.burst);
    // Which queues may use the pool, once per queue rather than per arrival.
    let uses: Vec<bool> = (0..w.queues.len())
        .map(|q| w.queue_pools(Some(q)).contains(&p))
        .collect();
    // The machine sizes the pool may buy with GPUs of the models, ascending
    // (once per set of models).
    let mut sizes_of: BTreeMap<Vec<GpuModel>, Vec<u64>> = BTreeMap::new();
    // Keyed by class and the arrival's models, borrowed when they are
    // already sorted without repeats (as one model or none always is).
    let mut seen: BTreeMap<(u64, Cow<'_, [GpuModel]>), Arrived> = BTreeMap::new();
    // The queue of the arrival before, and whether it may use the pool:
    // arrivals of one queue often come in a row.
    let mut last_queue: Option<(&str, bool)> = None;
    for a in w.arrivals {
        if a.at < since || a.at > w.now || a.gpus_per_pod == 0 {
            continue;
        }
        let may_use = match last_queue {
            Some((q, ok)) if q == a.queue => ok,
            _ => {
                let ok = w
                    .queues
                    .binary_search_by(|q| q.name.as_str().cmp(a.queue.as_str()))
                    .is_ok_and(|q| uses[q]);
                last_queue = Some((&a.queue, ok));
                ok
            }
        };
        if !may_use {
            continue;
        }
        let models: Cow<'_, [GpuModel]> = if a.gpu_models.windows(2).all(|p| p[0] < p[1]) {
            Cow::Borrowed(&a.gpu_models)
        } else {
            let mut m = a.gpu_models.clone();
            m.sort();
            m.dedup();
            Cow::Owned(m)
        };
        let sizes = match sizes_of.get(models.as_ref()) {
            Some(s) => s,
            None => {
                let mut v: Vec<u64> = w.pool_offerings[p]
                    .iter()
                    .map(|&o| &w.offerings[o])
                    .filter(|o| o.gpu_count > 0 && model_ok(&models, o.gpu_model.as_ref()))
                    .map(|o| u64::from(o.gpu_count))
                    .collect();
                v.sort_unstable();
                v.dedup();
                sizes_of.entry(models.to_vec()).or_insert(v)
            }
        };
        let per_pod = u64::from(a.gpus_per_pod);
        let Some(class) = class_of(sizes, per_pod) else {
            continue;
        };
        if !kw.all_sizes && sizes.first() != Some(&class) {
            // bigger than the smallest machine of its models: no demand
            // (see the module's comment)
            continue;
        }
        // pods of this size one machine of the class holds
        let per_machine = (class / per_pod).max(1);
        if u64::from(a.pods) > per_machine {
            // a gang over several machines is no demand for warm ones (see
            // the module's comment)
            continue;
        }
        // the share of a machine it fills, in millionths: arrivals smaller
        // than a machine share one
        let share = (u64::from(a.pods) * MACHINE).div_ceil(per_machine);
        seen.entry((class, models)).or_default().push((a.at, share));
    }
    for ((class, models), mut v) in seen {
        let want = Want {
            class,
            any_model: models.is_empty(),
            models: models.into_owned(),
        };
        v.sort_unstable();
        out.insert(want, peak(&v, burst).div_ceil(MACHINE));
    }
    out
}

/// When arrivals of one size class came, with their shares of a machine.
type Arrived = Vec<(Time, u64)>;

/// One machine, in the millionths arrivals' shares are counted in.
const MACHINE: u64 = 1_000_000;

/// The most arrivals (sorted by time, with their shares of a machine)
/// asked for within any span of `burst`.
fn peak(v: &[(Time, u64)], burst: Dur) -> u64 {
    let (mut best, mut sum, mut lo) = (0u64, 0u64, 0usize);
    for (hi, &(t, m)) in v.iter().enumerate() {
        sum += m;
        while lo < hi && v[lo].0 + burst < t {
            sum -= v[lo].1;
            lo += 1;
        }
        best = best.max(sum);
    }
    best
}

/// The empty nodes pool `p` keeps warm now, sorted by node index.
pub(crate) fn kept(w: &World<'_>, p: usize) -> Vec<Kept> {
    let Some(kw) = w.pools[p].disruption.keep_warm.as_ref() else {
        return Vec::new();
    };
    let demand = demand(w, p, kw);
    if demand.is_empty() {
        return Vec::new();
    }
    let mut empty: Vec<usize> = Vec::new();
    for (ni, n) in w.nodes.iter().enumerate() {
        if n.pool != Some(p)
            || n.removed
            || n.node.phase != crate::model::NodePhase::Ready
            || !n.gangs.is_empty()
            || n.exclusive.is_some()
            || !n.node.pods.iter().all(|pod| pod.daemon)
            || n.node.empty_since.is_none()
            || node_gpus(n.node) == 0
        {
            continue;
        }
        empty.push(ni);
    }
    // youngest first, then by price and name
    empty.sort_by(|&a, &b| {
        let (na, nb) = (w.nodes[a].node, w.nodes[b].node);
        nb.empty_since
            .cmp(&na.empty_since)
            .then(na.price.cmp(&nb.price))
            .then(na.name.cmp(&nb.name))
    });
    let mut taken = vec![false; empty.len()];
    let mut budget = kw.max_price_per_hour.map_or(u64::MAX, |p| p.0);
    let mut out = Vec::new();
    for (want, count) in demand {
        let mut left = count;
        for (i, &ni) in empty.iter().enumerate() {
            if left == 0 {
                break;
            }
            let n = w.nodes[ni].node;
            if taken[i]
                || node_gpus(n) != want.class
                || !model_ok(&want.models, n.gpu_model.as_ref())
            {
                continue;
            }
            let price = n.price.map_or(0, |p| p.0);
            if price > budget {
                break;
            }
            budget -= price;
            taken[i] = true;
            left -= 1;
            out.push(Kept {
                node: ni,
                class: want.class,
                demand: count,
            });
        }
    }
    out.sort_by_key(|k| k.node);
    out
}

#[cfg(test)]
mod tests {
    use super::class_of;

    #[test]
    fn a_pod_takes_the_smallest_size_that_holds_it() {
        let sizes = [1, 4, 8];
        assert_eq!(class_of(&sizes, 1), Some(1));
        assert_eq!(class_of(&sizes, 2), Some(4));
        assert_eq!(class_of(&sizes, 8), Some(8));
        assert_eq!(class_of(&sizes, 9), None);
    }
}
