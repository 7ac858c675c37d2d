//! A pod's effective resource requests, as kube-scheduler sums them: read
//! by the pod-group adapters, the slim cached Pod and translation alike.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use muster_planner::{Quantity, Resources};

use crate::controller::base::errors::WorkloadError;

/// Effective requests of one pod: the sum over containers, or the largest
/// init container where that is larger (as kube-scheduler computes it).
pub(crate) fn pod_requests(pod: &PodSpec) -> Result<BTreeMap<String, String>, WorkloadError> {
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

fn containers_sum(containers: &[Container]) -> Result<Resources, WorkloadError> {
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
                .map_err(|e| WorkloadError::BadRequest(c.name.clone(), e.to_string()))?;
            parsed.push((k, q));
        }
        let r = Resources::from_quantities(parsed)
            .map_err(|e| WorkloadError::BadRequest(c.name.clone(), e.to_string()))?;
        total.add(&r);
    }
    Ok(total)
}
