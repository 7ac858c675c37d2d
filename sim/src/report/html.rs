//! `report.html`: one self-contained page (inline CSS and SVG, no
//! JavaScript, no external files) with the summary table, the charts
//! (GPUs allocated vs busy per policy, queue depth per team per policy, the
//! wait-time CDF, cost by team and by capacity type) and every policy's
//! assumptions.

use std::fmt::Write;

use crate::report::summary::Summary;
use crate::report::svg::{COLORS, Series, XAxis, esc, line_chart, stacked_bars};
use crate::runner::{PolicyRun, Prepared};

/// The summary keys shown in the table, with their labels.
pub const TABLE_KEYS: [(&str, &str); 16] = [
    ("cost_usd", "cost ($)"),
    ("cost_vs_lower_bound", "cost ÷ lower bound"),
    ("gpu_hours_allocated", "GPU-hours allocated"),
    ("gpu_hours_busy", "GPU-hours busy"),
    ("idle_node_hours", "idle node-hours"),
    ("wait_p50_s", "wait p50 (s)"),
    ("wait_p95_s", "wait p95 (s)"),
    ("wait_p99_s", "wait p99 (s)"),
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
    let mut ids = Vec::new();
    for p in policies {
        ids.push(format!("chart-util-{p}"));
        ids.push(format!("chart-queue-{p}"));
    }
    ids.push("chart-wait-cdf".into());
    ids.push("chart-cost-team".into());
    ids.push("chart-cost-capacity".into());
    ids
}

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
    // Utilization.
    h.push_str("<h2>GPUs allocated vs busy</h2><div class=\"grid\">");
    for (i, r) in runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()].to_string();
        let alloc: Vec<(f64, f64)> = r
            .rec
            .series
            .iter()
            .map(|s| (s.t.0 as f64, s.gpus_allocated))
            .collect();
        let busy: Vec<(f64, f64)> = r
            .rec
            .series
            .iter()
            .map(|s| (s.t.0 as f64, s.gpus_busy))
            .collect();
        h.push_str(&line_chart(
            &format!("chart-util-{}", r.name),
            &format!("{}: GPUs allocated (solid) vs busy (dashed)", r.name),
            "GPUs",
            XAxis::Time,
            &[
                Series {
                    name: "allocated".into(),
                    color: color.clone(),
                    points: alloc,
                    dashed: false,
                },
                Series {
                    name: "busy".into(),
                    color,
                    points: busy,
                    dashed: true,
                },
            ],
        ));
    }
    h.push_str("</div>");
    // Queue depth per team.
    h.push_str("<h2>Queue depth per team (jobs submitted, not running)</h2><div class=\"grid\">");
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
    h.push_str("</div>");
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
    h.push_str("<h2>Queue wait</h2>");
    h.push_str(&line_chart(
        "chart-wait-cdf",
        "Wait-time CDF (fraction of jobs started within x)",
        "fraction",
        XAxis::LogSeconds,
        &cdf,
    ));
    // Costs.
    h.push_str("<h2>Cost</h2>");
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
        "Cost by team (GPU share of the nodes their pods held; rest idle)",
        &by_team,
    ));
    h.push_str(&stacked_bars(
        "chart-cost-capacity",
        "Cost by capacity type",
        &by_cap,
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
