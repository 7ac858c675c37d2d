//! `report.html`: one self-contained page (inline CSS and SVG, no
//! JavaScript, no external files). It opens with one chart per question,
//! every policy side by side on it: what each costs against the lower
//! bound, how long jobs wait (the wait-time CDF), what each buys and does
//! not use, and the GPUs each holds over time. Then the summary table, cost
//! by team and by capacity type, the per-queue table, queue depth per team
//! per policy (folded), and every policy's assumptions.

use std::fmt::Write;

use crate::report::summary::Summary;
use crate::report::svg::{COLORS, Series, Unit, XAxis, esc, line_chart, stacked_bars};
use crate::runner::{PolicyRun, Prepared};

/// The summary keys shown in the table, with their labels.
pub const TABLE_KEYS: [(&str, &str); 18] = [
    ("cost_usd", "cost ($)"),
    ("cost_vs_lower_bound", "cost ÷ lower bound"),
    ("gpu_hours_allocated", "GPU-hours allocated"),
    ("gpu_hours_busy", "GPU-hours busy"),
    ("idle_node_hours", "idle node-hours"),
    ("warm_cost_usd", "kept warm ($)"),
    ("wait_p50_s", "wait p50 (s)"),
    ("wait_p95_s", "wait p95 (s)"),
    ("wait_p99_s", "wait p99 (s)"),
    ("started_within_60s", "started within 60 s (share)"),
    ("partial_gang_gpu_hours", "partial-gang GPU-hours"),
    ("jobs_completed", "jobs completed"),
    ("preemptions", "preemptions"),
    ("interruptions", "interruptions"),
    ("fairness_jain", "fairness (Jain)"),
    ("planner_ms_p50", "planner ms p50"),
    ("planner_ms_p99", "planner ms p99"),
    ("reserved_idle_gpu_hours", "reserved idle GPU-hours"),
];

/// Chart element ids of a report for these policies.
pub fn chart_ids(policies: &[String]) -> Vec<String> {
    let mut ids: Vec<String> = QUESTION_CHARTS.iter().map(|s| s.to_string()).collect();
    ids.push("chart-cost-team".into());
    ids.push("chart-cost-capacity".into());
    for p in policies {
        ids.push(format!("chart-queue-{p}"));
    }
    ids
}

/// The charts the page opens with, one per question, in order: cost
/// against the lower bound, the wait-time CDF, GPU-hours bought and not
/// used, GPUs allocated over time.
pub const QUESTION_CHARTS: [&str; 4] = [
    "chart-cost-vs-bound",
    "chart-wait-cdf",
    "chart-unused",
    "chart-allocated",
];

/// The grey of what every policy shares (the lower bound).
const SHARED: &str = "#bbbbbb";

fn fmt_value(v: &serde_json::Value) -> String {
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) if x.abs() >= 100.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
        None => v.to_string(),
    }
}

/// A cell's text: planner timings of 0 are "not measured" (baselines have no
/// planner; `--zero-timings` blanks muster's), shown as a dash.
fn shown(key: &str, v: &serde_json::Value) -> String {
    if key.starts_with("planner_ms") && v.as_f64() == Some(0.0) {
        "–".to_string()
    } else {
        fmt_value(v)
    }
}

/// Renders the page.
pub fn render(p: &Prepared, runs: &[PolicyRun], summary: &Summary) -> String {
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    let json = serde_json::to_value(summary).unwrap_or_default();
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>muster simulate report</title><style>\
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}\
th:first-child,td:first-child{text-align:left}.chart{display:block;margin:1em 0}\
.title{font-size:14px;font-weight:600}.tick{font-size:11px;fill:#444}.legend{font-size:11px}\
.grid{display:flex;flex-wrap:wrap;gap:8px}p.assume{max-width:60em;line-height:1.4}</style></head><body>",
    );
    let _ = write!(
        h,
        "<h1>muster simulate</h1><p>{} jobs · lower bound <b>${:.2}</b> · seed {}<br>{}<br>{}</p>",
        summary.jobs_total,
        summary.lower_bound_usd,
        summary.seed,
        esc(&summary.workload),
        esc(&summary.offerings)
    );
    // The questions, every policy on one chart each.
    h.push_str("<h2>What does it cost?</h2>");
    let bound = summary.lower_bound_usd;
    let cost_bars: Vec<crate::report::svg::Bar> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let cost = r.rec.cost_micros as f64 / 1e6;
            (
                r.name.clone(),
                vec![
                    (
                        "lower bound".to_string(),
                        bound.min(cost),
                        SHARED.to_string(),
                    ),
                    (
                        "above the lower bound".to_string(),
                        (cost - bound).max(0.0),
                        COLORS[i % COLORS.len()].to_string(),
                    ),
                ],
            )
        })
        .collect();
    h.push_str(&stacked_bars(
        "chart-cost-vs-bound",
        "Cost ($): the lower bound every policy shares, and what each pays above it",
        &cost_bars,
        Unit::Dollars,
    ));
    // Wait CDF.
    let mut cdf = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let mut w: Vec<f64> = r
            .job_waits
            .iter()
            .map(|(_, submit, start, _, _)| (start.unwrap_or(r.end_s) - submit).max(0) as f64)
            .collect();
        w.sort_by(|a, b| a.total_cmp(b));
        let n = w.len().max(1) as f64;
        let points = w
            .iter()
            .enumerate()
            .map(|(k, x)| (x.max(1.0).log10(), (k + 1) as f64 / n))
            .collect();
        cdf.push(Series {
            name: r.name.clone(),
            color: COLORS[i % COLORS.len()].into(),
            points,
            dashed: false,
        });
    }
    h.push_str("<h2>How long do jobs wait?</h2>");
    h.push_str(&line_chart(
        "chart-wait-cdf",
        "Fraction of jobs started within x of their submission (left and high is better)",
        "fraction",
        XAxis::LogSeconds,
        &cdf,
    ));
    h.push_str("<h2>What is bought and not used?</h2>");
    let unused: Vec<crate::report::svg::Bar> = names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let q = summary.policies.get(n)?;
            let not_used = (q.gpu_hours_allocated - q.gpu_hours_busy).max(0.0);
            let partial = q.partial_gang_gpu_hours.min(not_used);
            let held = q.reserved_idle_gpu_hours.min(not_used - partial);
            Some((
                n.clone(),
                vec![
                    ("partial gangs".to_string(), partial, "#d62728".to_string()),
                    (
                        "held for gangs not started".to_string(),
                        held,
                        "#ff7f0e".to_string(),
                    ),
                    (
                        "idle, booting or draining otherwise".to_string(),
                        not_used - partial - held,
                        COLORS[i % COLORS.len()].to_string(),
                    ),
                ],
            ))
        })
        .collect();
    h.push_str(&stacked_bars(
        "chart-unused",
        "GPU-hours bought and not used (allocated − busy)",
        &unused,
        Unit::GpuHours,
    ));
    h.push_str("<h2>How many GPUs does each hold?</h2>");
    let held: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: r.name.clone(),
            color: COLORS[i % COLORS.len()].into(),
            points: r
                .rec
                .series
                .iter()
                .map(|s| (s.t.0 as f64, s.gpus_allocated))
                .collect(),
            dashed: false,
        })
        .chain(runs.first().map(|r| {
            Series {
                name: format!("busy ({})", r.name),
                color: SHARED.into(),
                points: r
                    .rec
                    .series
                    .iter()
                    .map(|s| (s.t.0 as f64, s.gpus_busy))
                    .collect(),
                dashed: true,
            }
        }))
        .collect();
    h.push_str(&line_chart(
        "chart-allocated",
        "GPUs allocated over time, per policy (dashed: GPUs busy)",
        "GPUs",
        XAxis::Time,
        &held,
    ));
    // Summary table.
    h.push_str("<h2>Summary</h2><table id=\"summary\"><tr><th>metric</th>");
    for n in &names {
        let _ = write!(h, "<th>{}</th>", esc(n));
    }
    h.push_str("</tr>");
    for (key, label) in TABLE_KEYS {
        let _ = write!(h, "<tr><td>{}</td>", esc(label));
        for n in &names {
            let v = &json["policies"][n][key];
            let _ = write!(
                h,
                "<td data-policy=\"{}\" data-key=\"{key}\" data-value=\"{}\">{}</td>",
                esc(n),
                v,
                shown(key, v)
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    // Costs.
    h.push_str("<h2>Who pays, and for what</h2>");
    let mut by_team = Vec::new();
    let mut by_cap = Vec::new();
    for r in runs {
        let total = r.rec.cost_micros as f64 / 1e6;
        let mut segs: Vec<(String, f64, String)> = p
            .teams
            .iter()
            .enumerate()
            .map(|(t, team)| {
                (
                    team.clone(),
                    r.rec.cost_by_team[t],
                    COLORS[t % COLORS.len()].to_string(),
                )
            })
            .collect();
        let attributed: f64 = segs.iter().map(|s| s.1).sum();
        segs.push((
            "idle / unattributed".into(),
            (total - attributed).max(0.0),
            "#cccccc".into(),
        ));
        by_team.push((r.name.clone(), segs));
        by_cap.push((
            r.name.clone(),
            vec![
                (
                    "spot".to_string(),
                    r.rec.cost_spot_micros as f64 / 1e6,
                    "#2ca02c".to_string(),
                ),
                (
                    "on-demand".to_string(),
                    r.rec.cost_on_demand_micros as f64 / 1e6,
                    "#1f77b4".to_string(),
                ),
            ],
        ));
    }
    h.push_str(&stacked_bars(
        "chart-cost-team",
        "Cost by team (GPU share of the nodes their pods held, and the warm nodes kept for their arrivals; rest idle)",
        &by_team,
        Unit::Dollars,
    ));
    h.push_str(&stacked_bars(
        "chart-cost-capacity",
        "Cost by capacity type",
        &by_cap,
        Unit::Dollars,
    ));
    // Per-queue table.
    h.push_str("<h2>Per queue</h2><table id=\"queues\"><tr><th>queue</th>");
    for n in &names {
        let _ = write!(
            h,
            "<th>{} p50 / p95 wait</th><th>{} cost</th>",
            esc(n),
            esc(n)
        );
    }
    h.push_str("</tr>");
    for team in &p.teams {
        let _ = write!(h, "<tr><td>{}</td>", esc(team));
        for n in &names {
            if let Some(q) = summary.policies.get(n).and_then(|s| s.queues.get(team)) {
                let _ = write!(
                    h,
                    "<td>{} / {}</td><td>${:.0}</td>",
                    crate::report::table::human_secs(q.wait_p50_s),
                    crate::report::table::human_secs(q.wait_p95_s),
                    q.cost_usd
                );
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    // Queue depth per team.
    h.push_str(
        "<details><summary>Queue depth per team, per policy (jobs submitted, not running)</summary>\
         <div class=\"grid\">",
    );
    let shown = p.teams.len().min(9);
    for r in runs {
        let mut series = Vec::new();
        for (t, team) in p.teams.iter().enumerate().take(shown) {
            series.push(Series {
                name: team.clone(),
                color: COLORS[t % COLORS.len()].into(),
                points: r
                    .rec
                    .series
                    .iter()
                    .map(|s| (s.t.0 as f64, f64::from(s.pending_by_team[t])))
                    .collect(),
                dashed: false,
            });
        }
        if p.teams.len() > shown {
            series.push(Series {
                name: "other teams".into(),
                color: COLORS[9].into(),
                points: r
                    .rec
                    .series
                    .iter()
                    .map(|s| {
                        (
                            s.t.0 as f64,
                            s.pending_by_team[shown..]
                                .iter()
                                .map(|x| f64::from(*x))
                                .sum(),
                        )
                    })
                    .collect(),
                dashed: false,
            });
        }
        h.push_str(&line_chart(
            &format!("chart-queue-{}", r.name),
            &format!("{}: pending jobs per team", r.name),
            "jobs",
            XAxis::Time,
            &series,
        ));
    }
    h.push_str("</div></details>");
    // Assumptions.
    h.push_str("<h2 id=\"assumptions\">What each policy assumes</h2>");
    for r in runs {
        let _ = write!(
            h,
            "<h3>{}</h3><p class=\"assume\" data-policy=\"{}\">{}</p>",
            esc(&r.name),
            esc(&r.name),
            esc(&r.assumptions)
        );
        if !r.counters.is_empty() {
            h.push_str("<p class=\"assume\">");
            let parts: Vec<String> = r
                .counters
                .iter()
                .map(|(k, v)| format!("{}: {v}", esc(k)))
                .collect();
            h.push_str(&parts.join(" · "));
            h.push_str("</p>");
        }
    }
    h.push_str(
        "<h2>Definitions</h2><p class=\"assume\">Cost: every node from launch to removal at its price. \
Lower bound: every job's GPU-seconds at the cheapest per-GPU price of any offering it may use, no boot time, perfect packing. \
GPU-hours busy: GPU × run time of completed runs. Idle node-hours: nodes Ready with no pod. \
Partial-gang GPU-hours: GPUs of pods bound while other pods of their job were not. \
Wait: submit to first start (jobs never started count until the end of the run). \
Fairness: Jain's index over teams of served GPU-seconds ÷ (served GPU-seconds + GPU-seconds spent waiting).</p>",
    );
    h.push_str("</body></html>\n");
    h
}
