//! Nodes that join an EKS cluster, against moto: the cluster's endpoint, CA
//! and service CIDR come from `DescribeCluster`, the AMI from the public SSM
//! parameter of the alias for the cluster's Kubernetes version, and the
//! user data of the launched instance (read back with
//! `DescribeInstanceAttribute`) is a complete nodeadm `NodeConfig` or
//! Bottlerocket TOML.

use std::collections::BTreeMap;

use muster_planner::{CapacityType, OfferingKey, Provider, Taint, TaintEffect};
use muster_provider_api::{CloudProvider, LaunchRequest, ProviderError};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use muster_provider_aws::nodeadm::{NODE_CONFIG, user_parts};
use serde_json::json;

fn request(name: &str) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: format!("key-{name}"),
        offering: OfferingKey {
            provider: Provider::Aws,
            zone: "us-east-1a".into(),
            instance_type: "g6.xlarge".into(),
            capacity_type: CapacityType::OnDemand,
            reservation: None,
        },
        pool: "l4".into(),
        cluster: "prod".into(),
        gang: None,
        labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
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

/// A NodeClass spec joining `prod` with `alias`, and moto's x86_64 AMI.
async fn joining(moto: &Moto, alias: &str) -> (serde_json::Value, String) {
    let mut spec = moto.node_class_spec().await;
    let ami = spec["aws"]["amiSelectorTerms"][0]["id"]
        .as_str()
        .expect("ami")
        .to_string();
    spec["aws"]["cluster"] = json!({"name": "prod"});
    spec["aws"]["amiSelectorTerms"] = json!([{ "alias": alias }]);
    (spec, ami)
}

#[tokio::test]
async fn an_al2023_node_gets_the_clusters_details_and_the_aliass_image() {
    let moto = Moto::start();
    let endpoint = moto.eks_cluster("prod", "1.31").await;
    let (mut spec, ami) = joining(&moto, "al2023@latest").await;
    spec["aws"]["maxPods"] = json!(110);
    spec["aws"]["userData"] = json!("#!/bin/bash\necho extra\n");
    moto.public_parameter(
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
        &ami,
    );
    let p = AwsProvider::new(&spec, moto.options())
        .await
        .expect("provider");
    let r = p.resolve().await.expect("resolves");
    assert_eq!(r.images.len(), 1, "only the x86_64 parameter exists");
    assert_eq!(r.images[0].id, ami);
    assert_eq!(r.images[0].architecture.as_deref(), Some("x86_64"));

    let i = p.launch(&request("l4-a")).await.expect("launch");
    let ud = moto.user_data(&i.provider_id).await.expect("user data");
    let parts = user_parts(&ud).expect("MIME");
    assert_eq!(parts.len(), 2);
    // the NodeClass's script first, muster's NodeConfig last (it wins the merge)
    assert!(parts[0].content_type.starts_with("text/x-shellscript"));
    assert_eq!(parts[0].content, "#!/bin/bash\necho extra\n");
    assert_eq!(parts[1].content_type, NODE_CONFIG);
    let config: serde_norway::Value = serde_norway::from_str(&parts[1].content).expect("YAML");
    let cluster = &config["spec"]["cluster"];
    assert_eq!(cluster["name"], "prod");
    assert_eq!(
        cluster["apiServerEndpoint"].as_str(),
        Some(endpoint.as_str())
    );
    // moto's default service CIDR
    assert_eq!(cluster["cidr"], "172.20.0.0/16");
    assert!(
        cluster["certificateAuthority"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    assert_eq!(config["spec"]["kubelet"]["config"]["maxPods"], 110);
    assert_eq!(
        config["spec"]["kubelet"]["flags"][0],
        "--node-labels=muster.dev/pool=l4"
    );
    assert_eq!(
        config["spec"]["kubelet"]["flags"][1],
        "--register-with-taints=nvidia.com/gpu=true:NoSchedule"
    );
    let described = p.describe(&i.provider_id).await.expect("describe");
    assert_eq!(
        described
            .tags
            .get("kubernetes.io/cluster/prod")
            .map(String::as_str),
        Some("owned")
    );
}

#[tokio::test]
async fn a_bottlerocket_node_gets_toml_settings() {
    let moto = Moto::start();
    let endpoint = moto.eks_cluster("prod", "1.30").await;
    let (mut spec, ami) = joining(&moto, "bottlerocket@v1.30.0").await;
    spec["aws"]["userData"] = json!("[settings.host-containers.admin]\nenabled = true\n");
    for arch in ["x86_64", "arm64"] {
        moto.public_parameter(
            &format!("/aws/service/bottlerocket/aws-k8s-1.30-nvidia/{arch}/1.30.0/image_id"),
            &ami,
        );
    }
    let p = AwsProvider::new(&spec, moto.options())
        .await
        .expect("provider");
    assert_eq!(p.resolve().await.expect("resolves").images.len(), 2);
    let i = p.launch(&request("l4-b")).await.expect("launch");
    let settings: toml::Table = moto
        .user_data(&i.provider_id)
        .await
        .expect("user data")
        .parse()
        .expect("TOML");
    let k = &settings["settings"]["kubernetes"];
    assert_eq!(k["cluster-name"].as_str(), Some("prod"));
    assert_eq!(k["api-server"].as_str(), Some(endpoint.as_str()));
    assert_eq!(k["cluster-dns-ip"].as_str(), Some("172.20.0.10"));
    assert_eq!(k["node-labels"]["muster.dev/pool"].as_str(), Some("l4"));
    assert_eq!(
        k["node-taints"]["nvidia.com/gpu"]
            .as_array()
            .map(|a| a.len()),
        Some(1)
    );
    assert_eq!(
        settings["settings"]["host-containers"]["admin"]["enabled"].as_bool(),
        Some(true)
    );
}

#[tokio::test]
async fn a_missing_cluster_parameter_or_cluster_name_is_named() {
    let moto = Moto::start();
    // no cluster named prod yet
    let (spec, ami) = joining(&moto, "al2023@latest").await;
    let p = AwsProvider::new(&spec, moto.options())
        .await
        .expect("provider");
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => {
            assert!(what.contains("EKS cluster prod"), "{what}")
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    // the cluster exists, its version's parameters do not
    moto.eks_cluster("prod", "1.31").await;
    moto.public_parameter(
        "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
        &ami,
    );
    let p = AwsProvider::new(&spec, moto.options())
        .await
        .expect("provider");
    match p.resolve().await {
        Err(ProviderError::NotFound { what }) => {
            assert!(what.contains("al2023@latest for Kubernetes 1.31"), "{what}")
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    // an alias without a cluster says what is missing
    let mut no_cluster = spec.clone();
    no_cluster["aws"]
        .as_object_mut()
        .expect("aws")
        .remove("cluster");
    let p = AwsProvider::new(&no_cluster, moto.options())
        .await
        .expect("provider");
    match p.resolve().await {
        Err(ProviderError::Permanent { message }) => {
            assert!(message.contains("needs spec.aws.cluster"), "{message}")
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
}
