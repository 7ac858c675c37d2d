//! Capacity bought ahead and the network the machines sit in.
//!
//! A [`Reservation`] is an EC2 On-Demand Capacity Reservation (`kind:
//! default`) or a Capacity Block for ML (`kind: capacity-block`) of `count`
//! machines of one instance type in one zone. The simulated cloud lists one
//! `reserved` offering per reservation, at price zero (the reservation is
//! paid for as a whole, [`Reservation::cost_usd`]), whose `available` is the
//! count less the machines in it; a launch beyond the count, before the
//! start or after the end is refused as a capacity error (EC2's
//! `ReservationCapacityExceeded`). EC2 starts terminating a Capacity Block's
//! instances 30 minutes before its end time (EC2 User Guide, "Capacity
//! Blocks for ML"): [`Reservation::reclaim_at`].
//!
//! A [`NetworkLayout`] gives each machine two network layers, a block and a
//! rack within it (as EC2's `DescribeInstanceTopology` network nodes and
//! GKE's `gce-topology-block` / `-subblock` labels do): a machine launched
//! outside a placement group lands in a rack drawn from the seed and its
//! name; the machines of one placement group share a rack while it has
//! room for them, then the next rack of the same block.

use muster_planner::{CapacityReservation, Dur, ReservationKind, Time};
use serde::{Deserialize, Serialize};

/// How long before a Capacity Block's end EC2 starts terminating its
/// instances (EC2 User Guide, "Capacity Blocks for ML": "instances are
/// terminated starting 30 minutes before the end time").
pub const CAPACITY_BLOCK_RECLAIM: Dur = Dur::mins(30);

/// Capacity bought ahead, as a scenario writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Reservation {
    /// Its id (`cr-0abc…`).
    pub id: String,
    /// `default` (an On-Demand Capacity Reservation) or `capacity-block`.
    pub kind: ReservationKind,
    /// What it holds (`p5.48xlarge`).
    pub instance_type: String,
    /// Where (`us-east-1a`).
    pub zone: String,
    /// How many machines.
    pub count: u32,
    /// Start, from the beginning of the run (default: at once).
    #[serde(default)]
    pub starts_at: Option<Dur>,
    /// End, from the beginning of the run (default: none — it lasts the
    /// whole run).
    #[serde(default)]
    pub ends_at: Option<Dur>,
    /// What the whole reservation costs, dollars (a Capacity Block's
    /// upfront price); default: the instance type's on-demand price × count
    /// × the window's hours.
    #[serde(default)]
    pub upfront_usd: Option<f64>,
}

impl Reservation {
    /// The start as a time.
    pub fn start(&self) -> Time {
        Time(0) + self.starts_at.unwrap_or(Dur(0))
    }

    /// The end as a time, if it has one.
    pub fn end(&self) -> Option<Time> {
        self.ends_at.map(|d| Time(0) + d)
    }

    /// When the cloud takes its machines back: a Capacity Block's end less
    /// [`CAPACITY_BLOCK_RECLAIM`]. An ODCR's (or a GCE reservation's)
    /// machines keep running past its end as plain on-demand ones, as in
    /// EC2 ("Capacity Reservations": the instances of an expired reservation
    /// continue to run): never. (They stay billed at the reserved price past
    /// the end; the reservation's own cost ends there.)
    pub fn reclaim_at(&self) -> Option<Time> {
        let end = self.end()?;
        match self.kind {
            ReservationKind::CapacityBlock => Some(end - CAPACITY_BLOCK_RECLAIM),
            ReservationKind::OnDemand | ReservationKind::Gce => None,
        }
    }

    /// True when a launch into it at `now` is within its window (from its
    /// start until its machines are reclaimed, or its end).
    pub fn sells_at(&self, now: Time) -> bool {
        let until = self.reclaim_at().or(self.end());
        now >= self.start() && until.is_none_or(|t| now < t)
    }

    /// What the offering says of it, with `available` machines left.
    pub fn describe(&self, available: u32) -> CapacityReservation {
        CapacityReservation {
            id: self.id.clone(),
            kind: self.kind,
            available,
            starts_at: self.starts_at.map(|d| Time(0) + d),
            ends_at: self.end(),
        }
    }

    /// What it costs for its whole window, used or not: `upfrontUsd`, else
    /// `on_demand_usd_h` × count × hours from its start to its end (or to
    /// `run_end` when it has none).
    pub fn cost_usd(&self, on_demand_usd_h: f64, run_end: Time) -> f64 {
        if let Some(u) = self.upfront_usd {
            return u;
        }
        let end = self.end().unwrap_or(run_end);
        let hours = end.since(self.start()).as_secs() as f64 / 3600.0;
        on_demand_usd_h * f64::from(self.count) * hours
    }

    /// Checks values; the message names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.id.is_empty() {
            return Err("id must be non-empty".into());
        }
        if self.count == 0 {
            return Err(format!("{}: count must be > 0", self.id));
        }
        if let (Some(s), Some(e)) = (self.starts_at, self.ends_at)
            && s >= e
        {
            return Err(format!(
                "{}: startsAt {s} must be before endsAt {e}",
                self.id
            ));
        }
        if self.kind == ReservationKind::CapacityBlock && self.ends_at.is_none() {
            return Err(format!("{}: a capacity block needs endsAt", self.id));
        }
        if let Some(u) = self.upfront_usd
            && (!u.is_finite() || u < 0.0)
        {
            return Err(format!("{}: upfrontUsd {u} must be a number ≥ 0", self.id));
        }
        Ok(())
    }
}

/// The network the simulated cloud's machines sit in: blocks of racks in
/// each zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NetworkLayout {
    /// Most machines of one placement group in one rack.
    pub nodes_per_rack: u32,
    /// Racks in a block.
    pub racks_per_block: u32,
    /// Blocks in a zone.
    #[serde(default = "default_blocks")]
    pub blocks_per_zone: u32,
}

fn default_blocks() -> u32 {
    4
}

impl NetworkLayout {
    /// Checks values.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes_per_rack == 0 || self.racks_per_block == 0 || self.blocks_per_zone == 0 {
            return Err("nodesPerRack, racksPerBlock and blocksPerZone must be > 0".into());
        }
        Ok(())
    }

    /// The layers of rack `rack` (numbered across the zone) in `zone`,
    /// broadest first: its block, then the rack.
    pub fn layers(&self, zone: &str, rack: u32) -> Vec<String> {
        let block = rack / self.racks_per_block;
        vec![
            format!("{zone}/block-{block}"),
            format!("{zone}/block-{block}/rack-{}", rack % self.racks_per_block),
        ]
    }

    /// Racks in a zone.
    pub fn racks(&self) -> u32 {
        self.racks_per_block.saturating_mul(self.blocks_per_zone)
    }

    /// The rack after `rack` in the same block.
    pub fn next_in_block(&self, rack: u32) -> u32 {
        let block = rack / self.racks_per_block;
        block * self.racks_per_block + (rack % self.racks_per_block + 1) % self.racks_per_block
    }
}
