//! `muster uninstall`: takes muster out of a cluster so that nothing it
//! bought keeps billing and nothing it registered keeps blocking, before
//! `helm uninstall` removes the controller.
//!
//! The steps, each safe to run again after an interruption:
//!
//! 1. **Hold**: every GPUQueue's `stopPolicy` becomes `Hold` (running gangs
//!    finish, nothing new is admitted) or, with [`Running::Stop`],
//!    `HoldAndDrain` (admitted gangs are evicted whole, their workloads left
//!    suspended), so the controller launches nothing more.
//! 2. **Gangs**: waits until no gang is Provisioning, Admitted or Running.
//! 3. **Machines**: deletes every PoolNode; the running controller's
//!    finalizer (`muster.dev/terminate-instance`) terminates its instance,
//!    deletes its Node and lets the PoolNode go — the one path that
//!    terminates instances, with the controller's own cloud credentials.
//!    Waits until none is left. A PoolNode still there at the deadline (the
//!    controller is not running, or cannot reach its cloud) keeps its
//!    finalizer and is reported with its instance, unless `force` removes
//!    the finalizer — the instance then keeps billing until it is
//!    terminated by hand, and the report names it.
//! 4. **Webhooks**: deletes muster's MutatingWebhookConfigurations (label
//!    `app.kubernetes.io/name=muster`, and the release's instance label when
//!    one is named), so that creates are not refused once the controller
//!    is gone (every hook fails closed).
//! 5. **Report**: what was done, and the workloads still suspended by muster
//!    (queued, never started): they stay suspended until someone unsuspends
//!    or deletes them.
//!
//! The CRDs and the objects in them stay: `kubectl delete crd` removes
//! them after `helm uninstall` (docs/install.md).

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch};

use crate::controller::base::api::{api, params};
use crate::controller::base::objects::{Kind, QUEUE_LABEL};
use crate::controller::observe::crd_check::short_error;

/// What happens to gangs that run when the uninstall starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Running {
    /// They run to the end (within the timeout); nothing new is admitted.
    Drain,
    /// They are evicted now, their workloads left suspended.
    Stop,
}

/// How to uninstall.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Helm release whose webhook configurations go (all of muster's
    /// when `None`).
    pub release: Option<String>,
    /// What happens to running gangs.
    pub running: Running,
    /// How long each wait (gangs, then machines) may take.
    pub timeout: Duration,
    /// Remove the finalizer of PoolNodes still there at the deadline.
    pub force: bool,
    /// How often the waits look again.
    pub poll: Duration,
}

/// What the uninstall did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The GPUQueues held, with the stop policy set.
    pub queues_held: Vec<String>,
    /// The PoolNodes deleted, whose instances the controller terminated.
    pub machines_terminated: Vec<String>,
    /// PoolNodes whose finalizer was removed with `force`, by instance
    /// (provider id): these instances still bill until terminated by hand.
    pub instances_left: Vec<(String, String)>,
    /// The webhook configurations deleted.
    pub webhooks_deleted: Vec<String>,
    /// Workloads still suspended by muster (`namespace/name` of Jobs
    /// labelled with a queue), which nothing will start now.
    pub suspended_jobs: Vec<String>,
}

/// Why the uninstall stopped before the end. Nothing done is undone: run
/// it again to go on.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// A request failed.
    #[error("{action}: {message}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The API server's answer.
        message: String,
    },
    /// A wait passed its deadline.
    #[error("{what} after {secs}s: {}{hint}", left.join(", "))]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// Seconds waited.
        secs: u64,
        /// What is still there.
        left: Vec<String>,
        /// What to do.
        hint: &'static str,
    },
}

impl UninstallError {
    /// Bounded category.
    pub fn as_str(&self) -> &'static str {
        match self {
            UninstallError::Api { .. } => "Api",
            UninstallError::Timeout { .. } => "Timeout",
        }
    }
}

fn failed(action: &'static str) -> impl FnOnce(kube::Error) -> UninstallError {
    move |e| UninstallError::Api {
        action,
        message: short_error(&e),
    }
}

/// Runs the uninstall against the cluster of `client`.
pub async fn run(client: &kube::Client, opts: &Options) -> Result<Report, UninstallError> {
    let mut report = Report {
        queues_held: hold_queues(client, opts.running).await?,
        ..Report::default()
    };
    wait_for_gangs(client, opts).await?;
    let (terminated, left) = remove_machines(client, opts).await?;
    report.machines_terminated = terminated;
    report.instances_left = left;
    report.webhooks_deleted = delete_webhooks(client, opts.release.as_deref()).await?;
    report.suspended_jobs = suspended_jobs(client).await?;
    Ok(report)
}

async fn hold_queues(
    client: &kube::Client,
    running: Running,
) -> Result<Vec<String>, UninstallError> {
    let policy = match running {
        Running::Drain => "Hold",
        Running::Stop => "HoldAndDrain",
    };
    let queues = api(client, Kind::GpuQueue, None);
    let mut held = Vec::new();
    for q in queues
        .list(&ListParams::default())
        .await
        .map_err(failed("list GPUQueues"))?
    {
        let name = q.name_any();
        let patch = serde_json::json!({"spec": {"stopPolicy": policy}});
        queues
            .patch(&name, &params(), &Patch::Merge(patch))
            .await
            .map_err(failed("hold GPUQueue"))?;
        held.push(format!("{name} ({policy})"));
    }
    Ok(held)
}

/// Waits until no gang holds or waits for capacity.
async fn wait_for_gangs(client: &kube::Client, opts: &Options) -> Result<(), UninstallError> {
    let gangs = api(client, Kind::Gang, None);
    let deadline = tokio::time::Instant::now() + opts.timeout;
    loop {
        let active: Vec<String> = gangs
            .list(&ListParams::default())
            .await
            .map_err(failed("list Gangs"))?
            .into_iter()
            .filter(|g| {
                matches!(
                    g.data.pointer("/status/phase").and_then(|p| p.as_str()),
                    Some("Provisioning" | "Admitted" | "Running")
                )
            })
            .map(|g| format!("{}/{}", g.namespace().unwrap_or_default(), g.name_any()))
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(UninstallError::Timeout {
                what: "gangs still hold capacity",
                secs: opts.timeout.as_secs(),
                left: active,
                hint: match opts.running {
                    Running::Drain => "; wait longer (--timeout), or stop them (--running stop)",
                    Running::Stop => "; is the controller running? It evicts them",
                },
            });
        }
        tokio::time::sleep(opts.poll).await;
    }
}

/// Deletes every PoolNode and waits for the controller to terminate their
/// instances; returns the PoolNodes gone, and those whose finalizer `force`
/// removed with their instances.
async fn remove_machines(
    client: &kube::Client,
    opts: &Options,
) -> Result<(Vec<String>, Vec<(String, String)>), UninstallError> {
    let pns = api(client, Kind::PoolNode, None);
    let first: Vec<String> = pns
        .list(&ListParams::default())
        .await
        .map_err(failed("list PoolNodes"))?
        .into_iter()
        .map(|p| p.name_any())
        .collect();
    for name in &first {
        match pns.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(failed("delete PoolNode")(e)),
        }
    }
    let deadline = tokio::time::Instant::now() + opts.timeout;
    loop {
        let left = pns
            .list(&ListParams::default())
            .await
            .map_err(failed("list PoolNodes"))?
            .items;
        if left.is_empty() {
            return Ok((first, Vec::new()));
        }
        if tokio::time::Instant::now() >= deadline {
            let instance = |p: &kube::api::DynamicObject| {
                p.data
                    .pointer("/status/providerID")
                    .and_then(|v| v.as_str())
                    .unwrap_or("no instance")
                    .to_string()
            };
            if !opts.force {
                return Err(UninstallError::Timeout {
                    what: "PoolNodes whose instances the controller has not terminated",
                    secs: opts.timeout.as_secs(),
                    left: left
                        .iter()
                        .map(|p| format!("{} ({})", p.name_any(), instance(p)))
                        .collect(),
                    hint: "; is the controller running and able to reach its cloud? Or terminate these instances yourself and run again with --force",
                });
            }
            let mut forced = Vec::new();
            for p in &left {
                // the controller's own removal (resourceVersion-guarded)
                crate::controller::steps::pool_nodes::remove_finalizer_with(client, p)
                    .await
                    .map_err(|e| UninstallError::Api {
                        action: "remove PoolNode finalizer",
                        message: e.to_string(),
                    })?;
                forced.push((p.name_any(), instance(p)));
            }
            let gone = first
                .into_iter()
                .filter(|n| !forced.iter().any(|(f, _)| f == n))
                .collect();
            return Ok((gone, forced));
        }
        tokio::time::sleep(opts.poll).await;
    }
}

/// Deletes muster's mutating webhook configurations (of `release`, or all).
async fn delete_webhooks(
    client: &kube::Client,
    release: Option<&str>,
) -> Result<Vec<String>, UninstallError> {
    let hooks: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut selector = "app.kubernetes.io/name=muster".to_string();
    if let Some(r) = release {
        selector.push_str(&format!(",app.kubernetes.io/instance={r}"));
    }
    let mut deleted = Vec::new();
    for h in hooks
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(failed("list MutatingWebhookConfigurations"))?
    {
        let name = h.name_any();
        match hooks.delete(&name, &DeleteParams::default()).await {
            Ok(_) => deleted.push(name),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(failed("delete MutatingWebhookConfiguration")(e)),
        }
    }
    Ok(deleted)
}

/// Jobs labelled with a queue and still suspended.
async fn suspended_jobs(client: &kube::Client) -> Result<Vec<String>, UninstallError> {
    let jobs: Api<Job> = Api::all(client.clone());
    Ok(jobs
        .list(&ListParams::default().labels(QUEUE_LABEL))
        .await
        .map_err(failed("list Jobs"))?
        .into_iter()
        .filter(|j| j.spec.as_ref().and_then(|s| s.suspend) == Some(true))
        .map(|j| format!("{}/{}", j.namespace().unwrap_or_default(), j.name_any()))
        .collect())
}
