//! Compute Engine reservations a NodeClass selects (`spec.gcp.reservations`),
//! offered as `reserved` capacity, and the reservation affinity of a launch.
//!
//! A reservation is zonal and holds `specificReservation.count` machines of
//! one shape (`instanceProperties.machineType` and `guestAccelerators`), of
//! which `inUseCount` run; only a `READY` one can be consumed (Compute API
//! reference, `reservations` resource). Reservations are read with
//! `reservations.aggregatedList` of each project that owns a selected one
//! (this project, or the project that shares it), every page, and kept for a
//! short time ([`RESERVATION_TTL`]); a launch into one takes its machine from
//! the kept count at once, as the AWS provider does with its reservations.
//!
//! A launch names its reservation with `reservationAffinity`
//! `{consumeReservationType: SPECIFIC_RESERVATION, key:
//! "compute.googleapis.com/reservation-name", values: [name]}`; a reservation
//! another project shares is named `projects/<owner>/reservations/<name>`
//! (`ReservationAffinity`, Compute API reference). Spot VMs cannot consume
//! reservations ("Consume reservations", Limitations), so a spot launch
//! carries no affinity.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use muster_crds::nodeclass::GcpNodeClass;
use muster_planner::{
    CapacityReservation, CapacityType, Offering, OfferingKey, Price, ReservationKind, Time,
};
use muster_provider_api::parse_rfc3339;
use serde_json::{Value, json};

use crate::offerings::{AcceleratorType, MachineType, ZoneContext, zone_offerings};
use crate::prices::{PriceTable, offering_name};

/// How long a reading of the reservations is reused.
pub const RESERVATION_TTL: Duration = Duration::from_secs(60);

/// The key a `SPECIFIC_RESERVATION` affinity names a reservation by.
pub const RESERVATION_NAME_KEY: &str = "compute.googleapis.com/reservation-name";

/// One selected reservation as Compute describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// The project that owns it.
    pub project: String,
    /// Its zone.
    pub zone: String,
    /// Its machine type, e.g. `a2-highgpu-1g`.
    pub machine_type: String,
    /// GPUs it attaches to each machine (N1): type and count.
    pub accelerator: Option<(String, u32)>,
    /// `specificReservationRequired`: only a launch naming it consumes it.
    pub specific_required: bool,
    /// Id (the affinity value), kind `gce`, `count - inUseCount`, its end.
    pub reservation: CapacityReservation,
}

impl Reservation {
    /// The id a launch names it by (the affinity value).
    pub fn id(&self) -> &str {
        &self.reservation.id
    }

    /// The offering name of its machines (`n1-standard-8+4xnvidia-tesla-t4`
    /// with attached GPUs, else the machine type).
    pub fn instance_type(&self) -> String {
        offering_name(
            &self.machine_type,
            self.accelerator.as_ref().map(|(a, n)| (a.as_str(), *n)),
        )
    }
}

/// The selected reservations by owner project: `(name, affinity value)`s.
pub fn selected(class: &GcpNodeClass) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for r in &class.reservations {
        let owner = r.project.clone().unwrap_or_else(|| class.project.clone());
        out.entry(owner)
            .or_default()
            .push((r.name.clone(), r.affinity_value(&class.project)));
    }
    out
}

/// The owner project and name of an affinity value (`name` or
/// `projects/<owner>/reservations/<name>`); `project` owns a bare name.
pub fn owner_and_name<'a>(project: &'a str, id: &'a str) -> (&'a str, &'a str) {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        ["projects", owner, "reservations", name] => (owner, name),
        _ => (project, id),
    }
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// A reservation resource as a [`Reservation`] named `id`; `None` unless it
/// is `READY` and a specific reservation with a machine type.
/// `deleteAtTime`, or `creationTimestamp` plus `deleteAfterDuration`, is its
/// end (Compute deletes it then); machines in it keep running past it.
pub fn of_compute(project: &str, v: &Value, id: String) -> Option<Reservation> {
    if v["status"].as_str() != Some("READY") {
        return None;
    }
    let specific = &v["specificReservation"];
    let props = &specific["instanceProperties"];
    let machine_type = last_segment(props["machineType"].as_str()?).to_string();
    let count = int(&specific["count"]).unwrap_or(0);
    let in_use = int(&specific["inUseCount"]).unwrap_or(0);
    let accelerator = props["guestAccelerators"].get(0).and_then(|a| {
        let ty = last_segment(a["acceleratorType"].as_str()?).to_string();
        let n = u32::try_from(int(&a["acceleratorCount"])?).ok()?;
        Some((ty, n))
    });
    let ends_at = v["deleteAtTime"]
        .as_str()
        .and_then(parse_rfc3339)
        .or_else(|| {
            let created = v["creationTimestamp"].as_str().and_then(parse_rfc3339)?;
            Some(created + int(&v["deleteAfterDuration"]["seconds"])?)
        });
    Some(Reservation {
        project: project.to_string(),
        zone: last_segment(v["zone"].as_str()?).to_string(),
        machine_type,
        accelerator,
        specific_required: v["specificReservationRequired"].as_bool() == Some(true),
        reservation: CapacityReservation {
            id,
            kind: ReservationKind::Gce,
            available: u32::try_from((count - in_use).max(0)).unwrap_or(u32::MAX),
            starts_at: None,
            ends_at: ends_at.map(Time),
        },
    })
}

/// The selected ones among the reservations one `aggregatedList` page of
/// `owner` lists (`items: {"zones/Z": {"reservations": [...]}}`), in `zones`.
pub fn of_aggregated_page(
    owner: &str,
    page: &Value,
    names: &[(String, String)],
    zones: &[String],
) -> Vec<Reservation> {
    let mut out = Vec::new();
    for scope in page["items"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for v in scope["reservations"].as_array().into_iter().flatten() {
            let Some((_, id)) = names.iter().find(|(n, _)| v["name"].as_str() == Some(n)) else {
                continue;
            };
            if let Some(r) = of_compute(owner, v, id.clone())
                && zones.contains(&r.zone)
            {
                out.push(r);
            }
        }
    }
    out
}

/// The `reserved` offering of a reservation in its zone: the machine's shape
/// as `machineTypes.list` gives it, price zero (the reservation is paid for
/// whether used or not), the reservation's count left. `None` when the
/// machine type is not listed or has no GPUs.
pub fn reserved_offering(
    ctx: &ZoneContext<'_>,
    machines: &[MachineType],
    r: &Reservation,
) -> Option<Offering> {
    let mt = machines.iter().find(|m| m.name == r.machine_type)?;
    let accels: Vec<AcceleratorType> = r
        .accelerator
        .iter()
        .map(|(a, n)| AcceleratorType {
            name: a.clone(),
            maximum_cards_per_instance: *n,
        })
        .collect();
    let want = r.instance_type();
    let mut o = zone_offerings(
        ctx,
        std::slice::from_ref(mt),
        &accels,
        &PriceTable::default(),
    )
    .into_iter()
    .find(|o| o.capacity_type == CapacityType::OnDemand && o.instance_type == want)?;
    o.capacity_type = CapacityType::Reserved;
    o.price = Some(Price::ZERO);
    o.available = r.reservation.available > 0;
    o.reservation = Some(r.reservation.clone());
    Some(o)
}

/// The `reservationAffinity` of a launch: `SPECIFIC_RESERVATION` naming the
/// reservation of a reserved offering; `NO_RESERVATION` for an on-demand
/// one while the NodeClass selects reservations; none otherwise (spot, or
/// no reservations: Compute's default, `ANY_RESERVATION`, applies).
///
/// Why `NO_RESERVATION`: an instance without affinity consumes any matching
/// reservation that does not require naming. An on-demand machine would
/// then silently take a slot of a selected reservation, which the planner
/// counted as free and will launch into next: that launch would fail with
/// the reservation full, and the on-demand machine would be paid twice
/// (reservation and instance) for nothing.
pub fn affinity(class: &GcpNodeClass, offering: &OfferingKey) -> Option<Value> {
    match (offering.capacity_type, offering.reservation.as_deref()) {
        (CapacityType::Reserved, Some(id)) => Some(json!({
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": RESERVATION_NAME_KEY,
            "values": [id],
        })),
        (CapacityType::OnDemand, _) if !class.reservations.is_empty() => {
            Some(json!({"consumeReservationType": "NO_RESERVATION"}))
        }
        _ => None,
    }
}

/// The reservation an instance names in its affinity, if it names one.
pub fn affinity_of_instance(v: &Value) -> Option<String> {
    let a = &v["reservationAffinity"];
    let specific = a["consumeReservationType"].as_str() == Some("SPECIFIC_RESERVATION")
        || a["consumeReservationType"].as_i64() == Some(3);
    if !specific || a["key"].as_str() != Some(RESERVATION_NAME_KEY) {
        return None;
    }
    a["values"][0].as_str().map(String::from)
}

/// The reservations read last, reused for [`RESERVATION_TTL`] and kept up
/// to date with the launches made since: each launch into a reservation
/// takes one from its `available` here, so that two launches within that
/// time do not both count on the last free machine. A launch Compute
/// refused for lack of room leaves none.
#[derive(Debug, Default)]
pub struct Cache {
    read: Option<(Instant, Vec<Reservation>)>,
    /// Reservations read one by one (`reservations.get`) since the last
    /// listing: they do not make the listing fresh.
    singles: Vec<Reservation>,
}

impl Cache {
    /// The reservations, when read less than `ttl` ago.
    pub fn fresh(&self, ttl: Duration) -> Option<Vec<Reservation>> {
        self.read
            .as_ref()
            .filter(|(at, _)| at.elapsed() < ttl)
            .map(|(_, r)| r.clone())
    }

    /// Keeps what was just listed (it supersedes the single readings).
    pub fn store(&mut self, list: Vec<Reservation>) {
        self.read = Some((Instant::now(), list));
        self.singles.clear();
    }

    /// One reservation by id and zone, however old the reading (its shape
    /// and zone do not change).
    pub fn get(&self, id: &str, zone: &str) -> Option<Reservation> {
        self.all().find(|r| r.id() == id && r.zone == zone).cloned()
    }

    /// Keeps one reservation read on its own, until the next listing.
    pub fn put(&mut self, r: Reservation) {
        self.singles
            .retain(|x| !(x.id() == r.id() && x.zone == r.zone));
        self.singles.push(r);
    }

    fn all(&self) -> impl Iterator<Item = &Reservation> {
        self.read
            .iter()
            .flat_map(|(_, l)| l.iter())
            .chain(self.singles.iter())
    }

    /// One machine launched into `id` in `zone`.
    pub fn took_one(&mut self, id: &str, zone: &str) {
        if let Some(r) = self.find_mut(id, zone) {
            r.reservation.available = r.reservation.available.saturating_sub(1);
        }
    }

    /// Compute said `id` in `zone` has no room left.
    pub fn exhausted(&mut self, id: &str, zone: &str) {
        if let Some(r) = self.find_mut(id, zone) {
            r.reservation.available = 0;
        }
    }

    fn find_mut(&mut self, id: &str, zone: &str) -> Option<&mut Reservation> {
        self.read
            .iter_mut()
            .flat_map(|(_, l)| l.iter_mut())
            .chain(self.singles.iter_mut())
            .find(|r| r.id() == id && r.zone == zone)
    }
}

#[cfg(test)]
mod tests {
    use muster_planner::Provider;

    use super::*;

    fn class(reservations: Value) -> GcpNodeClass {
        serde_json::from_value(json!({
            "project": "my-project", "region": "us-central1",
            "image": "projects/x/global/images/y",
            "reservations": reservations,
        }))
        .expect("class")
    }

    /// A reservation as `reservations.get` answers it.
    fn answer() -> Value {
        json!({
            "kind": "compute#reservation", "name": "a100-resv", "status": "READY",
            "zone": "https://www.googleapis.com/compute/v1/projects/my-project/zones/us-central1-a",
            "creationTimestamp": "2026-11-23T10:00:00.000-00:00",
            "specificReservationRequired": true,
            "specificReservation": {
                "count": "4", "inUseCount": "1",
                "instanceProperties": {"machineType": "a2-highgpu-1g"}
            }
        })
    }

    fn key(capacity: CapacityType, reservation: Option<&str>) -> OfferingKey {
        OfferingKey {
            provider: Provider::Gcp,
            zone: "us-central1-a".into(),
            instance_type: "a2-highgpu-1g".into(),
            capacity_type: capacity,
            reservation: reservation.map(String::from),
        }
    }

    #[test]
    fn a_ready_reservation_reads_shape_room_and_end() {
        let r = of_compute("my-project", &answer(), "a100-resv".into()).expect("ready");
        assert_eq!(r.zone, "us-central1-a");
        assert_eq!(r.instance_type(), "a2-highgpu-1g");
        assert_eq!(r.reservation.available, 3);
        assert_eq!(r.reservation.kind, ReservationKind::Gce);
        assert!(r.specific_required);
        assert_eq!(r.reservation.ends_at, None);
        let mut v = answer();
        v["deleteAfterDuration"] = json!({"seconds": "3600"});
        let end = of_compute("p", &v, "x".into()).and_then(|r| r.reservation.ends_at);
        assert_eq!(end.map(|t| t.0), parse_rfc3339("2026-11-23T11:00:00Z"));
        v["deleteAtTime"] = json!("2026-11-24T00:00:00Z");
        let end = of_compute("p", &v, "x".into()).and_then(|r| r.reservation.ends_at);
        assert_eq!(end.map(|t| t.0), parse_rfc3339("2026-11-24T00:00:00Z"));
        // full, or over-full after a resize down: nothing left, never negative
        v["specificReservation"]["inUseCount"] = json!(9);
        assert_eq!(
            of_compute("p", &v, "x".into()).map(|r| r.reservation.available),
            Some(0)
        );
        for status in ["CREATING", "DELETING", "UPDATING"] {
            v["status"] = json!(status);
            assert!(of_compute("p", &v, "x".into()).is_none(), "{status}");
        }
    }

    #[test]
    fn attached_gpus_make_the_n1_offering_name() {
        let mut v = answer();
        v["specificReservation"]["instanceProperties"] = json!({
            "machineType": "n1-standard-8",
            "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 4}]
        });
        let r = of_compute("p", &v, "x".into()).expect("ready");
        assert_eq!(r.instance_type(), "n1-standard-8+4xnvidia-tesla-t4");
    }

    #[test]
    fn shared_reservations_are_named_by_their_owner_project() {
        let c = class(
            json!([{"name": "mine"}, {"name": "theirs", "project": "host-project"},
                             {"name": "same", "project": "my-project"}]),
        );
        let s = selected(&c);
        assert_eq!(
            s["my-project"],
            [
                ("mine".to_string(), "mine".to_string()),
                ("same".to_string(), "same".to_string())
            ]
        );
        assert_eq!(
            s["host-project"],
            [(
                "theirs".to_string(),
                "projects/host-project/reservations/theirs".to_string()
            )]
        );
        assert_eq!(
            owner_and_name("my-project", "projects/host-project/reservations/theirs"),
            ("host-project", "theirs")
        );
        assert_eq!(owner_and_name("my-project", "mine"), ("my-project", "mine"));
    }

    #[test]
    fn affinity_names_the_reservation_and_keeps_on_demand_out_of_it() {
        let with = class(json!([{"name": "a100-resv"}]));
        let without = class(json!([]));
        let reserved = key(CapacityType::Reserved, Some("a100-resv"));
        let a = affinity(&with, &reserved).expect("specific");
        assert_eq!(a["consumeReservationType"], "SPECIFIC_RESERVATION");
        assert_eq!(a["key"], RESERVATION_NAME_KEY);
        assert_eq!(a["values"], json!(["a100-resv"]));
        let od = key(CapacityType::OnDemand, None);
        assert_eq!(
            affinity(&with, &od).map(|a| a["consumeReservationType"].clone()),
            Some(json!("NO_RESERVATION"))
        );
        assert_eq!(affinity(&without, &od), None);
        assert_eq!(affinity(&with, &key(CapacityType::Spot, None)), None);
        let inst = json!({"reservationAffinity": a});
        assert_eq!(affinity_of_instance(&inst).as_deref(), Some("a100-resv"));
        assert_eq!(
            affinity_of_instance(
                &json!({"reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}})
            ),
            None
        );
    }

    #[test]
    fn the_reserved_offering_is_free_and_carries_the_room_left() {
        let machines: Vec<MachineType> = serde_json::from_value(json!([
            {"name": "a2-highgpu-1g", "guestCpus": 12, "memoryMb": 87040,
             "accelerators": [{"guestAcceleratorType": "nvidia-tesla-a100", "guestAcceleratorCount": 1}]}
        ]))
        .expect("machines");
        let ctx = ZoneContext {
            node_class: "gpu",
            region: "us-central1",
            zone: "us-central1-a",
            flex_start: None,
            gke: false,
        };
        let r = of_compute("my-project", &answer(), "a100-resv".into()).expect("ready");
        let o = reserved_offering(&ctx, &machines, &r).expect("offering");
        assert_eq!(o.capacity_type, CapacityType::Reserved);
        assert_eq!(o.price, Some(Price::ZERO));
        assert_eq!(o.gpu_count, 1);
        assert_eq!(o.key().reservation.as_deref(), Some("a100-resv"));
        assert_eq!(o.reservation.as_ref().map(|r| r.available), Some(3));
        assert!(
            reserved_offering(&ctx, &[], &r).is_none(),
            "an unlisted type"
        );
    }

    #[test]
    fn launches_take_from_the_cached_count() {
        let mut c = Cache::default();
        let r = of_compute("my-project", &answer(), "a100-resv".into()).expect("ready");
        c.store(vec![r]);
        let left = |c: &Cache| {
            c.get("a100-resv", "us-central1-a")
                .map(|r| r.reservation.available)
        };
        c.took_one("a100-resv", "us-central1-a");
        assert_eq!(left(&c), Some(2));
        c.took_one("a100-resv", "us-central1-b");
        assert_eq!(left(&c), Some(2), "another zone's reservation of that name");
        c.exhausted("a100-resv", "us-central1-a");
        c.took_one("a100-resv", "us-central1-a");
        assert_eq!(left(&c), Some(0), "never below zero");
        assert!(c.fresh(RESERVATION_TTL).is_some());
        assert!(c.fresh(Duration::ZERO).is_none());
        // one read on its own is kept, and counted down, but lists nothing
        let mut single = Cache::default();
        let r = of_compute("my-project", &answer(), "a100-resv".into()).expect("ready");
        single.put(r);
        single.took_one("a100-resv", "us-central1-a");
        assert_eq!(left(&single), Some(2));
        assert!(
            single.fresh(RESERVATION_TTL).is_none(),
            "the listing is still to be read"
        );
    }
}
