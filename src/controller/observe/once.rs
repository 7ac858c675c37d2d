//! One reading of the cluster by listing, without watches: the
//! [`Observed`] that `muster explain`, `queues` and `pools` plan from, the
//! same a cycle reads from its caches.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};

use crate::controller::base::objects::{Kind, KindExt};
use crate::controller::observe::Observed;
use crate::controller::workloads::WorkloadKind;
use crate::controller::workloads::pod::{CachedPod, slim_node};

/// Reads every object the controller watches, once, by listing (for
/// `muster explain`, which runs no watches): the custom workload kinds the
/// server serves, since which ones an install enables is the controller's
/// flag, not known to a reader.
pub async fn once(client: &Client) -> Result<Observed, kube::Error> {
    let lp = ListParams::default();
    let jobs = Api::<Job>::all(client.clone()).list(&lp).await?;
    let pods = Api::<CachedPod>::all(client.clone()).list(&lp).await?;
    let mut nodes = Api::<Node>::all(client.clone()).list(&lp).await?.items;
    for n in &mut nodes {
        slim_node(n);
    }
    let namespaces = Api::<Namespace>::all(client.clone()).list(&lp).await?;
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&lp)
        .await?;
    let mut objects = BTreeMap::new();
    for kind in Kind::ALL {
        let ar = kind.api_resource();
        let list = Api::<DynamicObject>::all_with(client.clone(), &ar)
            .list(&lp)
            .await?;
        objects.insert(kind, list.items.into_iter().map(Arc::new).collect());
    }
    // the custom workload kinds the server serves (which ones the install
    // enables is the controller's flag, not known here)
    let mut kinds: std::collections::BTreeSet<WorkloadKind> = WorkloadKind::ALL
        .into_iter()
        .filter(|k| k.custom().is_none())
        .collect();
    let mut workloads = BTreeMap::new();
    for kind in WorkloadKind::ALL {
        let Some(custom) = kind.custom() else {
            continue;
        };
        let api = Api::<DynamicObject>::all_with(client.clone(), &custom.api_resource());
        if let Ok(list) = api.list(&lp).await {
            kinds.insert(kind);
            workloads.insert(kind, list.items.into_iter().map(Arc::new).collect());
        }
    }
    // a kind served in a version the controller refuses is not run by it
    for (kind, _) in
        crate::controller::observe::crd_check::refused_workload_kinds(client, &mut kinds).await
    {
        workloads.remove(&kind);
    }
    let mut related = BTreeMap::new();
    for r in WorkloadKind::ALL.iter().flat_map(|k| k.related()) {
        let api = Api::<DynamicObject>::all_with(client.clone(), &r.kind.api_resource());
        if let Ok(list) = api.list(&lp).await {
            related.insert(
                r.kind.crd_name(),
                list.items.into_iter().map(Arc::new).collect(),
            );
        }
    }
    Ok(Observed {
        kinds,
        workloads,
        related,
        jobs: jobs.items.into_iter().map(Arc::new).collect(),
        pods: pods.items.into_iter().map(Arc::new).collect(),
        nodes: nodes.into_iter().map(Arc::new).collect(),
        namespaces: namespaces.items.into_iter().map(Arc::new).collect(),
        pdbs: pdbs.items.into_iter().map(Arc::new).collect(),
        objects,
    })
}
