//! What the controller scenario tests (`tests/scenarios_*.rs`) share: the
//! controller started in-process on a fake cloud, scenario (2) (a gang of
//! four launched and admitted) for the files that check more of its run,
//! and readers of a Job and of the API test server's audit log.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::Api;
use muster::controller::{ControllerConfig, PlanFn};
use serde_json::json;

use super::emulator::Emulator;
use super::fake_cloud::FakeCloud;
use super::in_process::Running;
use super::objects::{TEAM_A, job, start_world};
use super::waits::{poolnodes, wait_for_running_pods};
use super::{ApiServer, AuditedWrite};

/// The scripted stub planner (`stub_planner.rs`).
pub fn stub() -> PlanFn {
    Arc::new(super::stub_planner::plan)
}

/// The controller (identity `c1`, no leader election) on `cloud`, deciding
/// with `planner`, as the server's client `controller`.
pub fn start(server: &ApiServer, cloud: &Arc<FakeCloud>, planner: PlanFn) -> Running {
    start_configured(server, cloud, planner, |_| {})
}

/// [`start`] with `configure` applied to the test configuration.
pub fn start_configured(
    server: &ApiServer,
    cloud: &Arc<FakeCloud>,
    planner: PlanFn,
    configure: impl FnOnce(&mut ControllerConfig),
) -> Running {
    let mut config = super::in_process::config("c1");
    configure(&mut config);
    super::in_process::spawn(&server.client_as("controller"), cloud, planner, config)
}

// ---------------------------------------------------------------- scenario (2)

/// What a finished scenario (2) leaves running, for further checks.
pub struct GangOfFour {
    /// The API server (its client reads what the scenario left).
    pub server: ApiServer,
    _emu: Emulator,
    /// The controller, still running.
    pub ctl: Running,
}

/// Scenario (2): a Job of four 8-GPU pods on no capacity gets four
/// PoolNodes written before the first launch, four instances, and is
/// admitted, pinned to the four nodes, once all four are Ready.
pub async fn scenario_gang_of_four(planner: PlanFn) -> GangOfFour {
    scenario_gang_of_four_with(planner, &[]).await
}

/// [`scenario_gang_of_four`] on a server started with `server_options`.
pub async fn scenario_gang_of_four_with(planner: PlanFn, server_options: &[&str]) -> GangOfFour {
    let (server, client) = start_world(server_options).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, planner);
    job("big")
        .queue("team-a")
        .pods(4)
        .gpus(8)
        .create(&client)
        .await;
    let pods = wait_for_running_pods(&client, TEAM_A, "job-name=big", 4, 30).await;
    // intent first: every launch call saw all four PoolNodes in the API
    let launches = cloud.launch_calls();
    assert!(launches.len() >= 4, "{launches:?}");
    assert_eq!(
        launches[0].poolnodes_seen,
        Some(4),
        "all PoolNodes written before the first launch"
    );
    let keys: BTreeSet<String> = launches.iter().map(|c| c.what.clone()).collect();
    assert_eq!(keys.len(), 4);
    assert_eq!(cloud.instances().len(), 4);
    let pns = poolnodes(&client).await;
    assert_eq!(pns.len(), 4);
    for pn in &pns {
        assert_eq!(pn.data["status"]["phase"], "Ready", "{pn:?}");
        assert!(
            pn.data["status"]["providerID"]
                .as_str()
                .is_some_and(|p| p.starts_with("gce://"))
        );
        let job_uid = Api::<Job>::namespaced(client.clone(), TEAM_A)
            .get("big")
            .await
            .expect("job")
            .uid();
        assert_eq!(
            pn.data["spec"]["gang"],
            json!({"namespace": "team-a", "name": "big", "uid": job_uid})
        );
        assert_eq!(pn.data["spec"]["offering"]["gpuCount"], 8);
        assert_eq!(pn.data["spec"]["offering"]["pricePerHour"], "10.000000");
        // the Node is found by its provider id (its name is the cloud's, not the PoolNode's)
        let node_name = pn.data["status"]["nodeName"].as_str().expect("nodeName");
        let node = Api::<Node>::all(client.clone())
            .get(node_name)
            .await
            .expect("the Node");
        assert_eq!(
            node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
            pn.data["status"]["providerID"].as_str()
        );
        assert!(
            pn.data["status"]["registeredAt"].is_string()
                && pn.data["status"]["readyAt"].is_string()
        );
        assert!(
            pn.finalizers()
                .contains(&"muster.dev/terminate-instance".to_string())
        );
    }
    // the Job was unsuspended only when all four nodes were Ready
    let seen = emu.seen.lock().expect("seen").clone();
    assert_eq!(seen.unsuspended_with_ready_nodes.get("big"), Some(&4));
    // pinned: required affinity to the four nodes, toleration of the pool taint
    let job = Api::<Job>::namespaced(client.clone(), TEAM_A)
        .get("big")
        .await
        .expect("job");
    let spec = job.spec.expect("spec").template.spec.expect("pod spec");
    let terms = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|n| n.required_during_scheduling_ignored_during_execution)
        .expect("required affinity")
        .node_selector_terms;
    // one term per node, one name each (the API server takes exactly one
    // value for `In` on a node field)
    let names: BTreeSet<String> = terms
        .iter()
        .map(|t| {
            let values = t.match_fields.clone().expect("fields")[0]
                .values
                .clone()
                .expect("values");
            assert_eq!(values.len(), 1, "{values:?}");
            values[0].clone()
        })
        .collect();
    assert_eq!(terms.len(), names.len());
    let pn_names: BTreeSet<String> = pns
        .iter()
        .filter_map(|p| p.data["status"]["nodeName"].as_str().map(String::from))
        .collect();
    assert_eq!(pn_names.len(), 4);
    assert_eq!(names, pn_names);
    assert!(
        spec.tolerations
            .expect("tolerations")
            .iter()
            .any(|t| t.key.as_deref() == Some("nvidia.com/gpu"))
    );
    let on: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(on, pn_names, "one pod per launched node");
    GangOfFour {
        server,
        _emu: emu,
        ctl,
    }
}

// ---------------------------------------------------------------- Jobs and the audit log

/// Whether the Job's pod template is pinned to its gang's nodes (node
/// selector `muster.dev/gang`), as an admission leaves it.
pub fn pinned_to_gang(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.node_selector.as_ref())
        .is_some_and(|s| s.contains_key("muster.dev/gang"))
}

/// Index of the first write at or after `after` that sets Gang `name`'s phase to `phase`.
pub fn gang_phase_written(
    log: &[AuditedWrite],
    name: &str,
    phase: &str,
    after: usize,
) -> Option<usize> {
    (after..log.len()).find(|&i| {
        let w = &log[i];
        w.name == name && w.resource == "gangs/status" && w.body["status"]["phase"] == phase
    })
}

/// Index of the first write at or after `after` that sets Job `name`'s `spec.suspend` to `value`.
pub fn job_suspend_written(
    log: &[AuditedWrite],
    name: &str,
    value: bool,
    after: usize,
) -> Option<usize> {
    (after..log.len()).find(|&i| {
        let w = &log[i];
        w.name == name && w.resource == "jobs" && w.body["spec"]["suspend"] == value
    })
}
