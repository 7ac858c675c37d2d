//! The GKE cluster a NodeClass names, read once per resolve: an Autopilot
//! cluster is refused (GKE makes its nodes itself); and the self links of
//! Compute resources (groups, templates, instances) read back.

use muster_crds::nodeclass::GkeCluster;
use muster_provider_api::ProviderError;

use crate::compute::{GkeClients, failure};

/// Where a Compute resource lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `projects/P/global/...`.
    Global,
    /// `projects/P/regions/R/...`.
    Region(String),
    /// `projects/P/zones/Z/...`.
    Zone(String),
}

/// A Compute self link, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRef {
    /// Project.
    pub project: String,
    /// Global, region or zone.
    pub scope: Scope,
    /// Resource name.
    pub name: String,
}

/// Reads a self link (full URL or path) naming a resource of `collection`.
pub fn parse_url(url: &str, collection: &str) -> Option<ResourceRef> {
    let path = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let i = segs.iter().position(|s| *s == collection)?;
    let name = segs.get(i + 1)?.to_string();
    let (project, scope) = match segs.get(..i)? {
        [.., "projects", p, "global"] => (p.to_string(), Scope::Global),
        [.., "projects", p, "regions", r] => (p.to_string(), Scope::Region(r.to_string())),
        [.., "projects", p, "zones", z] => (p.to_string(), Scope::Zone(z.to_string())),
        _ => return None,
    };
    Some(ResourceRef {
        project,
        scope,
        name,
    })
}

/// Why an Autopilot cluster gets no machines from muster, and what to use.
pub fn autopilot_refusal(parent: &str) -> String {
    format!(
        "spec.gcp.cluster: GKE cluster {parent} is an Autopilot cluster: GKE makes and \
         removes its nodes itself and lets no one add machines to it, so muster cannot \
         launch there. Use a GKE Standard cluster for muster's GPU pools"
    )
}

/// A failed call on the cluster: "not found" names `spec.gcp.cluster`.
fn cluster_failure(e: &google_cloud_gax::error::Error, parent: &str) -> ProviderError {
    match failure(e, None) {
        ProviderError::NotFound { .. } => {
            not_found(format!("spec.gcp.cluster: GKE cluster {parent}"))
        }
        other => other,
    }
}

fn not_found(what: String) -> ProviderError {
    ProviderError::NotFound { what }
}

/// Reads the cluster; an Autopilot cluster is refused ([`autopilot_refusal`]).
pub async fn check_cluster(
    clients: &GkeClients,
    cluster: &GkeCluster,
) -> Result<(), ProviderError> {
    let parent = format!(
        "projects/{}/locations/{}/clusters/{}",
        cluster.project, cluster.location, cluster.name
    );
    let found = clients
        .cluster_manager
        .get_cluster()
        .set_name(&parent)
        .send()
        .await
        .map_err(|e| cluster_failure(&e, &parent))?;
    if found.autopilot.as_ref().is_some_and(|a| a.enabled) {
        return Err(ProviderError::Permanent {
            message: autopilot_refusal(&parent),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_links_read_in_every_scope() {
        let igm = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroupManagers/gke-prod-pool-grp";
        assert_eq!(
            parse_url(igm, "instanceGroupManagers"),
            Some(ResourceRef {
                project: "p".into(),
                scope: Scope::Zone("us-central1-a".into()),
                name: "gke-prod-pool-grp".into()
            })
        );
        let regional = "projects/p/regions/us-central1/instanceTemplates/t1";
        assert_eq!(
            parse_url(regional, "instanceTemplates").map(|r| r.scope),
            Some(Scope::Region("us-central1".into()))
        );
        let global =
            "https://compute.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t2";
        assert_eq!(
            parse_url(global, "instanceTemplates").map(|r| r.scope),
            Some(Scope::Global)
        );
        assert_eq!(parse_url(global, "instanceGroupManagers"), None);
        assert_eq!(
            parse_url("projects/p/instanceTemplates/t", "instanceTemplates"),
            None
        );
    }
}
