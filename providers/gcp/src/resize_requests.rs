//! Flex-start launches on GKE: the machines of one grant are asked for in
//! one resize request of the flex-start node pool's group
//! ([`crate::flex_start`] builds it), so Compute creates them all at once
//! or none.
//!
//! The first member launched creates the request, naming every member;
//! the others (and the same member again after a restart) find it by name.
//! The insert carries a `requestId` derived from the request's name and
//! group, and a request of that name that exists already (409) is the same
//! request: a repeated call creates nothing. A member is pending while the
//! request is `CREATING` or `ACCEPTED`, and its instance is read once the
//! request `SUCCEEDED`; a `FAILED` request is the offering's capacity error
//! for every member. Terminating a member whose request is still queued
//! cancels the request (only an `ACCEPTED` request can be cancelled:
//! <https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagerResizeRequests/cancel>),
//! so the whole gang goes back to the planner.

use muster_provider_api::{Instance, InstanceState, LaunchRequest, ProviderError};
use serde_json::Value;

use crate::compute::failure;
use crate::errors::{classify, operation_error};
use crate::flex_start::{
    RequestState, grant_of, names_instance, request_state, resize_request_body, run_secs,
};
use crate::gke_nodes::{Group, Member};
use crate::insert::request_id;
use crate::names::provider_id;
use crate::provider::{GcpProvider, every_page, permanent_error as permanent, to_value};

impl GcpProvider {
    /// The resize request `name` of `group`, or `None` when there is none.
    async fn resize_request(
        &self,
        group: &Group,
        name: &str,
    ) -> Result<Option<Value>, ProviderError> {
        let (g, _) = self.gke_clients()?;
        match g
            .resize_requests
            .get()
            .set_project(&group.project)
            .set_zone(&group.zone)
            .set_instance_group_manager(&group.name)
            .set_resize_request(name)
            .send()
            .await
        {
            Ok(r) => Ok(Some(to_value(&r))),
            Err(e) => match failure(&e, None) {
                ProviderError::NotFound { .. } => Ok(None),
                other => Err(other),
            },
        }
    }

    /// Launches one member of the request's grant through `group`, whose
    /// instance is `instance`: the grant's resize request is created when it
    /// does not exist, then read.
    pub(crate) async fn launch_granted(
        &self,
        request: &LaunchRequest,
        group: &Group,
        instance: &str,
    ) -> Result<Instance, ProviderError> {
        let grant = grant_of(request);
        let found = match self.resize_request(group, &grant.name).await? {
            Some(r) => r,
            None => {
                let body =
                    resize_request_body(&grant, request.gang.as_deref(), run_secs(&self.class));
                let body: google_cloud_compute_v1::model::InstanceGroupManagerResizeRequest =
                    serde_json::from_value(body)
                        .map_err(|e| permanent(format!("resize request body: {e}")))?;
                let (g, _) = self.gke_clients()?;
                let sent = g
                    .resize_requests
                    .insert()
                    .set_project(&group.project)
                    .set_zone(&group.zone)
                    .set_instance_group_manager(&group.name)
                    .set_request_id(request_id(&format!("{}/{}", grant.name, group.name)))
                    .set_body(body)
                    .send()
                    .await;
                match sent {
                    Ok(op) => {
                        let done = self
                            .wait_in(&group.project, &group.zone, to_value(&op))
                            .await?;
                        if let Some(err) = operation_error(&done, Some(&request.offering)) {
                            return Err(err);
                        }
                    }
                    // made meanwhile by another member's launch: the same request
                    Err(e) if e.http_status_code() == Some(409) => {}
                    Err(e) => return Err(failure(&e, Some(&request.offering))),
                }
                self.resize_request(group, &grant.name)
                    .await?
                    .ok_or_else(|| ProviderError::Transient {
                        message: format!("resize request {} not found after insert", grant.name),
                        retry_after: None,
                    })?
            }
        };
        if !names_instance(&found, instance) {
            return Err(permanent(format!(
                "resize request {} of group {} does not name instance {instance}",
                grant.name, group.name
            )));
        }
        match request_state(&found) {
            RequestState::Waiting => Ok(self.pending(request, group, instance)),
            RequestState::Succeeded => match self.member(group, instance).await? {
                Member::Made => self.get(&group.zone, instance).await,
                _ => Ok(self.pending(request, group, instance)),
            },
            RequestState::Failed(code, message) => {
                let message = format!("resize request {}: {message}", grant.name);
                Err(
                    match classify(None, &code, &message, Some(&request.offering)) {
                        e @ (ProviderError::InsufficientCapacity { .. }
                        | ProviderError::QuotaExceeded { .. }) => e,
                        // Dynamic Workload Scheduler found no capacity in time
                        _ => ProviderError::InsufficientCapacity {
                            offering: request.offering.clone(),
                            message,
                        },
                    },
                )
            }
            RequestState::Cancelled => Err(permanent(format!(
                "resize request {} was cancelled: its gang was given up",
                grant.name
            ))),
        }
    }

    /// The member as pending: the PoolNode waits for its Node.
    fn pending(&self, request: &LaunchRequest, group: &Group, instance: &str) -> Instance {
        Instance {
            provider_id: provider_id(&group.project, &group.zone, instance),
            offering: request.offering.clone(),
            state: InstanceState::Pending,
            launched_at: crate::provider::now(),
            pool_node: Some(request.name.clone()),
            tags: Default::default(),
            network: Vec::new(),
        }
    }

    /// Cancels every queued (`ACCEPTED`) resize request of `group` that names
    /// instance `name`; true when one was.
    pub(crate) async fn cancel_queued(
        &self,
        group: &Group,
        name: &str,
    ) -> Result<bool, ProviderError> {
        let (g, _) = self.gke_clients()?;
        // every page: finished requests stay on the group, so a long-lived
        // group's list can pass one page (Compute's default 500)
        let list = &g.resize_requests;
        let pages = every_page(|token| async move {
            list.list()
                .set_project(&group.project)
                .set_zone(&group.zone)
                .set_instance_group_manager(&group.name)
                .set_page_token(token)
                .send()
                .await
                .map(|page| to_value(&page))
                .map_err(|e| failure(&e, None))
        })
        .await?;
        let requests: Vec<Value> = pages
            .iter()
            .flat_map(|v| v["items"].as_array().into_iter().flatten().cloned())
            .collect();
        let mut cancelled = false;
        for r in &requests {
            if r["state"].as_str() != Some("ACCEPTED") || !names_instance(r, name) {
                continue;
            }
            let Some(request) = r["name"].as_str() else {
                continue;
            };
            let sent = g
                .resize_requests
                .cancel()
                .set_project(&group.project)
                .set_zone(&group.zone)
                .set_instance_group_manager(&group.name)
                .set_resize_request(request)
                .set_request_id(request_id(&format!("cancel/{request}/{}", group.name)))
                .send()
                .await;
            match sent {
                Ok(op) => {
                    let done = self
                        .wait_in(&group.project, &group.zone, to_value(&op))
                        .await?;
                    if let Some(err) = operation_error(&done, None) {
                        return Err(err);
                    }
                    cancelled = true;
                }
                // granted or cancelled meanwhile: nothing left to cancel
                Err(e)
                    if e.http_status_code() == Some(400) || e.http_status_code() == Some(404) => {}
                Err(e) => return Err(failure(&e, None)),
            }
        }
        Ok(cancelled)
    }
}
