//! The workload: gangs of 1–8 one-GPU pods (a Job each) arriving over time,
//! a share of them of low priority, in the queue that borrows, and running
//! longer (the gangs the other queue's reclaim preempts, whole); a watcher of partial gangs; the
//! final reading of every Job.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::Rng;
use super::world::{LOW_QUEUE, NAMESPACE, QUEUE};
use crate::support::emulator::RUN_FOR_ANNOTATION;

/// One gang: Job name, pods, arrival after the start.
#[derive(Debug, Clone)]
pub struct Gang {
    /// Job name.
    pub name: String,
    /// Pods (= nodes, one GPU each).
    pub pods: u32,
    /// When it arrives.
    pub at: Duration,
    /// Of low priority, in [`LOW_QUEUE`], running [`LOW_RUN_FOR`].
    pub low: bool,
}

/// Priority (`muster.dev/priority`) of most gangs.
pub const HIGH_PRIORITY: &str = "10";
/// Priority of the low-priority share.
pub const LOW_PRIORITY: &str = "0";
/// How long the pods of a low-priority gang run.
pub const LOW_RUN_FOR: Duration = Duration::from_secs(4);

/// `n` gangs of 1–8 pods arriving uniformly over `over`, sorted by arrival.
pub fn gangs(n: usize, over: Duration, seed: u64) -> Vec<Gang> {
    mixed(n, over, seed, 0.0)
}

/// [`gangs`], each of low priority with probability `low_share`.
pub fn mixed(n: usize, over: Duration, seed: u64, low_share: f64) -> Vec<Gang> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<Gang> = (0..n)
        .map(|i| Gang {
            name: format!("g-{i:04}"),
            pods: 1 + rng.below(8) as u32,
            at: over.mul_f64(rng.unit()),
            low: false,
        })
        .collect();
    for g in &mut out {
        g.low = rng.unit() < low_share;
    }
    out.sort_by_key(|g| g.at);
    out
}

/// Submits each gang at its time (suspended and labelled, as the webhook
/// would leave it).
pub async fn submit(client: kube::Client, gangs: Vec<Gang>) {
    let jobs: Api<Job> = Api::namespaced(client, NAMESPACE);
    let t0 = Instant::now();
    for g in gangs {
        if let Some(wait) = g.at.checked_sub(t0.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let (queue, priority, pod_annotations) = if g.low {
            let ms = LOW_RUN_FOR.as_millis().to_string();
            (LOW_QUEUE, LOW_PRIORITY, json!({RUN_FOR_ANNOTATION: ms}))
        } else {
            (QUEUE, HIGH_PRIORITY, json!({}))
        };
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": g.name, "namespace": NAMESPACE,
                "labels": {"muster.dev/queue": queue},
                "annotations": {"muster.dev/priority": priority}},
            "spec": {"parallelism": g.pods, "completions": g.pods, "suspend": true,
                "template": {"metadata": {"annotations": pod_annotations},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "w", "image": "trainer",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1", "memory": "1Gi"}}
                }], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}
        }))
        .expect("job");
        let pp = PostParams::default();
        crate::support::retry_transient(|| jobs.create(&pp, &job))
            .await
            .expect("submit");
    }
}

/// Whether a Job finished (Complete=True).
pub fn complete(j: &Job) -> bool {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Gangs seen partly running (some pods Running, the rest neither Running
/// nor done) for longer than `grace`, with the longest such stretch.
#[derive(Debug, Default)]
pub struct Partial {
    since: BTreeMap<String, Instant>,
    /// Job → longest partial stretch beyond the grace.
    pub found: BTreeMap<String, Duration>,
}

impl Partial {
    /// One look at the Jobs and pods.
    pub async fn sample(&mut self, client: &kube::Client, grace: Duration) {
        let Ok(pods) = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await
        else {
            return;
        };
        let Ok(jobs) = Api::<Job>::namespaced(client.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await
        else {
            return;
        };
        let mut running: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for p in &pods.items {
            let Some(job) = p.metadata.labels.as_ref().and_then(|l| l.get("job-name")) else {
                continue;
            };
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            let e = running.entry(job.clone()).or_default();
            if p.metadata.deletion_timestamp.is_none() && phase == Some("Running") {
                e.0 += 1;
            }
            if phase == Some("Succeeded") {
                e.1 += 1;
            }
        }
        let now = Instant::now();
        for j in &jobs.items {
            let name = j.metadata.name.clone().unwrap_or_default();
            let want = j.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1) as u32;
            let (run, done) = running.get(&name).copied().unwrap_or_default();
            let partial = !complete(j) && run > 0 && run + done < want;
            if partial {
                let since = *self.since.entry(name.clone()).or_insert(now);
                let d = now - since;
                if d > grace {
                    let e = self.found.entry(name).or_default();
                    *e = (*e).max(d);
                }
            } else {
                self.since.remove(&name);
            }
        }
    }
}
