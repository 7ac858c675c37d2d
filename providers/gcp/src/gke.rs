//! The instance template a GKE node pool runs its machines from, found the
//! way GKE names it: the node pool (GKE API `nodePools.list`) names its
//! managed instance groups (`instanceGroupUrls`, one per zone), each group
//! (`instanceGroupManagers.get`) names the template it runs now, and the
//! template (`regionInstanceTemplates.get` or `instanceTemplates.get`)
//! carries the properties new machines copy. While a pool upgrades its
//! groups may name different templates: the newest is the one rolled out.
//! These are the facts production GCP providers for Karpenter rely on
//! (cloudpilot-ai/karpenter-provider-gcp
//! `pkg/providers/nodepooltemplate/sourcetemplate.go`).

use google_cloud_container_v1::model::node_pool::Status as NodePoolStatus;
use muster_crds::nodeclass::GkeCluster;
use muster_provider_api::{ProviderError, parse_rfc3339};
use serde_json::Value;

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

/// What the provider needs of a node pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Node pool name.
    pub name: String,
    /// Whether its status is `RUNNING`.
    pub running: bool,
    /// Its managed instance groups.
    pub instance_group_urls: Vec<String>,
}

/// The node pool to copy: the one named, or the first `RUNNING` one; the
/// error names what matched nothing.
pub fn pick_pool<'a>(pools: &'a [Pool], wanted: Option<&str>) -> Result<&'a Pool, String> {
    match wanted {
        Some(name) => pools
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("spec.gcp.nodePool {name} (a node pool of the cluster)")),
        None => pools
            .iter()
            .find(|p| p.running)
            .ok_or_else(|| "spec.gcp.cluster: a RUNNING node pool to copy".into()),
    }
}

/// The most recently created template (creation times compare as instants,
/// not strings: GCE writes local offsets).
pub fn newest(templates: Vec<Value>) -> Option<Value> {
    templates.into_iter().max_by_key(|t| {
        (
            t["creationTimestamp"]
                .as_str()
                .and_then(parse_rfc3339)
                .unwrap_or(i64::MIN),
            t["name"].as_str().unwrap_or_default().to_string(),
        )
    })
}

/// What a machine of the cluster is created from.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The node pool copied.
    pub pool: String,
    /// The instance template's name.
    pub template: String,
    /// The template's `properties`.
    pub properties: Value,
}

impl Source {
    /// The boot image of the template.
    pub fn image(&self) -> Option<String> {
        self.properties["disks"]
            .as_array()?
            .iter()
            .find(|d| d["boot"].as_bool() == Some(true))?["initializeParams"]["sourceImage"]
            .as_str()
            .map(String::from)
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
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

/// Reads the node pool, its instance groups and their newest template; an
/// Autopilot cluster is refused ([`autopilot_refusal`]).
pub async fn source(
    clients: &GkeClients,
    cluster: &GkeCluster,
    wanted: Option<&str>,
) -> Result<Source, ProviderError> {
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
    let pools = clients
        .cluster_manager
        .list_node_pools()
        .set_parent(&parent)
        .send()
        .await
        .map_err(|e| cluster_failure(&e, &parent))?;
    let pools: Vec<Pool> = pools
        .node_pools
        .iter()
        .map(|p| Pool {
            name: p.name.clone(),
            running: p.status == NodePoolStatus::Running,
            instance_group_urls: p.instance_group_urls.clone(),
        })
        .collect();
    let pool = pick_pool(&pools, wanted).map_err(not_found)?;
    let pool_name = pool.name.clone();
    let mut template_urls: Vec<String> = Vec::new();
    for url in &pool.instance_group_urls {
        let Some(r) = parse_url(url, "instanceGroupManagers") else {
            continue;
        };
        let Scope::Zone(zone) = &r.scope else {
            continue; // GKE node pools use zonal groups
        };
        let igm = clients
            .instance_group_managers
            .get()
            .set_project(&r.project)
            .set_zone(zone)
            .set_instance_group_manager(&r.name)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        let v = to_value(&igm);
        let t = v["instanceTemplate"]
            .as_str()
            .filter(|t| !t.is_empty())
            .or_else(|| {
                v["versions"]
                    .as_array()?
                    .iter()
                    .find_map(|x| x["instanceTemplate"].as_str().filter(|t| !t.is_empty()))
            });
        if let Some(t) = t
            && !template_urls.iter().any(|u| u == t)
        {
            template_urls.push(t.to_string());
        }
    }
    let mut templates = Vec::new();
    for url in &template_urls {
        let Some(r) = parse_url(url, "instanceTemplates") else {
            continue;
        };
        let t = match &r.scope {
            Scope::Region(region) => to_value(
                &clients
                    .region_instance_templates
                    .get()
                    .set_project(&r.project)
                    .set_region(region)
                    .set_instance_template(&r.name)
                    .send()
                    .await
                    .map_err(|e| failure(&e, None))?,
            ),
            Scope::Global => to_value(
                &clients
                    .instance_templates
                    .get()
                    .set_project(&r.project)
                    .set_instance_template(&r.name)
                    .send()
                    .await
                    .map_err(|e| failure(&e, None))?,
            ),
            Scope::Zone(_) => continue,
        };
        templates.push(t);
    }
    let t = newest(templates).ok_or_else(|| {
        not_found(format!(
            "spec.gcp.cluster: an instance template of node pool {pool_name}"
        ))
    })?;
    Ok(Source {
        pool: pool_name,
        template: t["name"].as_str().unwrap_or_default().to_string(),
        properties: t["properties"].clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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

    #[test]
    fn the_named_pool_or_the_first_running_one_is_copied() {
        let pool = |name: &str, running: bool| Pool {
            name: name.into(),
            running,
            instance_group_urls: Vec::new(),
        };
        let pools = vec![
            pool("upgrading", false),
            pool("cpu", true),
            pool("later", true),
        ];
        assert_eq!(pick_pool(&pools, None).map(|p| p.name.as_str()), Ok("cpu"));
        assert_eq!(
            pick_pool(&pools, Some("later")).map(|p| p.name.as_str()),
            Ok("later")
        );
        assert!(pick_pool(&pools, Some("gone")).is_err_and(|e| e.contains("gone")));
        assert!(pick_pool(&pools[..1], None).is_err());
    }

    #[test]
    fn the_newest_template_wins_by_instant_not_by_string() {
        // 03:00 UTC on Nov 1st
        let a = json!({"name": "a", "creationTimestamp": "2026-10-31T20:00:00.000-07:00"});
        // later as a string, earlier as an instant (23:00 UTC on Oct 31st)
        let b = json!({"name": "b", "creationTimestamp": "2026-10-31T23:00:00.000+00:00"});
        assert_eq!(
            newest(vec![a.clone(), b.clone()]).map(|t| t["name"].clone()),
            Some(json!("a"))
        );
        let c = json!({"name": "c", "creationTimestamp": "2026-11-01T04:00:00.000-00:00"});
        assert_eq!(
            newest(vec![a, b, c]).map(|t| t["name"].clone()),
            Some(json!("c"))
        );
    }
}
