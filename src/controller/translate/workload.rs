//! A workload behind the seam ([`crate::controller::workloads`]) → the
//! `spec` of its Gang: one pod set per pod set of the workload, with the
//! template's requests, node selector, tolerations and required node
//! affinity; the queue label and
//! the `muster.dev/*` annotations (priority, GPU model, topology) of the
//! object.
//!
//! Network topology (Kueue's topology-aware scheduling annotations):
//! `muster.dev/podset-required-topology` or
//! `muster.dev/podset-preferred-topology` names a network-topology node
//! label of [`muster_planner::labels::NETWORK_LAYERS`]; the required one
//! wins when both are set. A label that is not one of them is ignored and
//! reported ([`network_topology`]). `muster.dev/may-outlive-capacity:
//! "true"` lets the gang run on reserved capacity that ends before it does.
//!
//! Topology: the `muster.dev/topology` annotation when present; otherwise a
//! gang of more than one pod whose pods request `vpc.amazonaws.com/efa` is
//! `SamePlacementGroup` (EFA traffic does not leave a cluster placement
//! group's network well; EC2 User Guide, "Elastic Fabric Adapter":
//! "launch the instances into a cluster placement group"), and any other
//! gang `Any`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controller::base::objects::{
    GPU_MODEL_ANNOTATION, GangSpec, MAY_OUTLIVE_CAPACITY_ANNOTATION, PREFERRED_TOPOLOGY_ANNOTATION,
    PRIORITY_ANNOTATION, PodSetSpec, QUEUE_LABEL, REQUIRED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
};
use crate::controller::workloads::PodSetTemplate;
pub(crate) use crate::controller::workloads::WorkloadError;
use crate::controller::workloads::requests::pod_requests;
use muster_crds::gang::{NetworkTopology, NetworkTopologyMode};

/// The Gang spec of a labelled workload with metadata `meta` and `pod_sets`.
pub(crate) fn gang_spec(
    meta: &ObjectMeta,
    pod_sets: &[PodSetTemplate],
) -> Result<GangSpec, WorkloadError> {
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    let queue = labels
        .get(QUEUE_LABEL)
        .map(|q| q.trim().to_string())
        .unwrap_or_default();
    if queue.is_empty() {
        return Err(WorkloadError::NoQueue);
    }
    let priority = match annotations.get(PRIORITY_ANNOTATION) {
        Some(v) => v
            .trim()
            .parse::<i32>()
            .map_err(|e| WorkloadError::BadAnnotation(PRIORITY_ANNOTATION, e.to_string()))?,
        None => 0,
    };
    // the Gang names one GPU model per pod set; the annotation's first entry,
    // for the pod sets that request GPUs
    let gpu_model = annotations
        .get(GPU_MODEL_ANNOTATION)
        .and_then(|v| v.split(',').map(str::trim).find(|s| !s.is_empty()))
        .map(String::from);
    let mut sets = Vec::new();
    for ps in pod_sets {
        let pod = ps.template.spec.as_ref();
        let requests = pod.map(pod_requests).transpose()?.unwrap_or_default();
        let wants_gpus = requests
            .get("nvidia.com/gpu")
            .or_else(|| requests.get("amd.com/gpu"))
            .is_some_and(|q| q.trim() != "0");
        sets.push(PodSetSpec {
            name: ps.name.clone(),
            count: i32::try_from(ps.count).unwrap_or(i32::MAX),
            min_count: ps.min_count.map(|m| i32::try_from(m).unwrap_or(i32::MAX)),
            requests: requests
                .into_iter()
                .map(|(k, v)| (k, muster_crds::common::Quantity(v)))
                .collect(),
            node_selector: pod
                .and_then(|p| p.node_selector.clone())
                .unwrap_or_default(),
            tolerations: pod
                .and_then(|p| p.tolerations.as_ref())
                .into_iter()
                .flatten()
                .map(toleration)
                .collect(),
            affinity: pod.and_then(required_affinity),
            gpu_model: if wants_gpus || pod_sets.len() == 1 {
                gpu_model.clone()
            } else {
                None
            },
        });
    }
    let topology = topology(annotations.get(TOPOLOGY_ANNOTATION), &sets)?;
    let may_outlive_capacity = match annotations.get(MAY_OUTLIVE_CAPACITY_ANNOTATION) {
        Some(v) => v.trim().parse::<bool>().map_err(|_| {
            WorkloadError::BadAnnotation(
                MAY_OUTLIVE_CAPACITY_ANNOTATION,
                format!("{v:?} is not true or false"),
            )
        })?,
        None => false,
    };
    Ok(GangSpec {
        queue,
        priority,
        pod_sets: sets,
        topology,
        disruptible: false,
        expected_duration: None,
        network_topology: network_topology(annotations).0,
        may_outlive_capacity,
    })
}

/// The network topology a workload's annotations ask for, and what is wrong
/// with them if anything: the required annotation's label, else the
/// preferred one's; a label that is not a network layer
/// ([`muster_planner::labels::NETWORK_LAYERS`]) is left out (the gang gets
/// none from its workload) and named in the problem, as is a preferred
/// label given beside a required one.
pub(crate) fn network_topology(
    annotations: &BTreeMap<String, String>,
) -> (Option<NetworkTopology>, Option<String>) {
    let required = annotations.get(REQUIRED_TOPOLOGY_ANNOTATION);
    let preferred = annotations.get(PREFERRED_TOPOLOGY_ANNOTATION);
    let (key, value, mode) = match (required, preferred) {
        (Some(r), _) => (
            REQUIRED_TOPOLOGY_ANNOTATION,
            r,
            NetworkTopologyMode::Required,
        ),
        (None, Some(p)) => (
            PREFERRED_TOPOLOGY_ANNOTATION,
            p,
            NetworkTopologyMode::Preferred,
        ),
        (None, None) => return (None, None),
    };
    let level = value.trim();
    let known = muster_planner::labels::NETWORK_LAYERS
        .iter()
        .flat_map(|keys| keys.iter())
        .any(|k| *k == level);
    if !known {
        let problem = format!(
            "annotation {key}: {level:?} is not a network-topology label (one of {}); the gang is queued without the workload's network topology",
            known_network_labels()
        );
        return (None, Some(problem));
    }
    let problem = (required.is_some() && preferred.is_some()).then(|| {
        format!(
            "annotations {REQUIRED_TOPOLOGY_ANNOTATION} and {PREFERRED_TOPOLOGY_ANNOTATION} are both set; the required one is used"
        )
    });
    (
        Some(NetworkTopology {
            mode,
            level: level.to_string(),
        }),
        problem,
    )
}

/// Every network-topology label, comma-separated, for messages.
fn known_network_labels() -> String {
    muster_planner::labels::NETWORK_LAYERS
        .iter()
        .flat_map(|keys| keys.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The extended resource of EFA interfaces (AWS EFA device plugin).
const EFA_RESOURCE: &str = "vpc.amazonaws.com/efa";

/// The gang's topology: the annotation's, else `SamePlacementGroup` for a
/// multi-pod gang that requests EFA, else `Any`.
fn topology(
    annotation: Option<&String>,
    sets: &[PodSetSpec],
) -> Result<muster_crds::Topology, WorkloadError> {
    use muster_crds::Topology;
    if let Some(v) = annotation {
        return match v.trim() {
            "Any" => Ok(Topology::Any),
            "SameZone" => Ok(Topology::SameZone),
            "SamePlacementGroup" => Ok(Topology::SamePlacementGroup),
            "SameNode" => Ok(Topology::SameNode),
            other => Err(WorkloadError::BadAnnotation(
                TOPOLOGY_ANNOTATION,
                format!("{other:?} is not one of Any, SameZone, SamePlacementGroup, SameNode"),
            )),
        };
    }
    let pods: i64 = sets.iter().map(|s| i64::from(s.count)).sum();
    let efa = sets.iter().any(|s| {
        s.requests
            .get(EFA_RESOURCE)
            .is_some_and(|q| q.0.trim() != "0")
    });
    Ok(if pods > 1 && efa {
        Topology::SamePlacementGroup
    } else {
        Topology::Any
    })
}

/// The required node affinity of a pod
/// (`affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`)
/// as written in a Gang, matching the same nodes: the planner places the
/// pod set only where kube-scheduler would let its pods run.
///
/// Every term is kept as written, empty ones too (an empty term matches no
/// node), except a term with a requirement kube-scheduler cannot parse (an
/// operator that is none of Kubernetes' six): the scheduler counts such a
/// term as matching nothing
/// (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`,
/// `nodeSelectorTerm.match` returns false on its parse errors), and so does
/// leaving it out of an OR. No term left (or none written, which the API
/// server refuses in a pod) is one empty term: no node.
pub(crate) fn required_affinity(
    pod: &k8s_openapi::api::core::v1::PodSpec,
) -> Option<muster_crds::gang::PodSetAffinity> {
    use muster_crds::common::{NodeSelectorOperator as Op, NodeSelectorRequirement as Req};
    let required = pod
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    let requirement = |r: &k8s_openapi::api::core::v1::NodeSelectorRequirement| {
        let operator = match r.operator.as_str() {
            "In" => Op::In,
            "NotIn" => Op::NotIn,
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            "Gt" => Op::Gt,
            "Lt" => Op::Lt,
            _ => return None,
        };
        Some(Req {
            key: r.key.clone(),
            operator,
            values: r.values.clone().unwrap_or_default(),
        })
    };
    let all = |rs: &Option<Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>>| {
        rs.iter()
            .flatten()
            .map(requirement)
            .collect::<Option<Vec<Req>>>()
    };
    let mut terms: Vec<muster_crds::common::NodeSelectorTerm> = required
        .node_selector_terms
        .iter()
        .filter_map(|t| {
            Some(muster_crds::common::NodeSelectorTerm {
                match_expressions: all(&t.match_expressions)?,
                match_fields: all(&t.match_fields)?,
            })
        })
        .collect();
    if terms.is_empty() {
        terms.push(Default::default());
    }
    Some(muster_crds::gang::PodSetAffinity {
        required_node_selector_terms: terms,
    })
}

/// A Kubernetes toleration as written in a Gang.
pub(crate) fn toleration(
    t: &k8s_openapi::api::core::v1::Toleration,
) -> muster_crds::common::Toleration {
    use muster_crds::common::{TaintEffect, TolerationOperator};
    muster_crds::common::Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        operator: match t.operator.as_deref() {
            Some("Exists") => Some(TolerationOperator::Exists),
            Some("Equal") => Some(TolerationOperator::Equal),
            _ => None,
        },
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: match t.effect.as_deref() {
            Some("NoSchedule") => Some(TaintEffect::NoSchedule),
            Some("PreferNoSchedule") => Some(TaintEffect::PreferNoSchedule),
            Some("NoExecute") => Some(TaintEffect::NoExecute),
            _ => None,
        },
        toleration_seconds: t.toleration_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::workloads::Workload;
    use crate::controller::workloads::job::JobWorkload;
    use k8s_openapi::api::batch::v1::Job;
    use serde_json::json;

    fn gang_of(j: Job) -> Result<GangSpec, WorkloadError> {
        let w = JobWorkload(std::sync::Arc::new(j));
        gang_spec(w.meta(), &w.pod_sets()?)
    }

    fn job(annotations: serde_json::Value, pod: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "labels": {"muster.dev/queue": "team-a"}, "annotations": annotations},
            "spec": {"parallelism": 4, "template": {"spec": pod}}
        }))
        .expect("job")
    }

    #[test]
    fn pod_set_from_parallelism_requests_and_annotations() {
        let j = job(
            json!({"muster.dev/min-count": "2", "muster.dev/gpu-model": "A100, H100", "muster.dev/priority": "7"}),
            json!({
                "containers": [
                    {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "2"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
                ],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}],
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "x", "operator": "Exists"}]
            }),
        );
        let g = gang_of(j).expect("gang");
        assert_eq!(g.queue, "team-a");
        assert_eq!(g.priority, 7);
        let ps = &g.pod_sets[0];
        assert_eq!((ps.count, ps.min_count), (4, Some(2)));
        assert_eq!(ps.gpu_model.as_deref(), Some("A100"));
        assert_eq!(
            ps.requests.get("nvidia.com/gpu").map(|q| q.as_str()),
            Some("8")
        );
        // the init container's 8 CPUs exceed the containers' 2.5
        assert_eq!(ps.requests.get("cpu").map(|q| q.as_str()), Some("8"));
        assert_eq!(
            ps.node_selector.get("disk").map(String::as_str),
            Some("ssd")
        );
        assert_eq!(ps.tolerations.len(), 1);
    }

    /// Kueue-style network annotations: the required label wins over the
    /// preferred one (and that is reported); a label that is no network
    /// layer is left out and reported, the gang still made;
    /// `may-outlive-capacity` is a boolean.
    #[test]
    fn network_topology_and_capacity_opt_in_come_from_the_annotations() {
        use muster_crds::gang::{NetworkTopology, NetworkTopologyMode};
        let pod = json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]});
        let spec = |a: serde_json::Value| gang_of(job(a, pod.clone())).expect("gang");
        let topology = |a: serde_json::Value| {
            let map: BTreeMap<String, String> = serde_json::from_value(a).expect("map");
            network_topology(&map)
        };
        let none = spec(json!({}));
        assert_eq!(none.network_topology, None);
        assert!(!none.may_outlive_capacity);
        let required = spec(json!({
            "muster.dev/podset-required-topology": "topology.k8s.aws/network-node-layer-2",
            "muster.dev/may-outlive-capacity": "true",
        }));
        assert_eq!(
            required.network_topology,
            Some(NetworkTopology {
                mode: NetworkTopologyMode::Required,
                level: "topology.k8s.aws/network-node-layer-2".into()
            })
        );
        assert!(required.may_outlive_capacity);
        assert_eq!(
            topology(
                json!({"muster.dev/podset-preferred-topology": " cloud.google.com/gce-topology-block "})
            ),
            (
                Some(NetworkTopology {
                    mode: NetworkTopologyMode::Preferred,
                    level: "cloud.google.com/gce-topology-block".into()
                }),
                None
            )
        );
        let (both, problem) = topology(json!({
            "muster.dev/podset-required-topology": "cloud.google.com/gce-topology-host",
            "muster.dev/podset-preferred-topology": "cloud.google.com/gce-topology-block",
        }));
        assert_eq!(both.map(|t| t.mode), Some(NetworkTopologyMode::Required));
        assert!(problem.is_some_and(|p| p.contains("both set")));
        // an unknown label: no topology from the workload, a problem naming it
        let bad = json!({"muster.dev/podset-required-topology": "topology.kubernetes.io/zone"});
        assert_eq!(spec(bad.clone()).network_topology, None);
        let (t, problem) = topology(bad);
        assert_eq!(t, None);
        let problem = problem.expect("a problem");
        assert!(
            problem.contains("muster.dev/podset-required-topology")
                && problem.contains("\"topology.kubernetes.io/zone\"")
                && problem.contains("topology.k8s.aws/network-node-layer-1"),
            "{problem}"
        );
        let err = gang_of(job(
            json!({"muster.dev/may-outlive-capacity": "yes"}),
            pod.clone(),
        ))
        .err()
        .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("muster.dev/may-outlive-capacity")),
            "{err:?}"
        );
    }

    /// The CRDs' list of network labels is the planner's.
    #[test]
    fn the_crds_network_labels_are_the_planners() {
        let planner: Vec<&str> = muster_planner::labels::NETWORK_LAYERS
            .iter()
            .flat_map(|keys| keys.iter().copied())
            .collect();
        assert_eq!(planner, muster_crds::gang::NETWORK_LAYER_KEYS);
    }

    #[test]
    fn the_topology_is_the_annotations_else_a_placement_group_for_efa_gangs() {
        let efa = json!({"containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}}}]});
        let plain = json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]});
        use muster_crds::Topology;
        let of = |annotations, pod| gang_of(job(annotations, pod)).map(|g| g.topology);
        assert_eq!(
            of(json!({}), efa.clone()).ok(),
            Some(Topology::SamePlacementGroup)
        );
        assert_eq!(of(json!({}), plain.clone()).ok(), Some(Topology::Any));
        assert_eq!(
            of(json!({"muster.dev/topology": "SameZone"}), efa.clone()).ok(),
            Some(Topology::SameZone),
            "the annotation wins"
        );
        assert_eq!(
            of(json!({"muster.dev/topology": "SamePlacementGroup"}), plain).ok(),
            Some(Topology::SamePlacementGroup)
        );
        let err = of(json!({"muster.dev/topology": "rack"}), efa)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(
                |e| e.contains("muster.dev/topology") && e.contains("SamePlacementGroup")
            ),
            "{err:?}"
        );
    }

    #[test]
    fn the_gpu_model_goes_to_the_pod_sets_that_request_gpus() {
        let template = |gpus: &str| {
            PodSetTemplate {
            name: String::new(),
            count: 1,
            min_count: None,
            template: serde_json::from_value(json!({"spec": {"containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"cpu": "1"}}}
            ]}}))
            .expect("template"),
        }
        };
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "js", "labels": {"muster.dev/queue": "q"}, "annotations": {"muster.dev/gpu-model": "H100"}
        }))
        .expect("meta");
        let driver = PodSetTemplate {
            name: "driver".into(),
            ..template("0")
        };
        let workers = PodSetTemplate {
            name: "workers".into(),
            count: 4,
            ..template("8")
        };
        let g = gang_spec(&meta, &[driver, workers]).expect("gang");
        assert_eq!(g.pod_sets[0].gpu_model, None);
        assert_eq!(g.pod_sets[1].gpu_model.as_deref(), Some("H100"));
        assert_eq!(g.pod_sets[1].count, 4);
    }

    #[test]
    fn bad_annotations_and_quantities_are_errors() {
        let pod = json!({"containers": [{"name": "a"}]});
        let e = gang_of(job(json!({"muster.dev/min-count": "many"}), pod)).expect_err("bad");
        assert_eq!(e.reason(), "InvalidAnnotation");
        let pod =
            json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]});
        let e = gang_of(job(json!({}), pod)).expect_err("bad");
        assert_eq!(e.reason(), "InvalidRequests");
    }

    /// The Gang a Job's spec becomes, read back as the planner's gang, the
    /// way a cycle reads it from the API server.
    fn planner_gang(spec: &GangSpec) -> muster_planner::Gang {
        let mut obj: kube::core::DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec,
        }))
        .expect("gang object");
        obj.types = Some(kube::core::TypeMeta {
            api_version: "muster.dev/v1alpha1".into(),
            kind: "Gang".into(),
        });
        crate::controller::translate::gang::gang(&obj)
            .expect("valid gang")
            .expect("not finished")
    }

    /// One pool that may buy the same 8-GPU machine in two zones, the one
    /// the affinity excludes the cheaper.
    fn two_zones(g: muster_planner::Gang) -> muster_planner::Plan {
        use muster_planner::fixtures::{offering, pool, queue};
        use muster_planner::{GpuModel, Price, Resources, Snapshot};
        let machine = |zone: &str, price: f64| {
            offering("p4d.24xlarge", zone)
                .price(Price::from_usd(price).expect("price"))
                .gpu_model(GpuModel::new("A100"))
                .gpu_count(8)
                .resources(
                    Resources::parse_map([
                        ("cpu", "96"),
                        ("memory", "1152Gi"),
                        ("nvidia.com/gpu", "8"),
                    ])
                    .expect("resources"),
                )
                .build()
        };
        let snapshot = Snapshot {
            queues: vec![queue("team-a").build()],
            pools: vec![pool("gpu").build()],
            offerings: vec![machine("us-east-1a", 32.0), machine("us-east-1b", 40.0)],
            gangs: vec![g],
            ..Default::default()
        };
        muster_planner::plan(
            &snapshot,
            &muster_planner::Policy::default(),
            muster_planner::Time(10_000),
        )
    }

    fn affine_job(terms: serde_json::Value) -> Job {
        job(
            json!({}),
            json!({
                "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
            }),
        )
    }

    /// A Job whose required node affinity excludes a zone is planned only
    /// in the zone it allows (the pin then names a node that satisfies the
    /// Job's own terms); before, the Gang dropped the affinity and the
    /// planner launched in the cheaper, excluded zone, where the pinned
    /// pods could never schedule.
    #[test]
    fn required_node_affinity_keeps_the_launch_on_matching_capacity() {
        let j = affine_job(json!([
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1a"]}]}
        ]));
        let spec = gang_of(j).expect("gang");
        let plan = two_zones(planner_gang(&spec));
        let zones: Vec<&str> = plan
            .launches
            .iter()
            .flat_map(|l| l.nodes.iter().map(|n| n.offering.zone.as_str()))
            .collect();
        // the Job's four pods, one 8-GPU machine each
        assert_eq!(zones, ["us-east-1b"; 4], "{plan:#?}");
    }

    /// Nothing the pools can buy matches: the gang is Unsatisfiable, and
    /// the reason names its affinity.
    #[test]
    fn an_affinity_no_offering_matches_is_unsatisfiable_and_says_so() {
        let j = affine_job(json!([
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-west-1a"]}]},
            {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]}
        ]));
        let plan = two_zones(planner_gang(&gang_of(j).expect("gang")));
        assert!(plan.launches.is_empty(), "{plan:#?}");
        let w = &plan.waiting[0];
        assert_eq!(w.reason.as_str(), "Unsatisfiable");
        assert!(
            w.message.contains("required node affinity"),
            "{}",
            w.message
        );
    }

    /// Every term reaches the Gang as written, fields and empty terms
    /// included; a term kube-scheduler cannot parse matches nothing and is
    /// left out; no term left is one empty term; preferred affinity alone
    /// is no required affinity.
    #[test]
    fn the_required_terms_as_written_in_the_gang() {
        use muster_crds::common::NodeSelectorOperator as Op;
        let spec = gang_of(affine_job(json!([
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}],
             "matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]},
            {},
            {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}
        ])))
        .expect("gang");
        let terms = &spec.pod_sets[0]
            .affinity
            .as_ref()
            .expect("affinity")
            .required_node_selector_terms;
        assert_eq!(terms.len(), 2);
        assert_eq!(terms[0].match_fields[0].key, "metadata.name");
        assert_eq!(terms[0].match_fields[0].operator, Op::NotIn);
        assert_eq!(terms[0].match_expressions[0].operator, Op::Gt);
        assert_eq!(terms[1], Default::default());
        let none_left = gang_of(affine_job(json!([
            {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}
        ])))
        .expect("gang");
        assert_eq!(
            none_left.pod_sets[0]
                .affinity
                .as_ref()
                .map(|a| a.required_node_selector_terms.clone()),
            Some(vec![Default::default()])
        );
        let preferred = job(
            json!({}),
            json!({"containers": [{"name": "a"}], "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
            ]}}}),
        );
        assert_eq!(gang_of(preferred).expect("gang").pod_sets[0].affinity, None);
    }
}
