//! Offerings: a machine shape a cloud sells in one zone at one capacity type
//! and price. The planner chooses among them; providers list them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::price::Price;
use crate::resources::Resources;
use crate::time::Time;

/// The cloud an offering or node belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Amazon EC2.
    Aws,
    /// Google Compute Engine.
    Gcp,
    /// The simulated cloud of `muster simulate`.
    Sim,
}

impl Provider {
    /// Lower-case name, as in manifests and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Gcp => "gcp",
            Provider::Sim => "sim",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a machine is bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CapacityType {
    /// Interruptible, discounted capacity (AWS Spot, GCP Spot VMs).
    #[serde(rename = "spot")]
    Spot,
    /// Regular capacity.
    #[serde(rename = "on-demand")]
    OnDemand,
    /// Capacity bought ahead: an On-Demand Capacity Reservation or a
    /// Capacity Block for ML (AWS), a reservation (GCE). Its offerings name
    /// the reservation ([`Offering::reservation`]) and are listed at price
    /// zero: the reservation is paid for whether used or not, so a machine
    /// in it costs nothing more (Karpenter's `reserved` capacity type, which
    /// it likewise prefers over on-demand and spot).
    #[serde(rename = "reserved")]
    Reserved,
    /// GKE flex-start (Dynamic Workload Scheduler): discounted capacity
    /// granted when available, for a whole request at once, and run for at
    /// most seven days. Its offerings say how long a grant typically takes
    /// ([`Offering::flex_start`]); a queue says how long its gangs may wait
    /// (`Queue::flex_start_max_wait`).
    #[serde(rename = "flex-start")]
    FlexStart,
}

impl CapacityType {
    /// `spot` or `on-demand`.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::Spot => "spot",
            CapacityType::OnDemand => "on-demand",
            CapacityType::Reserved => "reserved",
            CapacityType::FlexStart => "flex-start",
        }
    }
}

/// What a flex-start offering promises: how long a request typically waits
/// to be granted, and how long its machines may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FlexStart {
    /// Typical wait before the whole request is granted.
    pub expected_wait: crate::time::Dur,
    /// Longest a machine may run (GKE: seven days).
    pub max_run: crate::time::Dur,
}

/// What kind of capacity reservation an offering draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ReservationKind {
    /// An EC2 On-Demand Capacity Reservation (`reservationType: default`).
    #[serde(rename = "default")]
    OnDemand,
    /// An EC2 Capacity Block for ML (`reservationType: capacity-block`):
    /// fixed start and end; EC2 starts terminating its instances 30 minutes
    /// before the end.
    #[serde(rename = "capacity-block")]
    CapacityBlock,
    /// A Compute Engine reservation (specific or with an end time).
    #[serde(rename = "gce")]
    Gce,
}

impl ReservationKind {
    /// `default`, `capacity-block` or `gce`, as in labels and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::OnDemand => "default",
            ReservationKind::CapacityBlock => "capacity-block",
            ReservationKind::Gce => "gce",
        }
    }
}

/// The reservation a `reserved` offering draws on, as the cloud reports it
/// (`DescribeCapacityReservations`, the GCE reservation resource).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityReservation {
    /// Its id (`cr-0abc…`) or name (GCE).
    pub id: String,
    /// What kind.
    pub kind: ReservationKind,
    /// Machines that can still be launched into it (EC2
    /// `AvailableInstanceCount`; GCE `count - inUseCount`).
    pub available: u32,
    /// Not usable before this time (a Capacity Block not yet started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<Time>,
    /// Gone at this time (a Capacity Block's end, an ODCR's end date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<Time>,
}

impl CapacityReservation {
    /// When the machines launched into it stop: a Capacity Block's end (EC2
    /// terminates the block's instances from 30 minutes before it). An
    /// On-Demand Capacity Reservation's or a GCE reservation's machines keep
    /// running as ordinary on-demand ones past its end (EC2 User Guide,
    /// "Capacity Reservations": an expired reservation's instances continue
    /// to run): `None`.
    pub fn machines_end(&self) -> Option<Time> {
        match self.kind {
            ReservationKind::CapacityBlock => self.ends_at,
            ReservationKind::OnDemand | ReservationKind::Gce => None,
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A GPU model such as `A100`, `H100`, `L4`, `A10G`, `T4`.
///
/// Names are normalised so that cloud spellings meet: upper case, vendor
/// prefixes dropped (`nvidia-tesla-a100` → `A100`, `nvidia-h100-80gb` →
/// `H100-80GB`, `NVIDIA-L4` → `L4`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct GpuModel(String);

impl GpuModel {
    /// Normalises a model name.
    pub fn new(name: &str) -> GpuModel {
        let upper = name.trim().to_ascii_uppercase().replace('_', "-");
        let stripped = ["NVIDIA-TESLA-", "NVIDIA-", "TESLA-", "NVIDIA "]
            .iter()
            .find_map(|p| upper.strip_prefix(p))
            .unwrap_or(&upper);
        GpuModel(stripped.to_string())
    }

    /// The normalised name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when `self` satisfies a requested model: equal, or the request
    /// names the family of a memory variant (`A100` accepts `A100-80GB`).
    pub fn satisfies(&self, requested: &GpuModel) -> bool {
        self.0 == requested.0
            || self
                .0
                .strip_prefix(requested.0.as_str())
                .is_some_and(|rest| rest.starts_with('-'))
    }
}

impl<'de> Deserialize<'de> for GpuModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(serde::de::Error::custom("GPU model must not be empty"));
        }
        Ok(GpuModel::new(&s))
    }
}

impl fmt::Display for GpuModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What identifies an offering: provider, zone, instance type, capacity type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OfferingKey {
    /// Cloud.
    pub provider: Provider,
    /// Zone (`us-east-1a`, `us-central1-b`).
    pub zone: String,
    /// Instance or machine type (`p4d.24xlarge`, `a2-highgpu-8g`).
    pub instance_type: String,
    /// Spot, on-demand or reserved.
    pub capacity_type: CapacityType,
    /// The capacity reservation, for `reserved`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

impl fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )?;
        match &self.reservation {
            Some(r) => write!(f, "/{r}"),
            None => Ok(()),
        }
    }
}

/// A machine shape for sale in one zone at one capacity type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Offering {
    /// Cloud.
    pub provider: Provider,
    /// The NodeClass this offering was listed for; empty means any NodeClass
    /// of the same provider.
    #[serde(default)]
    pub node_class: String,
    /// Region (`us-east-1`).
    #[serde(default)]
    pub region: String,
    /// Zone (`us-east-1a`).
    pub zone: String,
    /// Instance or machine type.
    pub instance_type: String,
    /// Spot or on-demand.
    pub capacity_type: CapacityType,
    /// Price per hour; `None` when unknown. Offerings with unknown prices are
    /// never chosen, and the plan says so.
    #[serde(default)]
    pub price: Option<Price>,
    /// GPU model, `None` for machines without GPUs.
    #[serde(default)]
    pub gpu_model: Option<GpuModel>,
    /// GPUs per machine.
    #[serde(default)]
    pub gpu_count: u32,
    /// Memory per GPU in MiB.
    #[serde(default)]
    pub gpu_memory_mib: u64,
    /// What a node of this shape offers to pods (allocatable, not raw
    /// capacity): CPU, memory, GPUs and extended resources such as MIG
    /// profiles.
    pub resources: Resources,
    /// False when the cloud does not sell it now.
    #[serde(default = "yes")]
    pub available: bool,
    /// Set when a launch recently failed for lack of capacity: the planner
    /// avoids the offering until then.
    #[serde(default)]
    pub unavailable_until: Option<Time>,
    /// Chance per hour that a node of this offering is interrupted (spot);
    /// zero for on-demand.
    #[serde(default)]
    pub interruption_rate_per_hour: f64,
    /// True when nodes can be launched into a shared placement group
    /// (cluster placement group, compact placement policy).
    #[serde(default)]
    pub placement_groups: bool,
    /// Typical seconds from launch to a Ready node with GPUs registered.
    #[serde(default)]
    pub boot_secs: u64,
    /// The reservation it draws on; set exactly for `reserved` offerings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<CapacityReservation>,
    /// Its grant and run limits; set exactly for `flex-start` offerings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex_start: Option<FlexStart>,
    /// Labels every node of this offering gets from its cloud and its
    /// kubelet beyond those the planner derives
    /// ([`crate::labels::new_node_labels`]), as the provider lists them:
    /// its CPU architecture ([`crate::labels::ARCH`]) and what a managed
    /// node pool adds (GKE's `cloud.google.com/gke-accelerator`). A node
    /// selector or required node affinity naming one of them matches a
    /// machine before it is launched.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

impl Offering {
    /// The offering's identity.
    pub fn key(&self) -> OfferingKey {
        OfferingKey {
            provider: self.provider,
            zone: self.zone.clone(),
            instance_type: self.instance_type.clone(),
            capacity_type: self.capacity_type,
            reservation: self.reservation.as_ref().map(|r| r.id.clone()),
        }
    }

    /// True when it may be launched at `now`: for sale, priced, not marked
    /// unavailable, and within its reservation's window.
    pub fn usable_at(&self, now: Time) -> bool {
        self.available
            && self.price.is_some()
            && self.unavailable_until.is_none_or(|t| t <= now)
            && self.reservation.as_ref().is_none_or(|r| {
                r.starts_at.is_none_or(|t| t <= now) && r.ends_at.is_none_or(|t| now < t)
            })
    }

    /// Price per GPU per hour, or `None` without GPUs or price.
    pub fn price_per_gpu(&self) -> Option<Price> {
        match (self.price, self.gpu_count) {
            (Some(p), n) if n > 0 => Some(Price(p.0 / u64::from(n))),
            _ => None,
        }
    }

    /// The instance family: the part of the type before the first `.` (AWS)
    /// or the first two `-` separated words (GCP `a2-highgpu`).
    pub fn family(&self) -> &str {
        family_of(&self.instance_type)
    }
}

/// The family of an instance type (`p4d.24xlarge` → `p4d`,
/// `a2-highgpu-8g` → `a2-highgpu`).
pub fn family_of(instance_type: &str) -> &str {
    if let Some((family, _)) = instance_type.split_once('.') {
        return family;
    }
    match instance_type.rmatch_indices('-').next() {
        Some((i, _)) if instance_type[..i].contains('-') => &instance_type[..i],
        _ => instance_type,
    }
}

/// Hashed field by field, as `PartialEq` compares (the interruption rate by
/// value). The destructuring lists every field, so a field added later does
/// not compile until it is hashed too.
impl std::hash::Hash for Offering {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let Offering {
            provider,
            node_class,
            region,
            zone,
            instance_type,
            capacity_type,
            price,
            gpu_model,
            gpu_count,
            gpu_memory_mib,
            resources,
            available,
            unavailable_until,
            interruption_rate_per_hour,
            placement_groups,
            boot_secs,
            reservation,
            flex_start,
            labels,
        } = self;
        provider.hash(state);
        node_class.hash(state);
        region.hash(state);
        zone.hash(state);
        instance_type.hash(state);
        capacity_type.hash(state);
        price.hash(state);
        gpu_model.hash(state);
        gpu_count.hash(state);
        gpu_memory_mib.hash(state);
        resources.hash(state);
        available.hash(state);
        unavailable_until.hash(state);
        super::float_bits(*interruption_rate_per_hour).hash(state);
        placement_groups.hash(state);
        boot_secs.hash(state);
        reservation.hash(state);
        flex_start.hash(state);
        labels.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_models_normalise() {
        assert_eq!(GpuModel::new("nvidia-tesla-a100").as_str(), "A100");
        assert_eq!(GpuModel::new("NVIDIA-L4").as_str(), "L4");
        assert_eq!(GpuModel::new("nvidia-h100-80gb").as_str(), "H100-80GB");
        assert_eq!(GpuModel::new(" h100 ").as_str(), "H100");
        assert!(GpuModel::new("A100-80GB").satisfies(&GpuModel::new("A100")));
        assert!(!GpuModel::new("A100").satisfies(&GpuModel::new("A10")));
        assert!(!GpuModel::new("A10G").satisfies(&GpuModel::new("A10")));
    }

    #[test]
    fn only_a_capacity_blocks_machines_stop_at_its_end() {
        let r = |kind| CapacityReservation {
            id: "cr-1".into(),
            kind,
            available: 1,
            starts_at: None,
            ends_at: Some(Time(100)),
        };
        assert_eq!(
            r(ReservationKind::CapacityBlock).machines_end(),
            Some(Time(100))
        );
        assert_eq!(r(ReservationKind::OnDemand).machines_end(), None);
        assert_eq!(r(ReservationKind::Gce).machines_end(), None);
    }

    #[test]
    fn families() {
        assert_eq!(family_of("p4d.24xlarge"), "p4d");
        assert_eq!(family_of("a2-highgpu-8g"), "a2-highgpu");
        assert_eq!(family_of("g2-standard-4"), "g2-standard");
        assert_eq!(family_of("n1-standard-8"), "n1-standard");
        assert_eq!(family_of("weird"), "weird");
    }
}
