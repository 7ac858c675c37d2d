//! The CRDs of third-party workload kinds (TrainJob and its runtimes,
//! PyTorchJob, RayCluster, RayJob, LeaderWorkerSet), as the API test server
//! keeps them in `tests/kube_api/crds`: minimal structural schemas written
//! from the upstream API types. Creating one starts the server's stand-in
//! for that kind's controller.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

use super::retry_transient;

/// Installs the CRDs of `files` (`tests/kube_api/crds/<file>.yaml`, e.g.
/// `"rayjob"`).
pub async fn install(client: &kube::Client, files: &[&str]) {
    install_from(client, "tests/kube_api/crds", files).await;
}

/// Installs the CRDs `<dir>/<file>.yaml` (`dir` relative to the
/// repository) of `files`.
pub async fn install_from(client: &kube::Client, dir: &str, files: &[&str]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for f in files {
        let path = format!("{}/{dir}/{f}.yaml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let crd: CustomResourceDefinition =
            serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let pp = PostParams::default();
        retry_transient(|| api.create(&pp, &crd))
            .await
            .expect("create CRD");
    }
}

/// Installs the CRD of `file` serving `versions` instead of its own: each
/// `(name, storage)` a copy of the file's first version (the same schema,
/// so the API server converts between them with strategy `None`, as a CRD
/// without a conversion webhook does).
pub async fn install_versions(client: &kube::Client, file: &str, versions: &[(&str, bool)]) {
    let path = format!(
        "{}/tests/kube_api/crds/{file}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut crd: CustomResourceDefinition =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let first = crd.spec.versions[0].clone();
    crd.spec.versions = versions
        .iter()
        .map(|(name, storage)| {
            let mut v = first.clone();
            v.name = (*name).to_string();
            v.served = true;
            v.storage = *storage;
            v
        })
        .collect();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PostParams::default();
    retry_transient(|| api.create(&pp, &crd))
        .await
        .expect("create CRD");
}
