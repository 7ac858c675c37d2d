//! Every snapshot example in `docs/examples/snapshots/` parses and plans.

use muster_planner::{PlanInput, plan};

#[test]
fn doc_examples_parse_and_plan() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/snapshots");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("examples dir") {
        let path = e.expect("entry").path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let text = std::fs::read_to_string(&path).expect("read");
            let input: PlanInput = serde_norway::from_str(&text)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let p = plan(&input.snapshot, &input.policy, input.now);
            let decided =
                p.admissions.len() + p.launches.len() + p.preemptions.len() + p.removals.len();
            assert!(
                decided > 0,
                "{}: the example decides nothing",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 4, "only {n} examples");
}
