//! The election loop of one candidate, with client-go's timing:
//!
//! - **acquire**: try every retry period (with up to 1.2 × jitter, so
//!   candidates do not try in lock-step) until a round wins the Lease;
//! - **renew**: every retry period; a renewal that has not succeeded by the
//!   renew deadline loses leadership. The deadline counts from the moment the
//!   last successful write was *sent*, so this candidate stops leading at
//!   least `lease duration − renew deadline` before any other candidate can
//!   see the Lease expire (others count from when they saw that write);
//! - **release**: on a graceful stop, a holder writes a record without holder
//!   so another candidate takes over at its next try.
//!
//! After losing, the candidate campaigns again: a controller that lost the
//! Lease rejoins as a follower instead of exiting.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::jiff::Timestamp;
use tokio::time::{Instant, sleep_until};

use crate::controller::leader::Leadership;
use crate::controller::leader::record::{Elector, Step};
use crate::controller::leader::store::{LeaderError, LeaseStore};

/// client-go's jitter factor: a follower waits between one and 2.2 retry
/// periods between tries.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// The election timing (see [`crate::controller::LeaseConfig`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

/// One candidate: its view of the record, the Lease object last read or
/// written (its resourceVersion is the precondition of the next write), and
/// the leadership it announces.
pub(crate) struct Candidate<S> {
    pub(crate) store: S,
    pub(crate) elector: Elector,
    pub(crate) timing: Timing,
    pub(crate) leadership: Leadership,
    /// A number in [0, 1) per wait; zero in tests.
    pub(crate) jitter: fn() -> f64,
    lease: Option<Lease>,
}

impl<S: LeaseStore> Candidate<S> {
    pub(crate) fn new(
        store: S,
        elector: Elector,
        timing: Timing,
        leadership: Leadership,
        jitter: fn() -> f64,
    ) -> Candidate<S> {
        Candidate {
            store,
            elector,
            timing,
            leadership,
            jitter,
            lease: None,
        }
    }

    /// Campaigns until the future is dropped.
    pub(crate) async fn run(&mut self) {
        loop {
            self.acquire().await;
            self.renew().await;
            self.leadership.lose();
        }
    }

    /// Returns once this candidate holds the Lease.
    async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Some(sent)) => {
                    self.leadership.lead(sent + self.timing.renew_deadline);
                    return;
                }
                Ok(None) => {}
                Err(e) => tracing::debug!(reason = e.as_str(), error = %e, "lease round failed"),
            }
            let jitter = (self.jitter)().clamp(0.0, 1.0) * JITTER_FACTOR;
            let retry = self.timing.retry_period;
            tokio::time::sleep(retry + retry.mul_f64(jitter)).await;
        }
    }

    /// Renews until a renewal misses the renew deadline or another holder is seen.
    async fn renew(&mut self) {
        loop {
            let Some(deadline) = self.leadership.valid_until() else {
                return;
            };
            let next = Instant::now() + self.timing.retry_period;
            tokio::select! {
                _ = sleep_until(next) => {}
                _ = sleep_until(deadline) => {
                    tracing::warn!("lease not renewed within the renew deadline");
                    return;
                }
            }
            // a process stopped past its deadline wakes with both timers due
            if Instant::now() >= deadline {
                tracing::warn!("lease not renewed within the renew deadline");
                return;
            }
            let round = tokio::select! {
                r = self.try_acquire_or_renew() => r,
                _ = sleep_until(deadline) => {
                    tracing::warn!("lease not renewed within the renew deadline");
                    return;
                }
            };
            match round {
                Ok(Some(sent)) => self.leadership.lead(sent + self.timing.renew_deadline),
                Ok(None) => {
                    tracing::warn!(
                        holder = self.elector.holder(),
                        "another candidate holds the lease"
                    );
                    return;
                }
                Err(e) => {
                    tracing::debug!(reason = e.as_str(), error = %e, "lease renewal failed")
                }
            }
        }
    }

    /// One round: `Some(instant the winning write was sent)` when this
    /// candidate holds the Lease afterwards.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<Option<Instant>, LeaderError> {
        // the holder first writes over the object it last wrote, without reading
        let sent = Instant::now();
        if let (Some(base), Some(spec)) = (
            self.lease.as_ref(),
            self.elector.renewal(sent, Timestamp::now()),
        ) {
            match self.store.replace(base, spec.clone()).await {
                Ok(lease) => {
                    self.written(lease, spec);
                    return Ok(Some(sent));
                }
                Err(e) => tracing::debug!(reason = e.as_str(), "renewal without read failed"),
            }
        }
        let current = self.store.get().await?;
        let step = self.elector.observe(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            Instant::now(),
            Timestamp::now(),
        );
        let sent = Instant::now();
        let (written, spec) = match (step, current) {
            (Step::Follow, current) => {
                self.lease = current;
                return Ok(None);
            }
            (Step::Create(spec), _) => (self.store.create(spec.clone()).await, spec),
            (Step::Write(spec), Some(current)) => {
                (self.store.replace(&current, spec.clone()).await, spec)
            }
            (Step::Write(spec), None) => (self.store.create(spec.clone()).await, spec),
        };
        self.written(written?, spec);
        Ok(Some(sent))
    }

    fn written(&mut self, lease: Lease, spec: LeaseSpec) {
        // what the server stored is what the others will read
        let stored = lease.spec.clone().unwrap_or(spec);
        self.elector.written(stored, Instant::now());
        self.lease = Some(lease);
    }

    /// Gives the Lease up if this candidate holds it (client-go's
    /// `ReleaseOnCancel`); a failure only means the others wait for expiry.
    pub(crate) async fn release(&mut self) {
        let (Some(base), Some(spec)) =
            (self.lease.as_ref(), self.elector.release(Timestamp::now()))
        else {
            return;
        };
        match self.store.replace(base, spec.clone()).await {
            Ok(lease) => {
                tracing::info!("lease released");
                self.written(lease, spec);
            }
            Err(e) => {
                tracing::warn!(reason = e.as_str(), error = %e, "could not release the lease")
            }
        }
    }
}
