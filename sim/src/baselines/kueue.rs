//! Kueue's quota admission, shared by the two baselines that put Kueue in
//! front of kube-scheduler (`kueue-karpenter`, `kueue-provreq`).
//!
//! One ClusterQueue per queue of the scenario with a GPU quota (`nominal`,
//! cohort borrowing within `borrowingLimit`, lending within
//! `lendingLimit`); admission checks quota, never capacity. Kueue's scheduler
//! takes the head of every ClusterQueue per cycle and starts the next cycle
//! as soon as one ends (`pkg/scheduler/scheduler.go` in
//! kubernetes-sigs/kueue), so every workload that fits its quota is admitted
//! back to back at the same instant: [`Kueue::admit`] loops until a pass
//! admits nothing. BestEffortFIFO skips heads that do not fit; StrictFIFO
//! blocks behind them. A workload can be held back until a time
//! (`waitForPodsReady` requeue backoff, admission-check retries).

use std::cmp::Reverse;
use std::collections::BTreeSet;

use muster_planner::{Queue, QueueingStrategy, QuotaResource, Time};

use crate::events::JobId;
use crate::world::World;

#[derive(Debug, Clone)]
struct ClusterQueue {
    cohort: Option<String>,
    strategy: QueueingStrategy,
    /// GPU quota in thousandths; `None` is unlimited.
    nominal: Option<u64>,
    borrowing_limit: Option<u64>,
    lending_limit: Option<u64>,
    used: u64,
    pending: BTreeSet<(Reverse<i32>, Time, JobId)>,
}

/// Kueue's ClusterQueues.
#[derive(Debug)]
pub struct Kueue {
    cqs: Vec<ClusterQueue>,
    team_cq: Vec<usize>,
    /// Workloads held back until a time (requeue backoff).
    held: BTreeSet<(Time, JobId)>,
    /// Admissions so far.
    pub admissions: u64,
}

fn gpu_quota(q: &Queue) -> (Option<u64>, Option<u64>, Option<u64>) {
    let to_millis = |x: muster_planner::Quantity| u64::try_from(x.millis()).unwrap_or(0);
    match q.quotas.iter().find(|x| x.resource == QuotaResource::Gpu) {
        Some(x) => (
            Some(to_millis(x.nominal)),
            x.borrowing_limit.map(to_millis),
            x.lending_limit.map(to_millis),
        ),
        None => (None, None, None),
    }
}

impl Kueue {
    /// ClusterQueues for the scenario's queues (team index → queue name).
    pub fn new(queues: &[Queue], team_queue: &[String]) -> Kueue {
        let cqs = queues
            .iter()
            .map(|q| {
                let (nominal, borrowing_limit, lending_limit) = gpu_quota(q);
                ClusterQueue {
                    cohort: q.cohort.clone(),
                    strategy: q.strategy,
                    nominal,
                    borrowing_limit,
                    lending_limit,
                    used: 0,
                    pending: BTreeSet::new(),
                }
            })
            .collect();
        let team_cq = team_queue
            .iter()
            .map(|name| queues.iter().position(|q| &q.name == name).unwrap_or(0))
            .collect();
        Kueue {
            cqs,
            team_cq,
            held: BTreeSet::new(),
            admissions: 0,
        }
    }

    fn cq_of(&self, world: &World, job: JobId) -> usize {
        self.team_cq[world.team_of[job]]
    }

    /// A workload joins its ClusterQueue.
    pub fn submit(&mut self, world: &World, job: JobId) {
        let cq = self.cq_of(world, job);
        let j = &world.jobs[job];
        self.cqs[cq]
            .pending
            .insert((Reverse(j.priority), j.submit, job));
    }

    /// A workload goes back to its queue, not before `at`; its quota is
    /// released.
    pub fn requeue(&mut self, world: &World, job: JobId, at: Time) {
        self.release(world, job);
        self.held.insert((at, job));
    }

    /// The next time a held workload comes back.
    pub fn next_release(&self) -> Option<Time> {
        self.held.first().map(|(t, _)| *t)
    }

    /// A workload finished or gave up its admission: its quota is freed.
    pub fn release(&mut self, world: &World, job: JobId) {
        let cq = self.cq_of(world, job);
        self.cqs[cq].used = self.cqs[cq]
            .used
            .saturating_sub(world.jobs[job].total_gpu_millis());
    }

    /// True when workloads wait for quota or for their hold to end.
    pub fn has_pending(&self) -> bool {
        !self.held.is_empty() || self.cqs.iter().any(|q| !q.pending.is_empty())
    }

    /// GPU thousandths queue `i` may still use (nominal + what it may borrow).
    fn headroom(&self, i: usize) -> Option<u64> {
        let cq = &self.cqs[i];
        let nominal = cq.nominal?;
        let mut borrowable = 0u64;
        if let Some(cohort) = &cq.cohort {
            for (j, other) in self.cqs.iter().enumerate() {
                if j == i || other.cohort.as_ref() != Some(cohort) {
                    continue;
                }
                let Some(n) = other.nominal else { continue };
                let lendable = other.lending_limit.map_or(n, |l| l.min(n));
                borrowable += n.saturating_sub(other.used).min(lendable);
            }
        }
        if let Some(limit) = cq.borrowing_limit {
            borrowable = borrowable.min(limit);
        }
        Some((nominal + borrowable).saturating_sub(cq.used))
    }

    /// Admission cycles back to back: every workload whose quota fits, in
    /// queue order. Returns the admitted workloads (quota reserved).
    pub fn admit(&mut self, world: &World) -> Vec<JobId> {
        let now = world.now;
        while let Some((t, job)) = self.held.first().copied() {
            if t > now {
                break;
            }
            self.held.remove(&(t, job));
            self.submit(world, job);
        }
        let mut admitted = Vec::new();
        loop {
            let mut progress = false;
            for i in 0..self.cqs.len() {
                let room = self.headroom(i);
                let cq = &self.cqs[i];
                let pick = match cq.strategy {
                    QueueingStrategy::StrictFifo => {
                        cq.pending.first().copied().filter(|(_, _, j)| {
                            room.is_none_or(|r| world.jobs[*j].total_gpu_millis() <= r)
                        })
                    }
                    _ => cq
                        .pending
                        .iter()
                        .find(|(_, _, j)| {
                            room.is_none_or(|r| world.jobs[*j].total_gpu_millis() <= r)
                        })
                        .copied(),
                };
                if let Some(entry) = pick {
                    self.cqs[i].pending.remove(&entry);
                    self.cqs[i].used += world.jobs[entry.2].total_gpu_millis();
                    admitted.push(entry.2);
                    self.admissions += 1;
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        admitted
    }
}
