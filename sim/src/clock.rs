//! Virtual time helpers: the simulator's clock is [`muster_planner::Time`]
//! (seconds from the start of the run); nothing here reads a wall clock
//! except [`Stopwatch`], used only to report how long planner calls take.

use muster_planner::{Dur, Time};

/// Coalesces triggers: at most one run per `min_gap` of virtual time.
#[derive(Debug, Clone)]
pub struct Debouncer {
    min_gap: Dur,
    last_run: Option<Time>,
    scheduled: Option<Time>,
}

impl Debouncer {
    /// A debouncer allowing one run per `min_gap`.
    pub fn new(min_gap: Dur) -> Debouncer {
        Debouncer {
            min_gap,
            last_run: None,
            scheduled: None,
        }
    }

    /// A trigger at `now`: the time to schedule a run at, or `None` when one
    /// is already scheduled.
    pub fn trigger(&mut self, now: Time) -> Option<Time> {
        if self.scheduled.is_some() {
            return None;
        }
        let at = match self.last_run {
            Some(last) => (last + self.min_gap).max(now),
            None => now,
        };
        self.scheduled = Some(at);
        Some(at)
    }

    /// The scheduled run happens at `now`.
    pub fn ran(&mut self, now: Time) {
        self.last_run = Some(now);
        self.scheduled = None;
    }
}

/// Wall-clock stopwatch for planner timings (reported, never fed back).
#[derive(Debug)]
pub struct Stopwatch(std::time::Instant);

impl Stopwatch {
    /// Starts.
    pub fn start() -> Stopwatch {
        Stopwatch(std::time::Instant::now())
    }
    /// Milliseconds since start.
    pub fn ms(&self) -> f64 {
        self.0.elapsed().as_secs_f64() * 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debounces() {
        let mut d = Debouncer::new(Dur::secs(10));
        assert_eq!(d.trigger(Time(5)), Some(Time(5)));
        assert_eq!(d.trigger(Time(6)), None);
        d.ran(Time(5));
        assert_eq!(d.trigger(Time(7)), Some(Time(15)));
        d.ran(Time(15));
        assert_eq!(d.trigger(Time(100)), Some(Time(100)));
    }
}
