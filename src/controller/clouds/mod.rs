//! The production [`ProviderFactory`]: builds the cloud provider a NodeClass
//! names (`spec.aws` or `spec.gcp`) from the provider crates compiled into
//! this binary (cargo features `aws`, `gcp`), and keeps one provider per
//! NodeClass until its spec changes.

#[cfg(feature = "aws")]
mod aws;
#[cfg(feature = "gcp")]
mod gcp;

use std::collections::BTreeMap;
use std::sync::Arc;

use muster_provider_api::CloudProvider;
use tokio::sync::Mutex;

use super::providers::{ProviderFactory, ProviderSetupError};

/// Options for building providers that do not come from a NodeClass.
#[derive(Debug, Clone, Default)]
pub struct CloudOptions {
    /// Cluster name: instances are tagged with it and listed by it.
    pub cluster: String,
    /// EC2 endpoint override (tests, private endpoints).
    pub aws_endpoint_url: Option<String>,
    /// SQS queue URL that receives EC2 interruption events (EventBridge target).
    pub aws_interruption_queue_url: Option<String>,
    /// SQS endpoint override (tests, private endpoints).
    pub aws_sqs_endpoint_url: Option<String>,
    /// Compute Engine endpoint override (tests, private endpoints).
    pub gcp_endpoint_url: Option<String>,
}

/// A built provider and the NodeClass spec it was built from.
type Built = (serde_json::Value, Arc<dyn CloudProvider>);

/// Builds and caches providers for NodeClasses.
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

    async fn build(
        &self,
        node_class: &str,
        spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
        if let Some(aws) = spec.get("aws") {
            #[cfg(feature = "aws")]
            return aws::build(node_class, aws, &self.options).await;
            #[cfg(not(feature = "aws"))]
            {
                let _ = (node_class, aws);
                return Err(ProviderSetupError::Unsupported("aws".into()));
            }
        }
        if let Some(gcp) = spec.get("gcp") {
            #[cfg(feature = "gcp")]
            return gcp::build(node_class, gcp, &self.options).await;
            #[cfg(not(feature = "gcp"))]
            {
                let _ = (node_class, gcp);
                return Err(ProviderSetupError::Unsupported("gcp".into()));
            }
        }
        Err(ProviderSetupError::InvalidNodeClass(format!(
            "NodeClass {node_class}: spec sets neither aws nor gcp"
        )))
    }
}

#[async_trait::async_trait]
impl ProviderFactory for Clouds {
    async fn provider(
        &self,
        node_class: &str,
        spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
        let mut built = self.built.lock().await;
        if let Some((seen, p)) = built.get(node_class)
            && seen == spec
        {
            return Ok(p.clone());
        }
        let p = self.build(node_class, spec).await?;
        built.insert(node_class.to_string(), (spec.clone(), p.clone()));
        Ok(p)
    }
}
