//! A TrainJob's pod sets as its Trainer really runs them: read from the
//! JobSet the Trainer builds for it once that exists.
//!
//! kubeflow/trainer builds the JobSet (`pkg/runtime/framework/plugins/
//! jobset/jobset.go`, `Build`) as soon as it reconciles the TrainJob,
//! suspended or not, named after the TrainJob, in its namespace, with a
//! controller ownerReference to it, and rebuilds it while either is
//! suspended. Each replicated job runs `replicas × parallelism` pods, the
//! parallelism (and completions) being the count its plugins gave the pod
//! set: `trainer.numNodes` for torch, `numNodes − 1` for the `node` job of
//! an MPI runtime that runs its launcher as a node
//! (`plugins/mpi/mpi.go`, `EnforceMLPolicy`), and whatever a plugin muster
//! does not know decides. Before it exists the pod sets are derived from
//! the runtime with the same rules ([`super::trainjob`]); the JobSet wins
//! as soon as it is there.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::controller::workloads::templated::WORKLOAD_LABEL;
use crate::controller::workloads::{PodSetTemplate, WorkloadError, trainjob};

/// True when `jobset` is the one the Trainer built for `job`: same
/// namespace and name, controlled by the TrainJob (by uid).
pub(crate) fn is_child_of(jobset: &DynamicObject, job: &DynamicObject) -> bool {
    jobset.namespace() == job.namespace()
        && jobset.name_any() == job.name_any()
        && jobset.owner_references().iter().any(|o| {
            o.controller == Some(true)
                && o.kind == trainjob::KIND.kind
                && job.metadata.uid.as_deref() == Some(o.uid.as_str())
        })
}

fn int(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(default).max(0)
}

/// The pod sets of the child `jobset`: counts as it runs them, templates
/// as built without muster's own runtime patch — the node selector and
/// tolerations of `derived` (the runtime with the other managers' patches,
/// by replicated job name) where there is one, and never muster's
/// workload label.
pub(crate) fn pod_sets(
    jobset: &DynamicObject,
    derived: &[(String, i64, Value)],
) -> Result<Vec<PodSetTemplate>, WorkloadError> {
    let jobs = jobset
        .data
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for rj in jobs {
        let name = rj
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| WorkloadError::BadShape("a replicated job has no name".to_string()))?;
        let spec = rj.pointer("/template/spec");
        let parallelism = int(spec.and_then(|s| s.get("parallelism")), 1);
        let pods = match spec.and_then(|s| s.get("completions")) {
            Some(c) => parallelism.min(int(Some(c), parallelism)),
            None => parallelism,
        };
        let count = int(rj.get("replicas"), 1).saturating_mul(pods);
        let mut template = spec
            .and_then(|s| s.get("template"))
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        unpin(&mut template, derived.iter().find(|(n, _, _)| n == name));
        let template: PodTemplateSpec = serde_json::from_value(template)
            .map_err(|e| WorkloadError::BadShape(format!("replicated job {name}: {e}")))?;
        out.push(PodSetTemplate {
            name: name.to_string(),
            count: u32::try_from(count).unwrap_or(u32::MAX),
            min_count: None,
            template,
        });
    }
    if out.is_empty() {
        return Err(WorkloadError::BadShape(
            "the TrainJob's JobSet has no replicated jobs".to_string(),
        ));
    }
    Ok(out)
}

/// Takes out of a built pod template what muster's runtime patch put in:
/// its workload label, and node selector and tolerations as derived
/// without that patch.
fn unpin(template: &mut Value, derived: Option<&(String, i64, Value)>) {
    if let Some(Value::Object(labels)) = template.pointer_mut("/metadata/labels") {
        labels.remove(WORKLOAD_LABEL);
    }
    let Some((_, _, submitted)) = derived else {
        return;
    };
    let Some(Value::Object(spec)) = template.get_mut("spec") else {
        return;
    };
    for k in ["nodeSelector", "tolerations"] {
        match submitted.pointer(&format!("/spec/{k}")) {
            Some(v) if !v.is_null() => {
                spec.insert(k.to_string(), v.clone());
            }
            _ => {
                spec.remove(k);
            }
        }
    }
}
