//! Builds the AWS provider of a NodeClass.

use std::sync::Arc;

use muster_provider_api::CloudProvider;

use super::CloudOptions;
use crate::controller::providers::ProviderSetupError;

/// The provider for `spec.aws` of NodeClass `node_class`.
pub async fn build(
    node_class: &str,
    spec: &serde_json::Value,
    options: &CloudOptions,
) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
    let _ = (node_class, spec, options);
    Err(ProviderSetupError::Unsupported("aws".into()))
}
