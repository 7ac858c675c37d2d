//! GPU-hours over the last 24 hours survive a restart: the hourly buckets a
//! previous leader wrote to the GPUQueue's `status.gpuHoursByHour` are read
//! back by the next controller, which goes on counting from them instead of
//! from zero. The real `kube::Client` against the API test server, the
//! controller in-process, the kubelet emulator.

mod support;

use std::sync::Arc;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::emulator::Emulator;
use support::fake_cloud::FakeCloud;
use support::objects::{gpu_node, job, start_world};
use support::{ar, eventually};

fn hour_start(secs_ago: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let t = (now - secs_ago).div_euclid(3600) * 3600;
    muster::controller::base::time::format(muster_planner::Time(t))
}

async fn queue_status(client: &kube::Client) -> Value {
    Api::<DynamicObject>::all_with(client.clone(), &ar("GPUQueue", "gpuqueues"))
        .get("team-a")
        .await
        .expect("queue")
        .data["status"]
        .clone()
}

fn cycles(text: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with("muster_planning_cycles_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn gpu_hours_of_the_last_day_survive_a_restart() {
    let (server, client) = start_world(&[]).await;
    // what a controller that led before wrote: this hour, three hours ago,
    // and a bucket older than a day (no longer counted)
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &ar("GPUQueue", "gpuqueues"));
    queues
        .patch_status(
            "team-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"gpuHoursByHour": [
                {"hour": hour_start(30 * 3600), "gpuHours": "1.0"},
                {"hour": hour_start(3 * 3600), "gpuHours": "2.5"},
                {"hour": hour_start(0), "gpuHours": "5.0"},
            ]}})),
        )
        .await
        .expect("seed status");
    gpu_node("gpu-0").create(&client).await;
    let cloud = FakeCloud::new(Some(client.clone()));
    let _emu = Emulator::start(client.clone(), vec![cloud.clone()]);
    let planner = muster::controller::real_planner();
    let first = support::in_process::spawn(
        &server.client_as("controller"),
        &cloud,
        planner.clone(),
        support::in_process::config("c1"),
    );
    job("train")
        .queue("team-a")
        .gpus(8)
        .requests("1", "1Gi")
        .create(&client)
        .await;
    // the first controller reads the buckets back and counts on: 5.0 + 2.5
    // (+ what the running gang adds)
    let st = eventually(60, "gpuHoursLast24h from the status and the gang", || {
        let client = client.clone();
        async move {
            let st = queue_status(&client).await;
            let h: f64 = st["gpuHoursLast24h"].as_str()?.parse().ok()?;
            (h >= 7.5 && st["runningGangs"] == 1).then_some(st)
        }
    })
    .await;
    let buckets = st["gpuHoursByHour"].as_array().expect("buckets").clone();
    assert_eq!(
        buckets.len(),
        2,
        "the day-old bucket is dropped: {buckets:?}"
    );
    assert_eq!(buckets[0]["gpuHours"], "2.5");
    assert_eq!(buckets[0]["hour"], hour_start(3 * 3600).as_str());
    let before: f64 = st["gpuHoursLast24h"]
        .as_str()
        .and_then(|h| h.parse().ok())
        .expect("figure");
    // a restart: the first controller stops, a fresh one (empty memory) leads
    drop(first);
    let second = support::in_process::spawn(
        &server.client_as("controller"),
        &cloud,
        planner,
        support::in_process::config("c2"),
    );
    eventually(30, "the new controller planning", || {
        let m = second.metrics.clone();
        async move { (cycles(&m.encode()) >= 3.0).then_some(()) }
    })
    .await;
    let st = queue_status(&client).await;
    let after: f64 = st["gpuHoursLast24h"]
        .as_str()
        .and_then(|h| h.parse().ok())
        .expect("figure");
    assert!(
        after >= before,
        "{after} after the restart, {before} before: {st}"
    );
    assert_eq!(st["gpuHoursByHour"][0]["gpuHours"], "2.5", "{st}");
    let _ = Arc::clone(&second.metrics);
}
