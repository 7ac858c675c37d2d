//! Data-driven planner cases: `tests/cases/<behaviour>/<case>/input.yaml`
//! (a `PlanInput`, the format of `muster plan -f`) and `expected.yaml`, a
//! partial expectation checked against the plan.
//!
//! `MUSTER_BLESS=1 cargo test -p muster-planner --test cases` prints the
//! actual plan of every case (it never writes expectations).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use muster_planner::plan::{Plan, RemovalKind};
use muster_planner::{PlanInput, plan};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    /// Gangs that must be admitted.
    #[serde(default)]
    admitted: Vec<String>,
    /// Gangs that must not be admitted.
    #[serde(default)]
    not_admitted: Vec<String>,
    /// Admissions with node → pod counts.
    #[serde(default)]
    admissions: Vec<ExpAdmission>,
    /// Launches that must be planned (others may be too, unless `onlyLaunches`).
    #[serde(default)]
    launches: Vec<ExpLaunch>,
    /// When true, no launch other than those in `launches`.
    #[serde(default)]
    only_launches: bool,
    /// Gangs that must not launch.
    #[serde(default)]
    not_launched: Vec<String>,
    /// Waiting gangs with reasons.
    #[serde(default)]
    waiting: Vec<ExpWait>,
    /// Exact list of preemptions (victim, for, reason), when given.
    #[serde(default)]
    preemptions: Option<Vec<ExpPreemption>>,
    /// Exact list of releases, when given.
    #[serde(default)]
    releases: Option<Vec<ExpRelease>>,
    /// Exact list of removals, when given.
    #[serde(default)]
    removals: Option<Vec<ExpRemoval>>,
    /// Exact list of nodes kept warm (`Plan::warm`), when given.
    #[serde(default)]
    warm: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpAdmission {
    gang: String,
    /// node → pods on it (exact).
    nodes: BTreeMap<String, u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpLaunch {
    gang: String,
    /// `instance-type/zone/capacity-type` → count of new nodes (exact).
    #[serde(default)]
    nodes: Option<BTreeMap<String, u32>>,
    /// Pool of every new node.
    #[serde(default)]
    pool: Option<String>,
    /// Every new node in one placement group (true) or none (false).
    #[serde(default)]
    one_placement_group: Option<bool>,
    /// Every new node in one grant request (true) or none in any (false).
    #[serde(default)]
    one_grant: Option<bool>,
    /// Existing nodes reserved (exact).
    #[serde(default)]
    reserve: Option<Vec<String>>,
    /// Total pods assigned.
    #[serde(default)]
    pods: Option<usize>,
    /// Pods assigned per existing node (exact for the nodes given).
    #[serde(default)]
    existing: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    message_contains: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpWait {
    gang: String,
    reason: String,
    #[serde(default)]
    position: Option<u32>,
    #[serde(default)]
    message_contains: Vec<String>,
}

#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpPreemption {
    victim: String,
    for_gang: String,
    reason: String,
}

#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpRelease {
    gang: String,
    nodes: Vec<String>,
    reason: String,
    #[serde(default)]
    handed_to: Option<String>,
}

#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpRemoval {
    node: String,
    kind: String,
    /// For `Replace`: the new instance type.
    #[serde(default)]
    with: Option<String>,
}

fn case_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut out = Vec::new();
    let mut behaviours: Vec<_> = std::fs::read_dir(&root)
        .expect("cases dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    behaviours.sort();
    for b in behaviours {
        let mut cases: Vec<_> = std::fs::read_dir(&b)
            .expect("behaviour dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("input.yaml").exists())
            .collect();
        cases.sort();
        out.extend(cases);
    }
    out
}

fn check(dir: &Path, p: &Plan, e: &Expect) -> Vec<String> {
    let mut errs = Vec::new();
    let admitted: Vec<&str> = p.admissions.iter().map(|a| a.gang.as_str()).collect();
    let launched: Vec<&str> = p.launches.iter().map(|l| l.gang.as_str()).collect();
    for g in &e.admitted {
        if !admitted.contains(&g.as_str()) {
            errs.push(format!("{g} not admitted"));
        }
    }
    for g in &e.not_admitted {
        if admitted.contains(&g.as_str()) {
            errs.push(format!("{g} admitted"));
        }
    }
    for ea in &e.admissions {
        match p.admissions.iter().find(|a| a.gang.as_str() == ea.gang) {
            None => errs.push(format!("{} not admitted", ea.gang)),
            Some(a) => {
                let mut per: BTreeMap<String, u32> = BTreeMap::new();
                for x in &a.assignments {
                    *per.entry(x.node.clone()).or_default() += 1;
                }
                if per != ea.nodes {
                    errs.push(format!(
                        "{}: pods per node {per:?}, want {:?}",
                        ea.gang, ea.nodes
                    ));
                }
            }
        }
    }
    for el in &e.launches {
        let Some(l) = p.launches.iter().find(|l| l.gang.as_str() == el.gang) else {
            errs.push(format!("{} not launched", el.gang));
            continue;
        };
        if let Some(want) = &el.nodes {
            let mut got: BTreeMap<String, u32> = BTreeMap::new();
            for n in &l.nodes {
                *got.entry(n.offering.to_string()).or_default() += 1;
            }
            if &got != want {
                errs.push(format!("{}: new nodes {got:?}, want {want:?}", el.gang));
            }
        }
        if let Some(pool) = &el.pool
            && l.nodes.iter().any(|n| &n.pool != pool)
        {
            errs.push(format!(
                "{}: pools {:?}, want {pool}",
                el.gang,
                l.nodes.iter().map(|n| &n.pool).collect::<Vec<_>>()
            ));
        }
        if let Some(want) = el.one_placement_group {
            let groups: std::collections::BTreeSet<Option<&String>> =
                l.nodes.iter().map(|n| n.placement_group.as_ref()).collect();
            let got = groups.len() == 1 && groups.iter().all(Option::is_some);
            if got != want {
                errs.push(format!(
                    "{}: placement groups {groups:?}, want one: {want}",
                    el.gang
                ));
            }
        }
        if let Some(want) = el.one_grant {
            let grants: std::collections::BTreeSet<Option<&String>> =
                l.nodes.iter().map(|n| n.grant.as_ref()).collect();
            let got = grants.len() == 1 && grants.iter().all(Option::is_some);
            if got != want {
                errs.push(format!("{}: grants {grants:?}, want one: {want}", el.gang));
            }
        }
        if let Some(r) = &el.reserve
            && &l.reserve != r
        {
            errs.push(format!("{}: reserve {:?}, want {r:?}", el.gang, l.reserve));
        }
        if let Some(n) = el.pods
            && l.assignments.len() != n
        {
            errs.push(format!(
                "{}: {} pods assigned, want {n}",
                el.gang,
                l.assignments.len()
            ));
        }
        if let Some(ex) = &el.existing {
            for (node, want) in ex {
                let got = l.assignments.iter().filter(|a| &a.node == node).count() as u32;
                if got != *want {
                    errs.push(format!("{}: {got} pods on {node}, want {want}", el.gang));
                }
            }
        }
        for m in &el.message_contains {
            if !l.message.contains(m.as_str()) {
                errs.push(format!(
                    "{}: launch message {:?} lacks {m:?}",
                    el.gang, l.message
                ));
            }
        }
    }
    if e.only_launches {
        for g in &launched {
            if !e.launches.iter().any(|l| l.gang == *g) {
                errs.push(format!("unexpected launch for {g}"));
            }
        }
    }
    for g in &e.not_launched {
        if launched.contains(&g.as_str()) {
            errs.push(format!("{g} launched"));
        }
    }
    for ew in &e.waiting {
        match p.waiting.iter().find(|w| w.gang.as_str() == ew.gang) {
            None => errs.push(format!("{} not waiting", ew.gang)),
            Some(w) => {
                if w.reason.as_str() != ew.reason {
                    errs.push(format!(
                        "{}: waits {} ({}), want {}",
                        ew.gang, w.reason, w.message, ew.reason
                    ));
                }
                if let Some(pos) = ew.position
                    && w.position != pos
                {
                    errs.push(format!("{}: position {}, want {pos}", ew.gang, w.position));
                }
                for m in &ew.message_contains {
                    if !w.message.contains(m.as_str()) {
                        errs.push(format!("{}: message {:?} lacks {m:?}", ew.gang, w.message));
                    }
                }
            }
        }
    }
    if let Some(want) = &e.preemptions {
        let mut got: Vec<ExpPreemption> = p
            .preemptions
            .iter()
            .map(|x| ExpPreemption {
                victim: x.victim.to_string(),
                for_gang: x.for_gang.to_string(),
                reason: format!("{:?}", x.reason),
            })
            .collect();
        got.sort();
        let mut want: Vec<&ExpPreemption> = want.iter().collect();
        want.sort();
        if got.iter().collect::<Vec<_>>() != want {
            errs.push(format!("preemptions {got:?}, want {want:?}"));
        }
    }
    if let Some(want) = &e.releases {
        let mut got: Vec<ExpRelease> = p
            .releases
            .iter()
            .map(|x| ExpRelease {
                gang: x.gang.to_string(),
                nodes: x.nodes.clone(),
                reason: format!("{:?}", x.reason),
                handed_to: x.handed_to.as_ref().map(|h| h.to_string()),
            })
            .collect();
        got.sort();
        let mut want: Vec<&ExpRelease> = want.iter().collect();
        want.sort();
        if got.iter().collect::<Vec<_>>() != want {
            errs.push(format!("releases {got:?}, want {want:?}"));
        }
    }
    if let Some(want) = &e.warm {
        let mut got: Vec<&str> = p.warm.iter().map(|x| x.node.as_str()).collect();
        got.sort_unstable();
        let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
        want.sort_unstable();
        if got != want {
            errs.push(format!("warm nodes: want {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &e.removals {
        let mut got: Vec<ExpRemoval> = p
            .removals
            .iter()
            .map(|x| {
                let (kind, with) = match &x.kind {
                    RemovalKind::Empty => ("Empty", None),
                    RemovalKind::Underutilized => ("Underutilized", None),
                    RemovalKind::Replace { with } => {
                        ("Replace", Some(with.offering.instance_type.clone()))
                    }
                    RemovalKind::ScaleToZero => ("ScaleToZero", None),
                    RemovalKind::CapacityEnding { .. } => ("CapacityEnding", None),
                };
                ExpRemoval {
                    node: x.node.clone(),
                    kind: kind.into(),
                    with,
                }
            })
            .collect();
        got.sort();
        let mut want: Vec<&ExpRemoval> = want.iter().collect();
        want.sort();
        if got.iter().collect::<Vec<_>>() != want {
            errs.push(format!("removals {got:?}, want {want:?}"));
        }
    }
    errs.into_iter()
        .map(|e| format!("{}: {e}", dir.display()))
        .collect()
}

#[test]
fn planner_cases() {
    let bless = std::env::var("MUSTER_BLESS").is_ok_and(|v| v == "1");
    let dirs = case_dirs();
    assert!(dirs.len() >= 40, "only {} cases", dirs.len());
    let mut failures = Vec::new();
    for dir in &dirs {
        let text = std::fs::read_to_string(dir.join("input.yaml")).expect("input");
        let input: PlanInput = match serde_norway::from_str(&text) {
            Ok(i) => i,
            Err(e) => {
                failures.push(format!("{}: bad input: {e}", dir.display()));
                continue;
            }
        };
        let etext = std::fs::read_to_string(dir.join("expected.yaml")).expect("expected.yaml");
        let expect: Expect = match serde_norway::from_str(&etext) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{}: bad expectation: {e}", dir.display()));
                continue;
            }
        };
        let p = plan(&input.snapshot, &input.policy, input.now);
        if bless {
            println!(
                "=== {}\n{}",
                dir.display(),
                serde_norway::to_string(&p).unwrap_or_default()
            );
        }
        failures.extend(check(dir, &p, &expect));
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
