//! Reproducible synthetic snapshots for benchmarks and load tests (not used
//! by [`plan`](crate::plan())).
//!
//! [`generate`] builds, from a seed, a cluster of `nodes` Ready nodes
//! (partly used by other workloads), `offerings` offerings over GPU
//! instance types × zones × capacity types, 8 queues in 2 cohorts, 3 pools,
//! and `gangs` pending gangs holding exactly `pods` pods of assorted shapes
//! (1, 2, 4, 8 and half GPUs) and topologies. Randomness comes from a
//! hand-written splitmix64, so the same parameters give the same snapshot
//! on every platform.

use std::collections::BTreeMap;

use crate::Price;
use crate::fixtures::{gang, gpu_quota, node, offering, pod_set, pool, queue};
use crate::model::pool::default_taints;
use crate::model::{
    CapacityType, GpuModel, Offering, OfferingKey, OtherPod, Pool, Provider, Queue, Toleration,
    TolerationOperator, Topology,
};
use crate::resources::Resources;
use crate::snapshot::Snapshot;
use crate::time::{Dur, Time};

/// Size of a synthetic snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Pending pods in total.
    pub pods: u32,
    /// Pending gangs.
    pub gangs: u32,
    /// Ready nodes.
    pub nodes: u32,
    /// Offerings.
    pub offerings: u32,
    /// Seed.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            pods: 10_000,
            gangs: 1_000,
            nodes: 2_000,
            offerings: 300,
            seed: 1,
        }
    }
}

/// Why a parameter string is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid synthetic parameters {input:?}: {detail} (example: pods=10000,gangs=1000,nodes=2000,offerings=300,seed=1)"
)]
pub struct ParamsError {
    /// The whole input.
    pub input: String,
    /// What is wrong.
    pub detail: String,
}

impl Params {
    /// Parses `pods=10000,gangs=1000,nodes=2000,offerings=300[,seed=N]`;
    /// missing keys keep their defaults.
    pub fn parse(input: &str) -> Result<Params, ParamsError> {
        let err = |detail: String| ParamsError {
            input: input.to_string(),
            detail,
        };
        let mut p = Params::default();
        for part in input.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| err(format!("{part:?} is not key=value")))?;
            let n: u64 = v
                .trim()
                .parse()
                .map_err(|_| err(format!("{k}: {v:?} is not a whole number")))?;
            let small =
                |n: u64| u32::try_from(n).map_err(|_| err(format!("{k}: {n} is too large")));
            match k.trim() {
                "pods" => p.pods = small(n)?,
                "gangs" => p.gangs = small(n)?,
                "nodes" => p.nodes = small(n)?,
                "offerings" => p.offerings = small(n)?,
                "seed" => p.seed = n,
                other => return Err(err(format!("unknown key {other:?}"))),
            }
        }
        if p.gangs == 0 && p.pods > 0 {
            return Err(err("pods need at least one gang".into()));
        }
        if p.pods < p.gangs {
            return Err(err(
                "every gang needs at least one pod (pods >= gangs)".into()
            ));
        }
        Ok(p)
    }
}

/// splitmix64: a small, fast, well-mixed PRNG.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`0` when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    /// True with probability `p` percent.
    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

struct Shape {
    name: &'static str,
    model: &'static str,
    gpus: u32,
    mem_mib: u64,
    cpu: u64,
    mem_gib: u64,
    usd: f64,
}

const TYPES: &[Shape] = &[
    Shape {
        name: "p4d.24xlarge",
        model: "A100",
        gpus: 8,
        mem_mib: 40960,
        cpu: 96,
        mem_gib: 1152,
        usd: 32.77,
    },
    Shape {
        name: "p4de.24xlarge",
        model: "A100-80GB",
        gpus: 8,
        mem_mib: 81920,
        cpu: 96,
        mem_gib: 1152,
        usd: 40.96,
    },
    Shape {
        name: "p5.48xlarge",
        model: "H100",
        gpus: 8,
        mem_mib: 81920,
        cpu: 192,
        mem_gib: 2048,
        usd: 98.32,
    },
    Shape {
        name: "a2-highgpu-1g",
        model: "A100",
        gpus: 1,
        mem_mib: 40960,
        cpu: 12,
        mem_gib: 85,
        usd: 3.67,
    },
    Shape {
        name: "a2-highgpu-2g",
        model: "A100",
        gpus: 2,
        mem_mib: 40960,
        cpu: 24,
        mem_gib: 170,
        usd: 7.35,
    },
    Shape {
        name: "a2-highgpu-4g",
        model: "A100",
        gpus: 4,
        mem_mib: 40960,
        cpu: 48,
        mem_gib: 340,
        usd: 14.69,
    },
    Shape {
        name: "a2-highgpu-8g",
        model: "A100",
        gpus: 8,
        mem_mib: 40960,
        cpu: 96,
        mem_gib: 680,
        usd: 29.39,
    },
    Shape {
        name: "g5.xlarge",
        model: "A10G",
        gpus: 1,
        mem_mib: 24576,
        cpu: 4,
        mem_gib: 16,
        usd: 1.01,
    },
    Shape {
        name: "g5.2xlarge",
        model: "A10G",
        gpus: 1,
        mem_mib: 24576,
        cpu: 8,
        mem_gib: 32,
        usd: 1.21,
    },
    Shape {
        name: "g5.12xlarge",
        model: "A10G",
        gpus: 4,
        mem_mib: 24576,
        cpu: 48,
        mem_gib: 192,
        usd: 5.67,
    },
    Shape {
        name: "g5.24xlarge",
        model: "A10G",
        gpus: 4,
        mem_mib: 24576,
        cpu: 96,
        mem_gib: 384,
        usd: 8.14,
    },
    Shape {
        name: "g5.48xlarge",
        model: "A10G",
        gpus: 8,
        mem_mib: 24576,
        cpu: 192,
        mem_gib: 768,
        usd: 16.29,
    },
    Shape {
        name: "g6.xlarge",
        model: "L4",
        gpus: 1,
        mem_mib: 23034,
        cpu: 4,
        mem_gib: 16,
        usd: 0.80,
    },
    Shape {
        name: "g6.12xlarge",
        model: "L4",
        gpus: 4,
        mem_mib: 23034,
        cpu: 48,
        mem_gib: 192,
        usd: 4.60,
    },
    Shape {
        name: "g6.48xlarge",
        model: "L4",
        gpus: 8,
        mem_mib: 23034,
        cpu: 192,
        mem_gib: 768,
        usd: 13.35,
    },
    Shape {
        name: "g4dn.xlarge",
        model: "T4",
        gpus: 1,
        mem_mib: 16384,
        cpu: 4,
        mem_gib: 16,
        usd: 0.53,
    },
    Shape {
        name: "g4dn.12xlarge",
        model: "T4",
        gpus: 4,
        mem_mib: 16384,
        cpu: 48,
        mem_gib: 192,
        usd: 3.91,
    },
    Shape {
        name: "g4dn.metal",
        model: "T4",
        gpus: 8,
        mem_mib: 16384,
        cpu: 96,
        mem_gib: 384,
        usd: 7.82,
    },
    Shape {
        name: "g2-standard-4",
        model: "L4",
        gpus: 1,
        mem_mib: 23034,
        cpu: 4,
        mem_gib: 16,
        usd: 0.71,
    },
    Shape {
        name: "g2-standard-24",
        model: "L4",
        gpus: 2,
        mem_mib: 23034,
        cpu: 24,
        mem_gib: 96,
        usd: 2.00,
    },
    Shape {
        name: "g2-standard-48",
        model: "L4",
        gpus: 4,
        mem_mib: 23034,
        cpu: 48,
        mem_gib: 192,
        usd: 4.00,
    },
    Shape {
        name: "g2-standard-96",
        model: "L4",
        gpus: 8,
        mem_mib: 23034,
        cpu: 96,
        mem_gib: 384,
        usd: 8.00,
    },
    Shape {
        name: "a3-highgpu-8g",
        model: "H100",
        gpus: 8,
        mem_mib: 81920,
        cpu: 208,
        mem_gib: 1872,
        usd: 88.25,
    },
    Shape {
        name: "p3.2xlarge",
        model: "V100",
        gpus: 1,
        mem_mib: 16384,
        cpu: 8,
        mem_gib: 61,
        usd: 3.06,
    },
    Shape {
        name: "p3.8xlarge",
        model: "V100",
        gpus: 4,
        mem_mib: 16384,
        cpu: 32,
        mem_gib: 244,
        usd: 12.24,
    },
];
const ZONES: &[&str] = &[
    "us-east-1a",
    "us-east-1b",
    "us-east-1c",
    "us-east-1d",
    "us-east-1e",
    "us-east-1f",
];
const GIB: u64 = 1 << 30;

fn shape_offering(t: &Shape, zone: &str, ct: CapacityType, rng: &mut SplitMix64) -> Offering {
    let factor = if ct == CapacityType::Spot {
        0.35 + rng.below(30) as f64 / 100.0
    } else {
        1.0
    };
    offering(t.name, zone)
        .region("us-east-1")
        .capacity_type(ct)
        .price(Price::from_usd(t.usd * factor))
        .gpu_model(GpuModel::new(t.model))
        .gpu_count(t.gpus)
        .gpu_memory_mib(t.mem_mib)
        .resources(Resources::new(t.cpu * 1000, t.mem_gib * GIB, t.gpus))
        .interruption_rate_per_hour(if ct == CapacityType::Spot {
            0.02 + rng.below(8) as f64 / 100.0
        } else {
            0.0
        })
        .placement_groups(t.gpus == 8)
        .boot_secs(120 + rng.below(180))
        .build()
}

fn pool_of(model: &str) -> &'static str {
    match model {
        "A100" | "A100-80GB" | "H100" => "training",
        "A10G" | "L4" => "inference",
        _ => "batch",
    }
}

/// Builds the synthetic snapshot.
pub fn generate(p: &Params) -> Snapshot {
    let mut rng = SplitMix64::new(p.seed);
    // Offerings: types × zones × capacity types, in a seeded order.
    let mut all = Vec::new();
    for t in TYPES {
        for z in ZONES {
            for ct in [CapacityType::OnDemand, CapacityType::Spot] {
                all.push((t, *z, ct));
            }
        }
    }
    for i in (1..all.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        all.swap(i, j);
    }
    let mut offerings: Vec<Offering> = Vec::new();
    let mut k = 0usize;
    while offerings.len() < p.offerings as usize && !all.is_empty() {
        let (t, z, ct) = all[k % all.len()];
        let mut o = shape_offering(t, z, ct, &mut rng);
        if k >= all.len() {
            o.node_class = format!("class-{}", k / all.len());
        }
        if rng.percent(3) {
            o.unavailable_until = Some(Time(1_000_000 + rng.below(600) as i64));
        }
        offerings.push(o);
        k += 1;
    }
    let pools: Vec<Pool> = ["training", "inference", "batch"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            pool(*name)
                .weight(i as i32)
                .gpu_models(
                    TYPES
                        .iter()
                        .filter(|t| pool_of(t.model) == *name)
                        .map(|t| GpuModel::new(t.model))
                        .collect(),
                )
                .capacity_types(vec![CapacityType::Spot, CapacityType::OnDemand])
                .max_nodes(u64::from(p.nodes) + 5_000)
                .label("muster.dev/tier", *name)
                .build()
        })
        .collect();
    let queues: Vec<Queue> = (0..8)
        .map(|i| {
            queue(format!("team-{i}"))
                .cohort(format!("cohort-{}", i % 2))
                .weight(1.0 + (i % 3) as f64)
                .quota(gpu_quota(i64::from(p.nodes.max(1)) * 2))
                .pools(vec!["training".into(), "inference".into(), "batch".into()])
                .build()
        })
        .collect();
    // Nodes: Ready, from the on-demand catalog, partly used by other pods.
    let mut nodes = Vec::with_capacity(p.nodes as usize);
    for i in 0..p.nodes {
        let t = &TYPES[rng.below(TYPES.len() as u64) as usize];
        let z = ZONES[rng.below(ZONES.len() as u64) as usize];
        let alloc = Resources::new(t.cpu * 1000, t.mem_gib * GIB, t.gpus);
        let used_gpus = rng.below(u64::from(t.gpus) + 1);
        let pods = if used_gpus > 0 {
            vec![OtherPod {
                name: format!("other/pod-{i}"),
                requests: Resources::new(used_gpus * 2000, used_gpus * 8 * GIB, used_gpus as u32),
                daemon: false,
                do_not_disrupt: false,
            }]
        } else {
            Vec::new()
        };
        let empty = pods.is_empty();
        nodes.push(
            node(format!("node-{i:05}"))
                .pool(pool_of(t.model))
                .offering(OfferingKey {
                    provider: Provider::Sim,
                    zone: z.into(),
                    instance_type: t.name.into(),
                    capacity_type: CapacityType::OnDemand,
                    reservation: None,
                })
                .provider(Provider::Sim)
                .zone(z)
                .placement_group(
                    (t.gpus == 8 && rng.percent(30)).then(|| format!("pg-{}", rng.below(20))),
                )
                .capacity_type(CapacityType::OnDemand)
                .price(Price::from_usd(t.usd))
                .gpu_model(GpuModel::new(t.model))
                .gpu_memory_mib(t.mem_mib)
                .allocatable(alloc)
                .taints(default_taints())
                .empty_since(empty.then_some(Time(999_000)))
                .pods(pods)
                .build(),
        );
    }
    // Gangs with exactly `pods` pods.
    let mut sizes = vec![1u32; p.gangs as usize];
    let mut left = p.pods.saturating_sub(p.gangs);
    let avg = p.pods.checked_div(p.gangs).unwrap_or(0);
    for s in sizes.iter_mut() {
        if left == 0 {
            break;
        }
        let extra = (rng.below(u64::from(avg.max(1)) * 2) as u32).min(left);
        *s += extra;
        left -= extra;
    }
    let mut i = 0usize;
    while left > 0 && !sizes.is_empty() {
        let len = sizes.len();
        sizes[i % len] += 1;
        left -= 1;
        i += 1;
    }
    let tol = vec![Toleration {
        key: "nvidia.com/gpu".into(),
        operator: TolerationOperator::Exists,
        ..Default::default()
    }];
    let gangs = sizes
        .iter()
        .enumerate()
        .map(|(gi, &n)| {
            let gpu_millis: u64 = match rng.below(10) {
                0 => 500,
                1..=4 => 1000,
                5..=6 => 2000,
                7..=8 => 4000,
                _ => 8000,
            };
            let models = match rng.below(4) {
                0 => vec![GpuModel::new("A100")],
                1 => vec![GpuModel::new("L4"), GpuModel::new("A10G")],
                _ => Vec::new(),
            };
            let topology = match rng.below(10) {
                0..=5 => Topology::Any,
                6..=8 => Topology::SameZone,
                _ if n * (gpu_millis as u32) <= 8000 => Topology::SameNode,
                _ => Topology::SamePlacementGroup,
            };
            let requests = Resources {
                cpu_millis: 1000 + gpu_millis,
                memory_bytes: (4 + gpu_millis / 250) * GIB,
                gpu_millis,
                extended: BTreeMap::new(),
            };
            let mut pod_sets = Vec::new();
            if n > 2 && rng.percent(30) {
                pod_sets.push(
                    pod_set("launcher", 1, Resources::new(2000, 8 * GIB, 0))
                        .tolerations(tol.clone())
                        .build(),
                );
            }
            let workers = n - pod_sets.len() as u32;
            pod_sets.push(
                pod_set("worker", workers, requests)
                    .min_count((workers > 4 && rng.percent(20)).then_some(workers / 2))
                    .tolerations(tol.clone())
                    .gpu_models(models)
                    .build(),
            );
            gang(
                format!("ns-{}/job-{gi:06}", gi % 8),
                format!("team-{}", rng.below(8)),
            )
            .priority(rng.below(4) as i32)
            .arrival(Time(rng.below(1_000_000) as i64))
            .pod_sets(pod_sets)
            .topology(topology)
            .expected_duration(Dur::mins(10 + rng.below(600)))
            .disruptible(rng.percent(20))
            .build()
        })
        .collect();
    Snapshot {
        queues,
        pools,
        offerings,
        nodes,
        gangs,
        gpu_utilization: Vec::new(),
        arrivals: Vec::new(),
    }
}

/// A gang arriving at [`NOW`] in queue `team-{queue}` of the snapshot of
/// `p`: the first gang the generator makes with the next seed (pods of
/// that snapshot's average size), under a name of its own.
pub fn arrival(p: &Params, queue: u32) -> crate::Gang {
    let per_gang = p.pods.checked_div(p.gangs).unwrap_or(1).max(1);
    let one = generate(&Params {
        pods: per_gang,
        gangs: 1,
        nodes: 0,
        offerings: 0,
        seed: p.seed.wrapping_add(1),
    });
    let mut g = one
        .gangs
        .into_iter()
        .next()
        .unwrap_or_else(|| gang(String::new(), "").arrival(NOW).build());
    g.id = crate::GangId(format!("ns-arrival/job-{queue:06}"));
    g.queue = format!("team-{queue}");
    g.arrival = NOW;
    g
}

/// The time synthetic snapshots are planned at.
pub const NOW: Time = Time(1_000_000);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Gang;

    #[test]
    fn exact_sizes_and_reproducible() {
        let p = Params::parse("pods=1000,gangs=100,nodes=50,offerings=40,seed=7").expect("params");
        let a = generate(&p);
        assert_eq!(a.gangs.iter().map(Gang::pod_count).sum::<u64>(), 1000);
        assert_eq!(a.gangs.len(), 100);
        assert_eq!(a.nodes.len(), 50);
        assert_eq!(a.offerings.len(), 40);
        assert_eq!(a, generate(&p));
        assert_ne!(a, generate(&Params { seed: 8, ..p }));
    }

    #[test]
    fn bad_params() {
        for (s, want) in [
            ("pods=x", "not a whole number"),
            ("foo=1", "unknown key"),
            ("pods", "key=value"),
            ("pods=1,gangs=2", "pods >= gangs"),
        ] {
            let e = Params::parse(s).expect_err(s).to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
