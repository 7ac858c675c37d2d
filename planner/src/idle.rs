//! Idle GPU holders: which running gangs kept their GPUs below their
//! queue's utilisation threshold for the queue's whole window, and what the
//! queue's policy does about it.
//!
//! The rule, per Running gang whose queue has an `idlePolicy` and for which
//! the driver observed utilisation:
//!
//! 1. Only samples from the gang's start (`startedAt`, else `admittedAt`)
//!    up to now count: older ones describe another tenant of the GPUs.
//! 2. No verdict without fresh data: the newest sample must lie within the
//!    window. Missing data never makes a gang idle.
//! 3. `since` is the earliest sample of the unbroken run of samples below
//!    the threshold that ends at the newest one (a sample that is not a
//!    number counts as busy).
//! 4. The gang is idle when that run spans the window: from `since` to the
//!    newest sample is at least the window (time without data is not
//!    counted as idle).
//!
//! Gangs are reported in id order. A `Requeue` verdict carries the time
//! the gang queues again: now plus the eviction backoff of
//! [`crate::lifecycle::gang::backoff`], as for a pods-ready timeout.

use std::collections::BTreeMap;

use crate::lifecycle::gang::backoff;
use crate::model::{GangId, GangPhase, IdleAction, UtilSample};
use crate::plan::{IdleGang, IdleReason};
use crate::snapshot::{Policy, Snapshot};
use crate::time::Time;

/// The idle verdicts of one cycle, in gang id order.
pub fn decide(s: &Snapshot, policy: &Policy, now: Time) -> Vec<IdleGang> {
    let mut usage: BTreeMap<&GangId, Vec<UtilSample>> = BTreeMap::new();
    for u in &s.gpu_utilization {
        usage.entry(&u.gang).or_default().extend(&u.samples);
    }
    let mut out = Vec::new();
    for g in &s.gangs {
        if g.phase != GangPhase::Running {
            continue;
        }
        let Some(q) = s.queues.iter().find(|q| q.name == g.queue) else {
            continue;
        };
        let Some(p) = &q.idle_policy else {
            continue;
        };
        let Some(samples) = usage.get(&g.id) else {
            continue;
        };
        let Some(start) = g.started_at.or(g.admitted_at) else {
            continue;
        };
        let Some((since, peak)) = idle_since(samples, start, now, p.threshold_percent) else {
            continue;
        };
        // rule 2: the newest sample is `since` or later; it must be fresh
        let newest = samples
            .iter()
            .filter(|x| x.at >= start && x.at <= now)
            .map(|x| x.at)
            .max()
            .unwrap_or(since);
        if now.since(newest) > p.window || newest.since(since) < p.window {
            continue;
        }
        let not_before =
            (p.action == IdleAction::Requeue).then(|| now + backoff(g.evictions, policy));
        out.push(IdleGang {
            gang: g.id.clone(),
            queue: q.name.clone(),
            action: p.action,
            reason: IdleReason::of(p.action),
            since,
            peak_percent: peak,
            not_before,
            message: crate::reasons::idle_message(
                g,
                q,
                p,
                newest.since(since),
                peak,
                now,
                not_before,
            ),
        });
    }
    out.sort_by(|a, b| a.gang.cmp(&b.gang));
    out
}

/// The start of the run of samples below `threshold` that ends at the
/// newest sample in `[start, now]`, and the highest value in it; `None`
/// when there is no such sample or the newest is not below.
pub fn idle_since(
    samples: &[UtilSample],
    start: Time,
    now: Time,
    threshold: u32,
) -> Option<(Time, f64)> {
    let mut seen: Vec<UtilSample> = samples
        .iter()
        .copied()
        .filter(|x| x.at >= start && x.at <= now)
        .collect();
    // newest first; at one instant the busiest counts
    seen.sort_by(|a, b| b.at.cmp(&a.at).then(b.percent.total_cmp(&a.percent)));
    let below = |x: &UtilSample| x.percent < f64::from(threshold);
    let mut run: Option<(Time, f64)> = None;
    let mut i = 0;
    while i < seen.len() {
        let at = seen[i].at;
        // every sample at this instant must be below
        let same: Vec<&UtilSample> = seen[i..].iter().take_while(|x| x.at == at).collect();
        if !same.iter().all(|x| below(x)) {
            break;
        }
        let peak = same.iter().map(|x| x.percent).fold(0.0, f64::max);
        run = Some(match run {
            None => (at, peak),
            Some((_, p)) => (at, p.max(peak)),
        });
        i += same.len();
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gang, GangUtilization, IdlePolicy, Queue};
    use crate::time::Dur;

    fn queue(action: Option<IdleAction>) -> Queue {
        Queue {
            name: "q".into(),
            cohort: None,
            weight: 1.0,
            quotas: Vec::new(),
            preemption: Default::default(),
            reclaim: Default::default(),
            pools: Vec::new(),
            strategy: Default::default(),
            pods_ready_timeout: None,
            stopped: false,
            drain: false,
            idle_policy: action.map(|action| IdlePolicy {
                threshold_percent: 10,
                window: Dur::mins(30),
                action,
            }),
            flex_start_max_wait: None,
        }
    }

    fn gang(phase: GangPhase, started: i64, evictions: u32) -> Gang {
        Gang {
            phase,
            started_at: Some(Time(started)),
            admitted_at: Some(Time(started)),
            evictions,
            ..Gang::new(GangId::new("ns/g"), "q", Time(0), Vec::new())
        }
    }

    fn series(points: &[(i64, f64)]) -> Vec<UtilSample> {
        points
            .iter()
            .map(|&(at, percent)| UtilSample {
                at: Time(at),
                percent,
            })
            .collect()
    }

    /// (case, action, phase, started, samples, now, want: (since, action, not_before))
    #[test]
    fn verdicts() {
        use GangPhase::*;
        use IdleAction::*;
        let idle_hour: Vec<(i64, f64)> = (0..=60).map(|m| (m * 60, 2.0)).collect();
        let busy_end: Vec<(i64, f64)> = (0..=60)
            .map(|m| (m * 60, if m == 60 { 95.0 } else { 1.0 }))
            .collect();
        let busy_mid: Vec<(i64, f64)> = (0..=60)
            .map(|m| (m * 60, if m == 40 { 50.0 } else { 1.0 }))
            .collect();
        let short: Vec<(i64, f64)> = (40..=60).map(|m| (m * 60, 0.0)).collect();
        let stale: Vec<(i64, f64)> = (0..=10).map(|m| (m * 60, 0.0)).collect();
        let nan: Vec<(i64, f64)> = (0..=60)
            .map(|m| (m * 60, if m == 59 { f64::NAN } else { 0.0 }))
            .collect();
        type Want = Option<(i64, IdleAction, Option<i64>)>;
        type Case<'a> = (
            &'a str,
            Option<IdleAction>,
            GangPhase,
            i64,
            &'a [(i64, f64)],
            i64,
            Want,
        );
        let cases: Vec<Case> = vec![
            (
                "idle an hour, report",
                Some(Report),
                Running,
                0,
                &idle_hour,
                3600,
                Some((0, Report, None)),
            ),
            (
                "idle an hour, requeue with the first backoff",
                Some(Requeue),
                Running,
                0,
                &idle_hour,
                3600,
                Some((0, Requeue, Some(3660))),
            ),
            (
                "idle an hour, stop",
                Some(Stop),
                Running,
                0,
                &idle_hour,
                3600,
                Some((0, Stop, None)),
            ),
            ("no policy", None, Running, 0, &idle_hour, 3600, None),
            (
                "not running",
                Some(Report),
                Admitted,
                0,
                &idle_hour,
                3600,
                None,
            ),
            (
                "busy at the newest sample",
                Some(Report),
                Running,
                0,
                &busy_end,
                3600,
                None,
            ),
            (
                "busy 20 minutes ago: idle 20 minutes only",
                Some(Report),
                Running,
                0,
                &busy_mid,
                3600,
                None,
            ),
            (
                "busy 20 minutes ago, judged 15 minutes later",
                Some(Report),
                Running,
                0,
                &busy_mid,
                3600 + 900,
                None,
            ),
            (
                "data for 20 minutes only",
                Some(Report),
                Running,
                0,
                &short,
                3600,
                None,
            ),
            (
                "samples before the gang started do not count",
                Some(Report),
                Running,
                2400,
                &idle_hour,
                3600,
                None,
            ),
            (
                "no fresh data",
                Some(Report),
                Running,
                0,
                &stale,
                3600,
                None,
            ),
            (
                "a sample that is not a number is busy",
                Some(Report),
                Running,
                0,
                &nan,
                3600,
                None,
            ),
            (
                "exactly the window",
                Some(Report),
                Running,
                1800,
                &idle_hour,
                3600,
                Some((1800, Report, None)),
            ),
        ];
        for (name, action, phase, started, points, now, want) in cases {
            let s = Snapshot {
                queues: vec![queue(action)],
                gangs: vec![gang(phase, started, 0)],
                gpu_utilization: vec![GangUtilization {
                    gang: GangId::new("ns/g"),
                    samples: series(points),
                }],
                ..Snapshot::default()
            };
            let got: Want = decide(&s, &Policy::default(), Time(now))
                .first()
                .map(|v| (v.since.0, v.action, v.not_before.map(|t| t.0)));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn backoff_grows_with_evictions_and_the_message_names_the_numbers() {
        let s = Snapshot {
            queues: vec![queue(Some(IdleAction::Requeue))],
            gangs: vec![gang(GangPhase::Running, 0, 2)],
            gpu_utilization: vec![GangUtilization {
                gang: GangId::new("ns/g"),
                samples: series(&[(0, 3.5), (1800, 1.0), (3600, 0.0)]),
            }],
            ..Snapshot::default()
        };
        let v = decide(&s, &Policy::default(), Time(3600));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].not_before, Some(Time(3600 + 240)));
        assert_eq!(v[0].peak_percent, 3.5);
        assert_eq!(v[0].reason.as_str(), "IdleRequeued");
        for part in ["3.5%", "10%", "1h", "30m", "q", "Requeue"] {
            assert!(v[0].message.contains(part), "{part}: {}", v[0].message);
        }
    }
}
