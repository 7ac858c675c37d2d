//! The webhook on the third-party workload kinds: TrainJob, PyTorchJob,
//! RayCluster, RayJob and LeaderWorkerSet held at creation, the objects
//! another workload creates left alone, a RayJob that keeps its cluster
//! refused, and what muster cannot run as a gang refused with a message
//! naming the field: a RayJob in InteractiveMode, autoscaling Ray clusters, a
//! JobSet with `muster.dev/min-count`.

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
    let owned = |kind: &str, owner: (&str, &str), spec: Value| {
        let mut o = labelled(kind, spec);
        o["metadata"]["ownerReferences"] = json!([{"apiVersion": owner.0, "kind": owner.1, "name": "p", "uid": "u", "controller": true}]);
        o
    };
    let trainjob = ("trainer.kubeflow.org/v1alpha1", "TrainJob");
    let rayjob = ("ray.io/v1", "RayJob");
    let jobset = ("jobset.x-k8s.io/v1alpha2", "JobSet");
    assert_eq!(
        decision(RAYCLUSTER, owned("RayCluster", rayjob, json!({}))),
        Decision::Ignore
    );
    assert_eq!(
        decision(JOB, owned("Job", trainjob, json!({}))),
        Decision::Ignore
    );
    assert_eq!(
        decision(JOB, owned("Job", rayjob, json!({}))),
        Decision::Ignore
    );
    assert_eq!(
        decision(JOB, owned("Job", jobset, json!({}))),
        Decision::Ignore
    );
    // the JobSet a TrainJob's Trainer builds, with the queue label its
    // runtime's template carries: the TrainJob is held, not the JobSet
    assert_eq!(
        decision(
            ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
            owned("JobSet", trainjob, json!({"replicatedJobs": []}))
        ),
        Decision::Ignore
    );
    // the pods of a labelled Job that also name a pod group: the Job holds them
    let pod = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "team-a",
        "labels": {"muster.dev/queue": "q", "muster.dev/pod-group": "g"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]},
        "spec": {"containers": []}});
    assert_eq!(decision(("", "v1", "Pod", "pods"), pod), Decision::Ignore);
    // owned by a kind muster does not run (a CronJob's Job): held
    assert_ne!(
        decision(
            JOB,
            owned("Job", ("batch/v1", "CronJob"), json!({"template": {}}))
        ),
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

/// True when `d` refuses the object with a message naming `field`.
fn denied_naming(d: &Decision, field: &str) -> bool {
    matches!(d, Decision::Deny(why) if why.starts_with("muster: ") && why.contains(field))
}

#[test]
fn a_rayjob_in_interactive_mode_is_refused() {
    let spec = |mode: &str| json!({"shutdownAfterJobFinishes": true, "submissionMode": mode, "rayClusterSpec": {}});
    let d = decision(RAYJOB, labelled("RayJob", spec("InteractiveMode")));
    assert!(denied_naming(&d, "spec.submissionMode"), "{d:?}");
    for mode in ["K8sJobMode", "HTTPMode", "SidecarMode"] {
        assert_eq!(
            decision(RAYJOB, labelled("RayJob", spec(mode))),
            Decision::Suspend(None),
            "{mode}"
        );
    }
    // not queued: not muster's to refuse
    let mut unlabelled = labelled("RayJob", spec("InteractiveMode"));
    unlabelled["metadata"]["labels"] = json!({});
    assert_eq!(decision(RAYJOB, unlabelled), Decision::Ignore);
}

#[test]
fn autoscaling_ray_clusters_are_refused() {
    let cluster = json!({"enableInTreeAutoscaling": true, "headGroupSpec": {}});
    let d = decision(RAYCLUSTER, labelled("RayCluster", cluster.clone()));
    assert!(denied_naming(&d, "enableInTreeAutoscaling"), "{d:?}");
    let job = json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": cluster});
    let d = decision(RAYJOB, labelled("RayJob", job));
    assert!(denied_naming(&d, "enableInTreeAutoscaling"), "{d:?}");
    let fixed = json!({"enableInTreeAutoscaling": false, "headGroupSpec": {}});
    assert_eq!(
        decision(RAYCLUSTER, labelled("RayCluster", fixed)),
        Decision::Suspend(None)
    );
}

#[test]
fn a_jobset_with_a_min_count_is_refused() {
    const JOBSET: (&str, &str, &str, &str) = ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets");
    let js = labelled("JobSet", json!({"replicatedJobs": []}));
    assert_eq!(decision(JOBSET, js.clone()), Decision::Suspend(None));
    let mut counted = js.clone();
    counted["metadata"]["annotations"] = json!({"muster.dev/min-count": "2"});
    let d = decision(JOBSET, counted);
    assert!(denied_naming(&d, "muster.dev/min-count"), "{d:?}");
    // exclusive placement, on the JobSet or on a replicated job's template
    let key = "alpha.jobset.sigs.k8s.io/exclusive-topology";
    let mut on_set = js.clone();
    on_set["metadata"]["annotations"] = json!({key: "topology.kubernetes.io/zone"});
    assert!(denied_naming(&decision(JOBSET, on_set), key));
    let mut on_job = js;
    on_job["spec"]["replicatedJobs"] = json!([{"name": "w", "template": {
        "metadata": {"annotations": {key: "cloud.google.com/gke-nodepool"}}, "spec": {}}}]);
    assert!(denied_naming(&decision(JOBSET, on_job), key));
}

/// A LeaderWorkerSet asking for exclusive placement (by either annotation,
/// or the typed placement policy) is refused, naming what it asked for:
/// LWS would keep each group to one domain and away from the others, which
/// muster's pins do not honour.
#[test]
fn a_leaderworkerset_with_exclusive_placement_is_refused() {
    let spec = json!({"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {}}}});
    let plain = labelled("LeaderWorkerSet", spec.clone());
    assert!(matches!(
        decision(LWS, plain.clone()),
        Decision::GateTemplates(..)
    ));
    for key in [
        "leaderworkerset.sigs.k8s.io/exclusive-topology",
        "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
    ] {
        let mut lws = plain.clone();
        lws["metadata"]["annotations"] = json!({key: "topology.kubernetes.io/zone"});
        let d = decision(LWS, lws);
        assert!(denied_naming(&d, "exclusive-topology"), "{key}: {d:?}");
    }
    let mut typed = plain;
    typed["spec"]["leaderWorkerTemplate"]["placementPolicy"] = json!({"type": "Exclusive"});
    let d = decision(LWS, typed);
    assert!(denied_naming(&d, "placementPolicy"), "{d:?}");
}

const POD: (&str, &str, &str, &str) = ("", "v1", "Pod", "pods");

/// A pod as the LeaderWorkerSet controller creates it from a template that
/// lost muster's gate (`gates`: those it kept).
fn set_pod(gates: Option<Value>) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "x"}]});
    if let Some(g) = gates {
        spec["schedulingGates"] = g;
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama-0-1", "namespace": "team-a",
        "labels": {"leaderworkerset.sigs.k8s.io/name": "llama", "leaderworkerset.sigs.k8s.io/group-index": "0",
                   "leaderworkerset.sigs.k8s.io/worker-index": "1"}}, "spec": spec})
}

fn set(labels: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama", "namespace": "team-a", "labels": labels}, "spec": {}}),
    )
    .expect("set")
}

/// The pod after the webhook's patch, given its set as read.
fn pod_applied(pod: Value, set: Option<&DynamicObject>) -> Value {
    let body = review("CREATE", POD, pod, false);
    let req = request(body.clone());
    let ops = patch(
        req.object.as_ref().expect("object"),
        &decide_with(&req, None, set),
    );
    let mut obj = body["request"]["object"].clone();
    let p: json_patch::Patch = serde_json::from_value(Value::Array(ops)).expect("patch");
    json_patch::patch(&mut obj, &p).expect("applies");
    obj
}

#[test]
fn a_pod_of_a_managed_leaderworkerset_is_gated_at_creation() {
    let managed = set(json!({"muster.dev/queue": "team-a"}));
    let req = request(review("CREATE", POD, set_pod(None), false));
    assert_eq!(leader_worker_set_of(&req), Some("llama"));
    assert!(
        !needs_default_queue(&req),
        "the set's label decides, not the pod's namespace"
    );
    assert_eq!(
        decide_with(&req, None, Some(&managed)),
        Decision::Gate(None)
    );
    let muster = json!({"name": SCHEDULING_GATE});
    let got = pod_applied(set_pod(None), Some(&managed));
    assert_eq!(got["spec"]["schedulingGates"], json!([muster.clone()]));
    assert_eq!(
        got["metadata"]["labels"].get("muster.dev/queue"),
        None,
        "the pod is not labelled: its gang's queue is its set's"
    );
    // beside the gates the template kept, once
    let got = pod_applied(set_pod(Some(json!([{"name": "other"}]))), Some(&managed));
    assert_eq!(
        got["spec"]["schedulingGates"],
        json!([{"name": "other"}, muster.clone()])
    );
    let got = pod_applied(set_pod(Some(json!([muster.clone()]))), Some(&managed));
    assert_eq!(got["spec"]["schedulingGates"], json!([muster]));
    // an update of the pod is not a creation
    let update = request(review("UPDATE", POD, set_pod(None), false));
    assert_eq!(leader_worker_set_of(&update), None);
    assert_eq!(decide_with(&update, None, Some(&managed)), Decision::Ignore);
}

#[test]
fn a_pod_of_a_set_muster_does_not_manage_is_left_alone() {
    let req = request(review("CREATE", POD, set_pod(None), false));
    // unlabelled: the controller would never release its pods, even where
    // the namespace names a default queue
    let unlabelled = set(json!({"app": "llama"}));
    assert_eq!(decide_with(&req, None, Some(&unlabelled)), Decision::Ignore);
    assert_eq!(
        decide_with(&req, Some("team-a"), Some(&unlabelled)),
        Decision::Ignore
    );
    let empty = set(json!({"muster.dev/queue": ""}));
    assert_eq!(decide_with(&req, None, Some(&empty)), Decision::Ignore);
    // no such set
    assert_eq!(decide_with(&req, Some("team-a"), None), Decision::Ignore);
    assert_eq!(
        pod_applied(set_pod(None), None)["spec"].get("schedulingGates"),
        None
    );
    // a pod of a pod group is that group's, whatever else it carries
    let mut grouped = set_pod(None);
    grouped["metadata"]["labels"]["muster.dev/pod-group"] = json!("g");
    grouped["metadata"]["labels"]["muster.dev/queue"] = json!("q");
    let req = request(review("CREATE", POD, grouped, false));
    assert_eq!(leader_worker_set_of(&req), None);
    assert_eq!(decide_with(&req, None, None), Decision::Gate(None));
}

/// The set cannot be read (here: nothing listens): the pod is refused with
/// a message that says why, never admitted ungated.
#[tokio::test]
async fn a_pod_whose_leaderworkerset_cannot_be_read_is_refused() {
    crate::controller::install_crypto_provider();
    let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
    let hook = Webhook {
        namespaces: None,
        leader_worker_sets: Some(kube::Client::try_from(config).expect("client")),
        default_queue_label: "muster.dev/default-queue".into(),
        queues: None,
    };
    let body = review("CREATE", POD, set_pod(None), false);
    let out: Value = serde_json::from_slice(
        &hook
            .review(body.to_string().as_bytes())
            .await
            .expect("answer"),
    )
    .expect("json");
    assert_eq!(out["response"]["allowed"], false, "{out}");
    assert_eq!(out["response"]["status"]["message"], LWS_NOT_READ);
    assert!(out["response"].get("patch").is_none(), "{out}");
    // without a reader (LeaderWorkerSets not managed) the pod is admitted
    let hook = Webhook {
        leader_worker_sets: None,
        ..hook
    };
    let out: Value = serde_json::from_slice(
        &hook
            .review(body.to_string().as_bytes())
            .await
            .expect("answer"),
    )
    .expect("json");
    assert_eq!(out["response"]["allowed"], true, "{out}");
    assert!(out["response"].get("patch").is_none(), "{out}");
}
