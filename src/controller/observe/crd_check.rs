//! Before any watch starts: are the muster CRDs installed?
//!
//! A watch on a kind the API server does not serve fails with 404 on every
//! retry. Instead of five such failures a second, the controller asks API
//! discovery once which muster kinds are served, says once which CRDs are
//! missing and the command that installs them, and asks again with a
//! growing pause until they are there.

use std::time::Duration;

use kube::Client;

use crate::controller::base::objects::{GROUP, Kind, VERSION};
use crate::controller::workloads::WorkloadKind;

/// The command that installs the CRDs, as the message prints it.
pub(crate) const INSTALL_COMMAND: &str = "muster crds | kubectl apply -f -";

/// First pause between two discovery requests while CRDs are missing.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
/// Longest pause between two discovery requests.
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// The muster kinds the API server does not serve, by discovery of the
/// muster group version. `Err` when discovery itself failed for another
/// reason than "not found" (the caller cannot tell, and proceeds).
pub(crate) async fn missing_kinds(client: &Client) -> Result<Vec<Kind>, kube::Error> {
    match client
        .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
        .await
    {
        Ok(list) => Ok(Kind::ALL
            .into_iter()
            .filter(|k| !list.resources.iter().any(|r| r.name == k.plural()))
            .collect()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(Kind::ALL.to_vec()),
        Err(e) => Err(e),
    }
}

/// What the operator reads when CRDs are missing: which ones, and the
/// command that installs them.
pub(crate) fn missing_message(missing: &[Kind]) -> String {
    let names: Vec<String> = missing
        .iter()
        .map(|k| format!("{}.{GROUP}", k.plural()))
        .collect();
    format!(
        "the API server does not serve {} of muster's custom resources ({}): \
         install the CRDs with `{INSTALL_COMMAND}`; the controller waits and \
         starts once they are served",
        names.len(),
        names.join(", ")
    )
}

/// Waits until every muster kind is served. Says once what is missing (and
/// again only if the set of missing kinds changes), then asks again with a
/// pause that doubles up to [`LONGEST_PAUSE`].
pub(crate) async fn wait_until_installed(client: &Client) {
    let mut pause = FIRST_PAUSE;
    let mut said: Option<Vec<Kind>> = None;
    loop {
        match missing_kinds(client).await {
            Ok(missing) if missing.is_empty() => {
                if said.is_some() {
                    tracing::info!("muster CRDs installed; starting");
                }
                return;
            }
            Ok(missing) => {
                if said.as_ref() != Some(&missing) {
                    tracing::error!("{}", missing_message(&missing));
                    said = Some(missing);
                }
            }
            Err(e) => {
                // discovery may be forbidden or failing; the watches will tell
                tracing::warn!(
                    error = %short_error(&e),
                    "could not check whether the muster CRDs are installed; starting anyway"
                );
                return;
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// The enabled workload kinds the API server serves; the custom ones it
/// does not (their CRD is not installed); and those whose CRD it serves only
/// in other versions than the one muster reads, each with the message that
/// says which (a CRD lists every version it serves, and a controller
/// release older or newer than muster's may serve others). Each missing or
/// refused kind is said once, in one line naming the CRD; it is skipped
/// until the controller restarts — no watch is started for it, so nothing
/// retries. A discovery that fails for another reason counts the kind as
/// served (its watch then says why).
pub(crate) async fn served_workload_kinds(
    client: &Client,
    enabled: &std::collections::BTreeSet<WorkloadKind>,
) -> (
    std::collections::BTreeSet<WorkloadKind>,
    Vec<WorkloadKind>,
    Vec<(WorkloadKind, String)>,
) {
    let mut served = std::collections::BTreeSet::new();
    let mut missing = Vec::new();
    let mut refused = Vec::new();
    for &kind in enabled {
        let Some(custom) = kind.custom() else {
            served.insert(kind);
            continue;
        };
        // the kind's own resource and those its adapter reads must all be served
        let mut all_served = true;
        let mut elsewhere = Vec::new();
        for c in std::iter::once(custom).chain(kind.related().iter().map(|r| r.kind)) {
            if !served_in(client, &c, kind).await {
                all_served = false;
                let others = other_versions(client, &c).await;
                if !others.is_empty() {
                    elsewhere.push(other_version_message(&c, &others));
                }
            }
        }
        if all_served {
            served.insert(kind);
        } else if elsewhere.is_empty() {
            missing.push(kind);
        } else {
            refused.push((kind, elsewhere.join("; ")));
        }
    }
    for kind in &missing {
        tracing::error!("{}", missing_workload_message(*kind));
    }
    for (kind, why) in &refused {
        tracing::error!(
            reason = "UnsupportedVersion",
            "workload kind {} is not run: {why}",
            kind.as_str()
        );
    }
    (served, missing, refused)
}

/// Whether discovery of `c`'s group and version lists its resource; a
/// discovery that fails for another reason than "not found" counts as
/// served (the watch then says why), with a warning naming `kind`.
async fn served_in(
    client: &Client,
    c: &crate::controller::workloads::CustomKind,
    kind: WorkloadKind,
) -> bool {
    match client
        .list_api_group_resources(&format!("{}/{}", c.group, c.version))
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == c.plural),
        Err(kube::Error::Api(s)) if s.is_not_found() => false,
        Err(e) => {
            tracing::warn!(kind = kind.as_str(), error = %short_error(&e), "could not check whether the workload kind is served; watching it anyway");
            true
        }
    }
}

/// The other versions of `c`'s group in which the API server serves its
/// resource, by discovery; none when discovery fails.
async fn other_versions(
    client: &Client,
    c: &crate::controller::workloads::CustomKind,
) -> Vec<String> {
    let Ok(groups) = client.list_api_groups().await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for g in groups.groups.iter().filter(|g| g.name == c.group) {
        for v in g.versions.iter().filter(|v| v.version != c.version) {
            if let Ok(list) = client.list_api_group_resources(&v.group_version).await
                && list.resources.iter().any(|r| r.name == c.plural)
            {
                out.push(v.version.clone());
            }
        }
    }
    out
}

/// What the operator reads when `c`'s CRD is served, but only in `others`.
fn other_version_message(
    c: &crate::controller::workloads::CustomKind,
    others: &[String],
) -> String {
    format!(
        "the API server serves {} only in version {} of {}, and muster reads {}/{}: \
         install the release of its controller (and CRD) that serves {} and restart muster",
        c.crd_name(),
        others.join(", "),
        c.group,
        c.group,
        c.version,
        c.version
    )
}

/// The served workload kinds whose served API muster cannot run (a
/// TrainJob CRD of a Kubeflow Trainer before v2.2, see
/// [`crate::controller::workloads::trainer_api`]), taken out of `served`,
/// each with the message that says why (logged once here). A CRD that
/// cannot be read (no `get` on CRDs) leaves the kind served, with a
/// warning.
pub(crate) async fn refused_workload_kinds(
    client: &Client,
    served: &mut std::collections::BTreeSet<WorkloadKind>,
) -> Vec<(WorkloadKind, String)> {
    use crate::controller::workloads::trainer_api;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut refused = Vec::new();
    if served.contains(&WorkloadKind::TrainJob) {
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
        let crd = api.get(&trainer_api::crd_name()).await;
        match crd.map(|c| serde_json::to_value(&c)) {
            Ok(Ok(crd)) => {
                if let Err(e) = trainer_api::check(&crd) {
                    tracing::error!(
                        reason = e.as_str(),
                        "workload kind trainjob is not run: {e}"
                    );
                    refused.push((WorkloadKind::TrainJob, e.to_string()));
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not read the TrainJob CRD's schema; running TrainJobs anyway");
            }
            Err(e) => {
                tracing::warn!(error = %short_error(&e), "could not read which Kubeflow Trainer version the TrainJob CRD serves; running TrainJobs anyway");
            }
        }
    }
    for (k, _) in &refused {
        served.remove(k);
    }
    refused
}

/// What the operator reads when an enabled workload kind's CRD is missing.
pub(crate) fn missing_workload_message(kind: WorkloadKind) -> String {
    let crd = kind
        .custom()
        .into_iter()
        .chain(kind.related().iter().map(|r| r.kind))
        .map(|c| c.crd_name())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "workload kind {} is enabled but the API server does not serve {crd}: \
         its objects are not run as gangs; install its CRD (or its controller) \
         and restart muster, or drop it from --workload-kinds",
        kind.as_str()
    )
}

/// One line for a kube client error: code, reason and message of an API
/// answer, never the `Debug` form kube's `Display` appends.
pub fn short_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

/// One line for a watch error (see [`short_error`]).
pub(crate) fn short_watch_error(e: &kube_runtime::watcher::Error) -> String {
    use kube_runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(e) => format!("initial list failed: {}", short_error(e)),
        W::WatchStartFailed(e) => format!("watch start failed: {}", short_error(e)),
        W::WatchFailed(e) => format!("watch failed: {}", short_error(e)),
        W::WatchError(s) => format!("watch error: {} {}: {}", s.code, s.reason, s.message),
        W::NoResourceVersion => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_missing_crd_and_the_install_command() {
        let m = missing_message(&[Kind::GpuQueue, Kind::Gang]);
        assert!(m.contains("2 of muster's"), "{m}");
        assert!(m.contains("gpuqueues.muster.dev, gangs.muster.dev"), "{m}");
        assert!(m.contains("`muster crds | kubectl apply -f -`"), "{m}");
        assert!(!m.contains("nodeclasses"), "{m}");
    }

    #[test]
    fn a_missing_workload_kind_names_its_crd_and_the_flag() {
        let m = missing_workload_message(WorkloadKind::JobSet);
        assert!(m.contains("jobsets.jobset.x-k8s.io"), "{m}");
        assert!(m.contains("--workload-kinds"), "{m}");
    }
}
