//! GKE nodes against the Compute fake (`tests/compute_fake.py`) holding the
//! GKE cluster of `tests/gke_fixture.json`: a launch goes through a node
//! pool of its shape that muster creates once, as a named instance of the
//! pool's managed instance group; GKE's join rules (`gke_fake/join.py`)
//! say whether the instance becomes a Node and with which labels.

use std::collections::BTreeMap;

use muster_planner::labels;
use muster_planner::{CapacityType, OfferingKey, PoolRequirements, Provider, Taint, TaintEffect};
use muster_provider_api::{CloudProvider, InstanceState, LaunchRequest, ProviderError};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::{Value, json};

const CLUSTER_PATH: &str = "/v1/projects/my-project/locations/us-central1/clusters/prod";

fn spec(extra: Value) -> Value {
    let mut gcp = json!({
        "project": "my-project",
        "region": "us-central1",
        "zones": ["us-central1-a", "us-central1-b"],
        "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
    });
    if let (Some(o), Some(e)) = (gcp.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    json!({ "gcp": gcp })
}

fn request(name: &str, zone: &str) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("key-{name}"),
        offering: OfferingKey {
            provider: Provider::Gcp,
            zone: zone.into(),
            instance_type: "g2-standard-8".into(),
            capacity_type: CapacityType::Spot,
            reservation: None,
        },
        pool: "l4".into(),
        cluster: "prod".into(),
        gang: Some("team-a.train".into()),
        labels: [
            ("muster.dev/pool".to_string(), "l4".to_string()),
            ("muster.dev/poolnode".to_string(), name.to_string()),
            ("nvidia.com/gpu.present".to_string(), "true".to_string()),
        ]
        .into(),
        taints: vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }],
        tags: BTreeMap::new(),
        placement_group: None,
        grant: None,
    }
}

async fn provider(fake: &ComputeFake, extra: Value) -> GcpProvider {
    GcpProvider::new("gke", &spec(extra), &fake.options())
        .await
        .expect("provider")
}

/// muster's node pools of the cluster (name prefix `muster-`).
fn muster_pools(fake: &ComputeFake) -> Vec<Value> {
    fake.get(&format!("{CLUSTER_PATH}/nodePools"))["nodePools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with("muster-")))
        .collect()
}

/// The managed instances of the pool's group in `zone`: name → whether the
/// VM exists.
fn members(fake: &ComputeFake, pool: &Value, zone: &str) -> BTreeMap<String, bool> {
    let url = pool["instanceGroupUrls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|u| u.contains(&format!("/zones/{zone}/")))
        .expect("a group in the zone");
    let path = url.split("/compute/v1/").nth(1).expect("a Compute link");
    let v: Value = serde_json::from_str(&post(
        fake,
        &format!("/compute/v1/{path}/listManagedInstances"),
    ))
    .expect("JSON");
    v["managedInstances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_string(),
                m.get("id").is_some(),
            )
        })
        .collect()
}

fn post(fake: &ComputeFake, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = fake.options().endpoint.expect("endpoint");
    let host = addr.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// GKE's verdict on instance `name` (`/fake/gke/join`).
fn join(fake: &ComputeFake, name: &str) -> Value {
    serde_json::from_str(&fake.control("GET", &format!("gke/join?name={name}"))).expect("JSON")
}

fn instance_name(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().expect("name")
}

#[tokio::test]
async fn a_gang_of_two_l4_nodes_joins_through_one_spot_node_pool_and_leaves_by_name() {
    let fake = ComputeFake::start();
    let p = provider(&fake, json!({"emptyNodePoolTTL": "0s"})).await;
    let r = p.resolve().await.expect("a Standard cluster resolves");
    assert!(
        r.images.is_empty(),
        "GKE chooses the node image: {:?}",
        r.images
    );
    let a = p
        .launch(&request("pn-0", "us-central1-a"))
        .await
        .expect("first");
    let b = p
        .launch(&request("pn-1", "us-central1-a"))
        .await
        .expect("second");
    assert_eq!(a.state, InstanceState::Running);
    assert_eq!(
        a.pool_node.as_deref(),
        Some("pn-0"),
        "read back from the instance's metadata"
    );
    assert_eq!(b.pool_node.as_deref(), Some("pn-1"));

    // one node pool, created once, with no autoscaling, holding both
    let pools = muster_pools(&fake);
    assert_eq!(pools.len(), 1, "{pools:?}");
    let pool = &pools[0];
    assert_eq!(
        fake.calls()["POST my-project/us-central1/prod"],
        1,
        "{}",
        fake.calls()
    );
    assert_eq!(pool["config"]["spot"], true);
    assert_ne!(
        pool["autoscaling"]["enabled"], true,
        "muster decides the count"
    );
    assert_eq!(pool["locations"], json!(["us-central1-a"]));
    let m = members(&fake, pool, "us-central1-a");
    let names: Vec<&str> = vec![instance_name(&a.provider_id), instance_name(&b.provider_id)];
    assert_eq!(m.keys().map(String::as_str).collect::<Vec<_>>(), {
        let mut n = names.clone();
        n.sort();
        n
    });

    // the labels the offering lists, as the planner matched selectors
    // against before the launch
    let listed = p
        .offerings(&PoolRequirements {
            capacity_types: vec![CapacityType::Spot],
            ..PoolRequirements::default()
        })
        .await
        .expect("offerings");
    let offering = request("pn-0", "us-central1-a").offering;
    let promised = listed
        .iter()
        .find(|o| o.key() == offering)
        .map(|o| o.labels.clone())
        .expect("the launched offering is listed");
    assert_eq!(
        promised.get(labels::ARCH).map(String::as_str),
        Some(labels::AMD64)
    );
    assert_eq!(
        promised
            .get("cloud.google.com/gke-accelerator")
            .map(String::as_str),
        Some("nvidia-l4")
    );

    // both become GKE nodes, with GKE's accelerator label and the pool's,
    // and every label their offering listed
    for name in &names {
        let v = join(&fake, name);
        assert_eq!(v["joins"], true, "{v}");
        assert_eq!(v["csr"], "Approved", "{v}");
        let labels = &v["node"]["metadata"]["labels"];
        assert_eq!(
            labels["cloud.google.com/gke-accelerator"], "nvidia-l4",
            "{v}"
        );
        assert_eq!(labels["cloud.google.com/gke-nodepool"], pool["name"], "{v}");
        assert_eq!(labels["cloud.google.com/gke-spot"], "true", "{v}");
        assert_eq!(labels["muster.dev/pool"], "l4", "{v}");
        assert_eq!(labels["nvidia.com/gpu.present"], "true", "{v}");
        for (k, want) in &promised {
            assert_eq!(labels[k.as_str()], want.as_str(), "{k} of {v}");
        }
        assert!(
            v["node"]["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == "nvidia.com/gpu" && t["effect"] == "NoSchedule"),
            "{v}"
        );
        assert_eq!(
            v["node"]["spec"]["providerID"],
            format!("gce://my-project/us-central1-a/{name}")
        );
    }
    // listed as the cluster's, with their PoolNodes
    let listed = p.list("prod").await.expect("list");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed
            .iter()
            .any(|i| i.pool_node.as_deref() == Some("pn-0"))
    );

    // a pool still holding a node is kept
    p.terminate(&a.provider_id)
        .await
        .expect("terminate the first");
    let m = members(&fake, pool, "us-central1-a");
    assert_eq!(
        m.keys().collect::<Vec<_>>(),
        vec![names[1]],
        "exactly the named one went"
    );
    assert!(p.delete_empty_groups().await.expect("collect").is_empty());
    // the second goes too; an empty pool past its time to live is deleted
    p.terminate(&b.provider_id)
        .await
        .expect("terminate the second");
    p.terminate(&b.provider_id)
        .await
        .expect("terminating twice is success");
    assert!(members(&fake, pool, "us-central1-a").is_empty());
    let gone = p.delete_empty_groups().await.expect("collect");
    assert_eq!(gone, vec![pool["name"].as_str().expect("name").to_string()]);
    assert!(muster_pools(&fake).is_empty());
}

#[tokio::test]
async fn a_restart_before_the_nodes_are_made_creates_no_third_instance() {
    let fake = ComputeFake::start();
    let first = provider(&fake, json!({})).await;
    // GCE still working: the group leaves the instances CREATING
    fake.control("POST", "hold?on=true");
    let a = first
        .launch(&request("pn-0", "us-central1-a"))
        .await
        .expect("accepted");
    let b = first
        .launch(&request("pn-1", "us-central1-a"))
        .await
        .expect("accepted");
    assert_eq!(a.state, InstanceState::Pending, "{a:?}");
    assert_eq!(b.state, InstanceState::Pending, "{b:?}");
    // the controller restarts: a new provider, no memory, launches the same PoolNodes
    let second = provider(&fake, json!({})).await;
    fake.control("POST", "hold?on=false");
    let a2 = second
        .launch(&request("pn-0", "us-central1-a"))
        .await
        .expect("adopted");
    let b2 = second
        .launch(&request("pn-1", "us-central1-a"))
        .await
        .expect("adopted");
    assert_eq!(
        (a2.provider_id.as_str(), b2.provider_id.as_str()),
        (a.provider_id.as_str(), b.provider_id.as_str())
    );
    let pools = muster_pools(&fake);
    assert_eq!(pools.len(), 1, "{pools:?}");
    let m = members(&fake, &pools[0], "us-central1-a");
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(m.values().all(|made| *made), "{m:?}");
    assert_eq!(
        fake.calls()["POST my-project/us-central1/prod"],
        1,
        "the pool was not created twice: {}",
        fake.calls()
    );
}

#[tokio::test]
async fn a_stockout_in_one_zone_is_the_offerings_and_leaves_nothing_retrying() {
    let fake = ComputeFake::start();
    let p = provider(&fake, json!({})).await;
    fake.control(
        "POST",
        "stockout?zone=us-central1-a&machineType=g2-standard-8&spot=true",
    );
    let e = p
        .launch(&request("pn-0", "us-central1-a"))
        .await
        .expect_err("no spot L4 in us-central1-a");
    match &e {
        ProviderError::InsufficientCapacity { offering, message } => {
            assert_eq!(offering.zone, "us-central1-a");
            assert!(
                message.contains("does not have enough resources"),
                "{message}"
            );
        }
        other => panic!("expected InsufficientCapacity, got {other:?}"),
    }
    // the group would retry for ever: the instance was taken out of it
    let pools = muster_pools(&fake);
    assert!(members(&fake, &pools[0], "us-central1-a").is_empty());
    // the planner's next offering, the next zone, gets its own pool and runs
    let ok = p
        .launch(&request("pn-0", "us-central1-b"))
        .await
        .expect("the next zone");
    assert_eq!(ok.state, InstanceState::Running);
    assert_eq!(ok.offering.zone, "us-central1-b");
    assert_eq!(muster_pools(&fake).len(), 2);
}

#[tokio::test]
async fn an_accelerator_the_zone_lacks_is_the_offerings_capacity() {
    let fake = ComputeFake::start();
    let p = provider(&fake, json!({})).await;
    fake.control(
        "POST",
        "gke/unavailable?zone=us-central1-a&acceleratorType=nvidia-l4",
    );
    let e = p
        .launch(&request("pn-0", "us-central1-a"))
        .await
        .expect_err("no L4 in the zone");
    assert!(
        matches!(e, ProviderError::InsufficientCapacity { .. }),
        "{e:?}"
    );
    assert!(muster_pools(&fake).is_empty());
}

#[tokio::test]
async fn an_autopilot_cluster_is_refused_with_what_to_use_instead() {
    let fake = ComputeFake::start();
    fake.control("POST", "gke/autopilot?on=true");
    let p = provider(&fake, json!({})).await;
    let e = p.resolve().await.expect_err("refused");
    let ProviderError::Permanent { message } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        message,
        &muster_provider_gcp::gke::autopilot_refusal(
            "projects/my-project/locations/us-central1/clusters/prod"
        )
    );
    assert!(
        message.contains("Autopilot") && message.contains("GKE Standard"),
        "{message}"
    );
    // nothing was read or made beyond the cluster
    assert_eq!(
        fake.calls()["GET my-project/us-central1/prod"],
        1,
        "{}",
        fake.calls()
    );
    assert!(!fake.calls().to_string().contains("instanceGroupManagers"));
    assert!(
        fake.calls()
            .get("POST my-project/us-central1/prod")
            .is_none()
    );
    // a Standard cluster resolves
    fake.control("POST", "gke/autopilot?on=false");
    provider(&fake, json!({}))
        .await
        .resolve()
        .await
        .expect("a Standard cluster resolves");
}

#[tokio::test]
async fn a_preempted_gke_node_is_reported_once_though_its_group_recreates_it() {
    let fake = ComputeFake::start();
    let p = provider(&fake, json!({})).await;
    let a = p
        .launch(&request("pn-0", "us-central1-a"))
        .await
        .expect("launch");
    let b = p
        .launch(&request("pn-1", "us-central1-a"))
        .await
        .expect("launch");
    assert!(p.interruptions().await.expect("poll").is_empty());
    let name = instance_name(&a.provider_id).to_string();
    fake.control("POST", &format!("preempt?name={name}"));
    let found = p.interruptions().await.expect("poll");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].provider_id, a.provider_id);
    assert_eq!(
        found[0].kind,
        muster_provider_api::InterruptionKind::Preempted
    );
    // the group made it again under its name: still one report
    let pools = muster_pools(&fake);
    assert!(members(&fake, &pools[0], "us-central1-a").contains_key(&name));
    assert!(
        p.interruptions().await.expect("poll").is_empty(),
        "reported once"
    );
    // muster releases it: deleted by name, the other kept
    p.terminate(&a.provider_id).await.expect("terminate");
    let left = members(&fake, &pools[0], "us-central1-a");
    assert_eq!(
        left.keys().map(String::as_str).collect::<Vec<_>>(),
        vec![instance_name(&b.provider_id)]
    );
}
