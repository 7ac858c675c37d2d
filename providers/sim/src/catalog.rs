//! The built-in catalog: well-known AWS and GCP GPU machine shapes with
//! public list prices, so `muster simulate` works with no data files.
//!
//! Prices are US dollars per hour and are the providers' own tables
//! ([`muster_provider_api::price_list`]; a test checks every shape against
//! them): AWS on-demand list prices in us-east-1 of 2026-07-20, and GCP
//! whole-machine on-demand and spot prices in us-central1 of 2026-08-03.
//! AWS spot prices are not in any provider table (the AWS provider reads
//! them from the cloud): here they are indicative medians across us-east-1
//! zones from an older public SkyPilot catalog snapshot, not quotes; `None`
//! where no figure was at hand (such shapes are sold on-demand only here). Allocatable CPU and memory are a
//! little below the raw machine (kubelet and system reservations).

use std::collections::BTreeMap;

use muster_planner::labels;
use muster_planner::{CapacityType, GpuModel, Offering, Price, Provider, Resources};

/// One machine shape of the built-in catalog.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Cloud.
    pub provider: Provider,
    /// Region.
    pub region: &'static str,
    /// Instance or machine type.
    pub instance_type: &'static str,
    /// GPU model.
    pub gpu_model: &'static str,
    /// GPUs per machine.
    pub gpu_count: u32,
    /// Memory per GPU, GiB.
    pub gpu_memory_gib: f64,
    /// Virtual CPUs.
    pub vcpu: u32,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// On-demand price per hour.
    pub on_demand_usd_h: f64,
    /// Spot price per hour, when known.
    pub spot_usd_h: Option<f64>,
}

/// A shape: type, (GPU model, GPUs, GiB per GPU), vCPUs, GiB, prices.
const fn aws(
    instance_type: &'static str,
    (gpu_model, gpu_count, gpu_memory_gib): (&'static str, u32, f64),
    vcpu: u32,
    memory_gib: f64,
    on_demand_usd_h: f64,
    spot_usd_h: Option<f64>,
) -> Shape {
    Shape {
        provider: Provider::Aws,
        region: "us-east-1",
        instance_type,
        gpu_model,
        gpu_count,
        gpu_memory_gib,
        vcpu,
        memory_gib,
        on_demand_usd_h,
        spot_usd_h,
    }
}

/// A shape: type, (GPU model, GPUs, GiB per GPU), vCPUs, GiB, prices.
const fn gcp(
    instance_type: &'static str,
    (gpu_model, gpu_count, gpu_memory_gib): (&'static str, u32, f64),
    vcpu: u32,
    memory_gib: f64,
    on_demand_usd_h: f64,
    spot_usd_h: Option<f64>,
) -> Shape {
    Shape {
        provider: Provider::Gcp,
        region: "us-central1",
        instance_type,
        gpu_model,
        gpu_count,
        gpu_memory_gib,
        vcpu,
        memory_gib,
        on_demand_usd_h,
        spot_usd_h,
    }
}

/// The built-in shapes (prices as of July–August 2026, see the module docs).
pub const SHAPES: &[Shape] = &[
    aws("g4dn.xlarge", ("T4", 1, 16.0), 4, 16.0, 0.526, Some(0.1869)),
    aws("g4dn.12xlarge", ("T4", 4, 16.0), 48, 192.0, 3.912, None),
    aws("g5.xlarge", ("A10G", 1, 24.0), 4, 16.0, 1.006, Some(0.4028)),
    aws("g5.2xlarge", ("A10G", 1, 24.0), 8, 32.0, 1.212, None),
    aws(
        "g5.12xlarge",
        ("A10G", 4, 24.0),
        48,
        192.0,
        5.672,
        Some(2.5445),
    ),
    aws(
        "g5.48xlarge",
        ("A10G", 8, 24.0),
        192,
        768.0,
        16.288,
        Some(4.3694),
    ),
    aws("g6.xlarge", ("L4", 1, 24.0), 4, 16.0, 0.8048, Some(0.4128)),
    aws("g6.12xlarge", ("L4", 4, 24.0), 48, 192.0, 4.6016, None),
    aws(
        "g6.48xlarge",
        ("L4", 8, 24.0),
        192,
        768.0,
        13.3504,
        Some(3.6027),
    ),
    aws(
        "g6e.xlarge",
        ("L40S", 1, 48.0),
        4,
        32.0,
        1.861,
        Some(0.8171),
    ),
    aws(
        "g6e.12xlarge",
        ("L40S", 4, 48.0),
        48,
        384.0,
        10.49264,
        Some(5.0844),
    ),
    aws(
        "g6e.48xlarge",
        ("L40S", 8, 48.0),
        192,
        1536.0,
        30.13118,
        Some(8.2956),
    ),
    aws(
        "p4d.24xlarge",
        ("A100", 8, 40.0),
        96,
        1152.0,
        21.957642,
        Some(6.7915),
    ),
    aws(
        "p4de.24xlarge",
        ("A100-80GB", 8, 80.0),
        96,
        1152.0,
        27.44705,
        Some(6.8234),
    ),
    aws(
        "p5.48xlarge",
        ("H100", 8, 80.0),
        192,
        2048.0,
        55.04,
        Some(26.7861),
    ),
    gcp(
        "g2-standard-4",
        ("L4", 1, 24.0),
        4,
        16.0,
        0.706832,
        Some(0.397336),
    ),
    gcp(
        "g2-standard-8",
        ("L4", 1, 24.0),
        8,
        32.0,
        0.853624,
        Some(0.479872),
    ),
    gcp(
        "g2-standard-24",
        ("L4", 2, 24.0),
        24,
        96.0,
        2.000833,
        Some(1.124816),
    ),
    gcp(
        "g2-standard-48",
        ("L4", 4, 24.0),
        48,
        192.0,
        4.001665,
        Some(2.249632),
    ),
    gcp(
        "g2-standard-96",
        ("L4", 8, 24.0),
        96,
        384.0,
        8.00333,
        Some(4.499264),
    ),
    gcp(
        "a2-highgpu-1g",
        ("A100", 1, 40.0),
        12,
        85.0,
        3.673385,
        Some(1.92802),
    ),
    gcp(
        "a2-highgpu-2g",
        ("A100", 2, 40.0),
        24,
        170.0,
        7.34677,
        Some(3.85604),
    ),
    gcp(
        "a2-highgpu-4g",
        ("A100", 4, 40.0),
        48,
        340.0,
        14.69354,
        Some(7.71208),
    ),
    gcp(
        "a2-highgpu-8g",
        ("A100", 8, 40.0),
        96,
        680.0,
        29.38708,
        Some(15.42416),
    ),
    gcp(
        "a2-ultragpu-1g",
        ("A100-80GB", 1, 80.0),
        12,
        170.0,
        5.068798,
        Some(2.759546),
    ),
    gcp(
        "a2-ultragpu-8g",
        ("A100-80GB", 8, 80.0),
        96,
        1360.0,
        40.550383,
        Some(22.07637),
    ),
    gcp(
        "a3-highgpu-8g",
        ("H100", 8, 80.0),
        208,
        1872.0,
        88.49,
        Some(50.609541),
    ),
];

/// Zones of a region that the simulated cloud sells in: three per region
/// (`us-east-1a..c` on AWS, `us-central1-a..c` on GCP).
pub fn zones_of(provider: Provider, region: &str) -> Vec<String> {
    ["a", "b", "c"]
        .iter()
        .map(|z| match provider {
            Provider::Gcp => format!("{region}-{z}"),
            _ => format!("{region}{z}"),
        })
        .collect()
}

/// What pods may use on a machine of `vcpu` CPUs and `memory_gib` GiB: raw
/// capacity less kubelet/system reservations (100m + 1 % of CPU; 8 % of
/// memory + 512 MiB).
pub fn allocatable(vcpu: u32, memory_gib: f64, gpus: u32) -> Resources {
    let cpu_millis = u64::from(vcpu) * 1000;
    let cpu_reserved = 100 + cpu_millis / 100;
    let mem_bytes = (memory_gib * (1u64 << 30) as f64) as u64;
    let mem_reserved = mem_bytes / 100 * 8 + (512u64 << 20);
    Resources::new(
        cpu_millis.saturating_sub(cpu_reserved),
        mem_bytes.saturating_sub(mem_reserved),
        gpus,
    )
}

/// Typical boot-to-Ready seconds of a family, used as the offering's
/// `boot_secs` (the simulated cloud draws actual boot times around it).
pub fn typical_boot_secs(instance_type: &str) -> u64 {
    let (lo, hi) = crate::behaviour::default_boot_range(instance_type);
    (lo.as_secs() + hi.as_secs()) / 2
}

/// The CPU architecture of an instance type, as the kubelet labels its
/// node (`kubernetes.io/arch`, Go's names), from the type's name: the real
/// providers read it from the cloud (EC2 `ProcessorInfo.SupportedArchitectures`,
/// Compute `machineTypes` `architecture`); the simulated cloud's catalog
/// has names only. EC2 names a Graviton family with `g` right after its
/// generation (`g5g`, `c7gn`, `r8g`: "g – AWS Graviton processors",
/// <https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html>),
/// and a Grace Blackwell family with `-gb` (`p6e-gb200`); Compute's Arm
/// series are C4A, N4A and T2A (Axion, Ampere) and A4X (Grace).
pub fn arch_of(instance_type: &str) -> &'static str {
    let family = muster_planner::model::offering::family_of(instance_type);
    let after_generation = family
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .trim_start_matches(|c: char| c.is_ascii_digit());
    let arm = match family.split_once('-') {
        // Compute: `c4a-standard`, `a4x-highgpu`; EC2: `p6e-gb200`
        Some((series, rest)) => {
            ["c4a", "n4a", "t2a", "a4x"].contains(&series) || rest.starts_with("gb")
        }
        None => after_generation.starts_with('g'),
    };
    if arm { labels::ARM64 } else { labels::AMD64 }
}

/// The labels an offering of `instance_type` lists (its architecture).
pub fn offering_labels(instance_type: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(labels::ARCH.to_string(), arch_of(instance_type).to_string())])
}

/// The offerings of one shape: every zone × on-demand, plus spot when a spot
/// price is known.
pub fn offerings_of(shape: &Shape) -> Vec<Offering> {
    let mut out = Vec::new();
    for zone in zones_of(shape.provider, shape.region) {
        let mut prices = vec![(CapacityType::OnDemand, Some(shape.on_demand_usd_h))];
        if let Some(spot) = shape.spot_usd_h {
            prices.push((CapacityType::Spot, Some(spot)));
        }
        for (capacity_type, usd) in prices {
            out.push(Offering {
                provider: shape.provider,
                node_class: String::new(),
                region: shape.region.to_string(),
                zone: zone.clone(),
                instance_type: shape.instance_type.to_string(),
                capacity_type,
                price: usd.and_then(Price::from_usd),
                gpu_model: Some(GpuModel::new(shape.gpu_model)),
                gpu_count: shape.gpu_count,
                gpu_memory_mib: (shape.gpu_memory_gib * 1024.0).round() as u64,
                resources: allocatable(shape.vcpu, shape.memory_gib, shape.gpu_count),
                available: true,
                unavailable_until: None,
                interruption_rate_per_hour: 0.0,
                placement_groups: true,
                boot_secs: typical_boot_secs(shape.instance_type),
                reservation: None,
                flex_start: None,
                labels: offering_labels(shape.instance_type),
            });
        }
    }
    out
}

/// Every offering of the built-in catalog.
pub fn builtin_offerings() -> Vec<Offering> {
    SHAPES.iter().flat_map(offerings_of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_sane() {
        let all = builtin_offerings();
        assert!(all.len() > 100);
        for o in &all {
            assert!(o.price.is_some_and(|p| p.0 > 0), "{}", o.key());
            assert!(o.gpu_count > 0);
            assert!(o.resources.cpu_millis > 0 && o.resources.memory_bytes > 0);
            assert!(o.boot_secs >= 120, "{}", o.instance_type);
        }
        let small = allocatable(4, 16.0, 1);
        assert!(small.cpu_millis < 4000 && small.cpu_millis > 3800);
        assert!(small.memory_bytes < 16 << 30 && small.memory_bytes > 14 << 30);
        // Every price is the providers' table's.
        use muster_provider_api::price_list::{aws_on_demand, gcp_machine};
        for s in SHAPES {
            match s.provider {
                Provider::Aws => assert_eq!(
                    aws_on_demand(s.instance_type),
                    Some(s.on_demand_usd_h),
                    "{}",
                    s.instance_type
                ),
                _ => assert_eq!(
                    gcp_machine(s.instance_type),
                    s.spot_usd_h.map(|spot| (s.on_demand_usd_h, spot)),
                    "{}",
                    s.instance_type
                ),
            }
        }
        // Spot is cheaper than on-demand wherever both exist.
        for s in SHAPES {
            if let Some(spot) = s.spot_usd_h {
                assert!(spot < s.on_demand_usd_h, "{}", s.instance_type);
            }
        }
    }

    #[test]
    fn graviton_axion_and_grace_types_are_arm64_the_rest_amd64() {
        for t in [
            "g5g.16xlarge",
            "c7gn.large",
            "r8g.xlarge",
            "is4gen.large",
            "p6e-gb200.36xlarge",
            "a4x-highgpu-4g",
            "c4a-standard-8",
            "t2a-standard-1",
        ] {
            assert_eq!(arch_of(t), labels::ARM64, "{t}");
        }
        for t in [
            "g5.xlarge",
            "g4dn.12xlarge",
            "p4de.24xlarge",
            "p5en.48xlarge",
            "g6e.xlarge",
            "a2-highgpu-8g",
            "a3-megagpu-8g",
            "g2-standard-4",
            "n1-standard-8",
        ] {
            assert_eq!(arch_of(t), labels::AMD64, "{t}");
        }
        let every = builtin_offerings();
        assert!(every.iter().all(|o| o.labels.contains_key(labels::ARCH)));
    }
}
