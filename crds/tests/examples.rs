//! The example manifests under `docs/examples/` are valid: each muster resource passes the
//! generated OpenAPI schema and CEL rules (as the API server would admit it) and
//! deserializes into its Rust type; the labelled Job is what muster expects to pick up.

mod support;

use k8s_openapi::api::batch::v1::Job;
use muster_crds::{Gang, GpuPool, GpuQueue, Kind, NodeClass, PoolNode};
use serde_json::Value;
use support::{admit, kind_of, read_yaml_docs, repo_dir};

const MUSTER_EXAMPLES: [&str; 7] = [
    "nodeclass-sim.yaml",
    "nodeclass-aws.yaml",
    "nodeclass-gcp.yaml",
    "gpupool-a100-spot.yaml",
    "gpupool-l4.yaml",
    "gpuqueue-team-a.yaml",
    "gpuqueue-team-b.yaml",
];

fn example(name: &str) -> Value {
    let path = repo_dir().join("docs/examples").join(name);
    let mut docs = read_yaml_docs(&path);
    assert_eq!(docs.len(), 1, "{name}: one document expected");
    docs.remove(0)
}

/// Deserializes an admitted (defaulted) object into its Rust type.
fn deserialize(kind: Kind, doc: Value) -> Result<(), serde_json::Error> {
    match kind {
        Kind::NodeClass => serde_json::from_value::<NodeClass>(doc).map(drop),
        Kind::GpuPool => serde_json::from_value::<GpuPool>(doc).map(drop),
        Kind::GpuQueue => serde_json::from_value::<GpuQueue>(doc).map(drop),
        Kind::Gang => serde_json::from_value::<Gang>(doc).map(drop),
        Kind::PoolNode => serde_json::from_value::<PoolNode>(doc).map(drop),
    }
}

#[test]
fn muster_examples_are_admitted_and_deserialize() {
    for name in MUSTER_EXAMPLES {
        let doc = example(name);
        let kind = kind_of(&doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        let admitted = admit(&doc, None)
            .unwrap_or_else(|errors| panic!("{name} rejected:\n  {}", errors.join("\n  ")));
        deserialize(kind, doc.clone()).unwrap_or_else(|e| panic!("{name} as written: {e}"));
        deserialize(kind, admitted).unwrap_or_else(|e| panic!("{name} defaulted: {e}"));
    }
}

#[test]
fn examples_cover_every_cluster_kind_but_gang_and_poolnode() {
    let kinds: Vec<Kind> = MUSTER_EXAMPLES
        .iter()
        .map(|n| kind_of(&example(n)).expect("muster kind"))
        .collect();
    for kind in [Kind::NodeClass, Kind::GpuPool, Kind::GpuQueue] {
        assert!(kinds.contains(&kind), "no example of {kind}");
    }
}

#[test]
fn defaults_apply_to_sparse_pool() {
    let admitted = admit(&example("gpupool-l4.yaml"), None).expect("admitted");
    let pool: GpuPool = serde_json::from_value(admitted).expect("GPUPool");
    assert_eq!(
        pool.spec.requirements.capacity_types,
        vec![muster_crds::common::CapacityType::OnDemand]
    );
    assert_eq!(pool.spec.taints.len(), 1);
    assert_eq!(pool.spec.taints[0].key, "nvidia.com/gpu");
    assert_eq!(pool.spec.disruption.scale_to_zero_after.as_str(), "10m");
    assert_eq!(pool.spec.disruption.budgets[0].nodes, "10%");
    assert!(!pool.spec.disruption.disrupt_running_gangs);
}

#[test]
fn aws_node_class_requires_imdsv2_by_default() {
    let mut doc = example("nodeclass-aws.yaml");
    doc["spec"]["aws"]
        .as_object_mut()
        .expect("aws block")
        .remove("metadataOptions");
    let admitted = admit(&doc, None).expect("admitted");
    let class: NodeClass = serde_json::from_value(admitted).expect("NodeClass");
    let aws = class.spec.aws.expect("aws");
    assert_eq!(
        aws.metadata_options.http_tokens,
        muster_crds::nodeclass::HttpTokens::Required
    );
}

#[test]
fn team_queues_share_a_cohort() {
    let a: GpuQueue = serde_json::from_value(example("gpuqueue-team-a.yaml")).expect("team-a");
    let b: GpuQueue = serde_json::from_value(example("gpuqueue-team-b.yaml")).expect("team-b");
    assert!(a.spec.cohort.is_some());
    assert_eq!(a.spec.cohort, b.spec.cohort);
}

#[test]
fn labelled_job_is_a_suspended_gang_of_four_times_eight_gpus() {
    let job: Job = serde_json::from_value(example("job-labelled.yaml")).expect("batch/v1 Job");
    let meta = &job.metadata;
    let label = meta.labels.as_ref().and_then(|l| l.get("muster.dev/queue"));
    assert_eq!(label.map(String::as_str), Some("team-a"));
    let min_count = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get("muster.dev/min-count"));
    assert_eq!(min_count.map(String::as_str), Some("4"));
    let spec = job.spec.expect("spec");
    assert_eq!(spec.suspend, Some(true));
    assert_eq!(spec.parallelism, Some(4));
    let pod = spec.template.spec.expect("pod spec");
    let gpus: i64 = pod
        .containers
        .iter()
        .filter_map(|c| {
            c.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("nvidia.com/gpu")
        })
        .map(|q| q.0.parse::<i64>().expect("integer GPUs"))
        .sum();
    assert_eq!(gpus, 8);
}

/// Typed → JSON → admitted → typed gives the same value: what a controller writes back is
/// accepted and means the same.
fn round_trip<T>(name: &str, admitted: Value)
where
    T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let typed: T = serde_json::from_value(admitted).expect("typed");
    let written = serde_json::to_value(&typed).expect("serialize");
    let again = admit(&written, None)
        .unwrap_or_else(|errors| panic!("{name} re-serialized rejected: {errors:?}"));
    let typed_again: T = serde_json::from_value(again).expect("typed again");
    assert_eq!(typed, typed_again, "{name}");
}

#[test]
fn rust_types_round_trip_through_json() {
    let good = support::crate_dir().join("tests/good");
    let mut docs: Vec<(String, Value)> = MUSTER_EXAMPLES
        .iter()
        .map(|n| (n.to_string(), example(n)))
        .collect();
    for name in ["gang.yaml", "poolnode.yaml"] {
        let doc = read_yaml_docs(&good.join(name)).remove(0);
        docs.push((name.to_string(), doc));
    }
    for (name, doc) in docs {
        let kind = kind_of(&doc).expect("kind");
        let admitted = admit(&doc, None)
            .unwrap_or_else(|errors| panic!("{name} rejected:\n  {}", errors.join("\n  ")));
        match kind {
            Kind::NodeClass => round_trip::<NodeClass>(&name, admitted),
            Kind::GpuPool => round_trip::<GpuPool>(&name, admitted),
            Kind::GpuQueue => round_trip::<GpuQueue>(&name, admitted),
            Kind::Gang => round_trip::<Gang>(&name, admitted),
            Kind::PoolNode => round_trip::<PoolNode>(&name, admitted),
        }
    }
}
