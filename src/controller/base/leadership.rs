//! Whether this instance may act: the flag the leader election sets
//! (`leader`), the cycle follows (a cycle in flight is cancelled when it
//! turns false) and the API client's write fence reads (`client`). Here, in
//! the plumbing, so the client needs nothing of the election above it.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::controller::base::metrics::Metrics;

/// Whether this instance may act, shared by the election, the planning loop
/// and the API client's write fence.
#[derive(Clone)]
pub struct Leadership {
    state: Arc<State>,
}

struct State {
    /// Without election: always leading.
    always: bool,
    /// Leading until this instant (the renew deadline of the last renewal).
    valid_until: Mutex<Option<Instant>>,
    leading: watch::Sender<bool>,
    metrics: Arc<Metrics>,
}

impl Leadership {
    /// Leading for good (a single replica without election).
    pub fn always(metrics: Arc<Metrics>) -> Leadership {
        metrics.leader.set(1);
        Leadership::with(true, metrics)
    }

    /// Not leading until the election (`leader::start`) wins.
    pub fn elected(metrics: Arc<Metrics>) -> Leadership {
        metrics.leader.set(0);
        Leadership::with(false, metrics)
    }

    fn with(always: bool, metrics: Arc<Metrics>) -> Leadership {
        Leadership {
            state: Arc::new(State {
                always,
                valid_until: Mutex::new(None),
                leading: watch::channel(always).0,
                metrics,
            }),
        }
    }

    /// True while this instance may write: always without election,
    /// otherwise until the renew deadline of its last renewal.
    pub(crate) fn may_write(&self) -> bool {
        self.state.always || self.valid_until().is_some_and(|t| Instant::now() < t)
    }

    /// Follows leadership: true while leading.
    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.state.leading.subscribe()
    }

    pub(crate) fn valid_until(&self) -> Option<Instant> {
        *self
            .state
            .valid_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Leading (again) until `until`.
    pub(crate) fn lead(&self, until: Instant) {
        *self
            .state
            .valid_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(until);
        // only a change wakes the followers (a renewal must not restart the
        // planning loop's waits)
        let started = self.state.leading.send_if_modified(|leading| {
            let changed = !*leading;
            *leading = true;
            changed
        });
        if started {
            tracing::info!("started leading");
            self.state.metrics.leader.set(1);
        }
    }

    /// Not leading: writes are refused from now on.
    pub(crate) fn lose(&self) {
        if self.state.always {
            return;
        }
        *self
            .state
            .valid_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        let stopped = self.state.leading.send_if_modified(|leading| {
            let changed = *leading;
            *leading = false;
            changed
        });
        if stopped {
            tracing::warn!("stopped leading");
        }
        self.state.metrics.leader.set(0);
    }
}
