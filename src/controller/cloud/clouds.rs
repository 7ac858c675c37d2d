//! The providers built into this binary: a [`ProviderFactory`] that builds
//! the provider of a NodeClass from the cloud block its spec sets (`aws`
//! with the `aws` feature, `gcp` with the `gcp` feature, `karpenter` —
//! Karpenter's delegate mode, `crate::controller::cloud::karpenter` — with
//! the `aws` feature, `sim` always: the simulated cloud of
//! [`crate::controller::cloud::sim`]) and keeps it while the spec stays the
//! same. A cloud not built in is reported as unsupported, a cloud built in
//! but not enabled (`--cloud`; the simulated cloud and the delegate mode are
//! off unless named) as disabled (a `Ready=False` condition on the
//! NodeClass).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use muster_provider_api::CloudProvider;

use crate::controller::cloud::providers::{ProviderFactory, ProviderSetupError};

/// A cloud a NodeClass may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CloudName {
    /// Amazon EC2 (`spec.aws`).
    Aws,
    /// Google Compute Engine (`spec.gcp`).
    Gcp,
    /// muster's simulated cloud (`spec.sim`): Node objects, no machines.
    Sim,
    /// Karpenter launches the machines muster chooses (`spec.karpenter`).
    Karpenter,
}

impl CloudName {
    /// Every cloud, in the order a NodeClass spec is searched.
    pub const ALL: [CloudName; 4] = [
        CloudName::Aws,
        CloudName::Gcp,
        CloudName::Sim,
        CloudName::Karpenter,
    ];

    /// The spec block's key (`aws`, `gcp`, `sim`, `karpenter`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CloudName::Aws => "aws",
            CloudName::Gcp => "gcp",
            CloudName::Sim => "sim",
            CloudName::Karpenter => "karpenter",
        }
    }

    /// The cloud the planner's offerings of this block are on (Karpenter
    /// launches EC2 machines).
    pub(crate) fn planner_provider(self) -> muster_planner::Provider {
        match self {
            CloudName::Aws | CloudName::Karpenter => muster_planner::Provider::Aws,
            CloudName::Gcp => muster_planner::Provider::Gcp,
            CloudName::Sim => muster_planner::Provider::Sim,
        }
    }

    /// Every cloud block a NodeClass spec sets.
    pub(crate) fn all_of_spec(spec: &serde_json::Value) -> Vec<CloudName> {
        CloudName::ALL
            .into_iter()
            .filter(|c| spec.get(c.as_str()).is_some_and(|v| !v.is_null()))
            .collect()
    }

    /// The cloud whose block a NodeClass spec sets (the first, if several).
    pub fn of_spec(spec: &serde_json::Value) -> Option<CloudName> {
        CloudName::all_of_spec(spec).into_iter().next()
    }
}

/// How the built-in providers reach their clouds.
#[derive(Debug, Clone, Default)]
pub struct CloudOptions {
    /// The clouds NodeClasses may launch on; `None` is every real cloud
    /// built in (the simulated cloud only when named).
    pub enabled: Option<Vec<CloudName>>,
    /// AWS: endpoint override, interruption queue, retries.
    #[cfg(feature = "aws")]
    pub aws: muster_provider_aws::AwsOptions,
    /// GCP: endpoint override, credentials, retries.
    #[cfg(feature = "gcp")]
    pub gcp: muster_provider_gcp::GcpOptions,
}

impl CloudOptions {
    /// These options, with NodeClasses allowed to launch on `clouds` only.
    pub fn enable(mut self, clouds: &[CloudName]) -> CloudOptions {
        self.enabled = Some(clouds.to_vec());
        self
    }
}

/// A provider built for a NodeClass spec.
type Built = (serde_json::Value, Arc<dyn CloudProvider>);

/// The built-in providers, one per NodeClass, rebuilt when its spec changes.
#[derive(Default)]
pub struct Clouds {
    options: CloudOptions,
    client: Option<kube::Client>,
    built: Mutex<BTreeMap<String, Built>>,
}

impl Clouds {
    /// A factory with these options.
    pub fn new(options: CloudOptions) -> Clouds {
        Clouds {
            options,
            client: None,
            built: Mutex::new(BTreeMap::new()),
        }
    }

    /// The Kubernetes client the simulated cloud keeps its Nodes with and
    /// the delegate mode its NodeClaims; without one a `sim` or `karpenter`
    /// NodeClass is unsupported.
    pub fn with_client(mut self, client: kube::Client) -> Clouds {
        self.client = Some(client);
        self
    }

    /// True when NodeClasses may launch on `cloud`.
    pub fn enabled(&self, cloud: CloudName) -> bool {
        match &self.options.enabled {
            Some(list) => list.contains(&cloud),
            None => !matches!(cloud, CloudName::Sim | CloudName::Karpenter),
        }
    }
}

#[async_trait::async_trait]
impl ProviderFactory for Clouds {
    async fn provider(
        &self,
        node_class: &str,
        spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
        if let Some((s, p)) = self
            .built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node_class)
            && s == spec
        {
            return Ok(p.clone());
        }
        let provider = self.build(node_class, spec).await?;
        self.built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node_class.to_string(), (spec.clone(), provider.clone()));
        Ok(provider)
    }
}

impl Clouds {
    async fn build(
        &self,
        node_class: &str,
        spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
        let Some(cloud) = CloudName::of_spec(spec) else {
            return Err(ProviderSetupError::Unsupported("unknown".to_string()));
        };
        if !self.enabled(cloud) {
            return Err(ProviderSetupError::Disabled(cloud.as_str().to_string()));
        }
        let _ = node_class;
        let _ = &self.options;
        match cloud {
            #[cfg(feature = "gcp")]
            CloudName::Gcp => {
                let p = muster_provider_gcp::GcpProvider::new(node_class, spec, &self.options.gcp)
                    .await
                    .map_err(|e| ProviderSetupError::InvalidNodeClass(e.to_string()))?;
                Ok(Arc::new(p))
            }
            #[cfg(feature = "aws")]
            CloudName::Aws => {
                let p = muster_provider_aws::AwsProvider::new(spec, self.options.aws.clone())
                    .await
                    .map_err(|e| ProviderSetupError::InvalidNodeClass(e.to_string()))?;
                Ok(Arc::new(p))
            }
            #[cfg(feature = "aws")]
            CloudName::Karpenter => {
                let Some(client) = self.client.clone() else {
                    return Err(ProviderSetupError::Unsupported(cloud.as_str().to_string()));
                };
                let p = crate::controller::cloud::karpenter::KarpenterClaims::new(
                    client,
                    node_class,
                    spec,
                    self.options.aws.clone(),
                )
                .await
                .map_err(|e| ProviderSetupError::InvalidNodeClass(e.to_string()))?;
                Ok(Arc::new(p))
            }
            CloudName::Sim => {
                let Some(client) = self.client.clone() else {
                    return Err(ProviderSetupError::Unsupported(cloud.as_str().to_string()));
                };
                let p = crate::controller::cloud::sim::SimNodes::new(client, node_class, spec)
                    .map_err(|e| ProviderSetupError::InvalidNodeClass(e.to_string()))?;
                Ok(Arc::new(p))
            }
            #[allow(unreachable_patterns)]
            other => Err(ProviderSetupError::Unsupported(other.as_str().to_string())),
        }
    }
}
