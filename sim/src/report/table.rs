//! The terminal summary: policies side by side.

use crate::report::summary::{PolicySummary, Summary};

/// Formats seconds as `42s`, `7.5m`, `3.2h`.
pub fn human_secs(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0}s")
    } else if s < 5400.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

type Row = (&'static str, fn(&PolicySummary) -> String);

const ROWS: &[Row] = &[
    ("cost", |p| format!("${:.0}", p.cost_usd)),
    ("cost / lower bound", |p| {
        format!("{:.2}x", p.cost_vs_lower_bound)
    }),
    ("GPU-hours allocated", |p| {
        format!("{:.0}", p.gpu_hours_allocated)
    }),
    ("GPU-hours busy", |p| format!("{:.0}", p.gpu_hours_busy)),
    ("utilization (busy/alloc)", |p| {
        if p.gpu_hours_allocated > 0.0 {
            format!("{:.0}%", 100.0 * p.gpu_hours_busy / p.gpu_hours_allocated)
        } else {
            "-".into()
        }
    }),
    ("idle node-hours", |p| format!("{:.0}", p.idle_node_hours)),
    ("kept warm", |p| format!("${:.0}", p.warm_cost_usd)),
    ("wait p50", |p| human_secs(p.wait_p50_s)),
    ("wait p95", |p| human_secs(p.wait_p95_s)),
    ("wait p99", |p| human_secs(p.wait_p99_s)),
    ("started within 60 s", |p| {
        format!("{:.1}%", 100.0 * p.started_within_60s)
    }),
    ("partial-gang GPU-hours", |p| {
        format!("{:.1}", p.partial_gang_gpu_hours)
    }),
    ("held for gangs not started (GPU-h)", |p| {
        format!("{:.1}", p.reserved_idle_gpu_hours)
    }),
    ("jobs completed", |p| p.jobs_completed.to_string()),
    ("preemptions", |p| p.preemptions.to_string()),
    ("interruptions", |p| p.interruptions.to_string()),
    ("fairness (Jain)", |p| format!("{:.3}", p.fairness_jain)),
    ("planner ms p50 / p99", |p| {
        if p.planner_calls == 0 {
            "-".into()
        } else {
            format!("{:.2} / {:.2}", p.planner_ms_p50, p.planner_ms_p99)
        }
    }),
];

/// The table as text, columns in `order`.
pub fn render(s: &Summary, order: &[String]) -> String {
    let cols: Vec<(&String, &PolicySummary)> = order
        .iter()
        .filter_map(|n| s.policies.get(n).map(|p| (n, p)))
        .collect();
    let label_w = ROWS.iter().map(|r| r.0.len()).max().unwrap_or(10) + 2;
    let mut cells: Vec<Vec<String>> = Vec::new();
    for (_, f) in ROWS {
        cells.push(cols.iter().map(|(_, p)| f(p)).collect());
    }
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([n.len()])
                .max()
                .unwrap_or(8)
                + 2
        })
        .collect();
    let mut out = String::new();
    out.push_str(&format!(
        "{} jobs · lower bound ${:.0} · seed {}\n{}\n{}\n\n",
        s.jobs_total, s.lower_bound_usd, s.seed, s.workload, s.offerings
    ));
    out.push_str(&format!("{:<label_w$}", ""));
    for (i, (n, _)) in cols.iter().enumerate() {
        out.push_str(&format!("{:>w$}", n, w = widths[i]));
    }
    out.push('\n');
    for (r, (label, _)) in ROWS.iter().enumerate() {
        out.push_str(&format!("{label:<label_w$}"));
        for (i, cell) in cells[r].iter().enumerate() {
            out.push_str(&format!("{:>w$}", cell, w = widths[i]));
        }
        out.push('\n');
    }
    out
}
