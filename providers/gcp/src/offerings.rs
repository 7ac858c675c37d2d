//! Offerings of one zone from Compute's machine and accelerator types.
//!
//! Machine types with built-in GPUs (`a2-*`, `a3-*`, `g2-*`) carry an
//! `accelerators` list in `machineTypes.list`; each becomes one offering per
//! capacity type. N1 machine types take attachable GPUs: every attachable
//! accelerator the zone lists (`acceleratorTypes.list`) becomes one offering
//! per allowed count and capacity type. Machine types without GPUs are left
//! out: muster buys GPU capacity only.

use std::collections::BTreeMap;

use muster_planner::labels;
use muster_planner::{CapacityType, FlexStart, GpuModel, Offering, Price, Provider, Resources};
use serde::Deserialize;

use crate::prices::{PriceTable, attachable_counts, flex_start_price, offering_name};

/// One entry of `machineTypes.list` (the fields muster reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineType {
    /// `a2-highgpu-8g`.
    pub name: String,
    /// vCPUs.
    #[serde(default)]
    pub guest_cpus: u64,
    /// Memory in MiB.
    #[serde(default)]
    pub memory_mb: u64,
    /// Its processor's architecture (Compute's `MachineType.architecture`:
    /// `X86_64`, `ARM64`); absent from older listings.
    #[serde(default)]
    pub architecture: Option<String>,
    /// Built-in accelerators.
    #[serde(default)]
    pub accelerators: Vec<BuiltInAccelerator>,
}

/// A machine type's built-in accelerators.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuiltInAccelerator {
    /// `nvidia-tesla-a100`.
    pub guest_accelerator_type: String,
    /// How many.
    pub guest_accelerator_count: u32,
}

/// One entry of `acceleratorTypes.list` (the fields muster reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorType {
    /// `nvidia-tesla-t4`.
    pub name: String,
    /// Most cards one instance may carry.
    #[serde(default)]
    pub maximum_cards_per_instance: u32,
}

/// Memory per GPU in MiB by accelerator type; 0 when unknown.
pub fn gpu_memory_mib(accelerator: &str) -> u64 {
    match accelerator {
        "nvidia-tesla-a100" => 40 * 1024,
        "nvidia-a100-80gb" | "nvidia-h100-80gb" | "nvidia-h100-mega-80gb" => 80 * 1024,
        "nvidia-l4" => 24 * 1024,
        "nvidia-tesla-t4" | "nvidia-tesla-v100" | "nvidia-tesla-p100" => 16 * 1024,
        "nvidia-tesla-p4" => 8 * 1024,
        _ => 0,
    }
}

/// The GPU model an accelerator type is sold as (`nvidia-a100-80gb` →
/// `A100-80GB`, `nvidia-tesla-t4` → `T4`).
pub fn gpu_model(accelerator: &str) -> GpuModel {
    GpuModel::new(accelerator)
}

/// A GPU shape of a machine type: accelerator type, count, and the
/// attached accelerator for N1 offerings.
type Shape<'a> = (String, u32, Option<(&'a str, u32)>);

/// Where the offerings are listed and for which NodeClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneContext<'a> {
    /// The NodeClass name.
    pub node_class: &'a str,
    /// Region, e.g. `us-central1`.
    pub region: &'a str,
    /// Zone, e.g. `us-central1-a`.
    pub zone: &'a str,
    /// The NodeClass's flex-start terms: each GPU machine type is also
    /// offered flex-start with them. `None` lists no flex-start offering.
    pub flex_start: Option<FlexStartTerms>,
    /// True when the NodeClass's machines join as GKE nodes
    /// (`spec.gcp.cluster`): each offering then also lists the labels GKE's
    /// node pool gives its nodes.
    pub gke: bool,
}

/// GKE's label of a GPU node pool's nodes: the accelerator type
/// (`nvidia-l4`), the selector GKE's GPU guide has pods use
/// (<https://cloud.google.com/kubernetes-engine/docs/how-to/gpus>).
pub const GKE_ACCELERATOR: &str = "cloud.google.com/gke-accelerator";
/// GKE's label of a Spot VM node pool's nodes (`"true"`;
/// <https://cloud.google.com/kubernetes-engine/docs/how-to/spot-vms>).
pub const GKE_SPOT: &str = "cloud.google.com/gke-spot";
/// GKE's label of a node pool's machine series (`g2`, `a3`).
pub const MACHINE_FAMILY: &str = "cloud.google.com/machine-family";

/// The labels every node of an offering gets beyond those the planner
/// derives: its kubelet's architecture (from the machine type's), and on
/// GKE the labels GKE writes into the node pool's `kube-labels` and
/// re-applies to each node (kubernetes/cloud-provider-gcp
/// `node_annotator.go`; `tests/gke_fake/nodepools.py` `kube_labels`).
fn offering_labels(
    mt: &MachineType,
    accelerator: &str,
    capacity: CapacityType,
    gke: bool,
) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    let arch = match mt.architecture.as_deref() {
        Some("ARM64") => Some(labels::ARM64),
        Some("X86_64") => Some(labels::AMD64),
        _ => None,
    };
    if let Some(a) = arch {
        l.insert(labels::ARCH.to_string(), a.to_string());
    }
    if gke {
        l.insert(GKE_ACCELERATOR.to_string(), accelerator.to_string());
        let family = mt.name.split('-').next().unwrap_or_default();
        l.insert(MACHINE_FAMILY.to_string(), family.to_string());
        if capacity == CapacityType::Spot {
            l.insert(GKE_SPOT.to_string(), "true".to_string());
        }
    }
    l
}

/// What a NodeClass's `spec.gcp.flexStart` makes of its flex-start offerings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlexStartTerms {
    /// The planner's promise: the wait for a grant and the longest run.
    pub promise: FlexStart,
    /// Percent below the on-demand price.
    pub discount_percent: u8,
}

/// Spot and on-demand offerings of one zone, and flex-start ones when the
/// context has flex-start terms (priced from the on-demand price, unpriced
/// where that is unknown).
pub fn zone_offerings(
    ctx: &ZoneContext<'_>,
    machine_types: &[MachineType],
    accelerator_types: &[AcceleratorType],
    prices: &PriceTable,
) -> Vec<Offering> {
    let mut out = Vec::new();
    for mt in machine_types {
        let shapes: Vec<Shape<'_>> = match mt.accelerators.first() {
            Some(built_in) => vec![(
                built_in.guest_accelerator_type.clone(),
                built_in.guest_accelerator_count,
                None,
            )],
            None if mt.name.starts_with("n1-") => accelerator_types
                .iter()
                .flat_map(|at| {
                    attachable_counts(&at.name)
                        .iter()
                        .filter(|n| {
                            at.maximum_cards_per_instance == 0
                                || **n <= at.maximum_cards_per_instance
                        })
                        .map(|n| (at.name.clone(), *n, Some((at.name.as_str(), *n))))
                })
                .collect(),
            None => Vec::new(),
        };
        for (accel, count, attached) in shapes {
            let flex = ctx.flex_start.map(|_| CapacityType::FlexStart);
            for capacity in [CapacityType::Spot, CapacityType::OnDemand]
                .into_iter()
                .chain(flex)
            {
                let price = match (capacity, ctx.flex_start) {
                    (CapacityType::FlexStart, Some(terms)) => prices
                        .price(&mt.name, attached, CapacityType::FlexStart)
                        .or_else(|| {
                            prices
                                .price(&mt.name, attached, CapacityType::OnDemand)
                                .map(|od| flex_start_price(od, terms.discount_percent))
                        }),
                    _ => prices.price(&mt.name, attached, capacity),
                }
                .and_then(Price::from_usd);
                out.push(Offering {
                    provider: Provider::Gcp,
                    node_class: ctx.node_class.to_string(),
                    region: ctx.region.to_string(),
                    zone: ctx.zone.to_string(),
                    instance_type: offering_name(&mt.name, attached),
                    capacity_type: capacity,
                    price,
                    gpu_model: Some(gpu_model(&accel)),
                    gpu_count: count,
                    gpu_memory_mib: gpu_memory_mib(&accel),
                    resources: Resources {
                        cpu_millis: mt.guest_cpus * 1000,
                        memory_bytes: mt.memory_mb * 1024 * 1024,
                        gpu_millis: u64::from(count) * 1000,
                        extended: BTreeMap::new(),
                    },
                    available: true,
                    unavailable_until: None,
                    interruption_rate_per_hour: 0.0,
                    placement_groups: false,
                    boot_secs: 0,
                    reservation: None,
                    flex_start: ctx
                        .flex_start
                        .filter(|_| capacity == CapacityType::FlexStart)
                        .map(|t| t.promise),
                    labels: offering_labels(mt, &accel, capacity, ctx.gke),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shapes as `machineTypes.list` / `acceleratorTypes.list` answer them.
    fn listed() -> (Vec<MachineType>, Vec<AcceleratorType>) {
        let machines = serde_json::json!([
            {"kind": "compute#machineType", "name": "a2-highgpu-8g", "guestCpus": 96, "memoryMb": 696320,
             "zone": "us-central1-a", "accelerators": [{"guestAcceleratorType": "nvidia-tesla-a100", "guestAcceleratorCount": 8}]},
            {"kind": "compute#machineType", "name": "a3-highgpu-8g", "guestCpus": 208, "memoryMb": 1916928,
             "accelerators": [{"guestAcceleratorType": "nvidia-h100-80gb", "guestAcceleratorCount": 8}]},
            {"kind": "compute#machineType", "name": "g2-standard-4", "guestCpus": 4, "memoryMb": 16384,
             "accelerators": [{"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}]},
            {"kind": "compute#machineType", "name": "n1-standard-8", "guestCpus": 8, "memoryMb": 30720},
            {"kind": "compute#machineType", "name": "e2-medium", "guestCpus": 2, "memoryMb": 4096}
        ]);
        let accels = serde_json::json!([
            {"kind": "compute#acceleratorType", "name": "nvidia-tesla-t4", "maximumCardsPerInstance": 4},
            {"kind": "compute#acceleratorType", "name": "nvidia-tesla-v100", "maximumCardsPerInstance": 8}
        ]);
        (
            serde_json::from_value(machines).expect("machine types"),
            serde_json::from_value(accels).expect("accelerator types"),
        )
    }

    fn offerings() -> Vec<Offering> {
        let (m, a) = listed();
        let ctx = ZoneContext {
            node_class: "gpu",
            region: "us-central1",
            zone: "us-central1-a",
            flex_start: None,
            gke: false,
        };
        zone_offerings(&ctx, &m, &a, &PriceTable::default())
    }

    #[test]
    fn flex_start_terms_add_one_discounted_offering_per_gpu_shape_with_its_promise() {
        let (m, a) = listed();
        let promise = FlexStart {
            expected_wait: muster_planner::Dur::mins(30),
            max_run: muster_planner::Dur::hours(24),
        };
        let ctx = ZoneContext {
            node_class: "gke",
            region: "us-central1",
            zone: "us-central1-a",
            flex_start: Some(FlexStartTerms {
                promise,
                discount_percent: 50,
            }),
            gke: false,
        };
        let all = zone_offerings(&ctx, &m, &a, &PriceTable::default());
        assert_eq!(all.len(), 3 * (3 + 7));
        let find = |c| {
            all.iter()
                .find(|o| o.instance_type == "a2-highgpu-8g" && o.capacity_type == c)
                .expect("offered")
        };
        let flex = find(CapacityType::FlexStart);
        assert_eq!(flex.flex_start, Some(promise));
        assert_eq!(flex.price, Price::from_usd(29.38708 / 2.0));
        assert_eq!(find(CapacityType::OnDemand).flex_start, None);
        assert!(
            offerings()
                .iter()
                .all(|o| o.capacity_type != CapacityType::FlexStart)
        );
    }

    #[test]
    fn built_in_gpu_machine_types_parse_to_model_count_memory_and_prices() {
        let all = offerings();
        for (name, model, count, mem_gib) in [
            ("a2-highgpu-8g", "A100", 8, 40),
            ("a3-highgpu-8g", "H100-80GB", 8, 80),
            ("g2-standard-4", "L4", 1, 24),
        ] {
            for capacity in [CapacityType::Spot, CapacityType::OnDemand] {
                let o = all
                    .iter()
                    .find(|o| o.instance_type == name && o.capacity_type == capacity)
                    .unwrap_or_else(|| panic!("{name} {capacity:?} missing"));
                assert_eq!(o.gpu_model, Some(GpuModel::new(model)), "{name}");
                assert_eq!(o.gpu_count, count, "{name}");
                assert_eq!(o.gpu_memory_mib, mem_gib * 1024, "{name}");
                assert_eq!(o.resources.gpu_millis, u64::from(count) * 1000);
                assert_eq!(o.zone, "us-central1-a");
                assert_eq!(o.node_class, "gpu");
                assert!(o.price.is_some(), "{name} {capacity:?} unpriced");
            }
        }
        let a2 = |c| {
            all.iter()
                .find(|o| o.instance_type == "a2-highgpu-8g" && o.capacity_type == c)
        };
        assert_eq!(
            a2(CapacityType::OnDemand).and_then(|o| o.price),
            Price::from_usd(29.38708)
        );
        assert_eq!(
            a2(CapacityType::OnDemand).map(|o| o.resources.cpu_millis),
            Some(96_000)
        );
    }

    #[test]
    fn n1_gets_one_offering_per_attachable_accelerator_count_and_gpu_less_types_none() {
        let all = offerings();
        let mut n1: Vec<&str> = all
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot && o.instance_type.starts_with("n1-"))
            .map(|o| o.instance_type.as_str())
            .collect();
        n1.sort();
        assert_eq!(
            n1,
            [
                "n1-standard-8+1xnvidia-tesla-t4",
                "n1-standard-8+1xnvidia-tesla-v100",
                "n1-standard-8+2xnvidia-tesla-t4",
                "n1-standard-8+2xnvidia-tesla-v100",
                "n1-standard-8+4xnvidia-tesla-t4",
                "n1-standard-8+4xnvidia-tesla-v100",
                "n1-standard-8+8xnvidia-tesla-v100",
            ]
        );
        assert!(all.iter().all(|o| !o.instance_type.starts_with("e2-")));
        assert_eq!(all.len(), 2 * (3 + 7));
    }

    #[test]
    fn unpriced_machine_types_are_offered_with_unknown_price() {
        let m: Vec<MachineType> = serde_json::from_value(serde_json::json!([
            {"name": "a9-future-8g", "guestCpus": 8, "memoryMb": 1024,
             "accelerators": [{"guestAcceleratorType": "nvidia-b300", "guestAcceleratorCount": 8}]}
        ]))
        .expect("machine types");
        let ctx = ZoneContext {
            node_class: "gpu",
            region: "us-central1",
            zone: "us-central1-b",
            flex_start: None,
            gke: false,
        };
        let all = zone_offerings(&ctx, &m, &[], &PriceTable::default());
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|o| o.price.is_none()));
    }

    /// An offering lists its machine type's architecture as the kubelet
    /// names it, and on GKE the labels GKE's node pool gives its nodes:
    /// the accelerator type, the machine series, and Spot.
    #[test]
    fn offerings_list_the_architecture_and_on_gke_the_node_pools_labels() {
        let machines: Vec<MachineType> = serde_json::from_value(serde_json::json!([
            {"name": "a4x-highgpu-4g", "guestCpus": 140, "memoryMb": 905216, "architecture": "ARM64",
             "accelerators": [{"guestAcceleratorType": "nvidia-gb200", "guestAcceleratorCount": 4}]},
            {"name": "g2-standard-4", "guestCpus": 4, "memoryMb": 16384, "architecture": "X86_64",
             "accelerators": [{"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}]},
            {"name": "a2-highgpu-1g", "guestCpus": 12, "memoryMb": 87040,
             "accelerators": [{"guestAcceleratorType": "nvidia-tesla-a100", "guestAcceleratorCount": 1}]}
        ]))
        .expect("machine types");
        let list = |gke| {
            let ctx = ZoneContext {
                node_class: "gpu",
                region: "us-central1",
                zone: "us-central1-a",
                flex_start: None,
                gke,
            };
            zone_offerings(&ctx, &machines, &[], &PriceTable::default())
        };
        let find = |all: &[Offering], t: &str, c: CapacityType| {
            let o = all
                .iter()
                .find(|o| o.instance_type == t && o.capacity_type == c)
                .expect("offered");
            o.labels.clone()
        };
        let gce = list(false);
        let arm = find(&gce, "a4x-highgpu-4g", CapacityType::Spot);
        assert_eq!(
            arm,
            BTreeMap::from([(labels::ARCH.into(), labels::ARM64.into())])
        );
        let l4 = find(&gce, "g2-standard-4", CapacityType::OnDemand);
        assert_eq!(
            l4.get(labels::ARCH).map(String::as_str),
            Some(labels::AMD64)
        );
        // no architecture listed: none derived
        assert!(find(&gce, "a2-highgpu-1g", CapacityType::OnDemand).is_empty());
        let gke = list(true);
        let spot = find(&gke, "g2-standard-4", CapacityType::Spot);
        assert_eq!(
            spot.get(GKE_ACCELERATOR).map(String::as_str),
            Some("nvidia-l4")
        );
        assert_eq!(spot.get(GKE_SPOT).map(String::as_str), Some("true"));
        assert_eq!(spot.get(MACHINE_FAMILY).map(String::as_str), Some("g2"));
        assert_eq!(
            spot.get(labels::ARCH).map(String::as_str),
            Some(labels::AMD64)
        );
        let od = find(&gke, "g2-standard-4", CapacityType::OnDemand);
        assert_eq!(od.get(GKE_SPOT), None);
    }
}
