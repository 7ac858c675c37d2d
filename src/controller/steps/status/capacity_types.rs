//! `NodeClass` condition `CapacityTypesPermitted`: `False` while a launch
//! found a capacity type the class's cloud account refuses until its
//! operator does a one-time step (EC2: spot without the
//! `AWSServiceRoleForEC2Spot` service-linked role), naming the step; `True`
//! again once the mark has passed. A class whose account never refused
//! anything gets no such condition, so a healthy cluster writes nothing.
//!
//! The planner's PoolNode life cycle decides the mark
//! (`lifecycle::pool_node::Unavailable::CapacityType`); the offering cache
//! keeps it with the launch error's message; this step only shows it.

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_crds::NodeClassStatus;
use muster_planner::{CapacityType, Provider, Time};

use crate::controller::base::api::{
    condition, conditions, patch_status, status_patch, with_condition,
};
use crate::controller::base::conditions::ConditionType;
use crate::controller::base::objects::Kind;
use crate::controller::base::time;
use crate::controller::cloud::clouds::CloudName;
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::steps::status::classes::stored_status;

/// Reason while a capacity type is refused.
pub(crate) const NOT_PERMITTED: &str = "CapacityTypeNotPermitted";
/// Reason once every refusal has passed.
pub(crate) const PERMITTED: &str = "Permitted";

/// The condition's status, reason and message for the refusals of one
/// class's cloud: `(capacity type, until, the launch error's message)`.
pub(crate) fn verdict(refused: &[(CapacityType, Time, String)]) -> (bool, &'static str, String) {
    if refused.is_empty() {
        return (
            true,
            PERMITTED,
            "every capacity type the pools allow may be launched".to_string(),
        );
    }
    let parts: Vec<String> = refused
        .iter()
        .map(|(c, until, why)| {
            format!(
                "{c} launches are avoided until {} (and tried again then): {why}",
                time::format(*until)
            )
        })
        .collect();
    (false, NOT_PERMITTED, parts.join("; "))
}

/// The planner provider of a NodeClass spec.
fn provider(obj: &DynamicObject) -> Option<Provider> {
    CloudName::of_spec(obj.data.get("spec")?).map(CloudName::planner_provider)
}

/// Writes the condition of every NodeClass whose cloud refuses a capacity
/// type now, or whose condition still says so after the refusal passed;
/// a Warning Event when it turns False.
pub(crate) async fn update(ctx: &Ctx, observed: &Observed, now: Time) {
    for nc in observed.of(Kind::NodeClass) {
        let Some(p) = provider(nc) else { continue };
        let refused = ctx.cloud.offerings.refused(p, now);
        let shown = conditions(nc)
            .into_iter()
            .any(|c| c.type_ == ConditionType::CapacityTypesPermitted.as_str());
        if refused.is_empty() && !shown {
            continue;
        }
        let (ok, reason, message) = verdict(&refused);
        let cond = condition(
            ConditionType::CapacityTypesPermitted,
            ok,
            reason,
            message.clone(),
            now,
            nc.metadata.generation,
        );
        let Some(conds) = with_condition(nc, cond) else {
            continue;
        };
        let before = stored_status(nc);
        let after = NodeClassStatus {
            conditions: conds,
            ..before.clone()
        };
        let name = nc.name_any();
        if let Some(patch) = status_patch(&before, &after)
            && let Err(e) = patch_status(&ctx.client, Kind::NodeClass, None, &name, patch).await
        {
            tracing::warn!(node_class = %name, error = %e, "could not write status");
            continue;
        }
        if !ok {
            ctx.events.warn(Kind::NodeClass, nc, reason, message).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_type_the_time_and_the_step() {
        let (ok, reason, message) = verdict(&[(
            CapacityType::Spot,
            Time(1_800_000_000),
            "run `aws iam create-service-linked-role`".to_string(),
        )]);
        assert!(!ok);
        assert_eq!(reason, NOT_PERMITTED);
        assert!(
            message.starts_with("spot launches are avoided until 2027-"),
            "{message}"
        );
        assert!(message.contains("create-service-linked-role"), "{message}");
        let (ok, reason, _) = verdict(&[]);
        assert!(ok);
        assert_eq!(reason, PERMITTED);
    }
}
