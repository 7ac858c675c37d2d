//! The providers built into this binary: a [`ProviderFactory`] that builds
//! the provider of a NodeClass from the cloud block its spec sets (`aws`
//! with the `aws` feature, `gcp` with the `gcp` feature) and keeps it while
//! the spec stays the same. A
//! cloud not built in is reported as unsupported (a `Valid=False` condition
//! on the NodeClass).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use muster_provider_api::CloudProvider;

use super::providers::{ProviderFactory, ProviderSetupError};

/// How the built-in providers reach their clouds.
#[derive(Debug, Clone, Default)]
pub struct CloudOptions {
    /// AWS: endpoint override, interruption queue, retries.
    #[cfg(feature = "aws")]
    pub aws: muster_provider_aws::AwsOptions,
    /// GCP: endpoint override, credentials, retries.
    #[cfg(feature = "gcp")]
    pub gcp: muster_provider_gcp::GcpOptions,
}

/// A provider built for a NodeClass spec.
type Built = (serde_json::Value, Arc<dyn CloudProvider>);

/// The built-in providers, one per NodeClass, rebuilt when its spec changes.
#[derive(Default)]
pub struct Clouds {
    options: CloudOptions,
    built: Mutex<BTreeMap<String, Built>>,
}

impl Clouds {
    /// A factory with these options.
    pub fn new(options: CloudOptions) -> Clouds {
        Clouds {
            options,
            built: Mutex::new(BTreeMap::new()),
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
        #[cfg(feature = "gcp")]
        if spec.get("gcp").is_some() {
            let p = muster_provider_gcp::GcpProvider::new(node_class, spec, &self.options.gcp)
                .await
                .map_err(|e| ProviderSetupError::InvalidNodeClass(e.to_string()))?;
            return Ok(Arc::new(p));
        }
        let _ = node_class;
        #[cfg(feature = "aws")]
        if spec.get("aws").is_some() {
            let p = muster_provider_aws::AwsProvider::new(spec, self.options.aws.clone())
                .await
                .map_err(|e| ProviderSetupError::InvalidNodeClass(e.to_string()))?;
            return Ok(Arc::new(p));
        }
        let _ = &self.options;
        let cloud = ["aws", "gcp"]
            .into_iter()
            .find(|c| spec.get(c).is_some())
            .unwrap_or("unknown");
        Err(ProviderSetupError::Unsupported(cloud.to_string()))
    }
}
