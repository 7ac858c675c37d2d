//! Which Kubeflow Trainer API the cluster serves, read from the TrainJob
//! CRD's structural schema, and whether muster can run TrainJobs on it.
//!
//! muster pins a TrainJob through `spec.runtimePatches` (see
//! [`super::trainjob`]), which kubeflow/trainer introduced in v2.2
//! (`pkg/apis/trainer/v1alpha1/trainjob_types.go`, `RuntimePatches`).
//! v2.1 has `spec.podTemplateOverrides` there and v2.0
//! `spec.podSpecOverrides`, under the same group and version: a structural
//! schema without `runtimePatches` prunes muster's patch silently, and the
//! TrainJob would run unpinned, on whatever nodes the scheduler picks. So
//! the kind is refused on those versions, with a message naming the
//! version, rather than run wrong.

use serde_json::Value;

use crate::controller::workloads::trainjob;

/// The CRD muster reads to tell the version.
pub(crate) fn crd_name() -> String {
    trainjob::KIND.crd_name()
}

/// Why muster cannot run TrainJobs on the served Trainer API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TrainerApiError {
    /// A Trainer release before v2.2, known by its override field.
    #[error(
        "the TrainJob CRD serves the Kubeflow Trainer {version} API (spec.{field}, no spec.runtimePatches), and muster pins TrainJobs only through spec.runtimePatches (Trainer v2.2 and later): its writes would be pruned and TrainJobs would run unpinned; upgrade Kubeflow Trainer to v2.2 or later and restart muster, or drop trainjob from --workload-kinds"
    )]
    Before22 {
        /// The release, `v2.0` or `v2.1`.
        version: &'static str,
        /// Its override field.
        field: &'static str,
    },
    /// None of the known override fields.
    #[error(
        "the TrainJob CRD's {version} schema has no spec.runtimePatches (Kubeflow Trainer v2.2 and later): muster's writes would be pruned and TrainJobs would run unpinned; install Kubeflow Trainer v2.2 or later and restart muster, or drop trainjob from --workload-kinds"
    )]
    Unknown {
        /// The API version looked for.
        version: &'static str,
    },
}

impl TrainerApiError {
    /// Bounded reason.
    pub(crate) fn as_str(&self) -> &'static str {
        "UnsupportedVersion"
    }
}

/// Whether the TrainJob CRD `crd` (as JSON) serves an API muster can run:
/// its served `v1alpha1` schema has `spec.runtimePatches`, or keeps any
/// field of `spec`. A CRD that does not serve `v1alpha1` at all is left to
/// the watch to report.
pub(crate) fn check(crd: &Value) -> Result<(), TrainerApiError> {
    let version = trainjob::KIND.version;
    let Some(v) = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| {
            v.get("name").and_then(Value::as_str) == Some(version)
                && v.get("served").and_then(Value::as_bool).unwrap_or(false)
        })
    else {
        return Ok(());
    };
    let Some(spec) = v.pointer("/schema/openAPIV3Schema/properties/spec") else {
        // no schema of spec: nothing is pruned
        return Ok(());
    };
    let keeps_all = spec
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let has = |field: &str| spec.pointer(&format!("/properties/{field}")).is_some();
    if has("runtimePatches") || keeps_all {
        Ok(())
    } else if has("podTemplateOverrides") {
        Err(TrainerApiError::Before22 {
            version: "v2.1",
            field: "podTemplateOverrides",
        })
    } else if has("podSpecOverrides") {
        Err(TrainerApiError::Before22 {
            version: "v2.0",
            field: "podSpecOverrides",
        })
    } else {
        Err(TrainerApiError::Unknown { version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(fields: &[&str]) -> Value {
        let props: serde_json::Map<String, Value> = fields
            .iter()
            .map(|f| (f.to_string(), json!({"type": "array"})))
            .collect();
        json!({"spec": {"versions": [{"name": "v1alpha1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": props}}}}}]}})
    }

    #[test]
    fn the_served_schema_names_the_trainer_release() {
        assert_eq!(check(&crd(&["runtimeRef", "runtimePatches"])), Ok(()));
        let v21 = check(&crd(&["runtimeRef", "podTemplateOverrides"])).expect_err("v2.1");
        assert_eq!(
            v21,
            TrainerApiError::Before22 {
                version: "v2.1",
                field: "podTemplateOverrides"
            }
        );
        assert!(
            v21.to_string().contains("Kubeflow Trainer v2.1 API"),
            "{v21}"
        );
        assert_eq!(v21.as_str(), "UnsupportedVersion");
        let v20 = check(&crd(&["podSpecOverrides"])).expect_err("v2.0");
        assert!(
            v20.to_string().contains("v2.0 API (spec.podSpecOverrides"),
            "{v20}"
        );
        assert!(matches!(
            check(&crd(&["runtimeRef"])),
            Err(TrainerApiError::Unknown { .. })
        ));
        // a spec that keeps unknown fields prunes nothing
        let mut open = crd(&[]);
        open["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] =
            json!(true);
        assert_eq!(check(&open), Ok(()));
    }
}
