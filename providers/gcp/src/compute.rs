//! The Compute clients (`instances`, `machineTypes`, `acceleratorTypes`,
//! `zoneOperations`, `zones`, `reservations`): Application Default Credentials (Workload Identity on
//! GKE) unless anonymous ones are asked for, and an optional endpoint
//! override (tests, private endpoints). Failures become typed errors: the
//! HTTP status and the error reason of the answer, or the code of an
//! operation's error.

use google_cloud_compute_v1::client::{
    AcceleratorTypes, InstanceGroupManagerResizeRequests, InstanceGroupManagers, Instances,
    MachineTypes, Reservations, ZoneOperations, Zones,
};
use muster_planner::OfferingKey;
use muster_provider_api::ProviderError;

pub use crate::errors::operation_error;
use crate::errors::{classify, error_body};

/// How the provider reaches Compute.
#[derive(Debug, Clone)]
pub struct GcpOptions {
    /// Endpoint override, e.g. `http://127.0.0.1:8080` (tests).
    pub endpoint: Option<String>,
    /// Anonymous credentials (a local fake needs none).
    pub anonymous: bool,
    /// Attempts per call, the first included (429, 503 and other retryable
    /// answers of idempotent calls are retried with exponential backoff).
    pub max_attempts: u32,
    /// Backoff before the first retry (doubles up to 10 s).
    pub initial_backoff: std::time::Duration,
    /// Between two reads of a managed instance group or GKE operation that
    /// is still working.
    pub poll_interval: std::time::Duration,
}

impl Default for GcpOptions {
    fn default() -> Self {
        GcpOptions {
            endpoint: None,
            anonymous: false,
            max_attempts: 5,
            initial_backoff: std::time::Duration::from_millis(500),
            poll_interval: std::time::Duration::from_secs(2),
        }
    }
}

/// The clients of one NodeClass.
#[derive(Clone, Debug)]
pub struct Clients {
    /// `instances`.
    pub instances: Instances,
    /// `machineTypes`.
    pub machine_types: MachineTypes,
    /// `acceleratorTypes`.
    pub accelerator_types: AcceleratorTypes,
    /// `zoneOperations`.
    pub operations: ZoneOperations,
    /// `zones`.
    pub zones: Zones,
    /// `reservations` (the NodeClass's selected reservations).
    pub reservations: Reservations,
}

macro_rules! build {
    ($client:ty, $options:expr) => {{
        let backoff = google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder::new()
            .with_initial_delay($options.initial_backoff)
            .with_maximum_delay(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| ProviderError::Permanent {
                message: format!("Compute client backoff: {e}"),
            })?;
        let mut b = <$client>::builder()
            .with_retry_policy(
                google_cloud_gax::retry_policy::RetryPolicyExt::with_attempt_limit(
                    google_cloud_gax::retry_policy::Aip194Strict,
                    $options.max_attempts.max(1),
                ),
            )
            .with_backoff_policy(backoff);
        if let Some(e) = &$options.endpoint {
            b = b.with_endpoint(e.clone());
        }
        if $options.anonymous {
            b = b.with_credentials(
                google_cloud_auth::credentials::anonymous::Builder::new().build(),
            );
        }
        b.build().await.map_err(|e| ProviderError::Permanent {
            message: format!("Compute client: {e}"),
        })?
    }};
}

/// The clients of GKE node pools and their managed instance groups.
#[derive(Clone, Debug)]
pub struct GkeClients {
    /// GKE `ClusterManager` (clusters, node pools, operations).
    pub cluster_manager: google_cloud_container_v1::client::ClusterManager,
    /// `instanceGroupManagers`.
    pub instance_group_managers: InstanceGroupManagers,
    /// `instanceGroupManagerResizeRequests` (flex-start grants).
    pub resize_requests: InstanceGroupManagerResizeRequests,
}

/// Builds the GKE clients (same endpoint override and credentials; the
/// GKE API shares Compute's host in tests).
pub async fn connect_gke(options: &GcpOptions) -> Result<GkeClients, ProviderError> {
    Ok(GkeClients {
        cluster_manager: build!(google_cloud_container_v1::client::ClusterManager, options),
        instance_group_managers: build!(InstanceGroupManagers, options),
        resize_requests: build!(InstanceGroupManagerResizeRequests, options),
    })
}

/// Builds the clients.
pub async fn connect(options: &GcpOptions) -> Result<Clients, ProviderError> {
    Ok(Clients {
        instances: build!(Instances, options),
        machine_types: build!(MachineTypes, options),
        accelerator_types: build!(AcceleratorTypes, options),
        operations: build!(ZoneOperations, options),
        zones: build!(Zones, options),
        reservations: build!(Reservations, options),
    })
}

/// A failed call as a typed error (`offering` is named by capacity errors).
pub fn failure(
    e: &google_cloud_gax::error::Error,
    offering: Option<&OfferingKey>,
) -> ProviderError {
    let status = e.http_status_code();
    let (reason, message) = e.http_payload().map(|p| error_body(p)).unwrap_or_default();
    let reason = reason
        .or_else(|| e.status().map(|s| format!("{:?}", s.code)))
        .unwrap_or_default();
    let message = message
        .or_else(|| e.status().map(|s| s.message.clone()))
        .unwrap_or_else(|| e.to_string());
    match status {
        // retries ran out (429, 503 …), or no answer came at all
        _ if e.is_exhausted() => ProviderError::Transient {
            message,
            retry_after: None,
        },
        None if e.is_timeout() || e.is_io() || e.is_connect() || e.is_transport() => {
            ProviderError::Transient {
                message,
                retry_after: None,
            }
        }
        _ => classify(status, &reason, &message, offering),
    }
}
