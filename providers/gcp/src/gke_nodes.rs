//! GKE nodes made by GKE: a launch is a named instance added to the
//! managed instance group of a node pool of the launch's shape
//! ([`crate::node_pools`]), created once when first needed; a termination
//! deletes exactly that instance from its group; node pools muster created
//! go once they have held no instance for `spec.gcp.emptyNodePoolTTL`.
//!
//! Calls, as Cluster Autoscaler's GCE provider makes them
//! (kubernetes/autoscaler `cluster-autoscaler/cloudprovider/gce/autoscaling_gce_client.go`:
//! `CreateInstances`, `DeleteInstances`, `FetchMigInstances`, error codes
//! read from `lastAttempt.errors`):
//! * `nodePools.get` / `nodePools.create` (then `operations.get` until
//!   `DONE`), `nodePools.list`, `nodePools.delete`;
//! * `instanceGroupManagers.createInstances` with the instance's name (the
//!   PoolNode's, so a repeated launch after a restart names an instance the
//!   group already has and creates nothing) and a `requestId`;
//! * `instanceGroupManagers.listManagedInstances` until the instance exists
//!   or its last attempt failed (`ZONE_RESOURCE_POOL_EXHAUSTED`,
//!   `QUOTA_EXCEEDED`: typed errors, and the instance is taken out of the
//!   group so it stops retrying);
//! * `instanceGroupManagers.deleteInstances` with
//!   `skipInstancesOnValidationError` (an instance already gone is success).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use google_cloud_container_v1::model::operation::Status as OpStatus;
use muster_crds::nodeclass::GkeCluster;
use muster_planner::CapacityType;
use muster_provider_api::{Instance, InstanceState, LaunchRequest, ProviderError};
use serde_json::{Value, json};

use crate::compute::{GkeClients, failure};
use crate::errors::{classify, operation_error};
use crate::gke::{Scope, parse_url};
use crate::insert::request_id;
use crate::names::{instance_name, provider_id};
use crate::node_pools::{
    MANAGED_LABEL, POOL_PREFIX, Shape, instance_metadata, pool_body, pool_name,
};
use crate::provider::{GcpProvider, permanent_error as permanent, to_value};

/// How often a launch reads the group before it returns the instance as
/// pending (the controller's registration timeout covers the rest).
const LAUNCH_POLLS: u32 = 30;
/// How often a GKE operation is read before the call gives up (transient).
const OPERATION_POLLS: u32 = 300;

/// A zonal managed instance group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) project: String,
    pub(crate) zone: String,
    pub(crate) name: String,
}

impl Group {
    fn of_url(url: &str) -> Option<Group> {
        let r = parse_url(url, "instanceGroupManagers")?;
        let Scope::Zone(zone) = r.scope else {
            return None;
        };
        Some(Group {
            project: r.project,
            zone,
            name: r.name,
        })
    }

    fn instance_url(&self, name: &str) -> String {
        format!(
            "projects/{}/zones/{}/instances/{name}",
            self.project, self.zone
        )
    }
}

/// What the provider remembers of the node pools: each pool's group, and
/// since when each of muster's pools has held no instance.
#[derive(Debug, Default)]
pub(crate) struct PoolMemory {
    groups: BTreeMap<String, Group>,
    /// One creation at a time per pool: launches of one shape that start
    /// together create the pool once.
    creating: BTreeMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>,
    empty_since: BTreeMap<String, Instant>,
}

fn parent(c: &GkeCluster) -> String {
    format!(
        "projects/{}/locations/{}/clusters/{}",
        c.project, c.location, c.name
    )
}

impl GcpProvider {
    pub(crate) fn gke_clients(&self) -> Result<(&GkeClients, &GkeCluster), ProviderError> {
        match (&self.gke, &self.class.cluster) {
            (Some(g), Some(c)) => Ok((g, c)),
            _ => Err(permanent(
                "spec.gcp.cluster: no GKE client was built".into(),
            )),
        }
    }

    /// Waits for a GKE operation to be `DONE`; its error, if it failed.
    async fn gke_wait(
        &self,
        op: google_cloud_container_v1::model::Operation,
    ) -> Result<(), ProviderError> {
        let (g, c) = self.gke_clients()?;
        let name = format!(
            "projects/{}/locations/{}/operations/{}",
            c.project, c.location, op.name
        );
        let mut op = op;
        for i in 0..OPERATION_POLLS {
            if op.status == OpStatus::Done {
                return match op
                    .error
                    .as_ref()
                    .filter(|e| e.code != 0 || !e.message.is_empty())
                {
                    None => Ok(()),
                    Some(e) => Err(permanent(format!(
                        "GKE operation {}: {}",
                        op.name, e.message
                    ))),
                };
            }
            if i > 0 {
                tokio::time::sleep(self.poll_interval).await;
            }
            op = g
                .cluster_manager
                .get_operation()
                .set_name(&name)
                .send()
                .await
                .map_err(|e| failure(&e, None))?;
        }
        Err(ProviderError::Transient {
            message: format!(
                "GKE operation {} not done after {OPERATION_POLLS} reads",
                op.name
            ),
            retry_after: None,
        })
    }

    /// The group of node pool `pool` in `zone`, once the pool exists:
    /// created from `body` when it does not.
    async fn pool_group(
        &self,
        pool: &str,
        zone: &str,
        body: Value,
        request: &LaunchRequest,
    ) -> Result<Group, ProviderError> {
        if let Some(g) = self.pools_memory().groups.get(pool) {
            return Ok(g.clone());
        }
        let lock = self
            .pools_memory()
            .creating
            .entry(pool.to_string())
            .or_default()
            .clone();
        let _creating = lock.lock().await;
        // made while this launch waited
        if let Some(g) = self.pools_memory().groups.get(pool) {
            return Ok(g.clone());
        }
        let (g, c) = self.gke_clients()?;
        let name = format!("{}/nodePools/{pool}", parent(c));
        let found = match g
            .cluster_manager
            .get_node_pool()
            .set_name(&name)
            .send()
            .await
        {
            Ok(p) => p,
            Err(e) => match failure(&e, None) {
                ProviderError::NotFound { .. } => {
                    let np: google_cloud_container_v1::model::NodePool =
                        serde_json::from_value(body)
                            .map_err(|e| permanent(format!("node pool body: {e}")))?;
                    let sent = g
                        .cluster_manager
                        .create_node_pool()
                        .set_parent(parent(c))
                        .set_node_pool(np)
                        .send()
                        .await;
                    match sent {
                        Ok(op) => self.gke_wait(op).await?,
                        // made meanwhile (a restart, another replica): use it
                        Err(e) if e.http_status_code() == Some(409) => {}
                        Err(e) => return Err(pool_failure(&e, request)),
                    }
                    g.cluster_manager
                        .get_node_pool()
                        .set_name(&name)
                        .send()
                        .await
                        .map_err(|e| failure(&e, None))?
                }
                other => return Err(other),
            },
        };
        let group = found
            .instance_group_urls
            .iter()
            .filter_map(|u| Group::of_url(u))
            .find(|gr| gr.zone == zone)
            .ok_or_else(|| {
                permanent(format!(
                    "node pool {pool} has no instance group in zone {zone}"
                ))
            })?;
        self.pools_memory()
            .groups
            .insert(pool.to_string(), group.clone());
        Ok(group)
    }

    fn pools_memory(&self) -> std::sync::MutexGuard<'_, PoolMemory> {
        self.pools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Launches the request's instance through the node pool of its shape.
    pub(crate) async fn launch_in_pool(
        &self,
        request: &LaunchRequest,
    ) -> Result<Instance, ProviderError> {
        let zone = request.offering.zone.as_str();
        let accelerator = self
            .accelerator(zone, &request.offering.instance_type)
            .await?;
        let machine = crate::prices::parse_offering_name(&request.offering.instance_type)
            .map(|(m, _)| m)
            .unwrap_or(request.offering.instance_type.as_str());
        let shape = Shape {
            machine_type: machine,
            accelerator: accelerator.as_ref().map(|(a, n)| (a.as_str(), *n)),
            capacity: request.offering.capacity_type,
            zone,
            reservation: request
                .offering
                .reservation
                .as_deref()
                .filter(|_| request.offering.capacity_type == CapacityType::Reserved),
        };
        let pool = pool_name(&shape, request);
        let compact = request.placement_group.is_some() && compact_placement(machine);
        let body = pool_body(&pool, &shape, &self.class, request, compact);
        let group = self.pool_group(&pool, zone, body, request).await?;
        let name = instance_name(&request.idempotency_key);
        if request.offering.capacity_type == CapacityType::FlexStart {
            // granted with the other machines of its launch (resize_requests.rs)
            return self.launch_granted(request, &group, &name).await;
        }
        let (g, _) = self.gke_clients()?;
        let create: google_cloud_compute_v1::model::InstanceGroupManagersCreateInstancesRequest =
            serde_json::from_value(json!({"instances": [{
                "name": name,
                "preservedState": {"metadata": instance_metadata(request)},
            }]}))
            .map_err(|e| permanent(format!("createInstances body: {e}")))?;
        let op = g
            .instance_group_managers
            .create_instances()
            .set_project(&group.project)
            .set_zone(&group.zone)
            .set_instance_group_manager(&group.name)
            // one request per instance and group: the same PoolNode in
            // another group (never, today) would be another request
            .set_request_id(request_id(&format!(
                "{}/{}",
                request.idempotency_key, group.name
            )))
            .set_body(create)
            .send()
            .await
            .map_err(|e| match failure(&e, Some(&request.offering)) {
                // the pool went meanwhile (deleted by another replica, or by hand):
                // forget its group, and the next try creates the pool again
                ProviderError::NotFound { what } => {
                    self.pools_memory().groups.remove(&pool);
                    ProviderError::Transient {
                        message: format!("group of node pool {pool} is gone: {what}"),
                        retry_after: None,
                    }
                }
                other => other,
            })?;
        let done = self
            .wait_in(&group.project, &group.zone, to_value(&op))
            .await?;
        if let Some(err) = operation_error(&done, Some(&request.offering)) {
            return Err(err);
        }
        for i in 0..LAUNCH_POLLS {
            if i > 0 {
                tokio::time::sleep(self.poll_interval).await;
            }
            match self.member(&group, &name).await? {
                Member::Made => return self.get(zone, &name).await,
                Member::Failed(code, message) => {
                    let err = classify(None, &code, &message, Some(&request.offering));
                    // the group retries until it succeeds: take the instance out
                    self.delete_from(&group, &name).await?;
                    return Err(err);
                }
                Member::Pending => {}
                Member::Absent => {
                    return Err(ProviderError::Transient {
                        message: format!(
                            "instance {name} is not in group {} after createInstances",
                            group.name
                        ),
                        retry_after: None,
                    });
                }
            }
        }
        // still being made: the PoolNode waits for its Node (registration timeout)
        Ok(Instance {
            provider_id: provider_id(&group.project, zone, &name),
            offering: request.offering.clone(),
            state: InstanceState::Pending,
            launched_at: crate::provider::now(),
            pool_node: Some(request.name.clone()),
            tags: Default::default(),
            network: Vec::new(),
        })
    }

    /// Where instance `name` stands in its group.
    pub(crate) async fn member(&self, group: &Group, name: &str) -> Result<Member, ProviderError> {
        let (g, _) = self.gke_clients()?;
        let mut token = String::new();
        loop {
            let page = g
                .instance_group_managers
                .list_managed_instances()
                .set_project(&group.project)
                .set_zone(&group.zone)
                .set_instance_group_manager(&group.name)
                .set_page_token(token.clone())
                .send()
                .await
                .map_err(|e| failure(&e, None))?;
            let v = to_value(&page);
            for m in v["managedInstances"].as_array().into_iter().flatten() {
                if m["name"].as_str() != Some(name)
                    && m["instance"].as_str().and_then(|u| u.rsplit('/').next()) != Some(name)
                {
                    continue;
                }
                if let Some(e) = m["lastAttempt"]["errors"]["errors"].get(0) {
                    let code = e["code"].as_str().unwrap_or_default().to_string();
                    let message = e["message"].as_str().unwrap_or(&code).to_string();
                    return Ok(Member::Failed(code, message));
                }
                let made = m["instanceStatus"].as_str().is_some_and(|s| !s.is_empty())
                    && m["currentAction"].as_str() == Some("NONE");
                return Ok(if made { Member::Made } else { Member::Pending });
            }
            token = v["nextPageToken"].as_str().unwrap_or_default().to_string();
            if token.is_empty() {
                return Ok(Member::Absent);
            }
        }
    }

    /// Deletes exactly instance `name` from `group`; one that is not a
    /// member (any more) is skipped.
    pub(crate) async fn delete_from(&self, group: &Group, name: &str) -> Result<(), ProviderError> {
        let (g, _) = self.gke_clients()?;
        let body: google_cloud_compute_v1::model::InstanceGroupManagersDeleteInstancesRequest =
            serde_json::from_value(json!({
                "instances": [group.instance_url(name)],
                "skipInstancesOnValidationError": true,
            }))
            .map_err(|e| permanent(format!("deleteInstances body: {e}")))?;
        let op = g
            .instance_group_managers
            .delete_instances()
            .set_project(&group.project)
            .set_zone(&group.zone)
            .set_instance_group_manager(&group.name)
            .set_body(body)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        let done = self
            .wait_in(&group.project, &group.zone, to_value(&op))
            .await?;
        match operation_error(&done, None) {
            None | Some(ProviderError::NotFound { .. }) => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// The groups of muster's node pools of the cluster, by pool name, and
    /// whether the pool is a flex-start one.
    async fn muster_pools(&self) -> Result<Vec<(String, Vec<Group>, bool)>, ProviderError> {
        let (g, c) = self.gke_clients()?;
        let list = g
            .cluster_manager
            .list_node_pools()
            .set_parent(parent(c))
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        Ok(list
            .node_pools
            .iter()
            .filter(|p| p.name.starts_with(POOL_PREFIX))
            .filter(|p| {
                p.config.as_ref().is_some_and(|c| {
                    c.resource_labels.get(MANAGED_LABEL).map(String::as_str) == Some("true")
                })
            })
            .map(|p| {
                let groups = p
                    .instance_group_urls
                    .iter()
                    .filter_map(|u| Group::of_url(u))
                    .collect();
                let flex = p.config.as_ref().and_then(|c| c.flex_start) == Some(true);
                (p.name.clone(), groups, flex)
            })
            .collect())
    }

    /// Terminates instance `name` of `zone` through the group that holds it:
    /// the group named by its `created-by` metadata, or, for an instance
    /// the group has not made yet, every group of muster's pools in the zone
    /// (in a flex-start pool's group, a queued resize request naming it is
    /// cancelled first: its gang is given up whole). False when no group of
    /// the cluster holds it (a plain VM).
    pub(crate) async fn terminate_in_pool(
        &self,
        zone: &str,
        name: &str,
        created_by: Option<&str>,
    ) -> Result<bool, ProviderError> {
        let groups: Vec<Group> =
            match created_by.and_then(|c| parse_url(c, "instanceGroupManagers")) {
                Some(r) => vec![Group {
                    // created-by names the project by number; the cluster's project is the same one
                    project: self.gke_clients()?.1.project.clone(),
                    zone: zone.to_string(),
                    name: r.name,
                }],
                None => {
                    let mut groups = Vec::new();
                    for (_, gs, flex) in self.muster_pools().await? {
                        for g in gs.into_iter().filter(|g| g.zone == zone) {
                            if flex {
                                self.cancel_queued(&g, name).await?;
                            }
                            groups.push(g);
                        }
                    }
                    groups
                }
            };
        for g in &groups {
            self.delete_from(g, name).await?;
        }
        Ok(!groups.is_empty())
    }

    /// Deletes muster's node pools that have held no instance for `ttl`;
    /// the names deleted.
    pub(crate) async fn delete_empty_pools(
        &self,
        ttl: Duration,
    ) -> Result<Vec<String>, ProviderError> {
        let pools = self.muster_pools().await?;
        let (g, c) = self.gke_clients()?;
        let mut deleted = Vec::new();
        for (pool, groups, _) in pools {
            let mut size = 0;
            for gr in &groups {
                let igm = g
                    .instance_group_managers
                    .get()
                    .set_project(&gr.project)
                    .set_zone(&gr.zone)
                    .set_instance_group_manager(&gr.name)
                    .send()
                    .await
                    .map_err(|e| failure(&e, None))?;
                size += to_value(&igm)["targetSize"].as_i64().unwrap_or(0);
            }
            let since = {
                let mut m = self.pools_memory();
                if size > 0 {
                    m.empty_since.remove(&pool);
                    continue;
                }
                *m.empty_since
                    .entry(pool.clone())
                    .or_insert_with(Instant::now)
            };
            if since.elapsed() < ttl {
                continue;
            }
            let sent = g
                .cluster_manager
                .delete_node_pool()
                .set_name(format!("{}/nodePools/{pool}", parent(c)))
                .send()
                .await;
            match sent {
                Ok(op) => self.gke_wait(op).await?,
                Err(e) => match failure(&e, None) {
                    ProviderError::NotFound { .. } => {}
                    other => return Err(other),
                },
            }
            let mut m = self.pools_memory();
            m.empty_since.remove(&pool);
            m.groups.remove(&pool);
            m.creating.remove(&pool);
            deleted.push(pool);
        }
        Ok(deleted)
    }
}

/// An instance of a group, as `listManagedInstances` shows it.
pub(crate) enum Member {
    /// The VM exists and the group is not acting on it.
    Made,
    /// The group's last attempt to make it failed: code and message.
    Failed(String, String),
    /// Being made.
    Pending,
    /// Not a member.
    Absent,
}

/// Machine families whose node pools take a `COMPACT` placement policy
/// (<https://cloud.google.com/kubernetes-engine/docs/how-to/compact-placement>:
/// A2, A3, A4, C2, C2D, C3, G2, H3, N2, N2D among them).
fn compact_placement(machine: &str) -> bool {
    let family = machine.split('-').next().unwrap_or_default();
    matches!(
        family,
        "a2" | "a3" | "a4" | "a4x" | "c2" | "c2d" | "c3" | "g2" | "h3" | "n2" | "n2d"
    )
}

/// A failed `nodePools.create`: an accelerator or machine type the zone
/// does not offer is the offering's capacity (the planner moves on);
/// anything else as Compute classifies it.
fn pool_failure(e: &google_cloud_gax::error::Error, request: &LaunchRequest) -> ProviderError {
    match failure(e, Some(&request.offering)) {
        ProviderError::Permanent { message } if message.contains("does not exist in zone") => {
            ProviderError::InsufficientCapacity {
                offering: request.offering.clone(),
                message,
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_links_read_and_instances_named_in_the_groups_zone() {
        let g = Group::of_url("https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroupManagers/gke-prod-muster-1-grp")
            .expect("a zonal group");
        assert_eq!(g.zone, "us-central1-a");
        assert_eq!(
            g.instance_url("muster-x"),
            "projects/p/zones/us-central1-a/instances/muster-x"
        );
        assert!(Group::of_url("projects/p/regions/r/instanceGroupManagers/g").is_none());
        assert!(compact_placement("a3-highgpu-8g") && !compact_placement("e2-standard-4"));
    }
}
