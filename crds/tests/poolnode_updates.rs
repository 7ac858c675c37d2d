//! The PoolNode writes the controller makes pass the CRD's schema and CEL rules, and the
//! changes it never makes are refused: what was bought (pool, nodeClass, offering) and the
//! idempotency key are immutable, the reservation (`spec.gang`) is not — a release clears
//! it and a hand-over names the next gang.

mod support;

use serde_json::{Value, json};
use support::admit;

fn stored() -> Value {
    json!({
        "apiVersion": "muster.dev/v1alpha1",
        "kind": "PoolNode",
        "metadata": {"name": "a100-team-a-train-0-0-k3f9x2"},
        "spec": {
            "pool": "a100",
            "nodeClass": "aws-gpu",
            "offering": {
                "provider": "aws", "region": "us-east-1", "zone": "us-east-1a",
                "instanceType": "p4d.24xlarge", "capacityType": "spot",
                "pricePerHour": "9.8304", "gpuModel": "A100", "gpuCount": 8
            },
            "gang": {"namespace": "team-a", "name": "train"},
            "idempotencyKey": "team-a-train-0-0-k3f9x2"
        }
    })
}

/// `doc` with the JSON merge patch (RFC 7386) `patch` applied.
fn merged(doc: &Value, patch: &Value) -> Value {
    match (doc, patch) {
        (Value::Object(d), Value::Object(p)) => {
            let mut out = d.clone();
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let next = merged(out.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), next);
                }
            }
            Value::Object(out)
        }
        (_, p) => p.clone(),
    }
}

#[test]
fn controller_writes_are_admitted_and_immutable_fields_refused() {
    let old = stored();
    admit(&old, None).expect("the PoolNode as written before the launch");
    // (what, merge patch, None = admitted / Some(message part) = refused)
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "release: reservation cleared",
            json!({"spec": {"gang": null}}),
            None,
        ),
        (
            "hand-over to another gang",
            json!({"spec": {"gang": {"namespace": "team-b", "name": "eval"}}}),
            None,
        ),
        (
            "status written",
            json!({"status": {"phase": "Ready", "nodeName": "ip-10-0-1-23.ec2.internal"}}),
            None,
        ),
        (
            "pool changed",
            json!({"spec": {"pool": "h100"}}),
            Some("spec.pool is immutable"),
        ),
        (
            "nodeClass changed",
            json!({"spec": {"nodeClass": "other"}}),
            Some("spec.nodeClass is immutable"),
        ),
        (
            "offering changed",
            json!({"spec": {"offering": {"zone": "us-east-1b"}}}),
            Some("spec.offering is immutable"),
        ),
        (
            "idempotency key changed",
            json!({"spec": {"idempotencyKey": "team-a-train-1-0-zzzzzz"}}),
            Some("spec.idempotencyKey is immutable"),
        ),
    ];
    for (what, patch, refused) in cases {
        let new = merged(&old, &patch);
        match (admit(&new, Some(&old)), refused) {
            (Ok(_), None) => {}
            (Err(errors), Some(part)) => assert!(
                errors.iter().any(|e| e.contains(part)),
                "{what}: refused, but not for {part:?}: {errors:?}"
            ),
            (Ok(_), Some(part)) => panic!("{what}: admitted, expected {part:?}"),
            (Err(errors), None) => panic!("{what}: refused: {errors:?}"),
        }
    }
    // a spare node (no gang) may be reserved later
    let spare = merged(&old, &json!({"spec": {"gang": null}}));
    admit(&old, Some(&spare)).expect("reserving a spare node");
}
