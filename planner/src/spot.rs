//! Gang-aware spot risk.
//!
//! One interruption stops a whole gang, so the risk grows with the number
//! of nodes and the run time. The expected cost of running a gang on a set
//! of nodes for `D` hours is
//!
//! ```text
//! E = P·D + P(any node interrupted within D) · P·D
//!     where P(any) = 1 − exp(−D · Σ rateᵢ)
//! ```
//!
//! (`P` the price per hour of the set, `rateᵢ` each node's
//! `interruption_rate_per_hour`): the first term is the run, the second the
//! expected cost of running again after an interruption. On-demand nodes
//! have rate zero, so `E = P·D`. The planner compares candidate launch sets
//! by `E`, so spot is chosen only when it is cheaper after risk.

use crate::time::Dur;

/// Probability that at least one of the nodes is interrupted within `d`.
pub fn interruption_probability(rates_per_hour: &[f64], d: Dur) -> f64 {
    let hours = d.as_secs() as f64 / 3600.0;
    let total: f64 = rates_per_hour
        .iter()
        .map(|r| if r.is_finite() && *r > 0.0 { *r } else { 0.0 })
        .sum();
    1.0 - (-(total * hours)).exp()
}

/// Expected cost in micro-dollars of running for `d` on nodes costing
/// `price_per_hour` (micro-dollars) together, with the given interruption
/// rates.
pub fn expected_cost(price_per_hour: u64, rates_per_hour: &[f64], d: Dur) -> u64 {
    let hours = d.as_secs() as f64 / 3600.0;
    let run = price_per_hour as f64 * hours;
    let p = interruption_probability(rates_per_hour, d);
    let e = run * (1.0 + p);
    if e.is_finite() && e < 1.8e19 {
        e.round() as u64
    } else {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_demand_has_no_risk() {
        assert_eq!(
            expected_cost(1_000_000, &[0.0, 0.0], Dur::hours(2)),
            2_000_000
        );
    }

    #[test]
    fn risk_grows_with_nodes_and_time() {
        let one = interruption_probability(&[0.1], Dur::hours(1));
        let four = interruption_probability(&[0.1; 4], Dur::hours(1));
        let long = interruption_probability(&[0.1], Dur::hours(10));
        assert!(one < four && one < long);
        assert!((one - (1.0 - (-0.1f64).exp())).abs() < 1e-12);
        // A large, long gang on spot at 40 % off costs more than on demand.
        let od = expected_cost(32_000_000, &[0.0; 4], Dur::hours(24));
        let spot = expected_cost(19_200_000, &[0.05; 4], Dur::hours(24));
        assert!(spot > od, "{spot} vs {od}");
        // A short one is cheaper on spot.
        let od = expected_cost(32_000_000, &[0.0; 4], Dur::mins(30));
        let spot = expected_cost(19_200_000, &[0.05; 4], Dur::mins(30));
        assert!(spot < od);
    }
}
