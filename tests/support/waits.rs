//! What the scenario tests read and wait for: Gangs and their phases,
//! running pods, PoolNodes, Events; and the merge patches they make to
//! pools and queues. Every wait polls with [`eventually`] and panics
//! naming what it waited for.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::{ar, eventually};

// ---------------------------------------------------------------- Gangs

/// Gang `name` in `ns`, if it exists.
pub async fn gang(client: &kube::Client, ns: &str, name: &str) -> Option<DynamicObject> {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar("Gang", "gangs"))
        .get_opt(name)
        .await
        .ok()?
}

/// The phase of gang `name` in `ns`, if it has one.
pub async fn gang_phase(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    gang(client, ns, name).await?.data["status"]["phase"]
        .as_str()
        .map(String::from)
}

/// Waits up to `secs` for gang `name` in `ns` to be in one of `phases`;
/// returns the phase.
pub async fn wait_for_gang_phase(
    client: &kube::Client,
    ns: &str,
    name: &str,
    phases: &[&str],
    secs: u64,
) -> String {
    eventually(
        secs,
        &format!("gang {ns}/{name} in {phases:?}"),
        || async move {
            let p = gang_phase(client, ns, name).await?;
            phases.contains(&p.as_str()).then_some(p)
        },
    )
    .await
}

/// Waits up to `secs` for gang `name` in `ns` to be gone.
pub async fn wait_for_gang_gone(client: &kube::Client, ns: &str, name: &str, secs: u64) {
    let api: &Api<DynamicObject> = &Api::namespaced_with(client.clone(), ns, &ar("Gang", "gangs"));
    eventually(secs, &format!("gang {ns}/{name} deleted"), || async move {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

// ---------------------------------------------------------------- pods

/// The pods in `ns` matching label `selector` in phase Running.
pub async fn running_pods(client: &kube::Client, ns: &str, selector: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect()
}

/// Waits up to `secs` for exactly `n` Running pods in `ns` matching
/// `selector`; returns them.
pub async fn wait_for_running_pods(
    client: &kube::Client,
    ns: &str,
    selector: &str,
    n: usize,
    secs: u64,
) -> Vec<Pod> {
    eventually(
        secs,
        &format!("{n} running pods of {selector}"),
        || async move {
            let pods = running_pods(client, ns, selector).await;
            (pods.len() == n).then_some(pods)
        },
    )
    .await
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// Waits up to `secs` for Job `name` in `ns` to be suspended.
pub async fn wait_for_job_suspended(client: &kube::Client, ns: &str, name: &str, secs: u64) {
    let jobs: &Api<Job> = &Api::namespaced(client.clone(), ns);
    eventually(secs, &format!("Job {ns}/{name} suspended"), || async move {
        jobs.get(name).await.ok()?.spec?.suspend.filter(|s| *s)
    })
    .await;
}

// ---------------------------------------------------------------- PoolNodes

/// Every PoolNode.
pub async fn poolnodes(client: &kube::Client) -> Vec<DynamicObject> {
    Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .list(&ListParams::default())
        .await
        .expect("list poolnodes")
        .items
}

/// The names of the Nodes of every PoolNode that has one.
pub async fn poolnode_node_names(client: &kube::Client) -> BTreeSet<String> {
    poolnodes(client)
        .await
        .iter()
        .filter_map(|p| p.data["status"]["nodeName"].as_str().map(String::from))
        .collect()
}

/// Waits up to `secs` for a PoolNode in `phase`; returns it.
pub async fn wait_for_poolnode_phase(
    client: &kube::Client,
    phase: &str,
    secs: u64,
) -> DynamicObject {
    eventually(secs, &format!("a PoolNode {phase}"), || async move {
        poolnodes(client)
            .await
            .into_iter()
            .find(|p| p.data["status"]["phase"] == phase)
    })
    .await
}

/// Waits up to `secs` for PoolNode `name` to be gone.
pub async fn wait_for_poolnode_gone(client: &kube::Client, name: &str, secs: u64) {
    eventually(secs, &format!("PoolNode {name} gone"), || async move {
        (!poolnodes(client).await.iter().any(|p| p.name_any() == name)).then_some(())
    })
    .await;
}

/// Waits up to `secs` for no PoolNode at all.
pub async fn wait_for_no_poolnodes(client: &kube::Client, secs: u64) {
    eventually(secs, "no PoolNode", || async move {
        poolnodes(client).await.is_empty().then_some(())
    })
    .await;
}

// ---------------------------------------------------------------- Events

/// Every Event of `reason`.
pub async fn events_of(client: &kube::Client, reason: &str) -> Vec<Event> {
    Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

// ---------------------------------------------------------------- changes

/// Merge-patches the spec of GPUPool `name` with `spec`.
pub async fn patch_pool(client: &kube::Client, name: &str, spec: Value) {
    patch_spec(client, "GPUPool", "gpupools", name, spec).await;
}

/// Merge-patches the spec of GPUQueue `name` with `spec`.
pub async fn patch_queue(client: &kube::Client, name: &str, spec: Value) {
    patch_spec(client, "GPUQueue", "gpuqueues", name, spec).await;
}

async fn patch_spec(client: &kube::Client, kind: &str, plural: &str, name: &str, spec: Value) {
    Api::<DynamicObject>::all_with(client.clone(), &ar(kind, plural))
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": spec })),
        )
        .await
        .unwrap_or_else(|e| panic!("patch {kind} {name}: {e}"));
}

/// Panics if any write of a controller in this process was refused as
/// invalid (422) by the API test server, which enforces the Job rules and
/// every CRD's schema and CEL rules.
pub fn assert_no_invalid_writes() {
    assert_eq!(
        muster::controller::base::api::invalid_writes(),
        0,
        "a controller write was refused as invalid (see the warnings)"
    );
}

/// A NodeClass's status once its `Ready` condition is `True`; `None` before.
pub async fn nodeclass_ready_status(client: &kube::Client, name: &str) -> Option<Value> {
    let nc = Api::<DynamicObject>::all_with(client.clone(), &ar("NodeClass", "nodeclasses"))
        .get(name)
        .await
        .ok()?;
    nc.data["status"]["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
        .then(|| nc.data["status"].clone())
}
