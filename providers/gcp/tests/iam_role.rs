//! The documented custom role (`docs/gcp-iam-role.yaml`) against every call
//! the provider makes: the Compute and GKE fake logs each request (`GET
//! /fake/log`), [`permissions`] says which IAM permissions Google checks
//! for it, and the role must include each; a call without a known
//! permission fails. The other way round, every permission of the role must
//! be needed by some call of the run: the role is no wider than muster.
//!
//! Sources of the permissions, per method:
//! * GKE: "Google Kubernetes Engine API permissions"
//!   (<https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions>):
//!   `clusters.get`, `nodePools.get`, `nodePools.list` need
//!   `container.clusters.get`; `nodePools.create` and `nodePools.delete`
//!   need `container.clusters.update`; `operations.get` needs
//!   `container.operations.get`.
//! * Compute: each method's reference page, "Authorization requires the
//!   following IAM permission" (e.g.
//!   <https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/createInstances>:
//!   `compute.instanceGroupManagers.update`), and for `instances.insert`
//!   the permissions of "Create a VM instance"
//!   (<https://cloud.google.com/compute/docs/instances/create-start-instance#required-permissions>):
//!   the instance, its disk from an image, the subnetwork, its metadata,
//!   labels, tags and service account.
//!
//! `iam.serviceAccounts.actAs` on the node service account (needed to create
//! a VM or node pool that runs as it) is granted on that service account,
//! not in the project role: docs/gke.md binds `roles/iam.serviceAccountUser`
//! there.

use std::collections::BTreeSet;

use muster_planner::{CapacityType, OfferingKey, PoolRequirements, Provider, Taint, TaintEffect};
use muster_provider_api::{CloudProvider, LaunchRequest};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::{Value, json};

/// The role as documented.
const ROLE: &str = include_str!("../../../docs/gcp-iam-role.yaml");

/// The permissions Google checks for one request, by method and path.
fn permissions(method: &str, path: &str) -> Result<Vec<&'static str>, String> {
    let s: Vec<&str> = path.split('/').filter(|x| !x.is_empty()).collect();
    let unknown = || Err(format!("no permission model for {method} {path}"));
    match s.as_slice() {
        // GKE
        ["v1", "projects", _, "locations", _, "clusters", _] if method == "GET" => {
            Ok(vec!["container.clusters.get"])
        }
        [
            "v1",
            "projects",
            _,
            "locations",
            _,
            "clusters",
            _,
            "nodePools",
        ] => match method {
            "GET" => Ok(vec!["container.clusters.get"]),
            "POST" => Ok(vec!["container.clusters.update"]),
            _ => unknown(),
        },
        [
            "v1",
            "projects",
            _,
            "locations",
            _,
            "clusters",
            _,
            "nodePools",
            _,
        ] => match method {
            "GET" => Ok(vec!["container.clusters.get"]),
            "DELETE" => Ok(vec!["container.clusters.update"]),
            _ => unknown(),
        },
        ["v1", "projects", _, "locations", _, "operations", _] if method == "GET" => {
            Ok(vec!["container.operations.get"])
        }
        // Compute
        ["compute", "v1", "projects", _, "zones"] if method == "GET" => {
            Ok(vec!["compute.zones.list"])
        }
        ["compute", "v1", "projects", _, "aggregated", "instances"] if method == "GET" => {
            Ok(vec!["compute.instances.list"])
        }
        ["compute", "v1", "projects", _, "aggregated", "reservations"] if method == "GET" => {
            Ok(vec!["compute.reservations.list"])
        }
        ["compute", "v1", "projects", _, "zones", _, rest @ ..] => match (method, rest) {
            ("GET", ["machineTypes"]) => Ok(vec!["compute.machineTypes.list"]),
            ("GET", ["machineTypes", _]) => Ok(vec!["compute.machineTypes.get"]),
            ("GET", ["acceleratorTypes"]) => Ok(vec!["compute.acceleratorTypes.list"]),
            ("GET", ["reservations"]) => Ok(vec!["compute.reservations.list"]),
            ("GET", ["reservations", _]) => Ok(vec!["compute.reservations.get"]),
            ("GET", ["operations", _]) | ("POST", ["operations", _, "wait"]) => {
                Ok(vec!["compute.zoneOperations.get"])
            }
            ("GET", ["operations"]) => Ok(vec!["compute.zoneOperations.list"]),
            ("GET", ["instances", _]) => Ok(vec!["compute.instances.get"]),
            ("DELETE", ["instances", _]) => Ok(vec!["compute.instances.delete"]),
            ("POST", ["instances"]) => Ok(vec![
                "compute.instances.create",
                "compute.disks.create",
                "compute.images.useReadOnly",
                "compute.subnetworks.use",
                "compute.instances.setMetadata",
                "compute.instances.setLabels",
                "compute.instances.setTags",
                "compute.instances.setServiceAccount",
            ]),
            ("GET", ["instanceGroupManagers", _])
            | ("POST", ["instanceGroupManagers", _, "listManagedInstances"])
            | ("GET", ["instanceGroupManagers", _, "listErrors"])
            // resize requests are read with the group's own permission
            // (an assumption by analogy with insert below; their get and
            // list pages were not read)
            | ("GET", ["instanceGroupManagers", _, "resizeRequests"])
            | ("GET", ["instanceGroupManagers", _, "resizeRequests", _]) => {
                Ok(vec!["compute.instanceGroupManagers.get"])
            }
            // instanceGroupManagerResizeRequests.insert: "Authorization
            // requires ... compute.instanceGroupManagers.update"
            // (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagerResizeRequests/insert);
            // cancel changes the group's queue the same way
            ("POST", ["instanceGroupManagers", _, "resizeRequests"])
            | ("POST", ["instanceGroupManagers", _, "resizeRequests", _, "cancel"]) => {
                Ok(vec!["compute.instanceGroupManagers.update"])
            }
            (
                "POST",
                [
                    "instanceGroupManagers",
                    _,
                    "createInstances" | "deleteInstances",
                ],
            ) => Ok(vec!["compute.instanceGroupManagers.update"]),
            _ => unknown(),
        },
        _ => unknown(),
    }
}

/// `includedPermissions` of the role file.
fn role() -> BTreeSet<String> {
    let v: serde_norway::Value = serde_norway::from_str(ROLE).expect("the role is YAML");
    v["includedPermissions"]
        .as_sequence()
        .expect("includedPermissions")
        .iter()
        .map(|p| p.as_str().expect("a permission").to_string())
        .collect()
}

fn request(name: &str, zone: &str, ty: &str) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("key-{name}"),
        offering: OfferingKey {
            provider: Provider::Gcp,
            zone: zone.into(),
            instance_type: ty.into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        },
        pool: "l4".into(),
        cluster: "prod".into(),
        gang: Some("team-a.train".into()),
        labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
        taints: vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }],
        tags: Default::default(),
        placement_group: None,
        grant: None,
    }
}

/// Everything the provider does, on GKE nodes and plain VMs: resolve,
/// offerings, launches (one refused by a stockout, one into a reservation
/// the provider has not listed yet), reserved offerings, list,
/// interruptions, describe, terminations and the empty pools' deletion.
async fn run(fake: &ComputeFake) {
    // operations still running when answered, as GCE's and GKE's are:
    // each is read until DONE
    fake.control("POST", "op-polls?n=1");
    fake.control("POST", "gke/op-polls?n=1");
    fake.control(
        "POST",
        "reservation?project=my-project&zone=us-central1-a&name=l4-resv&machineType=g2-standard-8&count=4",
    );
    let gke = json!({"gcp": {
        "project": "my-project", "region": "us-central1",
        "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
        "emptyNodePoolTTL": "0s",
        "reservations": [{"name": "l4-resv"}]
    }});
    let plain = json!({"gcp": {
        "project": "my-project", "region": "us-central1", "zones": ["us-central1-a"],
        "image": "projects/cos-cloud/global/images/family/cos-stable",
        "networkTags": ["gpu"],
        "serviceAccount": {"email": "nodes@my-project.iam.gserviceaccount.com"},
        "reservations": [{"name": "l4-resv"}]
    }});
    for (class, spec) in [("gke", gke), ("plain", plain)] {
        let p = GcpProvider::new(class, &spec, &fake.options())
            .await
            .expect("provider");
        p.resolve().await.expect("resolve");
        // into the reservation before any listing: reservations.get
        let mut into = request(
            &format!("{class}-reserved"),
            "us-central1-a",
            "g2-standard-8",
        );
        into.offering.capacity_type = CapacityType::Reserved;
        into.offering.reservation = Some("l4-resv".into());
        let r = p.launch(&into).await.expect("reserved launch");
        let reserved = PoolRequirements {
            capacity_types: vec![CapacityType::Reserved],
            ..PoolRequirements::default()
        };
        assert!(!p.offerings(&reserved).await.expect("reserved").is_empty());
        p.terminate(&r.provider_id)
            .await
            .expect("terminate reserved");
        let offerings = p
            .offerings(&PoolRequirements::default())
            .await
            .expect("offerings");
        assert!(!offerings.is_empty());
        fake.control(
            "POST",
            "stockout?zone=us-central1-b&machineType=g2-standard-8&spot=true",
        );
        let _ = p
            .launch(&request(
                &format!("{class}-refused"),
                "us-central1-b",
                "g2-standard-8",
            ))
            .await
            .expect_err("stocked out");
        let a = p
            .launch(&request(
                &format!("{class}-0"),
                "us-central1-a",
                "g2-standard-8",
            ))
            .await
            .expect("launch");
        p.describe(&a.provider_id).await.expect("describe");
        p.list("prod").await.expect("list");
        p.interruptions().await.expect("interruptions");
        p.terminate(&a.provider_id).await.expect("terminate");
        if class == "gke" {
            // a flex-start machine: its resize request made, read, and
            // cancelled while queued
            let mut fs = request("gke-flex", "us-central1-a", "g2-standard-8");
            fs.offering.capacity_type = muster_planner::CapacityType::FlexStart;
            let queued = p.launch(&fs).await.expect("queued");
            p.terminate(&queued.provider_id).await.expect("cancelled");
        }
        p.delete_empty_groups().await.expect("empty groups");
    }
}

#[tokio::test]
async fn every_call_of_a_run_is_allowed_by_the_documented_role_and_the_role_is_no_wider() {
    let fake = ComputeFake::start();
    run(&fake).await;
    let log: Vec<Value> = serde_json::from_str(&fake.control("GET", "log")).expect("the log");
    assert!(log.len() > 20, "{log:?}");
    let role = role();
    let mut denied = Vec::new();
    let mut needed = BTreeSet::new();
    for entry in &log {
        let method = entry["method"].as_str().unwrap_or_default();
        let path = entry["path"].as_str().unwrap_or_default();
        match permissions(method, path) {
            Ok(ps) => {
                for p in ps {
                    needed.insert(p.to_string());
                    if !role.contains(p) {
                        denied.push(format!("{method} {path}: {p}"));
                    }
                }
            }
            Err(e) => denied.push(e),
        }
    }
    assert!(denied.is_empty(), "denied: {denied:#?}");
    let unused: Vec<_> = role.difference(&needed).collect();
    assert!(
        unused.is_empty(),
        "in the role, needed by no call: {unused:?}"
    );
}

#[test]
fn the_model_knows_each_method_and_refuses_what_it_does_not_know() {
    assert_eq!(
        permissions(
            "POST",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/g/createInstances"
        ),
        Ok(vec!["compute.instanceGroupManagers.update"])
    );
    assert_eq!(
        permissions("POST", "/v1/projects/p/locations/l/clusters/c/nodePools"),
        Ok(vec!["container.clusters.update"])
    );
    assert_eq!(
        permissions("GET", "/v1/projects/p/locations/l/clusters/c/nodePools"),
        Ok(vec!["container.clusters.get"])
    );
    assert!(
        permissions(
            "POST",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/g/resize"
        )
        .is_err()
    );
    assert!(permissions("DELETE", "/v1/projects/p/locations/l/clusters/c").is_err());
}
