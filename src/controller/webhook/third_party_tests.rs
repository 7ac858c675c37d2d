//! The webhook on the third-party workload kinds: TrainJob, PyTorchJob,
//! RayCluster, RayJob and LeaderWorkerSet held at creation, the objects
//! another workload creates left alone, a RayJob that keeps its cluster
//! refused.

use serde_json::{Value, json};

use crate::controller::webhook::tests::review;
use crate::controller::webhook::*;

fn request(body: Value) -> AdmissionRequest<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(body).expect("review");
    review.try_into().expect("request")
}

/// The object after the webhook's patch, as the API server applies it.
fn applied(gvk: (&str, &str, &str, &str), object: Value, default_queue: Option<&str>) -> Value {
    let body = review("CREATE", gvk, object, false);
    let req = request(body.clone());
    let ops = patch(
        req.object.as_ref().expect("object"),
        &decide(&req, default_queue),
    );
    let mut obj = body["request"]["object"].clone();
    let p: json_patch::Patch = serde_json::from_value(Value::Array(ops)).expect("patch");
    json_patch::patch(&mut obj, &p).expect("applies");
    obj
}

fn decision(gvk: (&str, &str, &str, &str), object: Value) -> Decision {
    decide(&request(review("CREATE", gvk, object, false)), None)
}

const TRAINJOB: (&str, &str, &str, &str) =
    ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs");
const PYTORCHJOB: (&str, &str, &str, &str) = ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs");
const RAYCLUSTER: (&str, &str, &str, &str) = ("ray.io", "v1", "RayCluster", "rayclusters");
const RAYJOB: (&str, &str, &str, &str) = ("ray.io", "v1", "RayJob", "rayjobs");
const LWS: (&str, &str, &str, &str) = (
    "leaderworkerset.x-k8s.io",
    "v1",
    "LeaderWorkerSet",
    "leaderworkersets",
);
const JOB: (&str, &str, &str, &str) = ("batch", "v1", "Job", "jobs");

fn labelled(kind: &str, spec: Value) -> Value {
    json!({"kind": kind, "metadata": {"name": "w", "namespace": "team-a", "labels": {"muster.dev/queue": "q"}}, "spec": spec})
}

#[test]
fn suspend_flags_set_where_each_kind_keeps_them() {
    let tj = applied(
        TRAINJOB,
        labelled("TrainJob", json!({"runtimeRef": {"name": "torch"}})),
        None,
    );
    assert_eq!(tj["spec"]["suspend"], true);
    // a PyTorchJob's flag is in runPolicy, which may be missing or present
    let pj = applied(
        PYTORCHJOB,
        labelled("PyTorchJob", json!({"pytorchReplicaSpecs": {}})),
        None,
    );
    assert_eq!(pj["spec"]["runPolicy"], json!({"suspend": true}));
    let pj = applied(
        PYTORCHJOB,
        labelled(
            "PyTorchJob",
            json!({"runPolicy": {"cleanPodPolicy": "All", "suspend": false}}),
        ),
        None,
    );
    assert_eq!(
        pj["spec"]["runPolicy"],
        json!({"cleanPodPolicy": "All", "suspend": true})
    );
    let rc = applied(
        RAYCLUSTER,
        labelled("RayCluster", json!({"headGroupSpec": {}})),
        None,
    );
    assert_eq!(rc["spec"]["suspend"], true);
    let rj = applied(
        RAYJOB,
        labelled(
            "RayJob",
            json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": {}}),
        ),
        None,
    );
    assert_eq!(rj["spec"]["suspend"], true);
}

#[test]
fn a_leaderworkerset_gets_the_gate_in_each_template_it_has() {
    let lws = applied(
        LWS,
        labelled(
            "LeaderWorkerSet",
            json!({"leaderWorkerTemplate": {"size": 2,
            "workerTemplate": {"spec": {"containers": [], "schedulingGates": [{"name": "other"}]}}}}),
        ),
        None,
    );
    let t = &lws["spec"]["leaderWorkerTemplate"];
    assert_eq!(
        t["workerTemplate"]["spec"]["schedulingGates"],
        json!([{"name": "other"}, {"name": SCHEDULING_GATE}])
    );
    assert!(
        t.get("leaderTemplate").is_none(),
        "no leader template is made up"
    );
    let lws = applied(
        LWS,
        labelled(
            "LeaderWorkerSet",
            json!({"leaderWorkerTemplate": {"size": 2,
            "leaderTemplate": {"metadata": {}}, "workerTemplate": {"spec": {}}}}),
        ),
        None,
    );
    let t = &lws["spec"]["leaderWorkerTemplate"];
    assert_eq!(
        t["leaderTemplate"]["spec"]["schedulingGates"],
        json!([{"name": SCHEDULING_GATE}])
    );
    assert_eq!(
        t["workerTemplate"]["spec"]["schedulingGates"],
        json!([{"name": SCHEDULING_GATE}])
    );
}

#[test]
fn children_of_other_workloads_are_left_alone() {
    let owned = |kind: &str, owner: &str, spec: Value| {
        let mut o = labelled(kind, spec);
        o["metadata"]["ownerReferences"] = json!([{"apiVersion": "x/v1", "kind": owner, "name": "p", "uid": "u", "controller": true}]);
        o
    };
    assert_eq!(
        decision(RAYCLUSTER, owned("RayCluster", "RayJob", json!({}))),
        Decision::Ignore
    );
    assert_eq!(
        decision(JOB, owned("Job", "TrainJob", json!({}))),
        Decision::Ignore
    );
    assert_eq!(
        decision(JOB, owned("Job", "RayJob", json!({}))),
        Decision::Ignore
    );
    // a RayJob on an existing cluster is that cluster's
    let on_cluster = labelled(
        "RayJob",
        json!({"clusterSelector": {"ray.io/cluster": "c"}}),
    );
    assert_eq!(decision(RAYJOB, on_cluster), Decision::Ignore);
}

#[test]
fn a_rayjob_that_keeps_its_cluster_is_refused() {
    let keeps = labelled("RayJob", json!({"rayClusterSpec": {}}));
    assert_eq!(
        decision(RAYJOB, keeps),
        Decision::Deny(RAYJOB_NEEDS_SHUTDOWN)
    );
    // unlabelled, in a namespace without a default queue: not muster's
    let mut unlabelled =
        json!({"kind": "RayJob", "metadata": {"name": "w", "namespace": "team-a"}, "spec": {}});
    assert_eq!(decision(RAYJOB, unlabelled.clone()), Decision::Ignore);
    // with a default queue it is muster's, and refused alike
    unlabelled["spec"]["rayClusterSpec"] = json!({});
    let req = request(review("CREATE", RAYJOB, unlabelled, false));
    assert_eq!(
        decide(&req, Some("q")),
        Decision::Deny(RAYJOB_NEEDS_SHUTDOWN)
    );
}
