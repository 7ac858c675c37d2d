//! The webhook's decisions and patches on AdmissionReview bodies of the
//! admission.k8s.io/v1 shape.

use serde_json::{Value, json};

use crate::controller::webhook::*;

/// An AdmissionReview as the API server sends it for `kind` (group, version,
/// kind, resource) and `object`.
pub(crate) fn review(
    op: &str,
    gvk: (&str, &str, &str, &str),
    object: Value,
    dry_run: bool,
) -> Value {
    let (group, version, kind, resource) = gvk;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": "train",
            "namespace": "team-a",
            "operation": op,
            "userInfo": {"username": "alice", "uid": "014fbff9a07c", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

fn job(labels: Option<Value>, suspend: Option<bool>) -> Value {
    let mut meta = json!({"name": "train", "namespace": "team-a"});
    if let Some(l) = labels {
        meta["labels"] = l;
    }
    let mut spec = json!({"parallelism": 2, "completions": 2, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "trainer"}]}}});
    if let Some(s) = suspend {
        spec["suspend"] = json!(s);
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec})
}

const JOB: (&str, &str, &str, &str) = ("batch", "v1", "Job", "jobs");

fn request(body: Value) -> AdmissionRequest<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(body).expect("review");
    review.try_into().expect("request")
}

/// Applies the webhook's patch to the object, as the API server does.
fn applied(body: Value, default_queue: Option<&str>) -> Value {
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

#[test]
fn decisions() {
    let labelled = || job(Some(json!({"muster.dev/queue": "team-a"})), None);
    let cases: Vec<(&str, Value, Option<&str>, Decision)> = vec![
        (
            "labelled create",
            review("CREATE", JOB, labelled(), false),
            None,
            Decision::Suspend(None),
        ),
        (
            "labelled dry run",
            review("CREATE", JOB, labelled(), true),
            None,
            Decision::Suspend(None),
        ),
        (
            "labelled, namespace default ignored",
            review("CREATE", JOB, labelled(), false),
            Some("other"),
            Decision::Suspend(None),
        ),
        (
            "unlabelled, no default",
            review("CREATE", JOB, job(None, None), false),
            None,
            Decision::Ignore,
        ),
        (
            "unlabelled, default queue",
            review("CREATE", JOB, job(Some(json!({"app": "x"})), None), false),
            Some("team-a"),
            Decision::Suspend(Some("team-a".into())),
        ),
        (
            "empty label is no queue",
            review(
                "CREATE",
                JOB,
                job(Some(json!({"muster.dev/queue": ""})), None),
                false,
            ),
            None,
            Decision::Ignore,
        ),
        (
            "update",
            review("UPDATE", JOB, labelled(), false),
            None,
            Decision::Ignore,
        ),
        (
            "wrong kind",
            review(
                "CREATE",
                ("", "v1", "Pod", "pods"),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"muster.dev/queue": "q"}}, "spec": {}}),
                false,
            ),
            None,
            Decision::Ignore,
        ),
        (
            "labelled JobSet",
            review(
                "CREATE",
                ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
                json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "labels": {"muster.dev/queue": "q"}}, "spec": {"replicatedJobs": []}}),
                false,
            ),
            None,
            Decision::Suspend(None),
        ),
        (
            "a JobSet's child Job is the JobSet's",
            review(
                "CREATE",
                JOB,
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "js-w-0", "labels": {"app": "x"},
                    "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": true}]},
                    "spec": {"template": {}}}),
                false,
            ),
            Some("team-a"),
            Decision::Ignore,
        ),
        (
            "pod of a pod group",
            review(
                "CREATE",
                ("", "v1", "Pod", "pods"),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"muster.dev/queue": "q", "muster.dev/pod-group": "g"}}, "spec": {}}),
                false,
            ),
            None,
            Decision::Gate(None),
        ),
        (
            "pod of a pod group, default queue",
            review(
                "CREATE",
                ("", "v1", "Pod", "pods"),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"muster.dev/pod-group": "g"}}, "spec": {}}),
                false,
            ),
            Some("team-a"),
            Decision::Gate(Some("team-a".into())),
        ),
        (
            "other version",
            review(
                "CREATE",
                ("batch", "v1beta1", "Job", "jobs"),
                labelled(),
                false,
            ),
            None,
            Decision::Ignore,
        ),
    ];
    for (name, body, default_queue, want) in cases {
        assert_eq!(decide(&request(body), default_queue), want, "{name}");
    }
}

#[test]
fn patches_suspend_and_label() {
    let cases: Vec<(Value, Option<&str>, Option<&str>)> = vec![
        (
            job(Some(json!({"muster.dev/queue": "team-a"})), None),
            None,
            Some("team-a"),
        ),
        (
            job(Some(json!({"muster.dev/queue": "team-a"})), Some(false)),
            None,
            Some("team-a"),
        ),
        (
            job(Some(json!({"muster.dev/queue": "team-a"})), Some(true)),
            None,
            Some("team-a"),
        ),
        (job(None, None), Some("dflt"), Some("dflt")),
        (
            job(Some(json!({"app": "x"})), Some(false)),
            Some("dflt"),
            Some("dflt"),
        ),
    ];
    for (obj, default_queue, queue) in cases {
        let out = applied(review("CREATE", JOB, obj.clone(), false), default_queue);
        assert_eq!(out["spec"]["suspend"], json!(true), "{obj}");
        assert_eq!(
            out["metadata"]["labels"]["muster.dev/queue"].as_str(),
            queue,
            "{obj}"
        );
        // nothing else changes
        assert_eq!(out["spec"]["template"], obj["spec"]["template"]);
        if let Some(app) = obj["metadata"]["labels"].get("app") {
            assert_eq!(&out["metadata"]["labels"]["app"], app);
        }
    }
}

#[tokio::test]
async fn review_bodies() {
    let hook = Webhook {
        namespaces: None,
        leader_worker_sets: None,
        default_queue_label: "muster.dev/default-queue".into(),
        queues: None,
    };
    let body = review(
        "CREATE",
        JOB,
        job(Some(json!({"muster.dev/queue": "q"})), None),
        false,
    );
    let out: Value = serde_json::from_slice(
        &hook
            .review(body.to_string().as_bytes())
            .await
            .expect("answer"),
    )
    .expect("json");
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], body["request"]["uid"]);
    assert_eq!(out["response"]["allowed"], true);
    assert_eq!(out["response"]["patchType"], "JSONPatch");
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(out["response"]["patch"].as_str().expect("base64 patch"))
        .expect("base64");
    let patch: Value = serde_json::from_slice(&patch).expect("JSON patch");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/suspend", "value": true}])
    );
    let unlabelled = review("CREATE", JOB, job(None, None), false);
    let out: Value = serde_json::from_slice(
        &hook
            .review(unlabelled.to_string().as_bytes())
            .await
            .expect("answer"),
    )
    .expect("json");
    assert_eq!(out["response"]["allowed"], true);
    assert!(out["response"].get("patch").is_none(), "{out}");
    assert!(matches!(
        hook.review(b"{not json").await,
        Err(WebhookError::Malformed)
    ));
    let empty: Value = serde_json::from_slice(
        &hook
            .review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#)
            .await
            .expect("answer"),
    )
    .expect("json");
    assert_eq!(empty["response"]["allowed"], false);
}

#[test]
fn pods_of_a_group_get_the_gate_once_beside_their_own() {
    let pod = |gates: Option<Value>| {
        let mut spec = json!({"containers": [{"name": "c", "image": "x"}]});
        if let Some(g) = gates {
            spec["schedulingGates"] = g;
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"muster.dev/queue": "q", "muster.dev/pod-group": "g"}}, "spec": spec})
    };
    let gvk = ("", "v1", "Pod", "pods");
    let muster = json!({"name": "muster.dev/admission"});
    let got = applied(review("CREATE", gvk, pod(None), false), None);
    assert_eq!(got["spec"]["schedulingGates"], json!([muster.clone()]));
    let got = applied(
        review("CREATE", gvk, pod(Some(json!([{"name": "other"}]))), false),
        None,
    );
    assert_eq!(
        got["spec"]["schedulingGates"],
        json!([{"name": "other"}, muster.clone()])
    );
    let got = applied(
        review("CREATE", gvk, pod(Some(json!([muster.clone()]))), false),
        None,
    );
    assert_eq!(got["spec"]["schedulingGates"], json!([muster]));
    assert!(
        got["spec"].get("suspend").is_none(),
        "a pod is gated, not suspended"
    );
}

/// Found by fuzzing (tests/fuzz_inputs.rs): a body of another kind or
/// version was answered with that kind and version, an answer the API
/// server refuses. Such a body is now malformed.
#[tokio::test]
async fn only_admission_v1_reviews_are_answered() {
    let hook = Webhook {
        namespaces: None,
        leader_worker_sets: None,
        default_queue_label: "muster.dev/default-queue".into(),
        queues: None,
    };
    let labelled = job(Some(json!({"muster.dev/queue": "q"})), None);
    for (api_version, kind) in [
        ("admission.k8s.io/v1", ""),
        ("admission.k8s.io/v1", "P1D"),
        ("admission.k8s.io/v1beta1", "AdmissionReview"),
        ("", "AdmissionReview"),
    ] {
        let mut body = review("CREATE", JOB, labelled.clone(), false);
        body["apiVersion"] = json!(api_version);
        body["kind"] = json!(kind);
        assert!(
            matches!(
                hook.review(body.to_string().as_bytes()).await,
                Err(WebhookError::Malformed)
            ),
            "{api_version} {kind}"
        );
    }
    let body = review("CREATE", JOB, labelled, false);
    let out: Value = serde_json::from_slice(
        &hook
            .review(body.to_string().as_bytes())
            .await
            .expect("answer"),
    )
    .expect("json");
    assert_eq!(out["kind"], "AdmissionReview");
}
