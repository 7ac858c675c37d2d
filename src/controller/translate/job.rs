//! A labelled `batch/v1` Job → the `spec` of its Gang: one pod set from
//! `parallelism` and the template's requests, `minCount` from the
//! `muster.dev/min-count` annotation.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use kube::ResourceExt;
use muster_planner::{Quantity, Resources};

use crate::controller::objects::{
    GPU_MODEL_ANNOTATION, GangSpec, MIN_COUNT_ANNOTATION, PRIORITY_ANNOTATION, PodSetSpec,
    QUEUE_LABEL,
};

/// Why a Job cannot become a Gang.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The queue label is empty.
    #[error("label {QUEUE_LABEL} is empty")]
    NoQueue,
    /// An annotation does not parse.
    #[error("annotation {0}: {1}")]
    BadAnnotation(&'static str, String),
    /// A request quantity does not parse.
    #[error("container {0}: {1}")]
    BadRequest(String, String),
}

impl JobError {
    /// Bounded reason.
    pub fn reason(&self) -> &'static str {
        match self {
            JobError::NoQueue => "NoQueue",
            JobError::BadAnnotation(..) => "InvalidAnnotation",
            JobError::BadRequest(..) => "InvalidRequests",
        }
    }
}

/// The queue a Job asks for, if it is labelled.
pub fn queue_of(job: &Job) -> Option<&str> {
    job.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(QUEUE_LABEL))
        .map(String::as_str)
}

/// The Gang spec of a labelled Job.
pub fn gang_spec(job: &Job) -> Result<GangSpec, JobError> {
    let queue = queue_of(job).unwrap_or_default().trim().to_string();
    if queue.is_empty() {
        return Err(JobError::NoQueue);
    }
    let annotations = job.annotations();
    let spec = job.spec.as_ref();
    let count = spec
        .and_then(|s| s.parallelism)
        .map(|p| u32::try_from(p.max(0)).unwrap_or(0))
        .unwrap_or(1);
    let min_count = match annotations.get(MIN_COUNT_ANNOTATION) {
        Some(v) => Some(
            v.trim()
                .parse::<u32>()
                .map_err(|e| JobError::BadAnnotation(MIN_COUNT_ANNOTATION, e.to_string()))?,
        ),
        None => None,
    };
    let priority = match annotations.get(PRIORITY_ANNOTATION) {
        Some(v) => v
            .trim()
            .parse::<i32>()
            .map_err(|e| JobError::BadAnnotation(PRIORITY_ANNOTATION, e.to_string()))?,
        None => 0,
    };
    // the Gang names one GPU model per pod set; the annotation's first entry
    let gpu_model = annotations
        .get(GPU_MODEL_ANNOTATION)
        .and_then(|v| v.split(',').map(str::trim).find(|s| !s.is_empty()))
        .map(String::from);
    let pod = spec.and_then(|s| s.template.spec.as_ref());
    let requests = pod.map(pod_requests).transpose()?.unwrap_or_default();
    Ok(GangSpec {
        queue,
        priority,
        pod_sets: vec![PodSetSpec {
            name: "main".to_string(),
            count: i32::try_from(count).unwrap_or(i32::MAX),
            min_count: min_count.map(|m| i32::try_from(m).unwrap_or(i32::MAX)),
            requests: requests
                .into_iter()
                .map(|(k, v)| (k, muster_crds::common::Quantity(v)))
                .collect(),
            node_selector: pod
                .and_then(|p| p.node_selector.clone())
                .unwrap_or_default(),
            tolerations: pod
                .and_then(|p| p.tolerations.as_ref())
                .into_iter()
                .flatten()
                .map(toleration)
                .collect(),
            affinity: None,
            gpu_model,
        }],
        topology: Default::default(),
        disruptible: false,
        expected_duration: None,
    })
}

/// A Kubernetes toleration as written in a Gang.
pub fn toleration(t: &k8s_openapi::api::core::v1::Toleration) -> muster_crds::common::Toleration {
    use muster_crds::common::{TaintEffect, TolerationOperator};
    muster_crds::common::Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        operator: match t.operator.as_deref() {
            Some("Exists") => Some(TolerationOperator::Exists),
            Some("Equal") => Some(TolerationOperator::Equal),
            _ => None,
        },
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: match t.effect.as_deref() {
            Some("NoSchedule") => Some(TaintEffect::NoSchedule),
            Some("PreferNoSchedule") => Some(TaintEffect::PreferNoSchedule),
            Some("NoExecute") => Some(TaintEffect::NoExecute),
            _ => None,
        },
        toleration_seconds: t.toleration_seconds,
    }
}

/// Effective requests of one pod: the sum over containers, or the largest
/// init container where that is larger (as kube-scheduler computes it).
pub fn pod_requests(pod: &PodSpec) -> Result<BTreeMap<String, String>, JobError> {
    let sum = containers_sum(&pod.containers)?;
    let mut out = sum.clone();
    for c in pod.init_containers.iter().flatten() {
        let one = containers_sum(std::slice::from_ref(c))?;
        if one.gpu_millis > out.gpu_millis
            || one.cpu_millis > out.cpu_millis
            || one.memory_bytes > out.memory_bytes
        {
            out.gpu_millis = out.gpu_millis.max(one.gpu_millis);
            out.cpu_millis = out.cpu_millis.max(one.cpu_millis);
            out.memory_bytes = out.memory_bytes.max(one.memory_bytes);
        }
    }
    Ok(out
        .to_quantities()
        .into_iter()
        .map(|(k, q)| (k, q.to_string()))
        .collect())
}

fn containers_sum(containers: &[Container]) -> Result<Resources, JobError> {
    let mut total = Resources::zero();
    for c in containers {
        let Some(res) = &c.resources else { continue };
        // requests default to limits for resources that set only limits (GPUs)
        let mut map: BTreeMap<&str, &str> = BTreeMap::new();
        for (k, v) in res.limits.iter().flatten() {
            map.insert(k.as_str(), v.0.as_str());
        }
        for (k, v) in res.requests.iter().flatten() {
            map.insert(k.as_str(), v.0.as_str());
        }
        let mut parsed = Vec::new();
        for (k, v) in map {
            let q = Quantity::parse(v)
                .map_err(|e| JobError::BadRequest(c.name.clone(), e.to_string()))?;
            parsed.push((k, q));
        }
        let r = Resources::from_quantities(parsed)
            .map_err(|e| JobError::BadRequest(c.name.clone(), e.to_string()))?;
        total.add(&r);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(annotations: serde_json::Value, pod: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "labels": {"muster.dev/queue": "team-a"}, "annotations": annotations},
            "spec": {"parallelism": 4, "template": {"spec": pod}}
        }))
        .expect("job")
    }

    #[test]
    fn pod_set_from_parallelism_requests_and_annotations() {
        let j = job(
            json!({"muster.dev/min-count": "2", "muster.dev/gpu-model": "A100, H100", "muster.dev/priority": "7"}),
            json!({
                "containers": [
                    {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "2"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
                ],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}],
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "x", "operator": "Exists"}]
            }),
        );
        let g = gang_spec(&j).expect("gang");
        assert_eq!(g.queue, "team-a");
        assert_eq!(g.priority, 7);
        let ps = &g.pod_sets[0];
        assert_eq!((ps.count, ps.min_count), (4, Some(2)));
        assert_eq!(ps.gpu_model.as_deref(), Some("A100"));
        assert_eq!(
            ps.requests.get("nvidia.com/gpu").map(|q| q.as_str()),
            Some("8")
        );
        // the init container's 8 CPUs exceed the containers' 2.5
        assert_eq!(ps.requests.get("cpu").map(|q| q.as_str()), Some("8"));
        assert_eq!(
            ps.node_selector.get("disk").map(String::as_str),
            Some("ssd")
        );
        assert_eq!(ps.tolerations.len(), 1);
    }

    #[test]
    fn bad_annotations_and_quantities_are_errors() {
        let pod = json!({"containers": [{"name": "a"}]});
        let e = gang_spec(&job(json!({"muster.dev/min-count": "many"}), pod)).expect_err("bad");
        assert_eq!(e.reason(), "InvalidAnnotation");
        let pod =
            json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]});
        let e = gang_spec(&job(json!({}), pod)).expect_err("bad");
        assert_eq!(e.reason(), "InvalidRequests");
    }
}
