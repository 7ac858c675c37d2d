//! Quota usage per queue, as reported in `GPUQueue` status: for each quota
//! entry of the queue, what its holding gangs use (GPU models taken from the
//! nodes they are assigned to) and how much of that is borrowed from the
//! cohort (the part above nominal). The same book admission checks against,
//! so the status never disagrees with a decision.

use crate::index::World;
use crate::model::{GangPhase, QuotaResource};
use crate::quantity::Quantity;
use crate::quota::QuotaBook;
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;

/// Usage of one quota entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryUsage {
    /// The resource.
    pub resource: QuotaResource,
    /// Used by holding gangs.
    pub used: Quantity,
    /// Nominal quota.
    pub nominal: Quantity,
    /// The part of `used` above nominal.
    pub borrowed: Quantity,
}

/// One queue's gangs and usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueUsage {
    /// Queue name.
    pub queue: String,
    /// Gangs waiting (Queued, Evicted, Unsatisfiable).
    pub pending: u32,
    /// Gangs holding quota without all pods running (Provisioning, Admitted).
    pub admitted: u32,
    /// Gangs whose pods all run.
    pub running: u32,
    /// GPUs held by holding gangs (all models).
    pub gpus_used: Quantity,
    /// Per quota entry, in the queue's order.
    pub entries: Vec<EntryUsage>,
}

fn quantity(millis: u64) -> Quantity {
    Quantity::from_millis(i64::try_from(millis).unwrap_or(i64::MAX))
}

/// Usage of every queue of the snapshot, in snapshot order.
pub fn queues(snapshot: &Snapshot) -> Vec<QueueUsage> {
    let policy = Policy::default();
    let w = World::build(snapshot, &policy, Time(0));
    let book = QuotaBook::build(&w);
    w.queues
        .iter()
        .enumerate()
        .map(|(qi, q)| {
            let mut u = QueueUsage {
                queue: q.name.clone(),
                pending: 0,
                admitted: 0,
                running: 0,
                gpus_used: quantity(book.used(qi, &QuotaResource::Gpu)),
                entries: Vec::new(),
            };
            for g in snapshot.gangs.iter().filter(|g| g.queue == q.name) {
                match g.phase {
                    GangPhase::Queued | GangPhase::Evicted | GangPhase::Unsatisfiable => {
                        u.pending += 1
                    }
                    GangPhase::Provisioning | GangPhase::Admitted => u.admitted += 1,
                    GangPhase::Running => u.running += 1,
                    GangPhase::Finished => {}
                }
            }
            for quota in &q.quotas {
                let used = book.used(qi, &quota.resource);
                let nominal = u64::try_from(quota.nominal.millis()).unwrap_or(0);
                u.entries.push(EntryUsage {
                    resource: quota.resource.clone(),
                    used: quantity(used),
                    nominal: quota.nominal,
                    borrowed: quantity(used.saturating_sub(nominal)),
                });
            }
            u
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::PlanInput;

    fn input() -> PlanInput {
        serde_norway::from_str(include_str!(
            "../../docs/examples/snapshots/cohort-reclaim.yaml"
        ))
        .expect("example snapshot")
    }

    #[test]
    fn usage_counts_holding_gangs_and_borrowing() {
        let mut s = input().snapshot;
        let u = queues(&s);
        let b = u.iter().find(|u| u.queue == "team-b").expect("team-b");
        // two running gangs of 8 × 1 GPU against a nominal of 8: 8 borrowed
        assert_eq!((b.pending, b.admitted, b.running), (0, 0, 2));
        assert_eq!(b.gpus_used, Quantity::from_units(16));
        assert_eq!(b.entries.len(), 1);
        assert_eq!(b.entries[0].used, Quantity::from_units(16));
        assert_eq!(b.entries[0].nominal, Quantity::from_units(8));
        assert_eq!(b.entries[0].borrowed, Quantity::from_units(8));
        let a = u.iter().find(|u| u.queue == "team-a").expect("team-a");
        assert_eq!((a.pending, a.admitted, a.running), (1, 0, 0));
        assert_eq!(a.entries[0].used, Quantity::ZERO);
        assert_eq!(a.entries[0].borrowed, Quantity::ZERO);
        // one of team-b's gangs finishes: within nominal, nothing borrowed
        s.gangs.retain(|g| g.id.as_str() != "b/two");
        let b = queues(&s)
            .into_iter()
            .find(|u| u.queue == "team-b")
            .expect("b");
        assert_eq!(b.entries[0].used, Quantity::from_units(8));
        assert_eq!(b.entries[0].borrowed, Quantity::ZERO);
    }
}
