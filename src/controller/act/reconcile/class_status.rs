//! `NodeClass` status: what the class's cloud resolved from its selectors
//! (subnets, security groups, images, zones), with `Ready=True`, or
//! `Ready=False` naming what is missing (a selector that matched nothing, a
//! cloud muster was not built for, credentials that do not work). Resolved
//! when the class changes and at most once per `offerings_ttl` otherwise.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use kube::ResourceExt;
use muster_crds::common::Provider as CrdProvider;
use muster_provider_api::{ProviderError, Resolution};

use super::super::{patch_status, status_patch, with_condition};
use crate::controller::ctx::Ctx;
use crate::controller::objects::Kind;
use crate::controller::translate::Observed;
use muster_crds::NodeClassStatus;
use muster_crds::nodeclass::{
    ResolvedImage as CrdImage, ResolvedSecurityGroup as CrdSecurityGroup,
    ResolvedSubnet as CrdSubnet,
};
use muster_planner::Time;

/// When each NodeClass was last resolved, and at which generation.
#[derive(Debug, Default)]
pub struct Resolved(Mutex<BTreeMap<String, (Option<i64>, Instant)>>);

impl Resolved {
    fn due(&self, name: &str, generation: Option<i64>, ttl: std::time::Duration) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = m
            .get(name)
            .is_some_and(|(g, at)| *g == generation && at.elapsed() < ttl);
        if !fresh {
            m.insert(name.to_string(), (generation, Instant::now()));
        }
        !fresh
    }
}

/// The status a resolution outcome gives a NodeClass whose status was
/// `before` (conditions aside), and the `Ready` condition's parts: a
/// resolution replaces what was resolved before; a failure names the
/// provider and keeps the last resolution.
pub fn status(
    before: &NodeClassStatus,
    outcome: &Result<Resolution, String>,
    provider: Option<CrdProvider>,
) -> (NodeClassStatus, bool, &'static str, String) {
    match outcome {
        Ok(r) => (
            NodeClassStatus {
                provider,
                subnets: r
                    .subnets
                    .iter()
                    .map(|s| CrdSubnet {
                        id: s.id.clone(),
                        zone: s.zone.clone(),
                        zone_id: s.zone_id.clone(),
                    })
                    .collect(),
                security_groups: r
                    .security_groups
                    .iter()
                    .map(|g| CrdSecurityGroup {
                        id: g.id.clone(),
                        name: g.name.clone(),
                    })
                    .collect(),
                images: r
                    .images
                    .iter()
                    .map(|i| CrdImage {
                        id: i.id.clone(),
                        name: i.name.clone(),
                        architecture: i.architecture.clone(),
                    })
                    .collect(),
                zones: r.zones.clone(),
                ..before.clone()
            },
            true,
            "Resolved",
            String::new(),
        ),
        Err(m) => (
            NodeClassStatus {
                provider,
                ..before.clone()
            },
            false,
            "NotResolved",
            m.clone(),
        ),
    }
}

/// Resolves every NodeClass that is due and writes its status.
pub async fn update(ctx: &Ctx, observed: &Observed, now: Time) {
    for nc in observed.of(Kind::NodeClass) {
        let name = nc.name_any();
        if !ctx
            .resolved
            .due(&name, nc.metadata.generation, ctx.config.offerings_ttl)
        {
            continue;
        }
        let spec = nc.data.get("spec").cloned().unwrap_or_default();
        let provider = if spec.get("aws").is_some() {
            Some(CrdProvider::Aws)
        } else if spec.get("gcp").is_some() {
            Some(CrdProvider::Gcp)
        } else {
            None
        };
        let outcome = match ctx.deps.providers.provider(&name, &spec).await {
            Ok(p) => p.resolve().await.map_err(|e| match e {
                ProviderError::NotFound { what } => format!("{what} matched nothing"),
                e => e.to_string(),
            }),
            Err(e) => Err(e.to_string()),
        };
        let before: NodeClassStatus = nc
            .data
            .get("status")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        let (mut after, ok, reason, message) = status(&before, &outcome, provider);
        let cond = crate::controller::act::condition(
            "Ready",
            ok,
            reason,
            message.clone(),
            now,
            nc.metadata.generation,
        );
        let changed = with_condition(nc, cond);
        if let Some(c) = &changed {
            after.conditions = c.clone();
        }
        after.observed_generation = nc.metadata.generation;
        if let Some(patch) = status_patch(&before, &after)
            && let Err(e) = patch_status(&ctx.client, Kind::NodeClass, None, &name, patch).await
        {
            tracing::warn!(node_class = %name, error = %e, "could not write status");
        }
        if !ok && changed.is_some() {
            ctx.events.warn(Kind::NodeClass, nc, reason, message).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_provider_api::ResolvedSubnet;

    fn f_status() -> NodeClassStatus {
        NodeClassStatus {
            subnets: vec![CrdSubnet {
                id: "subnet-1".into(),
                zone: "us-east-1a".into(),
                zone_id: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn resolution_becomes_status_and_condition() {
        let r = Resolution {
            subnets: vec![ResolvedSubnet {
                id: "subnet-1".into(),
                zone: "us-east-1a".into(),
                zone_id: None,
            }],
            zones: vec!["us-east-1a".into()],
            ..Resolution::default()
        };
        let (st, ok, reason, _) =
            status(&NodeClassStatus::default(), &Ok(r), Some(CrdProvider::Aws));
        assert!(ok);
        assert_eq!(reason, "Resolved");
        let f = serde_json::to_value(&st).expect("json");
        assert_eq!(f["subnets"][0]["id"], "subnet-1");
        assert_eq!(f["provider"], "aws");
        let (st, ok, _, message) = status(
            &NodeClassStatus::default(),
            &Err("subnetSelectorTerms[0] (tag karpenter.sh/discovery=x) matched nothing".into()),
            Some(CrdProvider::Aws),
        );
        assert!(!ok);
        assert!(message.contains("subnetSelectorTerms[0]"));
        assert!(st.subnets.is_empty());
        // a failure keeps the last resolution
        let (kept, _, _, _) = status(&f_status(), &Err("down".into()), Some(CrdProvider::Aws));
        assert_eq!(kept.subnets.len(), 1);
    }
}
