//! What one candidate makes of the Lease record, following the rules of
//! client-go's leader election (`tools/leaderelection/leaderelection.go` in
//! kubernetes/client-go):
//!
//! - Expiry is never judged from the record's `renewTime` against the local
//!   wall clock. A candidate notes *when it saw the record change* on its own
//!   monotonic clock; a record that has not changed for its
//!   `leaseDurationSeconds` since then has expired. Clock skew between hosts
//!   does not matter, only their rates.
//! - A holder renewing keeps `acquireTime` and `leaseTransitions`; a new holder
//!   counts one more transition.
//! - A record without holder (a released Lease) may be taken at once.
//!
//! No I/O here: the caller reads and writes the Lease and passes the instant.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// The last record this candidate saw change, and when (monotonic clock).
#[derive(Debug, Clone)]
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// What to do after reading the Lease.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// No Lease of that name exists: create it, held by this candidate.
    Create(LeaseSpec),
    /// Write this record over the one read (acquire, or renew as holder).
    Write(LeaseSpec),
    /// Another candidate holds the Lease and it has not expired as observed here.
    Follow,
}

/// One candidate's view of the election.
#[derive(Debug, Clone)]
pub(crate) struct Elector {
    identity: String,
    lease_secs: i32,
    observed: Option<Observed>,
}

impl Elector {
    /// A candidate writing `lease_duration` (whole seconds) into the records it holds.
    pub(crate) fn new(identity: impl Into<String>, lease_duration: Duration) -> Elector {
        Elector {
            identity: identity.into(),
            lease_secs: i32::try_from(lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            observed: None,
        }
    }

    /// The holder of the last record observed ("" when none).
    pub(crate) fn holder(&self) -> &str {
        self.observed
            .as_ref()
            .and_then(|o| o.spec.holder_identity.as_deref())
            .unwrap_or_default()
    }

    /// True when the last record observed names this candidate as holder.
    pub(crate) fn is_leader(&self) -> bool {
        self.holder() == self.identity
    }

    /// True while the last record observed has not expired at `now`: less
    /// than its `leaseDurationSeconds` passed since it was seen to change.
    pub(crate) fn valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            let secs = o.spec.lease_duration_seconds.unwrap_or(0).max(0);
            o.at + Duration::from_secs(u64::try_from(secs).unwrap_or(0)) > now
        })
    }

    /// Takes in the record read from the server at `now` (`None`: no Lease)
    /// and says what to write, stamping times with the wall clock `wall`.
    pub(crate) fn observe(
        &mut self,
        current: Option<&LeaseSpec>,
        now: Instant,
        wall: Timestamp,
    ) -> Step {
        let Some(current) = current else {
            return Step::Create(self.record(None, wall));
        };
        if self.observed.as_ref().map(|o| &o.spec) != Some(current) {
            self.observed = Some(Observed {
                spec: current.clone(),
                at: now,
            });
        }
        let holder = current.holder_identity.as_deref().unwrap_or_default();
        if !holder.is_empty() && holder != self.identity && self.valid(now) {
            return Step::Follow;
        }
        Step::Write(self.record(Some(current), wall))
    }

    /// The holder's renewal without reading first (client-go's fast path):
    /// the last record observed with a fresh `renewTime`; `None` unless this
    /// candidate leads by a record still valid at `now`.
    pub(crate) fn renewal(&self, now: Instant, wall: Timestamp) -> Option<LeaseSpec> {
        if !self.is_leader() || !self.valid(now) {
            return None;
        }
        let observed = self.observed.as_ref()?;
        Some(self.record(Some(&observed.spec), wall))
    }

    /// A write of `spec` succeeded; the server now holds it (seen at `now`).
    pub(crate) fn written(&mut self, spec: LeaseSpec, now: Instant) {
        self.observed = Some(Observed { spec, at: now });
    }

    /// The record that gives the Lease up (client-go's `ReleaseOnCancel`): no
    /// holder, a one-second duration, the transition count kept; `None` when
    /// this candidate does not hold it.
    pub(crate) fn release(&self, wall: Timestamp) -> Option<LeaseSpec> {
        if !self.is_leader() {
            return None;
        }
        let observed = self.observed.as_ref()?;
        Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(MicroTime(wall)),
            renew_time: Some(MicroTime(wall)),
            lease_transitions: observed.spec.lease_transitions,
            ..Default::default()
        })
    }

    /// This candidate's record over `old`.
    fn record(&self, old: Option<&LeaseSpec>, wall: Timestamp) -> LeaseSpec {
        let mut spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.lease_secs),
            acquire_time: Some(MicroTime(wall)),
            renew_time: Some(MicroTime(wall)),
            lease_transitions: Some(0),
            ..Default::default()
        };
        if let Some(old) = old {
            if old.holder_identity.as_deref() == Some(self.identity.as_str()) {
                spec.acquire_time = old.acquire_time.clone().or(spec.acquire_time);
                spec.lease_transitions = Some(old.lease_transitions.unwrap_or(0));
            } else {
                spec.lease_transitions = Some(old.lease_transitions.unwrap_or(0).saturating_add(1));
            }
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: Option<&str>, secs: i32, renewed: i64, transitions: i32) -> LeaseSpec {
        let t = Timestamp::from_second(renewed).expect("time");
        LeaseSpec {
            holder_identity: holder.map(String::from),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(MicroTime(t)),
            renew_time: Some(MicroTime(t)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    fn wall(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("time")
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_counts_from_the_observed_change_not_from_renew_time() {
        let mut b = Elector::new("b", Duration::from_secs(15));
        // a renewTime far in the past by b's wall clock (skewed hosts) does
        // not make the Lease expired: b has only just seen it
        let stale = held_by(Some("a"), 15, 0, 3);
        let t0 = Instant::now();
        assert_eq!(b.observe(Some(&stale), t0, wall(1_000_000)), Step::Follow);
        // unchanged for 14 s: still held
        let t = t0 + Duration::from_secs(14);
        assert_eq!(b.observe(Some(&stale), t, wall(1_000_014)), Step::Follow);
        // a renewal (a changed record) restarts the count
        let renewed = held_by(Some("a"), 15, 2, 3);
        assert_eq!(b.observe(Some(&renewed), t, wall(1_000_014)), Step::Follow);
        let t = t0 + Duration::from_secs(28);
        assert_eq!(b.observe(Some(&renewed), t, wall(1_000_028)), Step::Follow);
        // 15 s without a change: expired, b takes over and counts a transition
        let t = t0 + Duration::from_secs(29);
        match b.observe(Some(&renewed), t, wall(1_000_029)) {
            Step::Write(spec) => {
                assert_eq!(spec.holder_identity.as_deref(), Some("b"));
                assert_eq!(spec.lease_transitions, Some(4));
                assert_eq!(spec.lease_duration_seconds, Some(15));
                assert_eq!(spec.acquire_time, Some(MicroTime(wall(1_000_029))));
            }
            other => panic!("expected a takeover, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_duration_decides_not_the_local_one() {
        let mut b = Elector::new("b", Duration::from_secs(15));
        let short = held_by(Some("a"), 2, 0, 0);
        let t0 = Instant::now();
        assert_eq!(b.observe(Some(&short), t0, wall(0)), Step::Follow);
        let t = t0 + Duration::from_secs(2);
        assert!(matches!(
            b.observe(Some(&short), t, wall(2)),
            Step::Write(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_or_missing_lease_is_taken_at_once() {
        let now = Instant::now();
        let mut b = Elector::new("b", Duration::from_secs(15));
        match b.observe(None, now, wall(5)) {
            Step::Create(spec) => {
                assert_eq!(spec.holder_identity.as_deref(), Some("b"));
                assert_eq!(spec.lease_transitions, Some(0));
            }
            other => panic!("expected a create, got {other:?}"),
        }
        let released = held_by(None, 1, 4, 7);
        match b.observe(Some(&released), now, wall(5)) {
            Step::Write(spec) => {
                assert_eq!(spec.holder_identity.as_deref(), Some("b"));
                assert_eq!(spec.lease_transitions, Some(8));
            }
            other => panic!("expected a takeover, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_holder_renews_keeping_acquire_time_and_transitions() {
        let t0 = Instant::now();
        let mut a = Elector::new("a", Duration::from_secs(15));
        let mine = held_by(Some("a"), 15, 100, 2);
        assert!(!a.is_leader());
        let Step::Write(renewed) = a.observe(Some(&mine), t0, wall(110)) else {
            panic!("the holder renews");
        };
        assert_eq!(renewed.acquire_time, mine.acquire_time);
        assert_eq!(renewed.renew_time, Some(MicroTime(wall(110))));
        assert_eq!(renewed.lease_transitions, Some(2));
        a.written(renewed.clone(), t0);
        assert!(a.is_leader());
        // the fast path renews the record last written, while it is valid
        let fast = a
            .renewal(t0 + Duration::from_secs(2), wall(112))
            .expect("fast path");
        assert_eq!(fast.acquire_time, mine.acquire_time);
        assert_eq!(fast.renew_time, Some(MicroTime(wall(112))));
        assert_eq!(a.renewal(t0 + Duration::from_secs(15), wall(125)), None);
        // releasing clears the holder, keeps the count and lasts one second
        let gone = a.release(wall(113)).expect("held");
        assert_eq!(gone.holder_identity, None);
        assert_eq!(gone.lease_duration_seconds, Some(1));
        assert_eq!(gone.lease_transitions, Some(2));
        a.written(gone, t0);
        assert!(!a.is_leader());
        assert_eq!(a.release(wall(114)), None, "nothing left to release");
    }
}
