//! Leader election with a `coordination.k8s.io/v1` Lease: only the holder
//! plans and writes.
//!
//! The semantics are client-go's (`tools/leaderelection` in
//! kubernetes/client-go): lease duration, renew deadline and retry period;
//! expiry judged from when a candidate saw the record change, on its own
//! monotonic clock ([`record`]); optimistic concurrency on the Lease's
//! resourceVersion, so two candidates can never both win; `leaseTransitions`
//! kept; the Lease released on a graceful stop ([`campaign`]).
//!
//! Hand-written rather than taken from a crate: of the kube-rs election
//! crates, `kube-leader-election` and `kube-coordinate` do not build with
//! kube 5, and `kube-lease-manager` (kube 5) judges expiry by comparing the
//! record's `renewTime` with the local wall clock and has no renew deadline.
//!
//! [`Leadership`] is what the rest of the controller sees: a flag the
//! planning loop follows (a cycle in flight is cancelled when it turns
//! false) and the write fence of the API client ([`crate::controller::base::client`]),
//! which refuses every write once the renew deadline has passed, even before
//! the election task had a chance to run (a process stopped and resumed).

pub(crate) mod campaign;
mod config;
pub(crate) mod record;
pub(crate) mod store;

#[cfg(test)]
mod tests;

use std::hash::{BuildHasher, Hasher};

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{LeaseConfig, TimingError};

pub use crate::controller::base::leadership::Leadership;
use campaign::{Candidate, Timing};
use record::Elector;
use store::KubeLease;

/// Runs `work` while `leading` stays true: `None` (and `work` dropped, its
/// requests with it) as soon as leadership is lost.
pub(crate) async fn while_leading<F: std::future::Future>(
    leading: &mut watch::Receiver<bool>,
    work: F,
) -> Option<F::Output> {
    tokio::select! {
        out = work => Some(out),
        _ = leading.wait_for(|l| !*l) => None,
    }
}

/// The running election; [`Election::stop`] it to release the Lease.
pub struct Election {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Election {
    /// Stops campaigning, closes the write fence, and releases the Lease if held.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        // dropped without stop (a killed controller): the Lease simply expires
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Starts campaigning for the Lease of `cfg` as `identity`, announcing the
/// outcome on `leadership`. `client` should carry a request timeout (and no
/// write fence: the election writes the Lease whoever leads).
pub fn start(
    client: kube::Client,
    cfg: &LeaseConfig,
    identity: &str,
    leadership: Leadership,
) -> Election {
    let store = KubeLease::new(client, &cfg.namespace, &cfg.name);
    let candidate = Candidate::new(
        store,
        Elector::new(identity, cfg.duration),
        Timing {
            renew_deadline: cfg.renew_deadline,
            retry_period: cfg.retry_period,
        },
        leadership,
        random_unit,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(campaign_until(candidate, stopped));
    Election {
        stop: Some(stop),
        task: Some(task),
    }
}

/// Campaigns until `stopped`, then gives the Lease up.
pub(crate) async fn campaign_until<S: store::LeaseStore>(
    mut candidate: Candidate<S>,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    tokio::select! {
        _ = candidate.run() => {}
        _ = stopped => {}
    }
    candidate.leadership.lose();
    candidate.release().await;
}

/// A number in [0, 1) from the process's random hash keys: jitter only,
/// nothing depends on its quality.
fn random_unit() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}
