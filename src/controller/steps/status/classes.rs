//! `NodeClass` status: what the class's cloud resolved from its selectors
//! (subnets, security groups, images, zones), with `Ready=True`, or
//! `Ready=False` naming what is missing (a selector that matched nothing, a
//! cloud muster was not built for, credentials that do not work); with a
//! resolution that found subnets, `SubnetsUsable` (see
//! [`super::subnets`]). Resolved
//! when the class changes and at most once per `offerings_ttl` otherwise,
//! off the planning path ([`crate::controller::cloud::work`]): a NodeClass
//! whose cloud answers slowly delays no cycle.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::ResourceExt;
use muster_crds::common::Provider as CrdProvider;
use muster_provider_api::{CloudProvider, ProviderError, Resolution};

use crate::controller::base::api::{
    condition, patch_status, status_patch, with_condition, with_condition_in,
};
use crate::controller::base::conditions::ConditionType;
use crate::controller::base::objects::Kind;
use crate::controller::cloud::clouds::CloudName;
use crate::controller::cloud::work::{Job, Progress};
use crate::controller::ctx::{Ctx, CycleProviders};
use crate::controller::observe::Observed;
use crate::controller::steps::status::subnets;
use muster_crds::NodeClassStatus;
use muster_crds::nodeclass::{
    ResolvedImage as CrdImage, ResolvedSecurityGroup as CrdSecurityGroup,
    ResolvedSubnet as CrdSubnet,
};
use muster_planner::Time;

/// When each NodeClass was last resolved, and at which generation.
#[derive(Debug, Default)]
pub(crate) struct Resolved(Mutex<BTreeMap<String, (Option<i64>, Instant)>>);

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
pub(crate) fn status(
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

/// What a resolution job hands back: the generation of the spec it
/// resolved, and the outcome.
type Resolving = (Option<i64>, Result<Resolution, String>);

/// Resolves every NodeClass that is due off the planning path, and writes
/// the status of every NodeClass whose resolution finished since: a cycle
/// starts the provider's `resolve` as background cloud work (on the
/// NodeClass's own permits) and a later cycle, woken by its end, writes
/// what it found. A NodeClass without a provider (a cloud not built in or
/// not enabled, an invalid spec) asks no cloud: its status is written in
/// the cycle that finds it due.
pub(crate) async fn update(
    ctx: &Ctx,
    resolved: &Resolved,
    observed: &Observed,
    providers: &CycleProviders,
    now: Time,
) {
    for nc in observed.of(Kind::NodeClass) {
        let name = nc.name_any();
        let generation = nc.metadata.generation;
        let due = resolved.due(&name, generation, ctx.config.offerings_ttl);
        let outcome = match providers.setup(&name) {
            None => continue,
            Some(Err(e)) if due => Err(e.to_string()),
            Some(Err(_)) => continue,
            Some(Ok(provider)) => match resolution(ctx, &name, provider, generation, due) {
                Some(outcome) => outcome,
                None => continue,
            },
        };
        write(ctx, nc, &outcome, now).await;
    }
}

/// The outcome of the NodeClass's resolution for `generation` if one
/// finished since the last cycle; otherwise `None`, having started one when
/// `due` (or when none ran: a new leader resolves once).
fn resolution(
    ctx: &Ctx,
    name: &str,
    provider: &Arc<dyn CloudProvider>,
    generation: Option<i64>,
    due: bool,
) -> Option<Result<Resolution, String>> {
    let job = Job::Resolve(name.to_string());
    let start = |provider: Arc<dyn CloudProvider>| {
        move || async move {
            let outcome = provider.resolve().await.map_err(|e| match e {
                ProviderError::NotFound { what } => format!("{what} matched nothing"),
                e => e.to_string(),
            });
            (generation, outcome)
        }
    };
    let wake = |_: &Resolving| true;
    if due {
        // a finished or settled resolution is stale: start another
        ctx.cloud.work.forget(&job);
    }
    match ctx
        .cloud
        .work
        .poll(job.clone(), name, wake, start(provider.clone()))
    {
        Progress::Waiting => None,
        Progress::Done((resolved, outcome)) => {
            ctx.cloud.work.settle(job.clone());
            if resolved == generation {
                return Some(outcome);
            }
            // resolved for a spec that has changed since: resolve this one
            ctx.cloud.work.forget(&job);
            let _ = ctx
                .cloud
                .work
                .poll(job, name, wake, start(provider.clone()));
            None
        }
    }
}

/// A NodeClass's status as stored (default when absent or unreadable).
pub(crate) fn stored_status(nc: &kube::api::DynamicObject) -> NodeClassStatus {
    nc.data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

/// Writes a NodeClass's status and `Ready` condition from a resolution
/// outcome, with a Warning Event when it turns (or changes while) not Ready.
async fn write(
    ctx: &Ctx,
    nc: &kube::api::DynamicObject,
    outcome: &Result<Resolution, String>,
    now: Time,
) {
    let name = nc.name_any();
    let spec = nc.data.get("spec").cloned().unwrap_or_default();
    let provider = match CloudName::of_spec(&spec) {
        Some(CloudName::Aws | CloudName::Karpenter) => Some(CrdProvider::Aws),
        Some(CloudName::Gcp) => Some(CrdProvider::Gcp),
        Some(CloudName::Sim) | None => None,
    };
    let before = stored_status(nc);
    let (mut after, ok, reason, message) = status(&before, outcome, provider);
    let cond = condition(
        ConditionType::Ready,
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
    // the subnets' condition, from the same resolution
    let usable = outcome.as_ref().ok().and_then(subnets::verdict);
    let mut usable_changed = false;
    if let Some((sub_ok, sub_reason, sub_message)) = &usable {
        let cond = condition(
            ConditionType::SubnetsUsable,
            *sub_ok,
            sub_reason,
            sub_message.clone(),
            now,
            nc.metadata.generation,
        );
        if let Some(c) = with_condition_in(after.conditions.clone(), cond) {
            after.conditions = c;
            usable_changed = true;
        }
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
    if let Some((false, sub_reason, sub_message)) = usable
        && usable_changed
    {
        ctx.events
            .warn(Kind::NodeClass, nc, sub_reason, sub_message)
            .await;
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
                available_ips: None,
                public: None,
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
