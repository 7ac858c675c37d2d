//! The instruction count of one plan of the 10k reference snapshot
//! (`pods=10000,gangs=1000,nodes=2000,offerings=300`), of the re-plan
//! after one gang arrives in queue `team-5` of it (a `Planner`, see
//! `planner/src/incremental.rs`), and of the controller's re-plan after one
//! arrives in queue `team-2` (a `Replanner` handed the new snapshot: the
//! costliest of the eight queues), stay within 10 % of the figures committed
//! in `planner/benches/instructions.txt`. Instructions,
//! counted by callgrind, do not move with the load of a shared machine the
//! way wall-clock time does.
//!
//! It builds `planner/instructions` (`plan-instructions`) in release mode
//! and runs it
//! under `valgrind --tool=callgrind`, counting only the plan. Without
//! valgrind the check is skipped with a message (CI installs it). After a
//! deliberate change, record the new figure:
//!
//! ```sh
//! MUSTER_UPDATE_INSTRUCTIONS=1 cargo test -p muster-planner --test instructions
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

const SPEC: &str = "pods=10000,gangs=1000,nodes=2000,offerings=300";
/// The re-plan measured: one gang arrives in queue team-5 (the arrival of
/// the eight that takes over the fewest tries).
const ARRIVAL: &str = "arrive=5";
/// The controller's re-plan measured: a `Replanner` handed the snapshot
/// with one more gang in queue team-2, one second later.
const CYCLE: &str = "cycle=2";
const FILE: &str = "benches/instructions.txt";
/// Allowed growth over the committed figure, in percent.
const TOLERANCE_PCT: u64 = 10;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The target directory this test was built into (`…/debug/deps/<test>`).
fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("the test binary has a path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .expect("the test binary lies in <target>/<profile>/deps")
}

fn valgrind_present() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds `plan-instructions` (release) and returns its path.
fn build_counter(target: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(manifest_dir())
        .args([
            "build",
            "--release",
            "-p",
            "muster-planner-instructions",
            "--bin",
            "plan-instructions",
        ])
        .env("CARGO_TARGET_DIR", target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building plan-instructions failed");
    target.join("release/plan-instructions")
}

/// Instructions callgrind counts in `function` of `plan-instructions ARGS`.
fn count(counter: &Path, args: &[&str], function: &str) -> u64 {
    let spec = args.join(" ");
    let out_file = std::env::temp_dir().join(format!(
        "muster-callgrind-{}-{}.out",
        std::process::id(),
        spec.len()
    ));
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            &format!("--toggle-collect=*{function}*"),
            &format!("--callgrind-out-file={}", out_file.display()),
        ])
        .arg(counter)
        .args(args)
        .output()
        .expect("valgrind runs");
    assert!(
        out.status.success(),
        "callgrind failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&out_file).expect("callgrind wrote its output");
    let _ = std::fs::remove_file(&out_file);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("callgrind output has a total")
}

/// The committed figure for `spec`.
fn committed(text: &str, spec: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| {
            let (s, n) = l.trim().rsplit_once(' ')?;
            (s == spec).then(|| n.parse().ok()).flatten()
        })
}

#[test]
fn ten_k_plan_instructions_within_budget() {
    if !valgrind_present() {
        eprintln!(
            "SKIPPED: valgrind is not installed, so the planner's instruction count is not checked \
             (apt-get install valgrind)"
        );
        return;
    }
    let counter = build_counter(&target_dir());
    let measured = [
        (
            SPEC.to_string(),
            count(&counter, &[SPEC], "measure_one_plan"),
        ),
        (
            format!("{SPEC} {ARRIVAL}"),
            count(&counter, &[SPEC, ARRIVAL], "measure_one_replan"),
        ),
        (
            format!("{SPEC} {CYCLE}"),
            count(&counter, &[SPEC, CYCLE], "measure_one_cycle"),
        ),
    ];
    let path = manifest_dir().join(FILE);
    let text = std::fs::read_to_string(&path).expect("the committed figures exist");
    if std::env::var_os("MUSTER_UPDATE_INSTRUCTIONS").is_some() {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !measured.iter().any(|(k, _)| is_figure_of(l, k)))
            .map(str::to_string)
            .collect();
        for (key, got) in &measured {
            lines.push(format!("{key} {got}"));
            eprintln!("recorded {got} instructions for {key} in {FILE}");
        }
        std::fs::write(&path, lines.join("\n") + "\n").expect("writes the figures");
        return;
    }
    let mut over = Vec::new();
    for (key, got) in &measured {
        let want = committed(&text, key).expect("the file has a figure for every measurement");
        eprintln!("{key}: {got} instructions (committed {want})");
        if got.saturating_mul(100) > want.saturating_mul(100 + TOLERANCE_PCT) {
            over.push(format!("{key} costs {got}, committed {want}"));
        }
        if got.saturating_mul(100) < want.saturating_mul(100 - TOLERANCE_PCT) {
            eprintln!(
                "{key} is more than {TOLERANCE_PCT} % cheaper than committed; record it with \
                 MUSTER_UPDATE_INSTRUCTIONS=1 cargo test -p muster-planner --test instructions"
            );
        }
    }
    assert!(
        over.is_empty(),
        "more than {TOLERANCE_PCT} % over the committed instruction counts: {}; if that is \
         deliberate: MUSTER_UPDATE_INSTRUCTIONS=1 cargo test -p muster-planner --test instructions",
        over.join("; ")
    );
}

/// True when `line` is the figure line of measurement `key`.
fn is_figure_of(line: &str, key: &str) -> bool {
    !line.trim_start().starts_with('#')
        && line
            .trim()
            .rsplit_once(' ')
            .is_some_and(|(k, n)| k == key && n.parse::<u64>().is_ok())
}
