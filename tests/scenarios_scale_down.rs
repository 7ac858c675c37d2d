//! Scale-down and disruption: empty nodes removed after `consolidateAfter`
//! and an idle pool scaled to zero (5), a Draining PoolNode drained (gangs
//! evicted whole, PodDisruptionBudgets and `do-not-disrupt` honoured),
//! orphan instances collected, a spot interruption, a node of a running
//! gang lost, and a PoolNode deleted by hand.
//!
//! Each runs the real `kube::Client` over HTTP against the API test server,
//! the controller in-process on a fake cloud, and the kubelet / scheduler
//! emulator.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use muster::controller;
use serde_json::json;
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{TEAM_A as NS, job, pdb, pod, start_world};
use support::scenario::{start, start_configured, stub};
use support::waits::{
    assert_no_invalid_writes, events_of, gang_phase, node_of, patch_pool, poolnodes, running_pods,
    wait_for_gang_phase, wait_for_job_suspended, wait_for_no_poolnodes, wait_for_poolnode_gone,
    wait_for_poolnode_phase, wait_for_running_pods,
};
use support::{ar, eventually};

// ---------------------------------------------------------------- (5)

/// Scenario (5): a Job runs and completes, its nodes go empty and are
/// removed (PoolNode `Draining` with the removal's reason, then deleted: the
/// finalizer terminates the instance and deletes the Node), no sooner than
/// `wait` after the Job completed, until the pool has no node left.
async fn scenario_scale_down(disruption: serde_json::Value, reason: &str, wait: Duration) {
    scale_down_after(&[("short", 2)], disruption, reason, wait).await;
}

/// [`scenario_scale_down`] with `jobs` (name, pods of 8 GPUs each): two
/// machines in all.
async fn scale_down_after(
    jobs: &[(&str, i32)],
    disruption: serde_json::Value,
    reason: &str,
    wait: Duration,
) {
    let (server, client) = start_world(&[]).await;
    patch_pool(&client, "a100", json!({"disruption": disruption})).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let emu = Emulator::start_running_for(
        client.clone(),
        vec![cloud.clone() as Arc<dyn support::emulator::Machines>],
        Some(Duration::from_secs(1)),
    );
    let _ctl = start(&server, &cloud, controller::real_planner());
    for (name, pods) in jobs {
        job(name)
            .queue("team-a")
            .pods(*pods)
            .gpus(8)
            .create(&client)
            .await;
    }
    eventually(60, "the Jobs completed", || {
        let seen = emu.seen.clone();
        async move {
            let seen = seen.lock().expect("seen");
            jobs.iter()
                .all(|(name, _)| seen.completed.contains(*name))
                .then_some(())
        }
    })
    .await;
    let completed = std::time::Instant::now();
    // every pod ran, on the two machines bought for them
    let ran = {
        let seen = emu.seen.lock().expect("seen");
        jobs.iter()
            .map(|(name, _)| {
                seen.started
                    .keys()
                    .filter(|p| p.starts_with(&format!("{NS}/{name}-")))
                    .count()
            })
            .collect::<Vec<_>>()
    };
    let pods: Vec<usize> = jobs
        .iter()
        .map(|(_, n)| usize::try_from(*n).unwrap_or(0))
        .collect();
    assert_eq!(ran, pods, "pods run per Job");
    assert_eq!(cloud.instances().len(), 2, "two machines bought");
    for (name, _) in jobs {
        wait_for_gang_phase(&client, NS, name, &["Finished"], 10).await;
    }
    // a removal is written as Draining with its reason before the node goes
    let draining = wait_for_poolnode_phase(&client, "Draining", 30).await;
    assert_eq!(draining.data["status"]["reason"], reason, "{draining:?}");
    assert!(
        completed.elapsed() + Duration::from_millis(300) >= wait,
        "removed {:?} after the Job completed, before {wait:?}",
        completed.elapsed()
    );
    wait_for_no_poolnodes(&client, 60).await;
    // every instance terminated, every muster Node deleted
    let instances = cloud.instances();
    assert_eq!(instances.len(), 2);
    assert!(
        instances
            .iter()
            .all(|i| i.instance.state == muster_provider_api::InstanceState::Terminated),
        "{instances:?}"
    );
    let nodes = eventually(10, "Nodes deleted", || {
        let client = client.clone();
        async move {
            let left = Api::<Node>::all(client)
                .list(&ListParams::default().labels("muster.dev/poolnode"))
                .await
                .expect("nodes")
                .items;
            left.is_empty().then_some(left)
        }
    })
    .await;
    assert!(nodes.is_empty());
    let removals = events_of(&client, reason).await.len();
    assert_eq!(removals, 2, "one {reason} Event per node");
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

#[tokio::test]
async fn s5_empty_nodes_removed_after_consolidate_after() {
    scenario_scale_down(
        json!({"consolidateAfter": "2s", "scaleToZeroAfter": "1h", "keepWarm": {"window": "0s"}}),
        "Empty",
        Duration::from_secs(2),
    )
    .await;
}

/// With warm capacity, the two empty 8-GPU nodes two finished one-machine
/// Jobs used are kept past `consolidateAfter` while their arrivals are in
/// the pool's window (each asked for one machine of that size), and removed
/// as Empty once they are not: at least 30 s after the Gangs were created,
/// so well after the Jobs completed. (A gang over several machines asks
/// for no warm machines: planner case
/// `warm/a-gang-over-several-machines-keeps-none`.)
#[tokio::test]
async fn s5_warm_nodes_kept_while_their_arrivals_are_in_the_window() {
    scale_down_after(
        &[("warm-a", 1), ("warm-b", 1)],
        json!({"consolidateAfter": "2s", "scaleToZeroAfter": "1h", "keepWarm": {"window": "30s", "burst": "30s"}}),
        "Empty",
        Duration::from_secs(10),
    )
    .await;
}

#[tokio::test]
async fn s5_idle_pool_scaled_to_zero_after_scale_to_zero_after() {
    scenario_scale_down(
        json!({"consolidateAfter": "1h", "scaleToZeroAfter": "3s"}),
        "ScaleToZero",
        Duration::from_secs(3),
    )
    .await;
}

// ---------------------------------------------------------------- disruption

/// A Draining PoolNode is drained the way a user expects: the Node is
/// cordoned, a gang on it is evicted whole (its Job suspended again), other
/// pods go through the Eviction API and wait for their PodDisruptionBudget,
/// a `muster.dev/do-not-disrupt` pod is never evicted, and the PoolNode goes
/// (instance terminated, Node deleted) only when nothing but those is left.
#[tokio::test]
async fn draining_evicts_gangs_whole_honours_pdbs_and_do_not_disrupt() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, stub());
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 20).await;
    let node = pn.data["status"]["nodeName"]
        .as_str()
        .expect("nodeName")
        .to_string();
    wait_for_running_pods(&client, NS, "job-name=one", 1, 20).await;
    // two pods that are not muster's, running and Ready on the node
    pod("web")
        .label("app", "web")
        .on_node(&node)
        .create_running(&client)
        .await;
    pod("keep")
        .label("app", "keep")
        .annotation("muster.dev/do-not-disrupt", "true")
        .on_node(&node)
        .create_running(&client)
        .await;
    pdb("web")
        .min_available(1)
        .selecting("app", "web")
        .create(&client)
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    // the plan's removal, as the removals executor records it
    Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .patch_status(
            &pn.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Draining", "reason": "Underutilized"}})),
        )
        .await
        .expect("draining");
    // cordoned; the gang evicted whole
    eventually(20, "the Node cordoned", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            let n = Api::<Node>::all(client).get(&node).await.ok()?;
            n.spec?.unschedulable.filter(|u| *u)
        }
    })
    .await;
    wait_for_gang_phase(&client, NS, "one", &["Evicted"], 20).await;
    wait_for_job_suspended(&client, NS, "one", 20).await;
    eventually(20, "the gang's pod gone from the node", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            let left = Api::<Pod>::namespaced(client, NS)
                .list(&ListParams::default().labels("job-name=one"))
                .await
                .ok()?
                .items;
            (!left.iter().any(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
            }))
            .then_some(())
        }
    })
    .await;
    // the budget holds the web pod; do-not-disrupt holds the other
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        pods.get_opt("web").await.expect("get").is_some(),
        "the PDB holds web"
    );
    assert!(pods.get_opt("keep").await.expect("get").is_some());
    let exists = |pns: Vec<DynamicObject>| pns.iter().any(|p| p.name_any() == pn.name_any());
    assert!(exists(poolnodes(&client).await), "the PoolNode waits");
    let blocked: Vec<String> = events_of(&client, "DrainBlocked")
        .await
        .into_iter()
        .filter_map(|e| e.note)
        .collect();
    assert!(
        blocked
            .iter()
            .any(|n| n.contains("team-a/keep") && n.contains("do-not-disrupt")),
        "{blocked:?}"
    );
    // the budget lifted: web is evicted through the Eviction API
    pdbs.delete("web", &Default::default())
        .await
        .expect("delete pdb");
    eventually(30, "web evicted", || {
        let pods = pods.clone();
        async move { pods.get_opt("web").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(
        pods.get_opt("keep").await.expect("get").is_some(),
        "never evicted"
    );
    assert!(
        exists(poolnodes(&client).await),
        "keep still holds the node"
    );
    // its owner removes it: the node goes
    pods.delete("keep", &Default::default())
        .await
        .expect("delete keep");
    wait_for_poolnode_gone(&client, &pn.name_any(), 20).await;
    eventually(10, "the Node deleted", || {
        let client = client.clone();
        let node = node.clone();
        async move {
            Api::<Node>::all(client)
                .get_opt(&node)
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID");
    assert!(
        cloud
            .calls()
            .iter()
            .any(|c| c.op == "terminate" && c.what == pid),
        "instance terminated"
    );
    let text = ctl.metrics.encode();
    assert!(
        text.contains(r#"muster_evictions_total{reason="NodeLost"} 1"#),
        "the gang evicted once: {text}"
    );
    // cordon, eviction and Node deletion included
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// Orphan collection terminates exactly the instances tagged for this
/// cluster that no PoolNode accounts for and that are older than the grace
/// period; a launched gang's instance and a fresh stray are kept.
#[tokio::test]
async fn orphan_collection_terminates_exactly_the_orphans() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let now = muster::controller::base::time::now();
    let old = cloud.plant(
        "stray-old",
        "test-cluster",
        now - muster_planner::Dur::secs(3600),
    );
    let fresh = cloud.plant(
        "stray-new",
        "test-cluster",
        now + muster_planner::Dur::secs(3600),
    );
    let other = cloud.plant(
        "other-cluster",
        "elsewhere",
        now - muster_planner::Dur::secs(3600),
    );
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start_configured(&server, &cloud, stub(), |c| {
        c.orphan_gc_period = Duration::from_millis(300);
        c.orphan_grace = Duration::from_secs(600);
    });
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 20).await;
    let mine = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    eventually(20, "the orphan terminated", || {
        let cloud = cloud.clone();
        let old = old.clone();
        async move {
            (cloud.state(&old) == Some(muster_provider_api::InstanceState::Terminated))
                .then_some(())
        }
    })
    .await;
    // a few more collections change nothing else
    tokio::time::sleep(Duration::from_secs(1)).await;
    for pid in [&mine, &fresh, &other] {
        assert_eq!(
            cloud.state(pid),
            Some(muster_provider_api::InstanceState::Running),
            "{pid} kept"
        );
    }
    let terminated: Vec<String> = cloud
        .calls()
        .into_iter()
        .filter(|c| c.op == "terminate")
        .map(|c| c.what)
        .collect();
    assert_eq!(terminated, [old]);
    assert!(
        ctl.metrics
            .encode()
            .contains("muster_orphans_terminated_total 1")
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

/// A spot interruption of a node a running gang holds: the PoolNode gets an
/// `Interrupted` condition and goes Draining, the gang is evicted whole and
/// requeued at once (no backoff), the node goes, and the offering is marked
/// unavailable so the gang is not launched on it again meanwhile.
#[tokio::test]
async fn spot_interruption_evicts_the_gang_and_marks_the_offering() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start_configured(&server, &cloud, controller::real_planner(), |c| {
        c.interruption_poll = Duration::from_millis(200)
    });
    job("one").queue("team-a").gpus(8).create(&client).await;
    wait_for_gang_phase(&client, NS, "one", &["Running"], 30).await;
    let pn = poolnodes(&client)
        .await
        .into_iter()
        .next()
        .expect("a PoolNode");
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    let launches = cloud.launch_calls().len();
    cloud.interrupt(
        &pid,
        muster_provider_api::InterruptionKind::SpotInterruption,
    );
    let drained = wait_for_poolnode_phase(&client, "Draining", 20).await;
    assert_eq!(drained.data["status"]["reason"], "Interrupted");
    let conds = drained.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conds.iter().any(|c| c["type"] == "Interrupted"
            && c["status"] == "True"
            && c["reason"] == "SpotInterruption"),
        "{conds:?}"
    );
    wait_for_job_suspended(&client, NS, "one", 20).await;
    wait_for_poolnode_gone(&client, &pn.name_any(), 20).await;
    // requeued at once, but the only fitting offering is marked unavailable
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        cloud.launch_calls().len(),
        launches,
        "no launch on the interrupted offering"
    );
    let phase = gang_phase(&client, NS, "one").await;
    assert!(
        matches!(phase.as_deref(), Some("Queued" | "Evicted")),
        "{phase:?}"
    );
    let text = ctl.metrics.encode();
    for line in [
        r#"muster_interruptions_total{kind="SpotInterruption"} 1"#,
        r#"muster_evictions_total{reason="SpotInterruption"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}

#[tokio::test]
async fn deleting_a_poolnode_terminates_its_instance_first() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(None);
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let _ctl = start(&server, &cloud, stub());
    job("one").queue("team-a").gpus(8).create(&client).await;
    let pn = wait_for_poolnode_phase(&client, "Ready", 20).await;
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
        .delete(&pn.name_any(), &Default::default())
        .await
        .expect("delete");
    wait_for_no_poolnodes(&client, 10).await;
    let terminated: Vec<String> = cloud
        .calls()
        .into_iter()
        .filter(|c| c.op == "terminate")
        .map(|c| c.what)
        .collect();
    assert_eq!(terminated, [pid]);
}

/// A node of a running gang is lost (the cloud ends its instance and its
/// Node is deleted): the PoolNode drains with reason `NodeLost`, the gang
/// is evicted whole at once (not left with a pod Pending for a node that
/// never comes back, since its pods are pinned to the gang's nodes by
/// name), the instance is terminated, and the gang runs again on nodes
/// that exist.
#[tokio::test]
async fn a_lost_node_requeues_its_running_gang_whole() {
    let (server, client) = start_world(&[]).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let ctl = start(&server, &cloud, controller::real_planner());
    job("two")
        .queue("team-a")
        .pods(2)
        .gpus(8)
        .create(&client)
        .await;
    wait_for_gang_phase(&client, NS, "two", &["Running"], 30).await;
    let pn = poolnodes(&client)
        .await
        .into_iter()
        .next()
        .expect("a PoolNode");
    let pid = pn.data["status"]["providerID"]
        .as_str()
        .expect("providerID")
        .to_string();
    let lost = pn.data["status"]["nodeName"]
        .as_str()
        .expect("nodeName")
        .to_string();
    cloud.fail(&pid);
    let drained = wait_for_poolnode_phase(&client, "Draining", 20).await;
    assert_eq!(drained.name_any(), pn.name_any());
    assert_eq!(drained.data["status"]["reason"], "NodeLost");
    eventually(20, "the gang evicted for its lost node", || {
        let text = ctl.metrics.encode();
        async move {
            text.contains(r#"muster_evictions_total{reason="NodeLost"} 1"#)
                .then_some(())
        }
    })
    .await;
    wait_for_poolnode_gone(&client, &pn.name_any(), 20).await;
    // the gang runs again, whole, on nodes that exist
    let pods = eventually(60, "both pods running off the lost node", || {
        let client = client.clone();
        let lost = lost.clone();
        async move {
            let pods = running_pods(&client, NS, "job-name=two").await;
            (pods.len() == 2 && pods.iter().all(|p| node_of(p) != Some(lost.as_str())))
                .then_some(pods)
        }
    })
    .await;
    for p in &pods {
        let node = node_of(p).expect("bound");
        assert!(
            Api::<Node>::all(client.clone())
                .get_opt(node)
                .await
                .expect("get")
                .is_some(),
            "{node} exists"
        );
    }
    assert!(
        cloud
            .calls()
            .iter()
            .any(|c| c.op == "terminate" && c.what == pid),
        "the lost instance terminated through the finalizer"
    );
    let events: Vec<String> = events_of(&client, "NodeLost")
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&*pn.name_any()))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        events
            .iter()
            .any(|n| n.contains(&lost) && n.contains("requeued whole")),
        "{events:?}"
    );
    server.assert_rbac_allows_controller();
    assert_no_invalid_writes();
}
