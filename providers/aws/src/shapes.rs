//! Instance types → offerings: what `DescribeInstanceTypes` says of a type
//! (read into [`TypeInfo`] by the client module), the zones
//! `DescribeInstanceTypeOfferings` lists it in, the latest spot price per
//! zone from `DescribeSpotPriceHistory`, and the on-demand price table, made
//! into one offering per type × zone × capacity type that the pool's
//! requirements admit; and one `reserved` offering per capacity reservation
//! ([`reserved`]), shaped as its type's other offerings.

use std::collections::BTreeMap;

use muster_planner::labels;
use muster_planner::{
    CapacityType, GpuModel, Offering, PoolRequirements, Price, Provider, Resources,
};

use crate::prices::PriceTable;
use crate::reservations::Reservation;

/// What EC2 says of an instance type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeInfo {
    /// e.g. `p4d.24xlarge`.
    pub name: String,
    /// Default vCPUs.
    pub vcpus: u32,
    /// Memory.
    pub memory_mib: u64,
    /// The GPU name EC2 reports (`A100`, `H100`, `A10G`, `L4`, `T4`), if any.
    pub gpu_name: Option<String>,
    /// The GPU manufacturer (`NVIDIA`).
    pub gpu_manufacturer: Option<String>,
    /// GPUs.
    pub gpu_count: u32,
    /// Memory of one GPU.
    pub gpu_memory_mib: u64,
    /// Elastic Fabric Adapter support (placement groups for gangs).
    pub efa: bool,
    /// EFA interfaces the type takes, one per network card
    /// (`NetworkInfo.EfaInfo.MaximumEfaInterfaces`); 0 without EFA.
    pub max_efa_interfaces: u32,
    /// The architectures its processor runs (`ProcessorInfo.SupportedArchitectures`:
    /// `x86_64`, `arm64`, `i386`, `x86_64_mac`, `arm64_mac`).
    pub architectures: Vec<String>,
}

impl TypeInfo {
    /// The architecture an image must have to boot this type: `arm64` when
    /// the processor runs it, else `x86_64` (the types that list both, if
    /// any, run x86-64 images).
    pub fn image_architecture(&self) -> &'static str {
        let runs = |a: &str| self.architectures.iter().any(|x| x == a);
        if runs("arm64") && !runs("x86_64") {
            "arm64"
        } else {
            "x86_64"
        }
    }

    /// Its nodes' `kubernetes.io/arch`: the architecture of the image it
    /// boots ([`TypeInfo::image_architecture`]), in the Go names the kubelet
    /// labels its node with (`x86_64` → `amd64`).
    pub fn node_architecture(&self) -> &'static str {
        match self.image_architecture() {
            "arm64" => labels::ARM64,
            _ => labels::AMD64,
        }
    }
}

/// The extended resource of EFA interfaces, as the AWS EFA Kubernetes device
/// plugin names it.
pub const EFA_RESOURCE: &str = "vpc.amazonaws.com/efa";

/// Typical time from launch to a Ready node with GPUs, for the planner's
/// provisioning estimate.
const BOOT_SECS: u64 = 240;

/// Interruptions per hour the planner assumes for spot capacity when nothing
/// better is known (the public Spot Instance Advisor's "<5 %" bucket, per
/// month, is far lower; GPU types are interrupted more than average).
const SPOT_INTERRUPTION_RATE: f64 = 0.02;

/// The offerings of listed types. `zones` is type → zones it is offered
/// in; `spot` is (type, zone) → latest spot price.
pub fn offerings(
    region: &str,
    types: &[TypeInfo],
    zones: &BTreeMap<String, Vec<String>>,
    spot: &BTreeMap<(String, String), f64>,
    prices: &PriceTable,
    requirements: &PoolRequirements,
) -> Vec<Offering> {
    let mut out = Vec::new();
    for t in types {
        if t.gpu_count == 0 {
            continue;
        }
        for zone in zones.get(&t.name).into_iter().flatten() {
            for capacity in [CapacityType::OnDemand, CapacityType::Spot] {
                let price = match capacity {
                    CapacityType::OnDemand => prices.on_demand(&t.name),
                    CapacityType::Spot => spot.get(&(t.name.clone(), zone.clone())).copied(),
                    // listed per reservation, by `reserved`; flex-start is GKE's
                    CapacityType::Reserved | CapacityType::FlexStart => None,
                };
                let o = offering(region, t, zone, capacity, price.and_then(Price::from_usd));
                if requirements.admits(&o) {
                    out.push(o);
                }
            }
        }
    }
    out.sort_by_key(|o| o.key());
    out
}

/// The `reserved` offering of one capacity reservation of type `t`: the
/// shape of the type's other offerings in the reservation's zone, at price
/// zero (the reservation is paid for whether used or not), available while
/// it has a machine left.
pub fn reserved(region: &str, t: &TypeInfo, r: &Reservation) -> Offering {
    let mut o = offering(
        region,
        t,
        &r.zone,
        CapacityType::Reserved,
        Some(Price::ZERO),
    );
    o.available = r.reservation.available > 0;
    o.reservation = Some(r.reservation.clone());
    o
}

/// One offering of type `t` in `zone`.
fn offering(
    region: &str,
    t: &TypeInfo,
    zone: &str,
    capacity: CapacityType,
    price: Option<Price>,
) -> Offering {
    // kubelet reserves some memory; the rest is what pods may use
    let mut resources = Resources::new(
        u64::from(t.vcpus) * 1000,
        t.memory_mib * 1024 * 1024 * 9 / 10,
        t.gpu_count,
    );
    // the EFA device plugin advertises one `vpc.amazonaws.com/efa` per
    // EFA interface, and a launch into a placement group attaches them all
    // (Karpenter's instance types carry the same capacity)
    if t.max_efa_interfaces > 0 {
        resources = resources.with_extended(EFA_RESOURCE, u64::from(t.max_efa_interfaces) * 1000);
    }
    Offering {
        provider: Provider::Aws,
        node_class: String::new(),
        region: region.to_string(),
        zone: zone.to_string(),
        instance_type: t.name.clone(),
        capacity_type: capacity,
        price,
        gpu_model: t.gpu_name.as_deref().map(GpuModel::new),
        gpu_count: t.gpu_count,
        gpu_memory_mib: t.gpu_memory_mib,
        resources,
        available: true,
        unavailable_until: None,
        interruption_rate_per_hour: if capacity == CapacityType::Spot {
            SPOT_INTERRUPTION_RATE
        } else {
            0.0
        },
        placement_groups: t.efa,
        boot_secs: BOOT_SECS,
        reservation: None,
        flex_start: None,
        labels: BTreeMap::from([(labels::ARCH.to_string(), t.node_architecture().to_string())]),
    }
}

/// The newest price per (type, zone) from spot price history entries
/// `(type, zone, price, epoch seconds)`.
pub fn latest_spot(entries: &[(String, String, f64, i64)]) -> BTreeMap<(String, String), f64> {
    let mut newest: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
    for (ty, zone, price, at) in entries {
        let e = newest
            .entry((ty.clone(), zone.clone()))
            .or_insert((*at, *price));
        if *at > e.0 {
            *e = (*at, *price);
        }
    }
    newest.into_iter().map(|(k, (_, p))| (k, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p4d() -> TypeInfo {
        TypeInfo {
            name: "p4d.24xlarge".into(),
            vcpus: 96,
            memory_mib: 1_179_648,
            gpu_name: Some("A100".into()),
            gpu_manufacturer: Some("NVIDIA".into()),
            gpu_count: 8,
            gpu_memory_mib: 40_960,
            efa: true,
            max_efa_interfaces: 4,
            architectures: vec!["x86_64".into()],
        }
    }

    #[test]
    fn types_become_offerings_per_zone_and_capacity() {
        let cpu = TypeInfo {
            name: "m5.large".into(),
            vcpus: 2,
            memory_mib: 8192,
            ..TypeInfo::default()
        };
        let zones: BTreeMap<String, Vec<String>> = [
            (
                "p4d.24xlarge".to_string(),
                vec!["us-east-1a".into(), "us-east-1b".into()],
            ),
            ("m5.large".to_string(), vec!["us-east-1a".into()]),
        ]
        .into();
        let spot = latest_spot(&[
            ("p4d.24xlarge".into(), "us-east-1a".into(), 9.0, 100),
            ("p4d.24xlarge".into(), "us-east-1a".into(), 8.0, 200),
        ]);
        let all = PoolRequirements {
            capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
            ..PoolRequirements::default()
        };
        let list = offerings(
            "us-east-1",
            &[p4d(), cpu],
            &zones,
            &spot,
            &PriceTable::default(),
            &all,
        );
        assert_eq!(
            list.len(),
            4,
            "2 zones × 2 capacity types; no GPU-less type"
        );
        let spot_a = list
            .iter()
            .find(|o| o.zone == "us-east-1a" && o.capacity_type == CapacityType::Spot)
            .expect("spot in a");
        assert_eq!(spot_a.price, Price::from_usd(8.0), "the newest spot price");
        assert_eq!(spot_a.gpu_model.as_ref().map(|m| m.as_str()), Some("A100"));
        assert_eq!((spot_a.gpu_count, spot_a.gpu_memory_mib), (8, 40_960));
        assert!(spot_a.placement_groups);
        assert_eq!(
            spot_a
                .resources
                .to_quantities()
                .get(EFA_RESOURCE)
                .map(|q| q.to_string()),
            Some("4".to_string()),
            "one vpc.amazonaws.com/efa per EFA interface"
        );
        let spot_b = list
            .iter()
            .find(|o| o.zone == "us-east-1b" && o.capacity_type == CapacityType::Spot)
            .expect("spot in b");
        assert_eq!(spot_b.price, None, "no spot history: unknown, not zero");
        // a requirement filters
        let h100 = PoolRequirements {
            gpu_models: vec![GpuModel::new("H100")],
            ..PoolRequirements::default()
        };
        assert!(
            offerings(
                "us-east-1",
                &[p4d()],
                &zones,
                &spot,
                &PriceTable::default(),
                &h100
            )
            .is_empty()
        );
        let od_only = PoolRequirements::default();
        let list = offerings(
            "us-east-1",
            &[p4d()],
            &zones,
            &spot,
            &PriceTable::default(),
            &od_only,
        );
        assert!(
            list.iter()
                .all(|o| o.capacity_type == CapacityType::OnDemand)
        );
        assert_eq!(list.len(), 2);
    }

    /// An offering lists its nodes' architecture in the kubelet's names:
    /// a Graviton type's `arm64`, an x86-64 type's `amd64`.
    #[test]
    fn offerings_list_their_nodes_architecture() {
        let graviton = TypeInfo {
            name: "g5g.2xlarge".into(),
            gpu_count: 1,
            architectures: vec!["arm64".into()],
            ..TypeInfo::default()
        };
        let arch = |t: &TypeInfo| {
            offering("us-east-1", t, "us-east-1a", CapacityType::Spot, None).labels[labels::ARCH]
                .clone()
        };
        assert_eq!(arch(&graviton), labels::ARM64);
        assert_eq!(arch(&p4d()), labels::AMD64);
        assert_eq!(graviton.image_architecture(), "arm64");
    }

    #[test]
    fn a_reservation_is_offered_in_its_zone_with_its_type_s_shape_at_price_zero() {
        use crate::reservations::Reservation;
        use muster_planner::{CapacityReservation, ReservationKind, Time};
        let zones: BTreeMap<String, Vec<String>> =
            [("p4d.24xlarge".to_string(), vec!["us-east-1a".into()])].into();
        let od = offerings(
            "us-east-1",
            &[p4d()],
            &zones,
            &BTreeMap::new(),
            &PriceTable::default(),
            &PoolRequirements::default(),
        );
        let mut r = Reservation {
            instance_type: "p4d.24xlarge".into(),
            zone: "us-east-1a".into(),
            reservation: CapacityReservation {
                id: "cr-0abc".into(),
                kind: ReservationKind::CapacityBlock,
                available: 2,
                starts_at: None,
                ends_at: Some(Time(86_400)),
            },
        };
        let o = reserved("us-east-1", &p4d(), &r);
        assert_eq!(o.capacity_type, CapacityType::Reserved);
        assert_eq!(o.price, Some(Price::ZERO));
        assert_eq!(
            o.resources, od[0].resources,
            "the on-demand offering's shape"
        );
        assert_eq!((o.gpu_count, o.placement_groups), (8, true));
        assert_eq!(o.key().reservation.as_deref(), Some("cr-0abc"));
        assert_eq!(
            o.reservation.as_ref().and_then(|r| r.ends_at),
            Some(Time(86_400))
        );
        assert!(o.available);
        r.reservation.available = 0;
        assert!(!reserved("us-east-1", &p4d(), &r).available, "nothing left");
    }
}
