//! The built-in GPU price table and its overrides.
//!
//! Hourly USD prices for `us-central1` as of [`TABLE_DATE`]: machines with
//! built-in GPUs from the shared list the simulator's catalog uses too
//! ([`muster_provider_api::price_list`]); N1 machines and attachable GPUs
//! from Google Cloud's list prices, rounded to the cent. Spot prices move,
//! so operators who need exact figures override entries. A price that
//! is neither in the table nor overridden is `None`, never zero.

use std::collections::BTreeMap;

use muster_planner::CapacityType;

/// The date the built-in figures were taken from the public price list.
pub use muster_provider_api::price_list::GCP_TABLE_DATE as TABLE_DATE;

use muster_provider_api::price_list::GCP_MACHINES;

/// Machine types with built-in GPUs that the shared list
/// ([`muster_provider_api::price_list`]) does not carry, because its source
/// does not sell them in us-central1: (type, on-demand, spot) per hour, from
/// Google Cloud's list prices of 2025-06-01.
const NOT_IN_SHARED_LIST: &[(&str, f64, f64)] = &[("a3-megagpu-8g", 101.25, 30.38)];

/// N1 machine types GPUs attach to: (type, on-demand, spot) per hour.
const N1: &[(&str, f64, f64)] = &[
    ("n1-standard-4", 0.19, 0.04),
    ("n1-standard-8", 0.38, 0.08),
    ("n1-standard-16", 0.76, 0.16),
    ("n1-standard-32", 1.52, 0.32),
];

/// Attachable accelerators: (accelerator type, on-demand, spot) per GPU-hour.
const ATTACHABLE: &[(&str, f64, f64)] = &[
    ("nvidia-tesla-t4", 0.35, 0.14),
    ("nvidia-tesla-v100", 2.48, 0.99),
    ("nvidia-tesla-p4", 0.60, 0.24),
    ("nvidia-tesla-p100", 1.46, 0.58),
];

/// Accelerator counts an N1 machine can carry, per accelerator type.
pub fn attachable_counts(accelerator: &str) -> &'static [u32] {
    match accelerator {
        "nvidia-tesla-t4" | "nvidia-tesla-p4" | "nvidia-tesla-p100" => &[1, 2, 4],
        "nvidia-tesla-v100" => &[1, 2, 4, 8],
        _ => &[],
    }
}

/// Hourly prices: the built-in table plus operator overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    /// Overrides keyed by offering name (see [`offering_name`]) and capacity.
    overrides: BTreeMap<(String, CapacityType), f64>,
}

/// The name an offering is priced under: the machine type, or for an N1
/// machine with attached GPUs `<machine>+<count>x<accelerator>`.
pub fn offering_name(machine_type: &str, accelerator: Option<(&str, u32)>) -> String {
    match accelerator {
        Some((accel, count)) => format!("{machine_type}+{count}x{accel}"),
        None => machine_type.to_string(),
    }
}

/// An offering name split back into machine type and attached accelerator
/// (type, count): the inverse of [`offering_name`]. `None` when the
/// attached part is malformed.
pub fn parse_offering_name(name: &str) -> Option<(&str, Option<(&str, u32)>)> {
    let Some((machine, attached)) = name.split_once('+') else {
        return Some((name, None));
    };
    let (count, accel) = attached.split_once('x')?;
    let count: u32 = count.parse().ok()?;
    if machine.is_empty() || accel.is_empty() || count == 0 {
        return None;
    }
    Some((machine, Some((accel, count))))
}

impl PriceTable {
    /// The built-in table with `overrides` (offering name and capacity →
    /// hourly price) taking precedence.
    pub fn with_overrides(overrides: BTreeMap<(String, CapacityType), f64>) -> Self {
        Self { overrides }
    }

    /// The hourly price of a machine type (with `accelerator` attached for
    /// N1 offerings), or `None` when it is unknown.
    pub fn price(
        &self,
        machine_type: &str,
        accelerator: Option<(&str, u32)>,
        capacity: CapacityType,
    ) -> Option<f64> {
        let name = offering_name(machine_type, accelerator);
        if let Some(p) = self.overrides.get(&(name, capacity)) {
            return Some(*p);
        }
        // Dynamic Workload Scheduler (flex-start) prices are SKUs of their
        // own, not in this table: unpriced unless overridden, so never
        // chosen (a NodeClass's flex-start terms price them, [`flex_start_price`]).
        if capacity == CapacityType::FlexStart {
            return None;
        }
        let pick = |row: &(&str, f64, f64)| match capacity {
            // (flex-start returned above)
            CapacityType::OnDemand | CapacityType::FlexStart => row.1,
            CapacityType::Spot => row.2,
            // Paid for with the reservation: a machine in it costs nothing more.
            CapacityType::Reserved => 0.0,
        };
        match accelerator {
            None => GCP_MACHINES
                .iter()
                .chain(NOT_IN_SHARED_LIST)
                .find(|r| r.0 == machine_type)
                .map(pick),
            Some((accel, count)) => {
                if !attachable_counts(accel).contains(&count) {
                    return None;
                }
                let machine = N1.iter().find(|r| r.0 == machine_type).map(pick)?;
                let gpu = ATTACHABLE.iter().find(|r| r.0 == accel).map(pick)?;
                Some(machine + gpu * f64::from(count))
            }
        }
    }
}

/// The hourly flex-start price of a machine whose on-demand price is
/// `on_demand`, `discount_percent` below it (capped at 53, the most Google
/// says flex-start takes off: "a discount up to 53% for memory, vCPUs, and
/// any attached GPUs",
/// <https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig>).
/// Google publishes no per-machine discount muster could carry, so the
/// operator states it; 0 prices flex-start as on-demand, its upper bound.
pub fn flex_start_price(on_demand: f64, discount_percent: u8) -> f64 {
    on_demand * (1.0 - f64::from(discount_percent.min(MAX_FLEX_START_DISCOUNT)) / 100.0)
}

/// The largest flex-start discount Google states ("up to 53%").
pub const MAX_FLEX_START_DISCOUNT: u8 = 53;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flex_start_is_priced_from_on_demand_and_the_stated_discount_capped_at_53() {
        assert!((flex_start_price(100.0, 0) - 100.0).abs() < 1e-9);
        assert!((flex_start_price(100.0, 40) - 60.0).abs() < 1e-9);
        assert!((flex_start_price(100.0, 90) - 47.0).abs() < 1e-9);
    }

    #[test]
    fn every_required_machine_type_has_both_prices_and_spot_is_cheaper() {
        let mut required: Vec<String> = Vec::new();
        for n in [1, 2, 4, 8] {
            required.push(format!("a2-highgpu-{n}g"));
            required.push(format!("a2-ultragpu-{n}g"));
            required.push(format!("a3-highgpu-{n}g"));
        }
        required.push("a2-megagpu-16g".into());
        required.push("a3-megagpu-8g".into());
        for n in [4, 8, 12, 16, 24, 32, 48, 96] {
            required.push(format!("g2-standard-{n}"));
        }
        let table = PriceTable::default();
        for m in &required {
            let od = table.price(m, None, CapacityType::OnDemand);
            let spot = table.price(m, None, CapacityType::Spot);
            match (od, spot) {
                (Some(od), Some(spot)) => assert!(spot > 0.0 && spot < od, "{m}: {spot} vs {od}"),
                other => panic!("{m} unpriced: {other:?}"),
            }
        }
    }

    #[test]
    fn n1_offerings_are_priced_per_accelerator_count() {
        let table = PriceTable::default();
        let one = table.price(
            "n1-standard-8",
            Some(("nvidia-tesla-t4", 1)),
            CapacityType::OnDemand,
        );
        let four = table.price(
            "n1-standard-8",
            Some(("nvidia-tesla-t4", 4)),
            CapacityType::OnDemand,
        );
        let (one, four) = (one.expect("priced"), four.expect("priced"));
        assert!((four - one - 3.0 * 0.35).abs() < 1e-9, "{one} {four}");
        assert_eq!(
            table.price(
                "n1-standard-8",
                Some(("nvidia-tesla-t4", 8)),
                CapacityType::OnDemand
            ),
            None,
            "a T4 count N1 cannot carry is not an offering"
        );
        for accel in [
            "nvidia-tesla-t4",
            "nvidia-tesla-v100",
            "nvidia-tesla-p4",
            "nvidia-tesla-p100",
        ] {
            assert!(
                table
                    .price("n1-standard-16", Some((accel, 1)), CapacityType::Spot)
                    .is_some(),
                "{accel}"
            );
        }
    }

    #[test]
    fn offering_names_round_trip() {
        for (machine, attached) in [
            ("a2-highgpu-8g", None),
            ("n1-standard-8", Some(("nvidia-tesla-t4", 4))),
        ] {
            let name = offering_name(machine, attached);
            assert_eq!(
                parse_offering_name(&name),
                Some((machine, attached)),
                "{name}"
            );
        }
        for bad in [
            "n1-standard-8+",
            "n1-standard-8+x",
            "n1-standard-8+0xt4",
            "+1xt4",
        ] {
            assert_eq!(parse_offering_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn unknown_prices_are_none_and_overrides_win() {
        let table = PriceTable::default();
        assert_eq!(
            table.price("z9-unknown-1", None, CapacityType::OnDemand),
            None
        );
        assert_eq!(
            table.price(
                "n1-standard-8",
                Some(("nvidia-h9000", 1)),
                CapacityType::Spot
            ),
            None
        );
        let mut overrides = BTreeMap::new();
        overrides.insert(("a2-highgpu-8g".to_string(), CapacityType::Spot), 7.5);
        overrides.insert(("z9-unknown-1".to_string(), CapacityType::OnDemand), 1.25);
        let table = PriceTable::with_overrides(overrides);
        assert_eq!(
            table.price("a2-highgpu-8g", None, CapacityType::Spot),
            Some(7.5)
        );
        assert_eq!(
            table.price("a2-highgpu-8g", None, CapacityType::OnDemand),
            Some(29.38708)
        );
        assert_eq!(
            table.price("z9-unknown-1", None, CapacityType::OnDemand),
            Some(1.25)
        );
    }
}
