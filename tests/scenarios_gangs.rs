//! Queues and gangs: a queue's `namespaceSelector` enforced, a waiting
//! gang's position and reason in its status, a Gang created for every
//! labelled Job and fresh Jobs suspended, nothing planned before the caches
//! sync; and a gang's Job life cycle: a Job submitted unsuspended stopped
//! then admitted, the Gang's status written before its Job, a gang whose
//! pods are not Ready in time evicted whole, and evicted then admitted
//! again.
//!
//! Each runs the real `kube::Client` over HTTP against the API test server
//! and the controller in-process on a fake cloud, with the kubelet /
//! scheduler emulator where pods are to run.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use muster::controller::PlanFn;
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{TEAM_A as NS, gpu_node, job, start_world};
use support::scenario::{
    gang_phase_written, job_suspend_written, pinned_to_gang, start, start_configured, stub,
};
use support::waits::{
    assert_no_invalid_writes, gang, patch_queue, running_pods, wait_for_gang_phase,
    wait_for_job_suspended, wait_for_running_pods,
};
use support::{ApiServer, eventually};

// ---------------------------------------------------------------- queues

/// A Job in a namespace its queue's `namespaceSelector` does not select
/// stays suspended, with `Valid=False`/`NamespaceNotAllowed` on its Gang and
/// no launch; once the queue selects the namespace, it is admitted.
#[tokio::test]
async fn queue_namespace_selector_is_enforced() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("outsider")
        .queue("team-a")
        .namespace("team-b")
        .gpus(8)
        .create(&client)
        .await;
    let cond = eventually(20, "NamespaceNotAllowed on the Gang", || {
        let client = client.clone();
        async move {
            let g = gang(&client, "team-b", "outsider").await?;
            g.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Valid" && c["status"] == "False")
                .cloned()
        }
    })
    .await;
    assert_eq!(cond["reason"], "NamespaceNotAllowed", "{cond}");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("team-b")),
        "{cond}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(cloud.launch_calls().is_empty(), "nothing launched for it");
    let job = Api::<Job>::namespaced(client.clone(), "team-b")
        .get("outsider")
        .await
        .expect("job");
    assert_eq!(job.spec.and_then(|s| s.suspend), Some(true));
    // the queue opens to every namespace: admitted
    patch_queue(
        &client,
        "team-a",
        json!({"namespaceSelector": {"matchLabels": null}}),
    )
    .await;
    eventually(30, "the outsider running", || {
        let client = client.clone();
        async move {
            let pods = Api::<Pod>::namespaced(client, "team-b")
                .list(&ListParams::default().labels("job-name=outsider"))
                .await
                .ok()?
                .items;
            pods.iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .then_some(())
        }
    })
    .await; // Namespaces watched included
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

#[tokio::test]
async fn waiting_gangs_show_position_and_reason() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    let _ctl = start(&server, &cloud, stub());
    job("huge").queue("team-a").gpus(16).create(&client).await; // no offering has 16 GPUs
    let st = eventually(10, "a waiting status", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "huge").await?;
            g.data["status"]["reason"]
                .is_string()
                .then(|| g.data["status"].clone())
        }
    })
    .await;
    assert_eq!(st["phase"], "Queued");
    assert_eq!(st["reason"], "NoOffering");
    assert!(
        st["message"].as_str().is_some_and(|m| !m.is_empty()),
        "why it waits, in words, in status: {st}"
    );
    assert_eq!(st["position"], 1);
    assert!(cloud.calls().is_empty());
}

#[tokio::test]
async fn gangs_created_and_fresh_jobs_suspended() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    // no emulator: nothing creates pods, so the controller may suspend
    let _ctl = start(
        &server,
        &cloud,
        Arc::new(|_: &_, _: &_, _| Default::default()),
    );
    job("eager")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .unsuspended()
        .create(&client)
        .await;
    let gang = eventually(10, "the Gang", || {
        let client = client.clone();
        async move { gang(&client, NS, "eager").await }
    })
    .await;
    assert_eq!(gang.data["spec"]["queue"], "team-a");
    assert_eq!(gang.data["spec"]["podSets"][0]["count"], 2);
    assert_eq!(
        gang.data["spec"]["podSets"][0]["requests"]["nvidia.com/gpu"],
        "8"
    );
    let owner = &gang.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Job", "eager", Some(true))
    );
    eventually(10, "the Job suspended", || {
        let client = client.clone();
        async move {
            let j = Api::<Job>::namespaced(client, NS).get("eager").await.ok()?;
            j.spec?.suspend.filter(|s| *s).map(|_| ())
        }
    })
    .await;
    wait_for_gang_phase(&client, NS, "eager", &["Queued"], 10).await;
}

#[tokio::test]
async fn no_planning_before_caches_sync() {
    // the controller starts before its CRDs exist: the muster watches fail,
    // the caches never sync, nothing is written; once the CRDs are installed
    // the watches recover and the controller acts
    let server = ApiServer::start();
    let client = server.client();
    let cloud = FakeCloud::new(None);
    let ctl = start(&server, &cloud, stub());
    job("early")
        .queue("team-a")
        .unsuspended()
        .create(&client)
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("early")
        .await
        .expect("job");
    assert_eq!(
        job.spec.and_then(|s| s.suspend),
        Some(false),
        "no write before sync"
    );
    assert!(
        ctl.metrics
            .encode()
            .contains("muster_planning_cycles_total 0")
    );
    support::install_crds(&client).await;
    eventually(30, "the Job suspended after sync", || {
        let client = client.clone();
        async move {
            Api::<Job>::namespaced(client, NS)
                .get("early")
                .await
                .ok()?
                .spec?
                .suspend
                .filter(|s| *s)
        }
    })
    .await;
}

// ---------------------------------------------------------------- the Job life cycle

/// A labelled Job submitted without `suspend` runs before muster sees it:
/// it is stopped (the Job controller deletes its pods), queued, and only
/// then admitted — pinned, on the node the plan chose.
#[tokio::test]
async fn labelled_job_created_unsuspended_is_stopped_then_admitted() {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    job("eager")
        .queue("team-a")
        .unsuspended()
        .create(&client)
        .await;
    let first = eventually(20, "the unadmitted pod to run", || {
        let client = client.clone();
        async move {
            let pods = running_pods(&client, NS, "job-name=eager").await;
            (pods.len() == 1).then(|| pods[0].uid())?
        }
    })
    .await;
    let _ctl = start(&server, &cloud, stub());
    eventually(30, "a pinned pod running in place of the first", || {
        let client = client.clone();
        let first = first.clone();
        async move {
            let running = running_pods(&client, NS, "job-name=eager").await;
            let pinned = running.iter().all(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_selector.as_ref())
                    .is_some_and(|s| s.contains_key("muster.dev/gang"))
            });
            (running.len() == 1 && pinned && running[0].uid() != Some(first)).then_some(())
        }
    })
    .await;
    let job = Api::<Job>::namespaced(client.clone(), NS)
        .get("eager")
        .await
        .expect("job");
    assert!(pinned_to_gang(&job));
    assert_eq!(job.spec.as_ref().and_then(|s| s.suspend), Some(false));
    let requests = server.audited("controller");
    assert!(
        requests
            .iter()
            .any(|(v, _, r, _)| v == "patch" && r == "jobs/status"),
        "startTime cleared before the template changed"
    );
    wait_for_gang_phase(&client, NS, "eager", &["Running"], 10).await;
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// The stub planner, except that once `team-a/second` is pending while
/// `team-a/first` runs, `first` is preempted for it; once `second` exists,
/// neither is admitted.
fn preempting_planner() -> PlanFn {
    use muster_planner::plan::{Preemption, PreemptionReason};
    use muster_planner::{GangId, GangPhase};
    Arc::new(
        |s: &muster_planner::Snapshot, p: &muster_planner::Policy, now| {
            let first = GangId::new("team-a/first");
            let second = GangId::new("team-a/second");
            let phase = |id: &GangId| s.gangs.iter().find(|g| &g.id == id).map(|g| g.phase);
            let mut plan = support::stub_planner::plan(s, p, now);
            if phase(&first) == Some(GangPhase::Running)
                && phase(&second).is_some_and(|ph| ph.pending())
            {
                plan.admissions.clear();
                plan.launches.clear();
                plan.preemptions.push(Preemption {
                    victim: first.clone(),
                    for_gang: second.clone(),
                    reason: PreemptionReason::WithinQueue,
                    message: "room for team-a/second".into(),
                });
            }
            if phase(&second).is_some() {
                // neither is admitted again: the test looks at one preemption
                plan.admissions
                    .retain(|a| a.gang != second && a.gang != first);
                plan.launches
                    .retain(|l| l.gang != second && l.gang != first);
            }
            plan
        },
    )
}

/// Intent before action for gangs as for machines: the Gang's status
/// records an admission before its Job is unsuspended, and an eviction
/// before its Job is suspended, so a process killed between the two leaves
/// a Gang that says what its Job is to become (the next process's workload
/// life cycle carries it out) rather than a running Job whose Gang says
/// `Queued`, or a stopping one whose Gang says `Admitted`. A preemption
/// requeues at once and is not counted in `evictions`.
#[tokio::test]
async fn gang_status_is_written_before_its_job() {
    let (server, client) = start_world(&["--audit-level", "Request"]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, preempting_planner());
    job("first").queue("team-a").create(&client).await;
    wait_for_running_pods(&client, NS, "job-name=first", 1, 20).await;
    wait_for_gang_phase(&client, NS, "first", &["Running"], 10).await;
    job("second").queue("team-a").create(&client).await;
    wait_for_job_suspended(&client, NS, "first", 20).await;
    let st = eventually(10, "first evicted", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "first").await?;
            (g.data["status"]["phase"] != "Running").then(|| g.data["status"].clone())
        }
    })
    .await;

    let log = server.audited_writes("controller");
    let gang_phase_at = |phase: &str, after| gang_phase_written(&log, "first", phase, after);
    let job_suspend_at = |value, after| job_suspend_written(&log, "first", value, after);
    let admitted = gang_phase_at("Admitted", 0).expect("Gang set Admitted");
    let unsuspended = job_suspend_at(false, 0).expect("Job unsuspended");
    assert!(
        admitted < unsuspended,
        "the Gang was set Admitted (write {admitted}) after its Job was unsuspended (write {unsuspended})"
    );
    let evicted = gang_phase_at("Evicted", unsuspended).expect("Gang set Evicted");
    let suspended = job_suspend_at(true, unsuspended).expect("Job suspended again");
    assert!(
        evicted < suspended,
        "the Gang was set Evicted (write {evicted}) after its Job was suspended (write {suspended})"
    );
    assert_eq!(st["evictions"].as_i64().unwrap_or(0), 0, "{st}");
    assert!(st["requeueAfter"].is_string(), "{st}");
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

#[tokio::test]
async fn pods_not_ready_in_time_evict_the_whole_gang() {
    let (server, client) = start_world(&["--audit-level", "Request"]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    // no emulator: the admitted pods never run; the queue allows them 1 s
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "1s"})).await;
    let _ctl = start(&server, &cloud, stub());
    job("stuck").queue("team-a").pods(2).create(&client).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    eventually(10, "admitted", || {
        let jobs = jobs.clone();
        async move { (jobs.get("stuck").await.ok()?.spec?.suspend == Some(false)).then_some(()) }
    })
    .await;
    let st = eventually(15, "evicted", || {
        let client = client.clone();
        async move {
            let g = gang(&client, NS, "stuck").await?;
            (g.data["status"]["phase"] == "Evicted").then(|| g.data["status"].clone())
        }
    })
    .await;
    assert_eq!(st["evictions"], 1);
    assert_eq!(st["reason"], "PodsReadyTimeout");
    assert!(st["requeueAfter"].is_string());
    // the Gang records the eviction first; the Job's stop follows
    let job = eventually(10, "the stop finished", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("stuck").await.ok()?;
            let done = j.spec.as_ref()?.suspend == Some(true) && !pinned_to_gang(&j);
            done.then_some(j)
        }
    })
    .await;
    assert!(
        !job.annotations().contains_key("muster.dev/admitted-nodes"),
        "admission record removed"
    );
    let tmpl = job.spec.expect("spec").template.spec.expect("pod spec");
    assert!(tmpl.affinity.is_none(), "submitted template restored");
    // the Gang records the eviction before its Job is stopped
    let log = server.audited_writes("controller");
    let unsuspended = job_suspend_written(&log, "stuck", false, 0).expect("Job unsuspended");
    let evicted = gang_phase_written(&log, "stuck", "Evicted", unsuspended).expect("Gang Evicted");
    let suspended = job_suspend_written(&log, "stuck", true, unsuspended).expect("Job suspended");
    assert!(
        evicted < suspended,
        "the Gang was set Evicted (write {evicted}) after its Job was suspended (write {suspended})"
    );
}

/// An admitted gang whose pods never run is evicted: its Job is suspended,
/// `startTime` is cleared through the status subresource and the submitted
/// template is restored, in that order; after the backoff it is admitted
/// again (pinned while suspended, then unsuspended) and runs.
#[tokio::test]
async fn eviction_then_readmission() {
    let (server, client) = start_world(&[]).await;
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(None);
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "1s"})).await;
    let _ctl = start_configured(&server, &cloud, stub(), |c| {
        c.policy.requeue_backoff_base = muster_planner::Dur::secs(2)
    });
    job("again").queue("team-a").create(&client).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    eventually(10, "admitted", || {
        let jobs = jobs.clone();
        async move { (jobs.get("again").await.ok()?.spec?.suspend == Some(false)).then_some(()) }
    })
    .await;
    wait_for_gang_phase(&client, NS, "again", &["Evicted"], 15).await;
    // the stop finished: suspended, startTime cleared, template restored, no marks
    let job = eventually(10, "the stop finished", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("again").await.ok()?;
            let done = j.spec.as_ref()?.suspend == Some(true)
                && j.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .is_none()
                && !pinned_to_gang(&j);
            done.then_some(j)
        }
    })
    .await;
    for a in [
        "muster.dev/stopping",
        "muster.dev/admitted-nodes",
        "muster.dev/original-template",
    ] {
        assert!(!job.annotations().contains_key(a), "{a} left on the Job");
    }
    let requests = server.audited("controller");
    let status_patch = requests
        .iter()
        .position(|(v, g, r, _)| v == "patch" && g == "batch" && r == "jobs/status")
        .expect("startTime cleared through jobs/status");
    // the restore is a merge patch of what the pin changed (so a pod field
    // muster's types do not know is kept), the last write of the Job
    let restore = requests
        .iter()
        .rposition(|(v, g, r, _)| v == "patch" && g == "batch" && r == "jobs")
        .expect("template restored by a patch");
    assert!(
        status_patch < restore,
        "startTime is cleared before the template changes"
    );
    // now pods run: the gang is admitted again after its backoff and runs
    patch_queue(&client, "team-a", json!({"podsReadyTimeout": "60s"})).await;
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    wait_for_running_pods(&client, NS, "job-name=again", 1, 30).await;
    let job = jobs.get("again").await.expect("job");
    assert!(pinned_to_gang(&job), "re-pinned");
    assert_eq!(
        job.annotations()
            .get("muster.dev/admitted-nodes")
            .map(String::as_str),
        Some("gpu-0")
    );
    wait_for_gang_phase(&client, NS, "again", &["Running"], 10).await;
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}
