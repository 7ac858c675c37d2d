//! The plans of the synthetic benchmark snapshots do not change when the
//! planner is made faster: each size's plan, serialized to JSON, hashes to
//! the figure recorded here (FNV-1a, 64 bit). A change that alters a plan on
//! purpose updates the figures; the failure message prints the new ones.

use muster_planner::synthetic::{self, Params};
use muster_planner::{Policy, plan};

/// (parameters, FNV-1a of the plan's JSON)
const CASES: &[(&str, u64)] = &[
    (
        "pods=1000,gangs=100,nodes=200,offerings=300,seed=1",
        0x98a15679b0310cc5,
    ),
    (
        "pods=10000,gangs=1000,nodes=2000,offerings=300,seed=1",
        0x63d3c63a2995c406,
    ),
    (
        "pods=3000,gangs=300,nodes=100,offerings=300,seed=2",
        0xaa5e63f5009f6c91,
    ),
    (
        "pods=2000,gangs=500,nodes=1500,offerings=60,seed=3",
        0xec7aadecd90d0fbc,
    ),
    (
        "pods=5000,gangs=400,nodes=300,offerings=150,seed=4",
        0x97947296b840ad84,
    ),
    (
        "pods=30000,gangs=3000,nodes=4000,offerings=300,seed=6",
        0x67579c3b75eca421,
    ),
    (
        "pods=400,gangs=120,nodes=20,offerings=30,seed=5",
        0xd623dbe4108d20a3,
    ),
];

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[test]
fn synthetic_plans_are_unchanged() {
    let mut wrong = Vec::new();
    for (spec, want) in CASES {
        let params = Params::parse(spec).expect("valid parameters");
        let snapshot = synthetic::generate(&params);
        let p = plan(&snapshot, &Policy::default(), synthetic::NOW);
        assert!(
            !p.admissions.is_empty() || !p.launches.is_empty(),
            "{spec}: the plan admits or launches something"
        );
        let json = serde_json::to_string(&p).expect("a plan serializes");
        let got = fnv1a(json.as_bytes());
        if got != *want {
            wrong.push(format!("    (\"{spec}\", {got:#018x}),"));
        }
    }
    assert!(
        wrong.is_empty(),
        "plans of synthetic snapshots changed; the new figures are:\n{}",
        wrong.join("\n")
    );
}
