//! A cloud's instances of one cluster as orphan-collection candidates
//! (`muster_planner::orphans` decides which are orphans).

use muster_planner::orphans::OwnedInstance;

use crate::{CloudProvider, InstanceState, ProviderError};

/// The instances `provider` lists for `cluster`, terminated ones left out.
pub async fn owned_instances(
    provider: &dyn CloudProvider,
    cluster: &str,
) -> Result<Vec<OwnedInstance>, ProviderError> {
    Ok(provider
        .list(cluster)
        .await?
        .into_iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .map(|i| OwnedInstance {
            provider_id: i.provider_id,
            pool_node: i.pool_node,
            launched_at: i.launched_at,
        })
        .collect())
}
