//! Launches: intent first. [`write`] creates every PoolNode of a plan's
//! launch sets before any cloud call (names and idempotency keys come from
//! the plan, so writing again is a no-op); the PoolNode life cycle
//! (`reconcile::pool_nodes`) then calls the cloud.

use kube::api::{DynamicObject, PostParams};
use muster_crds::common::{CapacityType as CrdCapacity, Provider as CrdProvider, Usd};
use muster_planner::plan::{Launch, NewNode};
use muster_planner::{CapacityType, Provider, Snapshot};

use crate::controller::base::api::{ActError, api, gang_label_value, is_already_exists};
use crate::controller::base::objects::{
    GANG_LABEL, GangRef, GrantMemberSpec, GrantSpec, Kind, KindExt, OfferingSpec, POOL_LABEL,
    PoolNodeSpec, TERMINATE_FINALIZER,
};
use crate::controller::ctx::Ctx;

/// Writes every PoolNode of every launch set. Returns how many were created.
pub(crate) async fn write(ctx: &Ctx, launches: &[Launch], snapshot: &Snapshot) -> usize {
    let mut created = 0;
    for launch in launches {
        for n in &launch.nodes {
            let grant = grant_of(launch, n);
            match create(ctx, n, grant, Some(launch.gang.as_str()), snapshot).await {
                Ok(true) => created += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(poolnode = %n.name, error = %e, "could not write PoolNode")
                }
            }
        }
    }
    created
}

/// The grant request `n` is bought in, with every node of the launch that
/// names the same request: what its PoolNode records, so whichever member
/// is launched first asks for all of them.
pub(crate) fn grant_of(launch: &Launch, n: &NewNode) -> Option<GrantSpec> {
    let name = n.grant.as_ref()?;
    Some(GrantSpec {
        name: name.clone(),
        members: launch
            .nodes
            .iter()
            .filter(|m| m.grant.as_ref() == Some(name))
            .map(|m| GrantMemberSpec {
                name: m.name.clone(),
                idempotency_key: m.idempotency_key.clone(),
            })
            .collect(),
    })
}

/// Writes the PoolNode of one new node, bought in `grant` when it has one,
/// for a gang (`namespace/name`) or for none (a consolidation
/// replacement). True when it was created, false when it already existed.
pub(crate) async fn create(
    ctx: &Ctx,
    n: &NewNode,
    grant: Option<GrantSpec>,
    gang: Option<&str>,
    snapshot: &Snapshot,
) -> Result<bool, ActError> {
    let node_class = snapshot
        .pools
        .iter()
        .find(|p| p.name == n.pool)
        .map(|p| p.node_class.clone())
        .unwrap_or_default();
    let listed = snapshot.offerings.iter().find(|o| o.key() == n.offering);
    let spec = PoolNodeSpec {
        pool: n.pool.clone(),
        node_class,
        offering: OfferingSpec {
            provider: match n.offering.provider {
                Provider::Aws => CrdProvider::Aws,
                Provider::Gcp => CrdProvider::Gcp,
                Provider::Sim => CrdProvider::Sim,
            },
            region: listed.map(|o| o.region.clone()).unwrap_or_default(),
            zone: n.offering.zone.clone(),
            instance_type: n.offering.instance_type.clone(),
            capacity_type: match n.offering.capacity_type {
                CapacityType::Spot => CrdCapacity::Spot,
                CapacityType::OnDemand => CrdCapacity::OnDemand,
                CapacityType::Reserved => CrdCapacity::Reserved,
                CapacityType::FlexStart => CrdCapacity::FlexStart,
            },
            price_per_hour: Usd(format!("{:.6}", n.price.usd())),
            gpu_model: listed
                .and_then(|o| o.gpu_model.as_ref())
                .map(|m| m.as_str().to_string())
                .unwrap_or_default(),
            gpu_count: listed
                .map(|o| i32::try_from(o.gpu_count).unwrap_or(i32::MAX))
                .unwrap_or(0),
            reservation: n.offering.reservation.clone(),
            capacity_ends_at: listed
                .and_then(|o| o.reservation.as_ref())
                .and_then(|r| r.machines_end())
                .map(crate::controller::base::time::to_kube),
        },
        gang: gang.and_then(|g| gang_ref(g, snapshot)),
        idempotency_key: n.idempotency_key.clone(),
        placement_group: n.placement_group.clone(),
        grant,
    };
    let mut obj = DynamicObject::new(&n.name, &Kind::PoolNode.api_resource());
    obj.metadata.finalizers = Some(vec![TERMINATE_FINALIZER.to_string()]);
    obj.metadata.labels = Some([(POOL_LABEL.to_string(), n.pool.clone())].into());
    if let (Some(g), Some(labels)) = (gang, obj.metadata.labels.as_mut()) {
        labels.insert(GANG_LABEL.to_string(), gang_label_value(g));
    }
    obj.data = serde_json::json!({ "spec": spec });
    let pns = api(&ctx.client, Kind::PoolNode, None);
    match pns.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(true),
        Err(e) if is_already_exists(&e) => {
            // the same intent written before (a re-plan after a crash) is
            // success; another launch under the same name is not
            let existing = pns
                .get(&n.name)
                .await
                .map_err(ActError::api("read PoolNode"))?;
            let key = existing
                .data
                .get("spec")
                .and_then(|s| s.get("idempotencyKey"))
                .and_then(|k| k.as_str());
            if key == Some(n.idempotency_key.as_str()) {
                Ok(false)
            } else {
                Err(ActError::NameTaken(n.name.clone()))
            }
        }
        Err(e) => Err(ActError::api("create PoolNode")(e)),
    }
}

/// The reservation of a gang (`namespace/name`), with its Job's UID when
/// the snapshot knows it.
pub(crate) fn gang_ref(gang: &str, snapshot: &Snapshot) -> Option<GangRef> {
    let (ns, name) = gang.split_once('/')?;
    let uid = snapshot
        .gangs
        .iter()
        .find(|g| g.id.as_str() == gang)
        .map(|g| g.uid.clone())
        .filter(|u| !u.is_empty());
    Some(GangRef {
        namespace: ns.to_string(),
        name: name.to_string(),
        uid,
    })
}

#[cfg(test)]
mod tests {
    use muster_planner::plan::Launch;
    use muster_planner::{GangId, OfferingKey, Price};

    use super::*;
    use crate::controller::steps::pool_nodes::registration::launch_request;

    fn node(name: &str, grant: Option<&str>) -> NewNode {
        NewNode {
            name: name.to_string(),
            idempotency_key: format!("key-{name}"),
            pool: "gpu".to_string(),
            offering: OfferingKey {
                provider: Provider::Gcp,
                zone: "us-central1-a".to_string(),
                instance_type: "a3-highgpu-8g".to_string(),
                capacity_type: CapacityType::FlexStart,
                reservation: None,
            },
            price: Price::default(),
            placement_group: None,
            grant: grant.map(str::to_string),
        }
    }

    #[test]
    fn a_flex_start_pool_node_records_every_member_of_its_grant_and_the_request_carries_it() {
        let launch = Launch {
            gang: GangId::new("a/j"),
            nodes: vec![node("j-0", Some("g1")), node("j-1", Some("g1"))],
            reserve: Vec::new(),
            assignments: Vec::new(),
            price_per_hour: Price::default(),
            message: String::new(),
            deadline: None,
        };
        let grant = grant_of(&launch, &launch.nodes[1]).expect("a grant");
        assert_eq!(grant.name, "g1");
        let members: Vec<_> = grant.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(members, ["j-0", "j-1"]);
        assert_eq!(grant.members[0].idempotency_key, "key-j-0");
        assert!(grant_of(&launch, &node("x", None)).is_none());

        let spec: PoolNodeSpec = serde_json::from_value(serde_json::json!({
            "pool": "gpu", "nodeClass": "gke",
            "offering": {"provider": "gcp", "region": "us-central1", "zone": "us-central1-a",
                         "instanceType": "a3-highgpu-8g", "capacityType": "flex-start",
                         "pricePerHour": "1", "gpuModel": "H100", "gpuCount": 8},
            "idempotencyKey": "key-j-1",
            "grant": serde_json::to_value(&grant).expect("grant"),
        }))
        .expect("spec");
        let req = launch_request("j-1", &spec, "prod", &Default::default(), Vec::new());
        let g = req.grant.expect("the request's grant");
        assert_eq!(g.name, "g1");
        assert_eq!(g.members.len(), 2);
        assert_eq!(g.members[1].idempotency_key, "key-j-1");
    }
}
