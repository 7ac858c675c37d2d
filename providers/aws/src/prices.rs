//! The built-in on-demand price table and its overrides.
//!
//! Hourly USD list prices for Linux on-demand instances in `us-east-1`, from
//! AWS's public price list as of [`TABLE_DATE`]. Other regions differ by a
//! few percent; operators who need exact figures override entries. Spot
//! prices are never in the table: they come from `DescribeSpotPriceHistory`.
//! A price that is neither in the table nor overridden is `None`, never zero.

use std::collections::BTreeMap;

/// The date the built-in figures were taken from the public price list.
pub const TABLE_DATE: &str = "2026-07-20";

/// (instance type, on-demand USD per hour).
const ON_DEMAND: &[(&str, f64)] = &[
    ("g4dn.xlarge", 0.526),
    ("g4dn.2xlarge", 0.752),
    ("g4dn.4xlarge", 1.204),
    ("g4dn.8xlarge", 2.176),
    ("g4dn.12xlarge", 3.912),
    ("g4dn.16xlarge", 4.352),
    ("g4dn.metal", 7.824),
    ("g5.xlarge", 1.006),
    ("g5.2xlarge", 1.212),
    ("g5.4xlarge", 1.624),
    ("g5.8xlarge", 2.448),
    ("g5.12xlarge", 5.672),
    ("g5.16xlarge", 4.096),
    ("g5.24xlarge", 8.144),
    ("g5.48xlarge", 16.288),
    ("g6.xlarge", 0.8048),
    ("g6.2xlarge", 0.9776),
    ("g6.4xlarge", 1.3232),
    ("g6.8xlarge", 2.0144),
    ("g6.12xlarge", 4.6016),
    ("g6.16xlarge", 3.3968),
    ("g6.24xlarge", 6.6752),
    ("g6.48xlarge", 13.3504),
    ("g6e.xlarge", 1.861),
    ("g6e.2xlarge", 2.24208),
    ("g6e.4xlarge", 3.00424),
    ("g6e.8xlarge", 4.52856),
    ("g6e.12xlarge", 10.49264),
    ("g6e.16xlarge", 7.57719),
    ("g6e.24xlarge", 15.06559),
    ("g6e.48xlarge", 30.13118),
    ("p3.2xlarge", 3.06),
    ("p3.8xlarge", 12.24),
    ("p3dn.24xlarge", 31.212),
    ("p4d.24xlarge", 21.957642),
    ("p4de.24xlarge", 27.44705),
    ("p5.4xlarge", 6.88),
    ("p5.48xlarge", 55.04),
    ("p5en.48xlarge", 63.296),
    ("p6-b200.48xlarge", 113.9328),
];

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
