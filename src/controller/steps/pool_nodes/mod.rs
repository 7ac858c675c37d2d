//! The PoolNode life cycle, every cycle: once a launch set is written
//! (`apply::launch`), [`lifecycle`] walks each PoolNode the
//! caches show: `Pending` → call
//! the provider with the idempotency key and record the provider ID
//! (`Launched`) → a Node with that providerID appeared (`Registered`) → the
//! Node is Ready and its GPUs are allocatable (`Ready`). A PoolNode being
//! deleted has its instance terminated before its finalizer is removed.
//! What an observation means (advance, stay, or terminate on insufficient
//! capacity, failure or timeout) is the planner's PoolNode life-cycle table
//! (`muster_planner::lifecycle::pool_node::next`); this module only observes
//! and writes. Termination deletes the PoolNode (its finalizer terminates any
//! instance) and may mark the offering unavailable; the next plan sees both.
//! A Registered node whose Node is Ready without GPUs for
//! `gpuRegistrationTimeout` gets the `Initialized=False` condition and one
//! Warning Event naming what to check (`pool_node::gpu_warning`). A
//! registered Node without network-topology labels gets them from its
//! cloud's description of the instance, once (`network`).

pub(crate) mod interruptions;
pub(crate) mod launch;
mod network;
pub(crate) mod orphans;
mod registration;
pub(crate) mod release;
pub(crate) mod removal;

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch};
use muster_planner::lifecycle::gang::EvictReason;
use muster_planner::lifecycle::pool_node::{self, LaunchError};
use muster_planner::{NodePhase, Time};
use muster_provider_api::{Instance, ProviderError};

use crate::controller::base::api::{
    ActError, api, condition, is_not_found, params, patch_status, with_condition,
};
use crate::controller::base::conditions::ConditionType;
use crate::controller::base::metrics::LaunchLabels;
use crate::controller::base::objects::node_ready;
use crate::controller::base::objects::{Kind, PoolNodeSpec, TERMINATE_FINALIZER};
use crate::controller::base::time;
use crate::controller::cloud::work::{Job, Progress};
use crate::controller::ctx::{Ctx, CycleProviders};
use crate::controller::observe::Observed;
use crate::controller::translate::node::{
    allocatable, node_phase, offering_key, phase_since, poolnode_status, ready_since, taints,
};
use crate::controller::translate::pool::spec;

/// True when the launch set this PoolNode belongs to is written: it is a
/// spare (no gang), or its gang's status assigns pods to it and every node
/// of those assignments exists (as a PoolNode or a Node). Intent before
/// action holds for the whole set: a set with a PoolNode whose create
/// failed is not launched in part; the next plan writes it again.
fn set_written(observed: &Observed, s: &PoolNodeSpec, name: &str) -> bool {
    let Some(g) = s.gang.as_ref() else {
        return true;
    };
    let Some(gang) = observed
        .of(Kind::Gang)
        .iter()
        .find(|o| o.namespace().as_deref() == Some(g.namespace.as_str()) && o.name_any() == g.name)
    else {
        return false;
    };
    let assigned: Vec<String> = crate::controller::translate::gang::record_of(gang)
        .assignments
        .into_iter()
        .map(|a| a.node)
        .collect();
    if !assigned.iter().any(|n| n == name) {
        return false;
    }
    let exists = |n: &str| {
        observed
            .of(Kind::PoolNode)
            .iter()
            .any(|p| p.name_any() == n)
            || observed.nodes.iter().any(|k| k.name_any() == n)
    };
    assigned.iter().all(|n| exists(n))
}

/// Advances every PoolNode one or more phases. Returns how many it changed.
pub(crate) async fn lifecycle(
    ctx: &Ctx,
    observed: &Observed,
    providers: &CycleProviders,
    now: Time,
) -> usize {
    let mut steps = Vec::new();
    for pn in observed.of(Kind::PoolNode) {
        steps.push(step(ctx, observed, providers, pn.clone(), now));
    }
    let results = futures::future::join_all(steps).await;
    let mut changed = 0;
    for r in results {
        match r {
            Ok(true) => changed += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "PoolNode step failed"),
        }
    }
    changed
}

async fn step(
    ctx: &Ctx,
    observed: &Observed,
    providers: &CycleProviders,
    pn: Arc<DynamicObject>,
    now: Time,
) -> Result<bool, ActError> {
    let name = pn.name_any();
    let s: PoolNodeSpec = spec(Kind::PoolNode, &pn).map_err(|i| ActError::Missing(i.message))?;
    let st = poolnode_status(&pn);
    let node_class = if s.node_class.is_empty() {
        pool_node_class(observed, &s.pool).unwrap_or_default()
    } else {
        s.node_class.clone()
    };
    if pn.metadata.deletion_timestamp.is_some() {
        return finalize(ctx, providers, &pn, &node_class, st.provider_id.as_deref()).await;
    }
    let offering = offering_key(&s);
    let phase = node_phase(st.phase);
    let created = pn
        .metadata
        .creation_timestamp
        .as_ref()
        .map(time::from_kube)
        .unwrap_or(now);
    let since = phase_since(&st, created);
    // the status is changed as a typed value and written as the merge patch from `st`
    let mut status = st.clone();
    let mut provider_id = st.provider_id.clone();
    let mut launch_error = None;
    let mut error_text = None;
    // the one action of a Pending PoolNode: ask the cloud (idempotent by key),
    // once the gang's whole launch set is written
    if phase == NodePhase::Pending && provider_id.is_none() && !set_written(observed, &s, &name) {
        return Ok(false);
    }
    if phase == NodePhase::Pending && provider_id.is_none() {
        let provider = providers.get(&node_class)?;
        // the pool's labels and taints go with the launch: a pool (or its
        // NodeClass) missing from the caches for a moment (a watch listing
        // again) waits for the next cycle rather than launching a node
        // without its taints, where pods that do not tolerate them would land
        let Some((labels, taints)) = pool_spec(observed, &s.pool) else {
            return Err(ActError::Missing(format!("GPUPool {} of {name}", s.pool)));
        };
        let req = registration::launch_request(&name, &s, &ctx.config.cluster, &labels, taints);
        let client = ctx.client.clone();
        let metrics = ctx.deps.metrics.clone();
        let labels = |result: &str| LaunchLabels {
            pool: s.pool.clone(),
            capacity_type: offering.capacity_type.as_str().to_string(),
            result: result.to_string(),
        };
        let (launched, failed) = (labels("Launched"), labels(""));
        let launch = move || async move {
            let result = provider.launch(&req).await;
            let labels = match &result {
                Ok(instance) => {
                    record_instance(&client, &req.name, &instance.provider_id).await;
                    launched
                }
                Err(e) => LaunchLabels {
                    result: e.category().as_str().to_string(),
                    ..failed
                },
            };
            metrics.launches.get_or_create(&labels).inc();
            result
        };
        // the call runs off the planning path; its outcome comes back in a
        // later cycle (the loop is woken for it)
        if let Progress::Done(result) = ctx.cloud.work.poll(
            Job::Launch(name.clone()),
            &node_class,
            wakes_the_loop,
            launch,
        ) {
            match result {
                Ok(instance) => {
                    status.provider_id = Some(instance.provider_id.clone());
                    status.launched_at = Some(time::to_kube(now));
                    provider_id = Some(instance.provider_id);
                    ctx.cloud.work.settle(Job::Launch(name.clone()));
                }
                Err(e) => {
                    launch_error = Some(match &e {
                        ProviderError::InsufficientCapacity { .. } => {
                            LaunchError::InsufficientCapacity
                        }
                        ProviderError::QuotaExceeded { .. } => LaunchError::QuotaExceeded,
                        ProviderError::CapacityTypeNotPermitted { .. } => {
                            LaunchError::CapacityTypeNotPermitted
                        }
                        ProviderError::Permanent { .. } => LaunchError::InvalidRequest,
                        ProviderError::Transient { .. } | ProviderError::NotFound { .. } => {
                            LaunchError::Transient
                        }
                    });
                    error_text = Some((e.category().as_str(), e.to_string()));
                }
            }
        }
    }
    let node = provider_id.as_ref().and_then(|pid| {
        observed
            .nodes
            .iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(pid))
    });
    if let (Some(n), Some(pid)) = (node, provider_id.as_deref())
        && matches!(phase, NodePhase::Registered | NodePhase::Ready)
        && let Err(e) = network::label(
            ctx,
            providers,
            (&name, &node_class, offering.provider),
            pid,
            n,
        )
        .await
    {
        tracing::warn!(poolnode = %name, error = %e, "could not label the Node with its network");
    }
    let seen = pool_node::Observed {
        launch_accepted: provider_id.is_some(),
        registered: node.is_some(),
        ready_with_gpus: node.is_some_and(|n| node_ready(n) && allocatable(n).gpu_millis > 0),
        launch_error,
    };
    let policy = &ctx.config.policy;
    // Ready since when (the kubelet's transition time, else the phase's start)
    let ready_at = node
        .and_then(|n| ready_since(n))
        .map(|t| t.unwrap_or(since));
    let gpus = node.is_some_and(|n| allocatable(n).gpu_millis > 0);
    let gpu_warning = pool_node::gpu_warning(phase, ready_at, gpus, policy, now).map(|w| {
        let message = pool_node::gpu_warning_message(
            &node.map(|n| n.name_any()).unwrap_or_default(),
            &node.map(|n| taints(n)).unwrap_or_default(),
            policy.gpu_registration_timeout,
        );
        (w, message)
    });
    // the planner's life-cycle table decides what the observation means
    match pool_node::next(phase, since, &offering, seen, policy, now) {
        pool_node::Step::Stay => {
            if let Some((reason, message)) = &error_text {
                status.reason = Some((*reason).to_string());
                status.message = Some(message.clone());
                ctx.events
                    .warn(Kind::PoolNode, &pn, reason, message.clone())
                    .await;
            }
            if let Some((warning, message)) = gpu_warning {
                let cond = condition(
                    ConditionType::Initialized,
                    false,
                    warning.as_str(),
                    message.clone(),
                    now,
                    None,
                );
                // written (and announced) once: later cycles find it in place
                if let Some(conds) = with_condition(&pn, cond) {
                    status.conditions = conds;
                    ctx.events
                        .warn(Kind::PoolNode, &pn, warning.as_str(), message)
                        .await;
                }
            }
        }
        pool_node::Step::Advance(next) => {
            status.phase = crd_phase(next);
            if let Some(n) = node {
                if phase < NodePhase::Registered {
                    status.node_name = Some(n.name_any());
                    status.registered_at = Some(time::to_kube(now));
                }
                if next == NodePhase::Ready {
                    status.ready_at = Some(time::to_kube(now));
                    let message = format!("{} has allocatable GPUs", n.name_any());
                    let cond = condition(
                        ConditionType::Initialized,
                        true,
                        "GPUsAllocatable",
                        message,
                        now,
                        None,
                    );
                    if let Some(conds) = with_condition(&pn, cond) {
                        status.conditions = conds;
                    }
                }
            }
            status.reason = None;
            status.message = None;
        }
        pool_node::Step::Lost => {
            // drained like a removal: the gang on it is evicted whole (its
            // life cycle sees a Draining node it holds), then the drain
            // finds no Node and deletes the PoolNode, whose finalizer
            // terminates the instance
            let reason = EvictReason::NodeLost.as_str();
            let message = format!(
                "the Node of {name} ({}) is gone; the node is drained and its instance terminated, \
                 and the gang on it is requeued whole",
                status.node_name.as_deref().unwrap_or("never named")
            );
            status.phase = muster_crds::PoolNodePhase::Draining;
            status.reason = Some(reason.to_string());
            status.message = Some(message.clone());
            ctx.events.warn(Kind::PoolNode, &pn, reason, message).await;
        }
        pool_node::Step::Terminate {
            reason,
            mark_unavailable,
        } => {
            if let Some((what, until)) = mark_unavailable {
                let why = error_text.as_ref().map_or("", |(_, m)| m.as_str());
                ctx.cloud.offerings.mark_unavailable(what, until, why);
            }
            let reason = reason.as_str().to_string();
            let message = error_text
                .map(|(_, m)| m)
                .or(gpu_warning.map(|(_, m)| m))
                .unwrap_or_else(|| format!("{name} terminated in phase {}", phase_name(phase)));
            ctx.events
                .warn(
                    Kind::PoolNode,
                    &pn,
                    &reason,
                    format!("{message}; re-planning"),
                )
                .await;
            if let Some(patch) = crate::controller::base::api::status_patch(&st, &status) {
                // record an instance the cloud created, so the finalizer terminates it
                patch_status(&ctx.client, Kind::PoolNode, None, &name, patch).await?;
            }
            match api(&ctx.client, Kind::PoolNode, None)
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(ActError::api("delete PoolNode")(e)),
            }
            if provider_id.is_none() {
                // nothing to terminate: let it go now
                remove_finalizer(ctx, &pn).await?;
            }
            ctx.caches.changes.notify_one();
            return Ok(true);
        }
    }
    let Some(patch) = crate::controller::base::api::status_patch(&st, &status) else {
        return Ok(false);
    };
    patch_status(&ctx.client, Kind::PoolNode, None, &name, patch).await?;
    Ok(true)
}

/// Whether a launch's outcome wakes the planning loop: an instance, or an
/// error the life-cycle table acts on, does; a transient failure waits for
/// the next regular cycle, so a failing cloud is not asked in a tight loop.
fn wakes_the_loop(result: &Result<Instance, ProviderError>) -> bool {
    !matches!(
        result,
        Err(ProviderError::Transient { .. } | ProviderError::NotFound { .. })
    )
}

/// Records the instance a launch returned in the PoolNode's status at once,
/// so a crash before the next cycle leaves its provider ID written (the
/// next cycle writes the same value with the phase). A PoolNode deleted
/// meanwhile is left alone: orphan collection finds the instance.
async fn record_instance(client: &kube::Client, name: &str, provider_id: &str) {
    let status = serde_json::json!({
        "providerID": provider_id,
        "launchedAt": time::to_kube(time::now()),
    });
    match patch_status(client, Kind::PoolNode, None, name, status).await {
        Ok(()) => {}
        Err(ActError::Api { source, .. }) if is_not_found(&source) => {}
        Err(e) => tracing::warn!(poolnode = %name, error = %e, "could not record the instance"),
    }
}

/// A planner node phase as the CRD's PoolNode phase.
fn crd_phase(p: NodePhase) -> muster_crds::PoolNodePhase {
    use muster_crds::PoolNodePhase as P;
    match p {
        NodePhase::Pending => P::Pending,
        NodePhase::Launched => P::Launched,
        NodePhase::Registered => P::Registered,
        NodePhase::Ready => P::Ready,
        NodePhase::Draining => P::Draining,
        NodePhase::Terminating => P::Terminating,
    }
}

fn phase_name(p: NodePhase) -> &'static str {
    match p {
        NodePhase::Pending => "Pending",
        NodePhase::Launched => "Launched",
        NodePhase::Registered => "Registered",
        NodePhase::Ready => "Ready",
        NodePhase::Draining => "Draining",
        NodePhase::Terminating => "Terminating",
    }
}

fn pool_obj<'a>(observed: &'a Observed, pool: &str) -> Option<&'a Arc<DynamicObject>> {
    observed
        .of(Kind::GpuPool)
        .iter()
        .find(|p| p.name_any() == pool)
}

fn pool_node_class(observed: &Observed, pool: &str) -> Option<String> {
    let p = pool_obj(observed, pool)?;
    let s: muster_crds::GpuPoolSpec = spec(Kind::GpuPool, p).ok()?;
    Some(s.node_class_ref.name)
}

fn pool_spec(
    observed: &Observed,
    pool: &str,
) -> Option<(BTreeMap<String, String>, Vec<muster_planner::Taint>)> {
    let p = pool_obj(observed, pool)?;
    let mut issues = Vec::new();
    let classes =
        crate::controller::translate::pool::node_classes(observed.of(Kind::NodeClass), &mut issues);
    let pools =
        crate::controller::translate::pool::pools(std::slice::from_ref(p), &classes, &mut issues);
    pools.into_iter().next().map(|p| (p.labels, p.taints))
}

async fn finalize(
    ctx: &Ctx,
    providers: &CycleProviders,
    pn: &Arc<DynamicObject>,
    node_class: &str,
    provider_id: Option<&str>,
) -> Result<bool, ActError> {
    let has_finalizer = pn.finalizers().iter().any(|f| f == TERMINATE_FINALIZER);
    if !has_finalizer {
        return Ok(false);
    }
    let Some(pid) = provider_id else {
        // no machine: the PoolNode goes now
        finalize_with(&ctx.client, None, pn).await?;
        return Ok(true);
    };
    let provider = providers.get(node_class)?;
    let job = Job::Terminate(pn.name_any());
    let client = ctx.client.clone();
    let (pn2, pid2) = (pn.clone(), pid.to_string());
    let terminate = move || async move {
        finalize_with(&client, Some((provider.as_ref(), pid2.as_str())), &pn2).await
    };
    match ctx
        .cloud
        .work
        .poll(job.clone(), node_class, Result::is_ok, terminate)
    {
        Progress::Waiting => Ok(false),
        Progress::Done(Ok(())) => {
            // done: not again while the caches still show the PoolNode
            ctx.cloud.work.settle(job);
            Ok(true)
        }
        Progress::Done(Err(e)) => Err(e),
    }
}

/// Terminates the machine (when there is one; gone already is success),
/// deletes its Node as the cloud's node controller would, and removes the
/// finalizer. Runs off the planning path when it calls the cloud.
async fn finalize_with(
    client: &kube::Client,
    machine: Option<(&dyn muster_provider_api::CloudProvider, &str)>,
    pn: &DynamicObject,
) -> Result<(), ActError> {
    if let Some((provider, pid)) = machine {
        match provider.terminate(pid).await {
            Ok(()) | Err(ProviderError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(node) = poolnode_status(pn).node_name {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        match nodes.delete(&node, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(ActError::api("delete Node")(e)),
        }
    }
    remove_finalizer_with(client, pn).await
}

/// Removes muster's finalizer (guarded by the object's resourceVersion).
pub(crate) async fn remove_finalizer(ctx: &Ctx, pn: &DynamicObject) -> Result<(), ActError> {
    remove_finalizer_with(&ctx.client, pn).await
}

/// [`remove_finalizer`] with a client alone (also `muster uninstall --force`).
pub(crate) async fn remove_finalizer_with(
    client: &kube::Client,
    pn: &DynamicObject,
) -> Result<(), ActError> {
    let rest: Vec<String> = pn
        .finalizers()
        .iter()
        .filter(|f| f.as_str() != TERMINATE_FINALIZER)
        .cloned()
        .collect();
    let patch = serde_json::json!({
        "metadata": {"finalizers": rest, "resourceVersion": pn.resource_version()}
    });
    match api(client, Kind::PoolNode, None)
        .patch(&pn.name_any(), &params(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(ActError::api("remove finalizer")(e)),
    }
}
