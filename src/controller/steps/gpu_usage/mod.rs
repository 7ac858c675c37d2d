//! Idle detection, the driver's part: reads the DCGM exporter's
//! `DCGM_FI_DEV_GPU_UTIL` from Prometheus every `--prometheus-interval`,
//! maps each GPU series to the gang whose pod uses it, and hands the
//! planner one utilisation series per gang (the busiest GPU of the gang at
//! each step). The planner decides who is idle ([`muster_planner::idle`]);
//! [`report`] writes what it decided: the Gang's `GPUsIdle` condition and an
//! Event. Evictions go through the Gang life cycle's one eviction path
//! (`act::reconcile::gang_status`).
//!
//! Label names are dcgm-exporter's (`internal/pkg/transformation/const.go`
//! in NVIDIA/dcgm-exporter): with its Kubernetes mapping on, a GPU in use by
//! a pod carries `namespace`, `pod` and `container`; every series carries
//! `gpu`, `UUID`, `device`, `modelName` and `Hostname`. A Prometheus that
//! scrapes the exporter through a ServiceMonitor without `honorLabels`
//! renames the first two to `exported_namespace` and `exported_pod`; both
//! spellings are read. A series without a pod is attributed by `Hostname`
//! (the node name, when the exporter runs with `NODE_NAME`) to the one gang
//! holding that node, if exactly one does.
//!
//! Prometheus unreachable: `muster_gpu_utilization_up` is 0, the error is
//! counted and logged once per read, the previous samples are kept (the
//! planner judges nobody on stale data), and the next read waits for the
//! interval: never a crash, never a tight loop.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use kube::ResourceExt;
use muster_planner::{GangId, GangUtilization, Snapshot, Time, UtilSample, plan::IdleGang};

use crate::controller::base::conditions::ConditionType;
use crate::controller::base::metrics::{IdleLabels, ReasonLabels};
use crate::controller::base::objects::Kind;
use crate::controller::base::reasons::NOT_IDLE;
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::observe::prometheus::{self, Endpoint, Series};
use crate::controller::translate::node::pod_job;

/// The metric read.
pub(crate) const METRIC: &str = "DCGM_FI_DEV_GPU_UTIL";

/// The last utilisation read and when it was made.
#[derive(Debug, Default)]
pub(crate) struct Cache(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    last_read: Option<Instant>,
    samples: Vec<GangUtilization>,
}

/// Puts the utilisation observed per gang into the snapshot, reading
/// Prometheus first when the interval has passed. Does nothing without
/// `--prometheus-url` or without a queue that has an idle policy.
pub(crate) async fn gather(
    ctx: &Ctx,
    cache: &Cache,
    observed: &Observed,
    snapshot: &mut Snapshot,
    now: Time,
) {
    let Some(url) = ctx.config.prometheus_url.as_deref() else {
        return;
    };
    let Some(window) = snapshot
        .queues
        .iter()
        .filter_map(|q| q.idle_policy.as_ref().map(|p| p.window))
        .max()
    else {
        return;
    };
    let due = {
        let st = cache.0.lock().unwrap_or_else(|e| e.into_inner());
        st.last_read
            .is_none_or(|t| t.elapsed() >= ctx.config.prometheus_interval)
    };
    if due {
        {
            let mut st = cache.0.lock().unwrap_or_else(|e| e.into_inner());
            st.last_read = Some(Instant::now());
        }
        let step = ctx.config.prometheus_step.as_secs().max(1);
        let start = now.0 - i64::try_from(window.as_secs() + step).unwrap_or(i64::MAX / 2);
        let read = match Endpoint::parse(url) {
            Ok(ep) => {
                prometheus::query_range(
                    &ep,
                    METRIC,
                    start,
                    now.0,
                    step,
                    ctx.config
                        .api_timeout
                        .max(std::time::Duration::from_secs(10)),
                )
                .await
            }
            Err(e) => Err(e),
        };
        let m = &ctx.deps.metrics;
        match read {
            Ok(series) => {
                m.gpu_utilization_up.set(1);
                let samples = by_gang(&series, observed, snapshot);
                tracing::debug!(
                    series = series.len(),
                    gangs = samples.len(),
                    "GPU utilisation read"
                );
                let mut st = cache.0.lock().unwrap_or_else(|e| e.into_inner());
                st.samples = samples;
            }
            Err(e) => {
                m.gpu_utilization_up.set(0);
                m.gpu_utilization_errors
                    .get_or_create(&ReasonLabels {
                        reason: e.as_str().to_string(),
                    })
                    .inc();
                tracing::warn!(
                    url,
                    reason = e.as_str(),
                    error = %e,
                    retry_in = ?ctx.config.prometheus_interval,
                    "could not read GPU utilisation; no gang is judged idle until it can"
                );
            }
        }
    }
    let st = cache.0.lock().unwrap_or_else(|e| e.into_inner());
    snapshot.gpu_utilization = st.samples.clone();
}

/// The (namespace, pod) of a series: dcgm-exporter's labels, or their
/// `exported_` spelling after a scrape that did not honour them.
fn pod_of(labels: &BTreeMap<String, String>) -> Option<(&str, &str)> {
    let get = |k: &str| {
        labels
            .get(&format!("exported_{k}"))
            .or_else(|| labels.get(k))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    Some((get("namespace")?, get("pod")?))
}

/// One utilisation series per gang: at each instant, the busiest of the
/// gang's GPUs.
pub(crate) fn by_gang(
    series: &[Series],
    observed: &Observed,
    snapshot: &Snapshot,
) -> Vec<GangUtilization> {
    // pod → gang, through the pod's Job
    let mut pods: BTreeMap<(&str, &str), GangId> = BTreeMap::new();
    for p in &observed.pods {
        if let (Some(ns), Some(name), Some((jns, job))) = (
            p.metadata.namespace.as_deref(),
            p.metadata.name.as_deref(),
            pod_job(p),
        ) {
            pods.insert((ns, name), GangId::new(format!("{jns}/{job}")));
        }
    }
    // node → the one gang holding it
    let mut holders: BTreeMap<&str, Vec<&GangId>> = BTreeMap::new();
    for g in snapshot.gangs.iter().filter(|g| g.phase.holds_capacity()) {
        for a in &g.assignments {
            let h = holders.entry(a.node.as_str()).or_default();
            if !h.contains(&&g.id) {
                h.push(&g.id);
            }
        }
    }
    let mut per_gang: BTreeMap<GangId, BTreeMap<i64, f64>> = BTreeMap::new();
    for s in series {
        let gang = match pod_of(&s.labels) {
            Some(key) => pods.get(&key).cloned(),
            None => s
                .labels
                .get("Hostname")
                .and_then(|h| holders.get(h.as_str()))
                .filter(|h| h.len() == 1)
                .map(|h| h[0].clone()),
        };
        let Some(gang) = gang else {
            continue;
        };
        let at = per_gang.entry(gang).or_default();
        for &(t, v) in &s.values {
            let e = at.entry(t).or_insert(v);
            // the busiest GPU counts; a value that is not a number wins (busy)
            if v.is_nan() || v > *e {
                *e = v;
            }
        }
    }
    per_gang
        .into_iter()
        .map(|(gang, at)| GangUtilization {
            gang,
            samples: at
                .into_iter()
                .map(|(t, percent)| UtilSample {
                    at: Time(t),
                    percent,
                })
                .collect(),
        })
        .collect()
}

/// Writes the planner's idle verdicts: `GPUsIdle=True` with the verdict's
/// reason and message on each idle gang (and a Warning Event when that is
/// new), `GPUsIdle=False` on gangs that had it and are no longer idle; and
/// the idle gangs gauge.
pub(crate) async fn report(ctx: &Ctx, idle: &[IdleGang], observed: &Observed, now: Time) {
    let m = &ctx.deps.metrics;
    m.idle_gangs.clear();
    for i in idle {
        m.idle_gangs
            .get_or_create(&IdleLabels {
                queue: i.queue.clone(),
                reason: i.reason.as_str().to_string(),
            })
            .inc();
    }
    for obj in observed.of(Kind::Gang) {
        let id = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
        let verdict = idle.iter().find(|i| i.gang.as_str() == id);
        let current = crate::controller::base::api::conditions(obj)
            .into_iter()
            .find(|c| c.type_ == ConditionType::GpusIdle.as_str());
        let cond = match verdict {
            Some(v) => crate::controller::base::api::condition(
                ConditionType::GpusIdle,
                true,
                v.reason.as_str(),
                v.message.clone(),
                now,
                obj.metadata.generation,
            ),
            // an evicted or stopped gang keeps the condition that says why
            None if running(obj)
                && current
                    .as_ref()
                    .is_some_and(|c| c.status == muster_crds::common::ConditionStatus::True) =>
            {
                crate::controller::base::api::condition(
                    ConditionType::GpusIdle,
                    false,
                    NOT_IDLE,
                    "running and no longer judged idle: its GPUs were busy again, or there is no fresh utilisation data".to_string(),
                    now,
                    obj.metadata.generation,
                )
            }
            None => continue,
        };
        // the message's figures grow while the gang stays idle; the
        // transition time is when the status last changed
        let mut cond = cond;
        if let Some(c) = current.as_ref().filter(|c| c.status == cond.status) {
            cond.last_transition_time = c.last_transition_time.clone();
        }
        let newly = verdict.is_some()
            && !current.as_ref().is_some_and(|c| {
                c.status == muster_crds::common::ConditionStatus::True && c.reason == cond.reason
            });
        let Some(next) = crate::controller::base::api::with_condition(obj, cond) else {
            continue;
        };
        let ns = obj.namespace();
        if let Err(e) = crate::controller::base::api::patch_status(
            &ctx.client,
            Kind::Gang,
            ns.as_deref(),
            &obj.name_any(),
            serde_json::json!({"conditions": next}),
        )
        .await
        {
            tracing::warn!(gang = %id, error = %e, "could not write the GPUsIdle condition");
            continue;
        }
        if let (true, Some(v)) = (newly, verdict) {
            ctx.events
                .warn(Kind::Gang, obj, v.reason.as_str(), v.message.clone())
                .await;
        }
    }
}

fn running(obj: &kube::api::DynamicObject) -> bool {
    obj.data
        .get("status")
        .and_then(|s| s.get("phase"))
        .is_some_and(|p| p == "Running")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pods_are_read_from_either_spelling() {
        let l = labels(&[
            ("gpu", "0"),
            ("namespace", "ns"),
            ("pod", "p"),
            ("Hostname", "n"),
        ]);
        assert_eq!(pod_of(&l), Some(("ns", "p")));
        let l = labels(&[
            ("namespace", "monitoring"),
            ("pod", "dcgm-exporter-x"),
            ("exported_namespace", "ns"),
            ("exported_pod", "p"),
        ]);
        assert_eq!(pod_of(&l), Some(("ns", "p")));
        // a GPU no pod uses: empty labels
        let l = labels(&[("namespace", ""), ("pod", ""), ("Hostname", "n")]);
        assert_eq!(pod_of(&l), None);
    }

    #[test]
    fn series_go_to_the_gang_of_their_pod_busiest_gpu_first() {
        use crate::controller::workloads::pod::CachedPod;
        use muster_planner::{Assignment, Gang, GangPhase};
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "train-0-abc", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1"}]}
        }))
        .expect("pod");
        let observed = Observed {
            pods: vec![std::sync::Arc::new(CachedPod::from(pod))],
            ..Observed::default()
        };
        let mut holder = Gang::new(GangId::new("ns/whole-node"), "q", Time(0), Vec::new());
        holder.phase = GangPhase::Running;
        holder.assignments = vec![Assignment {
            pod_set: "main".into(),
            index: 0,
            node: "gpu-1".into(),
        }];
        let snapshot = Snapshot {
            gangs: vec![holder],
            ..Snapshot::default()
        };
        let series = |l: &[(&str, &str)], values: Vec<(i64, f64)>| Series {
            labels: labels(l),
            values,
        };
        let got = by_gang(
            &[
                series(
                    &[("gpu", "0"), ("namespace", "ns"), ("pod", "train-0-abc")],
                    vec![(60, 3.0), (120, 1.0)],
                ),
                series(
                    &[("gpu", "1"), ("namespace", "ns"), ("pod", "train-0-abc")],
                    vec![(60, 40.0), (120, f64::NAN)],
                ),
                // no pod: the one gang holding the node named by Hostname
                series(
                    &[
                        ("gpu", "0"),
                        ("namespace", ""),
                        ("pod", ""),
                        ("Hostname", "gpu-1"),
                    ],
                    vec![(60, 0.0)],
                ),
                // a pod of no known Job, a node nobody holds: dropped
                series(
                    &[("gpu", "2"), ("namespace", "ns"), ("pod", "other")],
                    vec![(60, 0.0)],
                ),
                series(&[("gpu", "3"), ("Hostname", "gpu-9")], vec![(60, 0.0)]),
            ],
            &observed,
            &snapshot,
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].gang.as_str(), "ns/train");
        assert_eq!(
            got[0].samples[0],
            UtilSample {
                at: Time(60),
                percent: 40.0
            }
        );
        assert!(
            got[0].samples[1].percent.is_nan(),
            "not a number counts as busy"
        );
        assert_eq!(got[1].gang.as_str(), "ns/whole-node");
        assert_eq!(
            got[1].samples,
            vec![UtilSample {
                at: Time(60),
                percent: 0.0
            }]
        );
    }
}
