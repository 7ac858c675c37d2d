//! Events of the discrete-event loop and the queue that orders them: by
//! virtual time, then by insertion order (ties are broken deterministically).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use muster_planner::Time;

/// Index of a job in the workload.
pub type JobId = usize;
/// Index of a node in the cluster (never reused).
pub type NodeId = usize;

/// Something that happens at a virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A job is submitted.
    Arrival(JobId),
    /// A launched machine registers as a Node.
    NodeRegistered(NodeId),
    /// A node becomes Ready with GPUs allocatable.
    NodeReady(NodeId),
    /// A job's run ends (ignored when `run` is stale after an eviction).
    JobFinished {
        /// The job.
        job: JobId,
        /// Which run of it.
        run: u32,
    },
    /// The cloud interrupts a spot machine.
    Interrupt(NodeId),
    /// Record a point of the time series.
    Sample,
    /// A timer a policy set (its own meaning).
    Timer(u32),
}

/// A priority queue of events.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(Time, u64, Event)>>,
    seq: u64,
}

impl EventQueue {
    /// Adds an event.
    pub fn push(&mut self, at: Time, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, event)));
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        self.heap.pop().map(|Reverse((t, _, e))| (t, e))
    }

    /// Number of queued events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_insertion() {
        let mut q = EventQueue::default();
        q.push(Time(5), Event::Sample);
        q.push(Time(1), Event::Timer(2));
        q.push(Time(1), Event::Arrival(9));
        q.push(Time(1), Event::Timer(1));
        let order: Vec<Event> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(
            order,
            vec![Event::Timer(2), Event::Arrival(9), Event::Timer(1), Event::Sample]
        );
    }
}
