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
use serde_json::json;

use super::super::{patch_status, with_condition};
use crate::controller::ctx::Ctx;
use crate::controller::objects::Kind;
use crate::controller::translate::Observed;
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

/// The status fields and `Ready` condition for a resolution outcome.
pub fn status(
    outcome: &Result<Resolution, String>,
    provider: Option<CrdProvider>,
) -> (serde_json::Value, bool, &'static str, String) {
    match outcome {
        Ok(r) => (
            json!({
                "provider": provider,
                "subnets": r.subnets.iter().map(|s| json!({"id": s.id, "zone": s.zone, "zoneID": s.zone_id})).collect::<Vec<_>>(),
                "securityGroups": r.security_groups.iter().map(|g| json!({"id": g.id, "name": g.name})).collect::<Vec<_>>(),
                "images": r.images.iter().map(|i| json!({"id": i.id, "name": i.name, "architecture": i.architecture})).collect::<Vec<_>>(),
                "zones": r.zones,
            }),
            true,
            "Resolved",
            String::new(),
        ),
        Err(m) => (
            json!({"provider": provider}),
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
        let (mut fields, ok, reason, message) = status(&outcome, provider);
        let cond = crate::controller::act::condition(
            "Ready",
            ok,
            reason,
            message.clone(),
            now,
            nc.metadata.generation,
        );
        let changed = with_condition(nc, cond);
        if let (Some(m), Some(c)) = (fields.as_object_mut(), changed.as_ref()) {
            m.insert(
                "conditions".into(),
                serde_json::to_value(c).unwrap_or_default(),
            );
        }
        if let Some(m) = fields.as_object_mut() {
            m.insert("observedGeneration".into(), json!(nc.metadata.generation));
        }
        if let Err(e) = patch_status(&ctx.client, Kind::NodeClass, None, &name, fields).await {
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
        let (f, ok, reason, _) = status(&Ok(r), Some(CrdProvider::Aws));
        assert!(ok);
        assert_eq!(reason, "Resolved");
        assert_eq!(f["subnets"][0]["id"], "subnet-1");
        assert_eq!(f["provider"], "aws");
        let (f, ok, _, message) = status(
            &Err("subnetSelectorTerms[0] (tag karpenter.sh/discovery=x) matched nothing".into()),
            Some(CrdProvider::Aws),
        );
        assert!(!ok);
        assert!(message.contains("subnetSelectorTerms[0]"));
        assert!(f.get("subnets").is_none());
    }
}
