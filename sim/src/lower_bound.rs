//! The cost lower bound: every job's GPU-seconds at the cheapest price per
//! GPU of any offering it may use (any pool may buy it — spot included when
//! a pool allows spot — its GPU model and memory fit, one pod fits on it),
//! with zero boot time and perfect packing. Reserved capacity is paid for
//! whole and costs nothing more to use: [`lower_bound_with_free`] takes the
//! GPU-hours the reservations hold off the dearest work first, whatever
//! machine that work needs (a relaxation, so still a bound).

use std::collections::HashMap;

use muster_planner::{Offering, Resources};

use crate::binder::Constraint;
use crate::workload::Job;

/// Cheapest price per GPU-hour (dollars) for a pod with `req` under `c`
/// among `offerings`; `None` when nothing fits.
pub fn cheapest_per_gpu(offerings: &[&Offering], c: &Constraint, req: &Resources) -> Option<f64> {
    offerings
        .iter()
        .filter(|o| c.accepts_offering(o, req))
        .filter_map(|o| o.price.map(|p| p.usd() / f64::from(o.gpu_count.max(1))))
        .fold(None, |best: Option<f64>, x| {
            Some(best.map_or(x, |b| b.min(x)))
        })
}

/// The lower bound in dollars, and the jobs (index) nothing fits.
pub fn lower_bound(
    jobs: &[Job],
    requests: &[Resources],
    constraints: &[Constraint],
    buyable: &[&Offering],
) -> (f64, Vec<usize>) {
    let mut cache: HashMap<(Constraint, Resources), Option<f64>> = HashMap::new();
    let mut total = 0.0;
    let mut misfits = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let key = (constraints[i].clone(), requests[i].clone());
        let price = *cache
            .entry(key)
            .or_insert_with(|| cheapest_per_gpu(buyable, &constraints[i], &requests[i]));
        match price {
            Some(p) => total += j.gpu_seconds() / 3600.0 * p,
            None => misfits.push(i),
        }
    }
    (total, misfits)
}

/// [`lower_bound`] over `buyable` (offerings with a price: reserved ones
/// left out), less `free_gpu_hours` of work at no cost, taken from the jobs
/// whose cheapest GPU-hour is dearest. Returns the dollars beyond what the
/// reservations cost, and the jobs nothing fits.
pub fn lower_bound_with_free(
    jobs: &[Job],
    requests: &[Resources],
    constraints: &[Constraint],
    buyable: &[&Offering],
    free_gpu_hours: f64,
) -> (f64, Vec<usize>) {
    let mut cache: HashMap<(Constraint, Resources), Option<f64>> = HashMap::new();
    let mut work: Vec<(f64, f64)> = Vec::with_capacity(jobs.len());
    let mut misfits = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let key = (constraints[i].clone(), requests[i].clone());
        let price = *cache
            .entry(key)
            .or_insert_with(|| cheapest_per_gpu(buyable, &constraints[i], &requests[i]));
        match price {
            Some(p) => work.push((p, j.gpu_seconds() / 3600.0)),
            None => misfits.push(i),
        }
    }
    work.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut free = free_gpu_hours.max(0.0);
    let mut total = 0.0;
    for (price, hours) in work {
        let taken = hours.min(free);
        free -= taken;
        total += (hours - taken) * price;
    }
    (total, misfits)
}
