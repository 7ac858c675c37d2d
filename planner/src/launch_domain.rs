//! Launch domains: where one launch may buy its machines, (pool, capacity
//! type), with a zone for `SameZone` and `SamePlacementGroup`, and the
//! offerings usable there. `provisioning.rs` builds and ranks them; the
//! working state caches them per cycle (`World::domain_cache`) and a
//! re-plan carries them to the next cycle (`carry.rs`).

use crate::model::CapacityType;

/// A launch domain. It owns what it holds (the zone's name too), so a
/// re-plan can carry a cycle's domains to the next (`carry.rs`).
#[derive(Debug, Clone)]
pub(crate) struct Domain {
    /// The pool buying the machines (index into `World::pools`).
    pub(crate) pool: usize,
    /// The pool's position in the queue's pool order.
    pub(crate) pool_rank: usize,
    /// The capacity type bought.
    pub(crate) ct: CapacityType,
    /// The capacity type's position in the pool's preference order.
    pub(crate) ct_rank: usize,
    /// The zone, for `SameZone` and `SamePlacementGroup`; `None` when
    /// zones may mix.
    pub(crate) zone: Option<Box<str>>,
    /// Offerings usable now (indexes into `World::offerings`), in offering
    /// order.
    pub(crate) offerings: Vec<usize>,
    /// The lowest price per GPU among the domain's offerings with GPUs, as
    /// (price, GPU millis): no set of machines holding `g` GPU millis costs
    /// less than `g × price / millis`.
    pub(crate) gpu_price: Option<(u64, u64)>,
}
