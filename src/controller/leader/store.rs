//! Reading and writing the Lease: the only I/O of the election.

use std::future::Future;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

/// Why a Lease request failed (bounded categories for logs).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaderError {
    /// Another candidate wrote the Lease since it was read (409).
    #[error("lost the race for the lease")]
    Conflict,
    /// The API server could not be reached, refused, or did not answer in time.
    #[error("lease request failed: {0}")]
    Api(#[from] kube::Error),
}

impl LeaderError {
    /// A short, bounded reason for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            LeaderError::Conflict => "Conflict",
            LeaderError::Api(_) => "ApiError",
        }
    }
}

/// Where the election record lives.
pub(crate) trait LeaseStore: Send + Sync + 'static {
    /// The Lease, or `None` when it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, LeaderError>> + Send;
    /// Creates the Lease with `spec`; `Conflict` when it exists already.
    fn create(&self, spec: LeaseSpec) -> impl Future<Output = Result<Lease, LeaderError>> + Send;
    /// Replaces `base` with `spec`, on condition that the Lease is still at
    /// `base`'s resourceVersion (`Conflict` otherwise).
    fn replace(
        &self,
        base: &Lease,
        spec: LeaseSpec,
    ) -> impl Future<Output = Result<Lease, LeaderError>> + Send;
}

/// The Lease on the API server.
pub(crate) struct KubeLease {
    api: Api<Lease>,
    name: String,
    namespace: String,
}

impl KubeLease {
    pub(crate) fn new(client: Client, namespace: &str, name: &str) -> KubeLease {
        KubeLease {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            namespace: namespace.to_string(),
        }
    }
}

fn conflict(e: kube::Error) -> LeaderError {
    match e {
        kube::Error::Api(s) if s.code == 409 => LeaderError::Conflict,
        e => LeaderError::Api(e),
    }
}

impl LeaseStore for KubeLease {
    async fn get(&self) -> Result<Option<Lease>, LeaderError> {
        Ok(self.api.get_opt(&self.name).await?)
    }

    async fn create(&self, spec: LeaseSpec) -> Result<Lease, LeaderError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            },
            spec: Some(spec),
        };
        self.api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(conflict)
    }

    async fn replace(&self, base: &Lease, spec: LeaseSpec) -> Result<Lease, LeaderError> {
        let mut lease = base.clone();
        lease.spec = Some(spec);
        // `lease` carries the resourceVersion read: a concurrent writer makes this 409
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(conflict)
    }
}
