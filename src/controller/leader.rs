//! Leader election with a `coordination.k8s.io/v1` Lease: only the holder
//! plans and writes. Acquire and renew are optimistic updates carrying the
//! Lease's `resourceVersion`, so two candidates can never both win (the
//! loser gets 409 Conflict). A holder that cannot renew within the lease
//! duration steps down; a graceful stop gives the Lease up at once.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::metrics::Metrics;
use super::{ControllerConfig, LeaseConfig};

/// Why one election round failed (bounded categories for logs).
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Another candidate wrote the Lease first.
    #[error("lost the race for the lease")]
    Conflict,
    /// The API server could not be reached or refused.
    #[error("lease request failed: {0}")]
    Api(#[from] kube::Error),
}

/// The running election; stop it to release the Lease.
pub struct LeaderTask {
    task: Option<JoinHandle<()>>,
    release: Option<(Api<Lease>, String, String)>,
}

impl LeaderTask {
    /// Stops campaigning and releases the Lease if held.
    pub async fn stop(mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        if let Some((api, name, me)) = self.release.take()
            && let Ok(mut lease) = api.get(&name).await
        {
            let held = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(me.as_str());
            if held {
                if let Some(spec) = lease.spec.as_mut() {
                    spec.holder_identity = None;
                    spec.renew_time = None;
                }
                let _ = api.replace(&name, &PostParams::default(), &lease).await;
            }
        }
    }
}

impl Drop for LeaderTask {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Starts the election. Without a lease configuration this instance leads at once.
pub fn start(
    client: Client,
    config: &ControllerConfig,
    metrics: Arc<Metrics>,
) -> (watch::Receiver<bool>, LeaderTask) {
    let Some(lease) = config.lease.clone() else {
        let (tx, rx) = watch::channel(true);
        metrics.leader.set(1);
        let task = tokio::spawn(async move {
            // keep the sender alive for the life of the controller
            tx.closed().await;
        });
        return (
            rx,
            LeaderTask {
                task: Some(task),
                release: None,
            },
        );
    };
    let (tx, rx) = watch::channel(false);
    let api: Api<Lease> = Api::namespaced(client, &lease.namespace);
    let me = config.identity.clone();
    let release = Some((api.clone(), lease.name.clone(), me.clone()));
    let task = tokio::spawn(campaign(api, lease, me, tx, metrics));
    (
        rx,
        LeaderTask {
            task: Some(task),
            release,
        },
    )
}

async fn campaign(
    api: Api<Lease>,
    cfg: LeaseConfig,
    me: String,
    tx: watch::Sender<bool>,
    metrics: Arc<Metrics>,
) {
    let mut last_renewed: Option<tokio::time::Instant> = None;
    loop {
        let leading = match try_acquire_or_renew(&api, &cfg, &me).await {
            Ok(true) => {
                last_renewed = Some(tokio::time::Instant::now());
                true
            }
            Ok(false) => false,
            Err(LeaderError::Conflict) => false,
            Err(e) => {
                tracing::debug!(error = %e, "lease round failed");
                // keep leading only while the lease we hold cannot have expired
                last_renewed.is_some_and(|t| t.elapsed() < cfg.duration)
            }
        };
        if !leading {
            last_renewed = None;
        }
        if *tx.borrow() != leading {
            tracing::info!(identity = %me, leading, "leadership changed");
            metrics.leader.set(i64::from(leading));
            let _ = tx.send(leading);
        }
        tokio::time::sleep(cfg.renew_every).await;
    }
}

/// One round: true when this instance holds the Lease afterwards.
pub async fn try_acquire_or_renew(
    api: &Api<Lease>,
    cfg: &LeaseConfig,
    me: &str,
) -> Result<bool, LeaderError> {
    let now = Timestamp::now();
    let secs = i32::try_from(cfg.duration.as_secs().max(1)).unwrap_or(i32::MAX);
    match api.get_opt(&cfg.name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.to_string()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Err(LeaderError::Conflict),
                Err(e) => Err(e.into()),
            }
        }
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            let holder = spec.holder_identity.clone().unwrap_or_default();
            let held_by_me = holder == me;
            let duration = spec
                .lease_duration_seconds
                .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
                .unwrap_or(cfg.duration);
            let expired = match &spec.renew_time {
                Some(MicroTime(t)) => {
                    let ttl = SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX);
                    t.checked_add(ttl).map(|end| end < now).unwrap_or(false)
                }
                None => true,
            };
            if !held_by_me && !holder.is_empty() && !expired {
                return Ok(false);
            }
            if !held_by_me {
                spec.acquire_time = Some(MicroTime(now));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                spec.holder_identity = Some(me.to_string());
            }
            spec.renew_time = Some(MicroTime(now));
            spec.lease_duration_seconds = Some(secs);
            // `lease` carries the resourceVersion we read: a concurrent writer makes this 409.
            match api.replace(&cfg.name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Err(LeaderError::Conflict),
                Err(e) => Err(e.into()),
            }
        }
    }
}
