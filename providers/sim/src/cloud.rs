//! The simulated cloud itself: a synchronous model that the simulator (and
//! the async [`crate::SimProvider`]) call with a virtual time. It answers
//! launches with a boot plan (register and Ready delays, a spot interruption
//! time, when the cloud takes a reserved machine back, its place in the
//! network) or an insufficient-capacity error, from the seed alone.

use std::collections::BTreeMap;

use muster_planner::{CapacityType, Dur, Offering, OfferingKey, Price, Time};

use crate::behaviour::{BehaviourError, CloudBehaviour, OfferingBehaviour, Outages};
use crate::reservations::{NetworkLayout, Reservation};
use crate::rng::Rng;

/// What happens to a machine the cloud accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootPlan {
    /// From the launch until the Node registers.
    pub register_after: Dur,
    /// From the launch until the Node is Ready with GPUs allocatable.
    pub ready_after: Dur,
    /// When a spot machine will be interrupted, if it lives that long.
    pub interrupt_at: Option<Time>,
    /// When the cloud terminates a machine of a reservation that ends (a
    /// Capacity Block: 30 minutes before its end).
    pub reclaim_at: Option<Time>,
    /// Its network layers, broadest first (empty without a topology).
    pub network: Vec<String>,
}

/// Why a launch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// The offering has no capacity now.
    #[error("insufficient capacity for {0}")]
    InsufficientCapacity(OfferingKey),
    /// The offering is not sold by this cloud.
    #[error("unknown offering {0}")]
    UnknownOffering(OfferingKey),
}

/// A simulated cloud.
#[derive(Debug, Clone)]
pub struct SimCloud {
    seed: u64,
    offerings: Vec<Offering>,
    behaviour: Vec<OfferingBehaviour>,
    outages: Vec<Outages>,
    alive: Vec<u32>,
    index: BTreeMap<OfferingKey, usize>,
    launches: u64,
    capacity_errors: u64,
    reservations: Vec<Reservation>,
    /// Offering index → its reservation's index.
    reservation_of: Vec<Option<usize>>,
    topology: Option<NetworkLayout>,
    /// (zone, placement group) → the rack its machines go to and how many
    /// went there.
    groups: BTreeMap<(String, String), (u32, u32)>,
}

impl SimCloud {
    /// A cloud selling `offerings`, behaving as `behaviour`, drawing from `seed`.
    /// Each offering's `interruption_rate_per_hour` and `boot_secs` are
    /// filled in from the behaviour (the planner reads them).
    pub fn new(
        mut offerings: Vec<Offering>,
        behaviour: &CloudBehaviour,
        seed: u64,
    ) -> Result<SimCloud, BehaviourError> {
        behaviour.validate()?;
        offerings.sort_by_key(|o| o.key());
        offerings.dedup_by(|a, b| a.key() == b.key());
        let mut reserved = Vec::new();
        for (i, r) in behaviour.reservations.iter().enumerate() {
            let base = offerings
                .iter()
                .find(|o| {
                    o.instance_type == r.instance_type
                        && o.zone == r.zone
                        && o.capacity_type == CapacityType::OnDemand
                })
                .ok_or_else(|| {
                    BehaviourError::Capacity(format!(
                        "reservations[{i}]: no on-demand {} in {} to reserve",
                        r.instance_type, r.zone
                    ))
                })?;
            reserved.push(Offering {
                capacity_type: CapacityType::Reserved,
                price: Some(Price::ZERO),
                reservation: Some(r.describe(r.count)),
                ..base.clone()
            });
        }
        offerings.extend(reserved);
        offerings.sort_by_key(|o| o.key());
        let reservation_of: Vec<Option<usize>> = offerings
            .iter()
            .map(|o| {
                let id = &o.reservation.as_ref()?.id;
                behaviour.reservations.iter().position(|r| &r.id == id)
            })
            .collect();
        let mut resolved = Vec::with_capacity(offerings.len());
        let mut outages = Vec::with_capacity(offerings.len());
        let mut index = BTreeMap::new();
        for (i, o) in offerings.iter_mut().enumerate() {
            let key = o.key();
            let mut b = behaviour.resolve(&key);
            if reservation_of[i].is_some() {
                // Reserved capacity is held: no outage, no limit but its count.
                b.capacity_error_probability = 0.0;
                b.unavailable.clear();
                b.capacity_limit = None;
            }
            o.interruption_rate_per_hour = b.interruption_rate_per_hour;
            o.boot_secs = (b.boot.min.as_secs() + b.boot.max.as_secs()) / 2;
            outages.push(Outages::new(
                Rng::for_stream(seed, &format!("outage/{key}")),
                &b,
            ));
            resolved.push(b);
            index.insert(key, i);
        }
        let n = offerings.len();
        Ok(SimCloud {
            seed,
            offerings,
            behaviour: resolved,
            outages,
            alive: vec![0; n],
            index,
            launches: 0,
            capacity_errors: 0,
            reservations: behaviour.reservations.clone(),
            reservation_of,
            topology: behaviour.topology,
            groups: BTreeMap::new(),
        })
    }

    /// The reservation the offering at `idx` draws on.
    pub fn reservation(&self, idx: usize) -> Option<&Reservation> {
        self.reservations.get((*self.reservation_of.get(idx)?)?)
    }

    /// The reservations, as the scenario gave them.
    pub fn reservations(&self) -> &[Reservation] {
        &self.reservations
    }

    /// The network layout, if machines have one.
    pub fn topology(&self) -> Option<NetworkLayout> {
        self.topology
    }

    /// Every offering, sorted by key.
    pub fn offerings(&self) -> &[Offering] {
        &self.offerings
    }

    /// The index of an offering.
    pub fn index_of(&self, key: &OfferingKey) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// The offering at `idx`.
    pub fn offering(&self, idx: usize) -> Option<&Offering> {
        self.offerings.get(idx)
    }

    /// Resolved behaviour of the offering at `idx`.
    pub fn behaviour(&self, idx: usize) -> Option<&OfferingBehaviour> {
        self.behaviour.get(idx)
    }

    /// True when a launch of `idx` at `now` would find capacity.
    pub fn has_capacity(&mut self, idx: usize, now: Time) -> bool {
        let (Some(b), Some(o), Some(alive)) = (
            self.behaviour.get(idx),
            self.outages.get_mut(idx),
            self.alive.get(idx),
        ) else {
            return false;
        };
        if b.capacity_limit.is_some_and(|l| *alive >= l) {
            return false;
        }
        if let Some(r) = self.reservation_of[idx].map(|r| &self.reservations[r]) {
            return r.sells_at(now) && *alive < r.count;
        }
        !o.down_at(now)
    }

    /// Launches one machine named `machine` (its draws come from the seed and
    /// this name) of the offering `key` at `now`, in no placement group.
    pub fn launch(
        &mut self,
        key: &OfferingKey,
        machine: &str,
        now: Time,
    ) -> Result<BootPlan, LaunchError> {
        self.launch_in(key, machine, now, None)
    }

    /// [`SimCloud::launch`] into `placement_group`: with a topology, the
    /// group's machines share a rack while it has room for them
    /// (`nodesPerRack`), then go to the next rack of the same block.
    pub fn launch_in(
        &mut self,
        key: &OfferingKey,
        machine: &str,
        now: Time,
        placement_group: Option<&str>,
    ) -> Result<BootPlan, LaunchError> {
        let idx = self
            .index_of(key)
            .ok_or_else(|| LaunchError::UnknownOffering(key.clone()))?;
        self.launches += 1;
        if !self.has_capacity(idx, now) {
            self.capacity_errors += 1;
            return Err(LaunchError::InsufficientCapacity(key.clone()));
        }
        self.alive[idx] += 1;
        self.sync_available(idx);
        let network = self.place(key, machine, placement_group);
        let reclaim_at = self.reservation(idx).and_then(Reservation::reclaim_at);
        let b = &self.behaviour[idx];
        let mut rng = Rng::for_stream(self.seed, &format!("machine/{machine}"));
        let ready = rng
            .range_u64(b.boot.min.as_secs(), b.boot.max.as_secs())
            .max(1);
        let register = (ready * 3 / 5).max(1);
        let interrupt_at = if b.interruption_rate_per_hour > 0.0 {
            let hours = rng.exp(1.0 / b.interruption_rate_per_hour);
            let secs = (hours * 3600.0).ceil();
            (secs < 1e15).then(|| now + Dur::secs(secs as u64 + 1))
        } else {
            None
        };
        Ok(BootPlan {
            register_after: Dur::secs(register),
            ready_after: Dur::secs(ready),
            interrupt_at,
            reclaim_at,
            network,
        })
    }

    /// The rack a new machine lands in, as its layers.
    fn place(&mut self, key: &OfferingKey, machine: &str, group: Option<&str>) -> Vec<String> {
        let Some(t) = self.topology else {
            return Vec::new();
        };
        let drawn = || {
            let mut rng = Rng::for_stream(self.seed, &format!("rack/{machine}"));
            rng.range_u64(0, u64::from(t.racks()) - 1) as u32
        };
        let rack = match group {
            None => drawn(),
            Some(g) => {
                let first = drawn();
                let slot = self
                    .groups
                    .entry((key.zone.clone(), g.to_string()))
                    .or_insert((first, 0));
                if slot.1 >= t.nodes_per_rack {
                    *slot = (t.next_in_block(slot.0), 0);
                }
                slot.1 += 1;
                slot.0
            }
        };
        t.layers(&key.zone, rack)
    }

    /// Keeps a reserved offering's `available` at its count less the
    /// machines in it.
    fn sync_available(&mut self, idx: usize) {
        if let Some(r) = self.reservation_of[idx].map(|r| self.reservations[r].count) {
            let left = r.saturating_sub(self.alive[idx]);
            if let Some(res) = self.offerings[idx].reservation.as_mut() {
                res.available = left;
            }
        }
    }

    /// A machine of `key` is gone (terminated or interrupted).
    pub fn machine_gone(&mut self, key: &OfferingKey) {
        if let Some(idx) = self.index_of(key) {
            self.alive[idx] = self.alive[idx].saturating_sub(1);
            self.sync_available(idx);
        }
    }

    /// Launch calls and how many failed for capacity.
    pub fn launch_counts(&self) -> (u64, u64) {
        (self.launches, self.capacity_errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::{OfferingRule, Window};
    use crate::catalog::builtin_offerings;
    use muster_planner::{CapacityType, PoolRequirements};

    fn cloud(rules: Vec<OfferingRule>) -> SimCloud {
        let b = CloudBehaviour {
            rules,
            ..Default::default()
        };
        SimCloud::new(builtin_offerings(), &b, 9).expect("cloud")
    }

    #[test]
    fn boots_are_deterministic_and_in_range() {
        let mut a = cloud(vec![]);
        let mut b = cloud(vec![]);
        let key = a.offerings()[0].key();
        let pa = a.launch(&key, "n1", Time(0)).expect("launch");
        let pb = b.launch(&key, "n1", Time(0)).expect("launch");
        assert_eq!(pa, pb);
        let beh = a.behaviour(0).expect("b").boot;
        assert!(pa.ready_after >= beh.min && pa.ready_after <= beh.max);
        assert!(pa.register_after < pa.ready_after);
    }

    #[test]
    fn capacity_limits_and_windows() {
        let mut c = cloud(vec![
            OfferingRule {
                pattern: "p4d.24xlarge/us-east-1a/on-demand".into(),
                capacity_limit: Some(2),
                ..Default::default()
            },
            OfferingRule {
                pattern: "p5.*".into(),
                unavailable: vec![Window {
                    from: Dur::hours(1),
                    to: Dur::hours(2),
                }],
                ..Default::default()
            },
        ]);
        let key = |ty: &str| OfferingKey {
            provider: muster_planner::Provider::Aws,
            zone: "us-east-1a".into(),
            instance_type: ty.into(),
            capacity_type: CapacityType::OnDemand,
            reservation: None,
        };
        let p4d = key("p4d.24xlarge");
        assert!(c.launch(&p4d, "a", Time(0)).is_ok());
        assert!(c.launch(&p4d, "b", Time(0)).is_ok());
        assert_eq!(
            c.launch(&p4d, "c", Time(0)),
            Err(LaunchError::InsufficientCapacity(p4d.clone()))
        );
        c.machine_gone(&p4d);
        assert!(c.launch(&p4d, "d", Time(0)).is_ok());
        let p5 = key("p5.48xlarge");
        assert!(c.launch(&p5, "e", Time(100)).is_ok());
        assert!(c.launch(&p5, "f", Time(3600)).is_err());
        assert!(c.launch(&p5, "g", Time(7200)).is_ok());
        assert_eq!(c.launch_counts(), (7, 2));
    }

    #[test]
    fn spot_machines_get_interruptions() {
        let mut c = cloud(vec![OfferingRule {
            pattern: "*/*/spot".into(),
            interruption_rate_per_hour: Some(1.0),
            ..Default::default()
        }]);
        let spot = c
            .offerings()
            .iter()
            .find(|o| o.capacity_type == CapacityType::Spot)
            .map(|o| o.key())
            .expect("spot offering");
        let mut total = 0.0;
        for i in 0..2000 {
            let p = c.launch(&spot, &format!("m{i}"), Time(0)).expect("launch");
            total += p.interrupt_at.expect("interrupted").0 as f64;
        }
        let mean_h = total / 2000.0 / 3600.0;
        assert!((mean_h - 1.0).abs() < 0.1, "{mean_h}");
        let od = c
            .offerings()
            .iter()
            .find(|o| o.capacity_type == CapacityType::OnDemand)
            .map(|o| o.key())
            .expect("od");
        assert_eq!(c.launch(&od, "x", Time(0)).expect("od").interrupt_at, None);
    }

    #[test]
    fn requirements_filter() {
        let all = builtin_offerings();
        let r = PoolRequirements {
            gpu_models: vec![muster_planner::GpuModel::new("A100")],
            capacity_types: vec![CapacityType::Spot],
            ..Default::default()
        };
        let fit: Vec<_> = all.iter().filter(|o| r.admits(o)).collect();
        assert!(!fit.is_empty());
        assert!(fit.iter().all(|o| o.capacity_type == CapacityType::Spot));
        assert!(fit.iter().any(|o| o.instance_type == "p4de.24xlarge"));
        let od_only = PoolRequirements::default();
        assert!(
            all.iter()
                .filter(|o| od_only.admits(o))
                .all(|o| o.capacity_type == CapacityType::OnDemand)
        );
    }
}
