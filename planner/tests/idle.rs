//! Properties of idle detection over random utilisation series: the
//! verdict does not depend on sample order, agrees with a brute-force
//! reading of the rule, and never calls a gang idle on a busy or missing
//! observation.

use muster_planner::idle::decide;
use muster_planner::model::*;
use muster_planner::snapshot::{Policy, Snapshot};
use muster_planner::{Dur, Time};
use proptest::prelude::*;

fn snapshot(
    samples: Vec<UtilSample>,
    threshold: u32,
    window: u64,
    started: i64,
    phase: GangPhase,
) -> Snapshot {
    let mut q: Queue = serde_json::from_value(serde_json::json!({"name": "q"})).expect("queue");
    q.idle_policy = Some(IdlePolicy {
        threshold_percent: threshold,
        window: Dur(window),
        action: IdleAction::Requeue,
    });
    let g = Gang {
        phase,
        started_at: Some(Time(started)),
        ..Gang::new(GangId::new("ns/g"), "q", Time(0), Vec::new())
    };
    Snapshot {
        queues: vec![q],
        gangs: vec![g],
        gpu_utilization: vec![GangUtilization {
            gang: GangId::new("ns/g"),
            samples,
        }],
        ..Snapshot::default()
    }
}

/// The rule read directly: the earliest sample time T such that every
/// sample in [max(T, start), now] is below the threshold and one exists at
/// the newest instant; idle when newest − T ≥ window and now − newest ≤ window.
fn oracle(
    samples: &[UtilSample],
    threshold: u32,
    window: u64,
    start: i64,
    now: i64,
) -> Option<i64> {
    let seen: Vec<&UtilSample> = samples
        .iter()
        .filter(|s| s.at.0 >= start && s.at.0 <= now)
        .collect();
    let newest = seen.iter().map(|s| s.at.0).max()?;
    let below = |s: &&UtilSample| s.percent < f64::from(threshold);
    let mut times: Vec<i64> = seen.iter().map(|s| s.at.0).collect();
    times.sort_unstable();
    times.dedup();
    let since = times
        .into_iter()
        .find(|&t| seen.iter().filter(|s| s.at.0 >= t).all(below))?;
    let long = u64::try_from(newest - since).ok()? >= window;
    let fresh = u64::try_from(now - newest).ok()? <= window;
    (long && fresh).then_some(since)
}

fn sample() -> impl Strategy<Value = UtilSample> {
    (
        0i64..120,
        prop_oneof![8 => 0.0f64..20.0, 2 => 0.0f64..100.0, 1 => Just(f64::NAN)],
    )
        .prop_map(|(m, percent)| UtilSample {
            at: Time(m * 60),
            percent,
        })
}

proptest! {
    #[test]
    fn verdict_follows_the_rule_in_any_order(
        samples in prop::collection::vec(sample(), 0..60),
        threshold in 1u32..30,
        window_m in 1u64..90,
        start_m in 0i64..60,
        now_m in 60i64..180,
        rot in 0usize..60,
    ) {
        let (window, start, now) = (window_m * 60, start_m * 60, now_m * 60);
        let policy = Policy::default();
        let want = oracle(&samples, threshold, window, start, now);
        let got = decide(&snapshot(samples.clone(), threshold, window, start, GangPhase::Running), &policy, Time(now));
        prop_assert_eq!(got.first().map(|v| v.since.0), want);
        // any order of the samples gives the same verdict
        let mut turned = samples.clone();
        turned.reverse();
        if !turned.is_empty() {
            let k = rot % turned.len();
            turned.rotate_left(k);
        }
        let again = decide(&snapshot(turned, threshold, window, start, GangPhase::Running), &policy, Time(now));
        prop_assert_eq!(&got, &again);
        if let Some(v) = got.first() {
            prop_assert!(v.peak_percent < f64::from(threshold));
            prop_assert_eq!(v.not_before, Some(Time(now) + muster_planner::lifecycle::gang::backoff(0, &policy)));
            // one busy sample at the newest instant ends the verdict
            let newest = samples.iter().filter(|s| s.at.0 >= start && s.at.0 <= now).map(|s| s.at).max();
            let mut busy = samples.clone();
            busy.push(UtilSample { at: newest.unwrap_or(Time(now)), percent: f64::from(threshold) });
            prop_assert!(decide(&snapshot(busy, threshold, window, start, GangPhase::Running), &policy, Time(now)).is_empty());
        }
        // only running gangs are judged
        for phase in [GangPhase::Admitted, GangPhase::Queued, GangPhase::Evicted] {
            prop_assert!(decide(&snapshot(samples.clone(), threshold, window, start, phase), &policy, Time(now)).is_empty());
        }
    }
}
