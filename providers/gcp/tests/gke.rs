//! GKE nodes against the Compute fake (`tests/compute_fake.py`) holding the
//! GKE cluster of `tests/gke_fixture.json`: the node pool's newest instance
//! template becomes the machine, with muster's labels and taints in the
//! kubelet flags of its `kube-env`.

use std::collections::BTreeMap;

use muster_planner::{CapacityType, OfferingKey, Provider, Taint, TaintEffect};
use muster_provider_api::{CloudProvider, LaunchRequest, ProviderError};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use muster_provider_gcp::kube_env;
use serde_json::{Value, json};

fn spec(extra: Value) -> Value {
    let mut gcp = json!({
        "project": "my-project",
        "region": "us-central1",
        "zones": ["us-central1-a"],
        "cluster": {"project": "my-project", "location": "us-central1", "name": "prod"},
    });
    if let (Some(o), Some(e)) = (gcp.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    json!({ "gcp": gcp })
}

fn request(name: &str, ty: &str, capacity: CapacityType) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("pn-{name}"),
        offering: OfferingKey {
            provider: Provider::Gcp,
            zone: "us-central1-a".into(),
            instance_type: ty.into(),
            capacity_type: capacity,
        },
        pool: "l4".into(),
        cluster: "prod".into(),
        gang: Some("team-a/train".into()),
        labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
        taints: vec![Taint {
            key: "muster.dev/gpu".into(),
            value: "true".into(),
            effect: TaintEffect::NoSchedule,
        }],
        tags: BTreeMap::new(),
        placement_group: None,
    }
}

fn stored(fake: &ComputeFake, provider_id: &str) -> Value {
    let name = provider_id.rsplit('/').next().expect("name");
    fake.get(&format!(
        "/compute/v1/projects/my-project/zones/us-central1-a/instances/{name}"
    ))
}

fn kube_env_of(inst: &Value) -> String {
    inst["metadata"]["items"]
        .as_array()
        .expect("metadata")
        .iter()
        .find(|i| i["key"] == "kube-env")
        .and_then(|i| i["value"].as_str())
        .expect("kube-env")
        .to_string()
}

#[tokio::test]
async fn a_gke_node_is_made_from_the_node_pools_newest_template() {
    let fake = ComputeFake::start();
    let p = GcpProvider::new("gke", &spec(json!({})), &fake.options())
        .await
        .expect("provider");
    let r = p.resolve().await.expect("resolves");
    // the first RUNNING pool, and of its two templates the newer instant
    // (the other is later as a string)
    assert!(r.images[0].id.contains("gke-node-images"), "{:?}", r.images);
    assert_eq!(
        r.images[0].name.as_deref(),
        Some("node pool default-pool template gke-prod-default-pool-5f1e2d3c")
    );
    let read = fake.calls()["GET projects/zones/instanceGroupManagers"].as_u64();
    assert_eq!(read, Some(2), "both zones' groups are read");

    let a = p
        .launch(&request("l4-a", "g2-standard-4", CapacityType::Spot))
        .await
        .expect("launch");
    let b = p
        .launch(&request(
            "t4-b",
            "n1-standard-8+2xnvidia-tesla-t4",
            CapacityType::OnDemand,
        ))
        .await
        .expect("launch");
    assert_eq!(
        fake.calls()["GET projects/zones/instanceGroupManagers"].as_u64(),
        read,
        "launches reuse the template read at resolution"
    );

    let inst = stored(&fake, &a.provider_id);
    assert_eq!(inst["scheduling"]["provisioningModel"], "SPOT");
    assert_eq!(inst["labels"]["goog-k8s-node-pool-name"], "default-pool");
    assert_eq!(inst["labels"]["muster-poolnode"], "l4-a");
    assert_eq!(
        inst["networkInterfaces"][0]["aliasIpRanges"][0]["subnetworkRangeName"],
        "gke-prod-pods-5f1e2d3c"
    );
    assert_eq!(
        inst["serviceAccounts"][0]["email"],
        "gke-nodes@my-project.iam.gserviceaccount.com"
    );
    let env = kube_env_of(&inst);
    // the newer template's credentials, not the older one's
    assert!(kube_env::get(&env, "KUBELET_CERT").is_some_and(|c| c.starts_with("LS0t")));
    let args = kube_env::get(&env, "KUBELET_ARGS")
        .expect("args")
        .to_string();
    for want in [
        "--max-pods=110",
        "cloud.google.com/gke-nodepool=default-pool",
        "muster.dev/pool=l4",
        "cloud.google.com/gke-accelerator=nvidia-l4",
        "cloud.google.com/gke-gpu-driver-version=default",
        "--register-with-taints=muster.dev/gpu=true:NoSchedule",
    ] {
        assert!(args.contains(want), "{want} missing from {args}");
    }
    assert_eq!(kube_env::get(&env, "ZONE"), Some("us-central1-a"));

    let t4 = stored(&fake, &b.provider_id);
    assert_eq!(t4["guestAccelerators"][0]["acceleratorCount"], 2);
    assert_eq!(t4["scheduling"]["provisioningModel"], "STANDARD");
    let args = kube_env::get(&kube_env_of(&t4), "KUBELET_ARGS")
        .expect("args")
        .to_string();
    assert!(
        args.contains("cloud.google.com/gke-accelerator=nvidia-tesla-t4"),
        "{args}"
    );
}

#[tokio::test]
async fn a_missing_pool_or_cluster_is_named() {
    let fake = ComputeFake::start();
    let p = GcpProvider::new(
        "gke",
        &spec(json!({"nodePool": "gpu-pool"})),
        &fake.options(),
    )
    .await
    .expect("provider");
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => assert!(what.contains("gpu-pool"), "{what}"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    let other = spec(
        json!({"cluster": {"project": "my-project", "location": "us-central1", "name": "staging"}}),
    );
    let p = GcpProvider::new("gke", &other, &fake.options())
        .await
        .expect("provider");
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => assert!(
            what.contains("projects/my-project/locations/us-central1/clusters/staging"),
            "{what}"
        ),
        other => panic!("expected NotFound, got {other:?}"),
    }
    // a pool that is named need not be RUNNING
    let p = GcpProvider::new(
        "gke",
        &spec(json!({"nodePool": "upgrading-pool"})),
        &fake.options(),
    )
    .await
    .expect("provider");
    match p.resolve().await {
        // its group is not in the fixture: the group read is what fails
        Err(ProviderError::NotFound { .. }) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[tokio::test]
async fn an_autopilot_cluster_is_refused_with_what_to_use_instead() {
    let fake = ComputeFake::start();
    fake.control("POST", "gke/autopilot?on=true");
    let p = GcpProvider::new("gke", &spec(json!({})), &fake.options())
        .await
        .expect("provider");
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
    // nothing was read beyond the cluster: one GET under the cluster's
    // path (the fake's call log keys GKE calls by project, location and
    // cluster), no instance group or template read
    let cluster_gets = |fake: &ComputeFake| {
        fake.calls()["GET my-project/us-central1/prod"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(cluster_gets(&fake), 1, "{}", fake.calls());
    assert!(!fake.calls().to_string().contains("instanceGroupManagers"));
    // a Standard cluster resolves
    fake.control("POST", "gke/autopilot?on=false");
    let p = GcpProvider::new("gke", &spec(json!({})), &fake.options())
        .await
        .expect("provider");
    p.resolve().await.expect("a Standard cluster resolves");
    // (a Standard cluster's node pools are listed: more calls there)
    assert!(cluster_gets(&fake) > 2, "{}", fake.calls());
}
