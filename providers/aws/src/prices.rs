//! The built-in on-demand price table and its overrides.
//!
//! Hourly USD list prices for Linux on-demand instances in `us-east-1`, from
//! AWS's public price list as of [`TABLE_DATE`]. Other regions differ by a
//! few percent; operators who need exact figures override entries. Spot
//! prices are never in the table: they come from `DescribeSpotPriceHistory`.
//! A price that is neither in the table nor overridden is `None`, never zero.

use std::collections::BTreeMap;

/// The date the built-in figures were taken from the public price list.
pub use muster_provider_api::price_list::AWS_TABLE_DATE as TABLE_DATE;

use muster_provider_api::price_list::AWS_ON_DEMAND as ON_DEMAND;

/// On-demand prices: the built-in table plus operator overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    overrides: BTreeMap<String, f64>,
}

impl PriceTable {
    /// The built-in table with these overrides (instance type → USD/hour).
    pub fn with_overrides(overrides: BTreeMap<String, f64>) -> Self {
        PriceTable { overrides }
    }

    /// The on-demand price of an instance type, if known.
    pub fn on_demand(&self, instance_type: &str) -> Option<f64> {
        self.overrides.get(instance_type).copied().or_else(|| {
            ON_DEMAND
                .iter()
                .find(|(t, _)| *t == instance_type)
                .map(|(_, p)| *p)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_covers_the_gpu_families_and_overrides_win() {
        let t = PriceTable::default();
        for ty in [
            "p4d.24xlarge",
            "p5.48xlarge",
            "g5.xlarge",
            "g6.xlarge",
            "g4dn.xlarge",
        ] {
            assert!(t.on_demand(ty).is_some_and(|p| p > 0.0), "{ty}");
        }
        // bigger machines of a family cost more
        assert!(t.on_demand("g5.48xlarge") > t.on_demand("g5.12xlarge"));
        assert_eq!(t.on_demand("m5.large"), None, "unknown is None, never zero");
        let t = PriceTable::with_overrides([("p4d.24xlarge".to_string(), 19.5)].into());
        assert_eq!(t.on_demand("p4d.24xlarge"), Some(19.5));
        // the table is sorted by nothing but has no duplicates
        let mut names: Vec<&str> = ON_DEMAND.iter().map(|(t, _)| *t).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ON_DEMAND.len());
    }
}
