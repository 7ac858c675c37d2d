//! Resource vectors: CPU, memory, GPUs and any extended resource.
//!
//! [`Resources`] is what a pod requests and what a node or an offering can
//! hold. CPU is kept in millicores, memory in bytes, GPUs in thousandths of a
//! GPU (so a shared, fractional GPU such as `0.5` is exact), and every other
//! resource (MIG profiles such as `nvidia.com/mig-1g.10gb`, EFA devices,
//! ephemeral storage) in milli-units under its Kubernetes name.
//!
//! On the wire (snapshot files) a `Resources` is the familiar Kubernetes map:
//! `{cpu: 500m, memory: 64Gi, nvidia.com/gpu: 8}`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::quantity::{Quantity, QuantityError};

/// Kubernetes name of the CPU resource.
pub const CPU: &str = "cpu";
/// Kubernetes name of the memory resource.
pub const MEMORY: &str = "memory";
/// Kubernetes name of whole (or, in muster's model, fractional) NVIDIA GPUs.
pub const GPU: &str = "nvidia.com/gpu";

/// Why a resource map could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// A quantity did not parse.
    #[error("resource {name}: {source}")]
    Quantity {
        /// The resource name.
        name: String,
        /// The parse error.
        source: QuantityError,
    },
    /// Requests and capacities must not be negative.
    #[error("resource {name}: quantity {value} must not be negative")]
    Negative {
        /// The resource name.
        name: String,
        /// The offending value.
        value: Quantity,
    },
}

/// A vector of resources. Missing entries are zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// GPUs in thousandths of a GPU (`nvidia.com/gpu`).
    pub gpu_millis: u64,
    /// Other resources by Kubernetes name, in milli-units.
    pub extended: BTreeMap<String, u64>,
}

impl Resources {
    /// No resources at all.
    pub fn zero() -> Self {
        Self::default()
    }

    /// CPU, memory and whole GPUs.
    pub fn new(cpu_millis: u64, memory_bytes: u64, gpus: u32) -> Self {
        Resources {
            cpu_millis,
            memory_bytes,
            gpu_millis: u64::from(gpus) * 1000,
            extended: BTreeMap::new(),
        }
    }

    /// Adds an extended resource (milli-units) and returns self.
    pub fn with_extended(mut self, name: &str, millis: u64) -> Self {
        if millis > 0 {
            *self.extended.entry(name.to_string()).or_default() += millis;
        }
        self
    }

    /// Builds resources from a Kubernetes-style request map.
    pub fn from_quantities<'a>(
        items: impl IntoIterator<Item = (&'a str, Quantity)>,
    ) -> Result<Self, ResourceError> {
        let mut r = Resources::zero();
        for (name, q) in items {
            if q.is_negative() {
                return Err(ResourceError::Negative {
                    name: name.to_string(),
                    value: q,
                });
            }
            let millis = q.millis().unsigned_abs();
            match name {
                CPU => r.cpu_millis += millis,
                MEMORY => r.memory_bytes += q.units_ceil().unsigned_abs(),
                GPU => r.gpu_millis += millis,
                other => {
                    if millis > 0 {
                        *r.extended.entry(other.to_string()).or_default() += millis;
                    }
                }
            }
        }
        Ok(r)
    }

    /// Parses a map of resource name to quantity string.
    pub fn parse_map<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ResourceError> {
        let mut parsed = Vec::new();
        for (name, text) in items {
            let q = Quantity::parse(text).map_err(|source| ResourceError::Quantity {
                name: name.to_string(),
                source,
            })?;
            parsed.push((name, q));
        }
        Self::from_quantities(parsed)
    }

    /// Whole GPUs, rounded up.
    pub fn gpus_ceil(&self) -> u64 {
        self.gpu_millis.div_ceil(1000)
    }

    /// True when nothing is requested.
    pub fn is_zero(&self) -> bool {
        self.cpu_millis == 0
            && self.memory_bytes == 0
            && self.gpu_millis == 0
            && self.extended.values().all(|v| *v == 0)
    }

    /// True when `self` fits inside `available` in every dimension.
    #[inline]
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.cpu_millis <= available.cpu_millis
            && self.memory_bytes <= available.memory_bytes
            && self.gpu_millis <= available.gpu_millis
            && self
                .extended
                .iter()
                .all(|(k, v)| *v == 0 || available.extended.get(k).is_some_and(|a| v <= a))
    }

    /// Adds `other` into `self` (saturating).
    pub fn add(&mut self, other: &Resources) {
        self.cpu_millis = self.cpu_millis.saturating_add(other.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_add(other.memory_bytes);
        self.gpu_millis = self.gpu_millis.saturating_add(other.gpu_millis);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
    }

    /// Subtracts `other` from `self`, stopping at zero in every dimension.
    pub fn saturating_sub(&mut self, other: &Resources) {
        self.cpu_millis = self.cpu_millis.saturating_sub(other.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_sub(other.memory_bytes);
        self.gpu_millis = self.gpu_millis.saturating_sub(other.gpu_millis);
        for (k, v) in &other.extended {
            if let Some(e) = self.extended.get_mut(k) {
                *e = e.saturating_sub(*v);
            }
        }
        self.extended.retain(|_, v| *v > 0);
    }

    /// `self × n` (saturating).
    pub fn times(&self, n: u64) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_mul(n),
            memory_bytes: self.memory_bytes.saturating_mul(n),
            gpu_millis: self.gpu_millis.saturating_mul(n),
            extended: self
                .extended
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_mul(n)))
                .collect(),
        }
    }

    /// The resource as a Kubernetes map of name → quantity, zero entries left out.
    pub fn to_quantities(&self) -> BTreeMap<String, Quantity> {
        let mut m = BTreeMap::new();
        let q = |millis: u64| Quantity::from_millis(i64::try_from(millis).unwrap_or(i64::MAX));
        if self.cpu_millis > 0 {
            m.insert(CPU.to_string(), q(self.cpu_millis));
        }
        if self.memory_bytes > 0 {
            m.insert(
                MEMORY.to_string(),
                Quantity::from_units(i64::try_from(self.memory_bytes).unwrap_or(i64::MAX)),
            );
        }
        if self.gpu_millis > 0 {
            m.insert(GPU.to_string(), q(self.gpu_millis));
        }
        for (k, v) in &self.extended {
            if *v > 0 {
                m.insert(k.clone(), q(*v));
            }
        }
        m
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.to_quantities();
        if m.is_empty() {
            return f.write_str("nothing");
        }
        let mut first = true;
        for (k, v) in &m {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            if k == MEMORY {
                write!(f, "{k}={}", format_bytes(self.memory_bytes))?;
            } else {
                write!(f, "{k}={v}")?;
            }
        }
        Ok(())
    }
}

/// Bytes in the largest binary unit that keeps one decimal (`64Gi`, `1.5Ti`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if (value - value.round()).abs() < 0.05 {
        format!("{}{}", value.round(), UNITS[unit])
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}

/// How many pods of `shape` fit in `free`; `u32::MAX` for an empty shape.
pub(crate) fn fit_count(free: &Resources, shape: &Resources) -> u32 {
    let mut n = u64::MAX;
    let mut dim = |have: u64, need: u64| {
        if let Some(k) = have.checked_div(need) {
            n = n.min(k);
        }
    };
    dim(free.cpu_millis, shape.cpu_millis);
    dim(free.memory_bytes, shape.memory_bytes);
    dim(free.gpu_millis, shape.gpu_millis);
    for (k, v) in &shape.extended {
        dim(free.extended.get(k).copied().unwrap_or(0), *v);
    }
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Serialize for Resources {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_quantities().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, Quantity>::deserialize(d)?;
        Resources::from_quantities(m.iter().map(|(k, v)| (k.as_str(), *v)))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_request_map() {
        let r = Resources::parse_map([
            ("cpu", "500m"),
            ("memory", "64Gi"),
            ("nvidia.com/gpu", "0.5"),
            ("nvidia.com/mig-1g.10gb", "2"),
        ])
        .expect("valid");
        assert_eq!(r.cpu_millis, 500);
        assert_eq!(r.memory_bytes, 64 << 30);
        assert_eq!(r.gpu_millis, 500);
        assert_eq!(r.extended.get("nvidia.com/mig-1g.10gb"), Some(&2000));
        assert_eq!(r.gpus_ceil(), 1);
    }

    #[test]
    fn errors_name_the_resource() {
        let e = Resources::parse_map([("memory", "64Gx")]).expect_err("bad");
        assert!(e.to_string().starts_with("resource memory:"), "{e}");
        let e = Resources::parse_map([("cpu", "-1")]).expect_err("negative");
        assert!(e.to_string().contains("must not be negative"), "{e}");
    }

    #[test]
    fn fits_and_arithmetic() {
        let node = Resources::new(8000, 64 << 30, 8).with_extended("nvidia.com/mig-1g.10gb", 7000);
        let pod = Resources::new(1000, 8 << 30, 1);
        assert!(pod.fits_in(&node));
        assert!(pod.times(8).fits_in(&node));
        assert!(!pod.times(9).fits_in(&node));
        let mig = Resources::zero().with_extended("nvidia.com/mig-1g.10gb", 1000);
        assert!(mig.fits_in(&node));
        assert!(!mig.fits_in(&Resources::new(8000, 64 << 30, 8)));
        let mut free = node.clone();
        free.saturating_sub(&pod.times(3));
        assert_eq!(free.gpu_millis, 5000);
        free.add(&pod);
        assert_eq!(free.gpu_millis, 6000);
        free.saturating_sub(&node.times(2));
        assert!(free.is_zero());
    }

    #[test]
    fn serde_round_trip() {
        let r: Resources =
            serde_norway::from_str("{cpu: 500m, memory: 64Gi, nvidia.com/gpu: 8}").expect("yaml");
        assert_eq!(r, Resources::new(500, 64 << 30, 8));
        let back: Resources =
            serde_norway::from_str(&serde_norway::to_string(&r).expect("ser")).expect("de");
        assert_eq!(r, back);
        assert_eq!(r.to_string(), "cpu=500m, memory=64Gi, nvidia.com/gpu=8");
    }
}
