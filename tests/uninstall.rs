//! `muster uninstall` against the API test server and the fake cloud, with
//! the controller running in-process: what an operator runs before `helm
//! uninstall` leaves no instance running, no muster object held by a
//! finalizer and no webhook refusing creates.

mod support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams};
use muster::controller::uninstall::{self, Options, Running, UninstallError};
use muster_provider_api::InstanceState;
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{TEAM_A as NS, job, start_world};
use support::scenario::start;
use support::waits::{poolnodes, wait_for_running_pods};
use support::{ar, eventually};

/// muster's webhook configuration as the chart names and labels it
/// (release `muster`), its service without an endpoint: the controller is
/// gone, and every labelled Job create is refused (failurePolicy Fail).
fn muster_webhook() -> MutatingWebhookConfiguration {
    serde_json::from_value(json!({
        "metadata": {"name": "muster", "labels": {
            "app.kubernetes.io/name": "muster", "app.kubernetes.io/instance": "muster"}},
        "webhooks": [{
            "name": "jobs.muster.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {"service": {"namespace": "muster-system", "name": "muster-webhook", "path": "/mutate"}},
            "objectSelector": {"matchExpressions": [{"key": "muster.dev/queue", "operator": "Exists"}]},
            "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}]
        }]
    }))
    .expect("webhook configuration")
}

fn options(running: Running, timeout: Duration, force: bool) -> Options {
    Options {
        release: Some("muster".into()),
        running,
        timeout,
        force,
        poll: Duration::from_millis(200),
    }
}

/// Instances of the fake cloud not terminated.
fn billing(cloud: &FakeCloud) -> Vec<String> {
    cloud
        .instances()
        .into_iter()
        .filter(|i| i.instance.state != InstanceState::Terminated)
        .map(|i| i.instance.provider_id)
        .collect()
}

/// Objects of muster's kinds still held by a finalizer.
async fn finalized(client: &kube::Client) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, plural) in [
        ("PoolNode", "poolnodes"),
        ("Gang", "gangs"),
        ("GPUQueue", "gpuqueues"),
        ("GPUPool", "gpupools"),
        ("NodeClass", "nodeclasses"),
    ] {
        let api = Api::<kube::api::DynamicObject>::all_with(client.clone(), &ar(kind, plural));
        for o in api.list(&ListParams::default()).await.expect("list") {
            if o.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                out.push(format!("{kind}/{}", o.metadata.name.unwrap_or_default()));
            }
        }
    }
    out
}

/// A gang runs on a machine muster bought, and muster's webhook refuses
/// labelled Jobs while its service has no endpoint. `muster uninstall
/// --running stop` holds the queue, evicts the gang (its Job suspended),
/// has the controller terminate the machine, deletes the webhook
/// configuration and says what it did: afterwards the fake cloud bills for
/// nothing, no muster object has a finalizer, and a labelled Job is
/// created. Before, there was no such command: `helm uninstall` left the
/// PoolNodes with their finalizers and the instances running.
#[tokio::test]
async fn uninstall_stops_gangs_terminates_every_machine_and_unblocks_creates() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, muster::controller::real_planner());
    job("train").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=train", 1, 30).await;
    assert_eq!(billing(&cloud).len(), 1, "one machine bought");
    let hooks: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    hooks
        .create(&PostParams::default(), &muster_webhook())
        .await
        .expect("webhook configuration");
    let jobs = Api::<Job>::namespaced(client.clone(), NS);
    let next = job("next").queue("team-a").build();
    let refused = jobs.create(&PostParams::default(), &next).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("failed calling webhook")),
        "{refused:?}"
    );

    let report = uninstall::run(
        &client,
        &options(Running::Stop, Duration::from_secs(60), false),
    )
    .await
    .expect("uninstall");
    assert_eq!(report.queues_held, ["team-a (HoldAndDrain)"]);
    assert_eq!(report.machines_terminated.len(), 1, "{report:?}");
    assert!(report.instances_left.is_empty());
    assert_eq!(report.webhooks_deleted, ["muster"]);
    assert_eq!(report.suspended_jobs, [format!("{NS}/train")]);
    assert!(billing(&cloud).is_empty(), "{:?}", billing(&cloud));
    assert!(poolnodes(&client).await.is_empty());
    assert!(finalized(&client).await.is_empty());
    let train = jobs.get("train").await.expect("job");
    assert_eq!(train.spec.and_then(|s| s.suspend), Some(true));
    jobs.create(&PostParams::default(), &next)
        .await
        .expect("a labelled Job is no longer refused");
    // run again: nothing left to do, nothing fails
    let again = uninstall::run(
        &client,
        &options(Running::Stop, Duration::from_secs(5), false),
    )
    .await
    .expect("uninstall again");
    assert!(again.machines_terminated.is_empty() && again.webhooks_deleted.is_empty());
}

/// With the controller gone, nothing terminates the machines: the
/// uninstall stops at its deadline naming each PoolNode and its instance;
/// with `force` it lets the PoolNodes go and reports the instances that
/// still bill, by provider id.
#[tokio::test]
async fn uninstall_without_the_controller_names_the_instances_that_still_bill() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as std::sync::Arc<dyn support::emulator::Machines>],
        Some(Duration::from_secs(1)),
    );
    let ctl = start(&server, &cloud, muster::controller::real_planner());
    job("short").queue("team-a").create(&client).await;
    support::waits::wait_for_gang_phase(&client, NS, "short", &["Finished"], 30).await;
    drop(ctl);
    let ids = billing(&cloud);
    assert_eq!(ids.len(), 1, "the empty machine is still held");
    let err = uninstall::run(
        &client,
        &options(Running::Drain, Duration::from_secs(2), false),
    )
    .await
    .expect_err("nothing terminates the machine");
    assert_eq!(err.as_str(), "Timeout");
    let msg = err.to_string();
    assert!(
        msg.contains(&ids[0]) && msg.contains("is the controller running"),
        "{msg}"
    );
    assert!(matches!(err, UninstallError::Timeout { .. }));
    let report = uninstall::run(
        &client,
        &options(Running::Drain, Duration::from_secs(2), true),
    )
    .await
    .expect("forced");
    assert_eq!(
        report
            .instances_left
            .iter()
            .map(|(_, id)| id.clone())
            .collect::<Vec<_>>(),
        ids
    );
    assert!(finalized(&client).await.is_empty());
    eventually(10, "the PoolNode gone", || {
        let client = client.clone();
        async move { poolnodes(&client).await.is_empty().then_some(()) }
    })
    .await;
    assert_eq!(billing(&cloud), ids, "still billing, as reported");
}
