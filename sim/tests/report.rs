//! The HTML report, checked structurally: every chart is there as inline
//! SVG, nothing is loaded from elsewhere, and the table's numbers are the
//! ones of `summary.json`.

mod common;

use common::{SMALL, run, scenario};
use muster_sim::report::html::{QUESTION_CHARTS, TABLE_KEYS, chart_ids, render};

#[test]
fn report_has_every_chart_and_matches_the_summary() {
    let (p, runs, s) = run(scenario(SMALL), None, 5);
    let html = render(&p, &runs, &s);
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    for id in chart_ids(&names) {
        assert!(
            html.contains(&format!("<svg id=\"{id}\"")),
            "chart {id} missing"
        );
    }
    assert_eq!(
        html.matches("<svg ").count(),
        html.matches("</svg>").count()
    );
    assert!(!html.contains("<script"), "no JavaScript");
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "nothing external"
    );
    for r in &runs {
        assert!(
            html.contains(&format!("<p class=\"assume\" data-policy=\"{}\">", r.name)),
            "assumptions of {}",
            r.name
        );
    }
    let json: serde_json::Value = serde_json::from_str(&s.to_json()).expect("json");
    for name in &names {
        for (key, _) in TABLE_KEYS {
            let marker = format!("data-policy=\"{name}\" data-key=\"{key}\" data-value=\"");
            let at = html
                .find(&marker)
                .unwrap_or_else(|| panic!("cell {name}/{key} missing"));
            let rest = &html[at + marker.len()..];
            let value = &rest[..rest.find('"').expect("closing quote")];
            let shown: f64 = value.parse().expect("number");
            let want = json["policies"][name][key].as_f64().expect("summary value");
            assert_eq!(shown, want, "{name}/{key}");
        }
    }
    // The page opens with the question charts, in order, before the table.
    let at: Vec<usize> = QUESTION_CHARTS
        .iter()
        .map(|id| html.find(&format!("<svg id=\"{id}\"")).expect("chart"))
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "question charts in order"
    );
    assert!(at[3] < html.find("id=\"summary\"").expect("table"));
    // Each policy's bar on the cost chart is the lower bound plus what it
    // pays above it, adding up to its cost; on the unused chart, its
    // GPU-hours allocated less busy.
    let segments = |chart: &str| -> Vec<f64> {
        let from = html.find(&format!("<svg id=\"{chart}\"")).expect("chart");
        let svg = &html[from..from + html[from..].find("</svg>").expect("end")];
        svg.split("data-value=\"")
            .skip(1)
            .map(|v| v[..v.find('"').expect("quote")].parse().expect("number"))
            .collect()
    };
    let cost = segments("chart-cost-vs-bound");
    let unused = segments("chart-unused");
    assert_eq!(cost.len(), 2 * names.len());
    assert_eq!(unused.len(), 3 * names.len());
    for (i, name) in names.iter().enumerate() {
        let p = &s.policies[name];
        assert!(p.cost_usd > 0.0);
        let bar = cost[2 * i] + cost[2 * i + 1];
        assert!(
            (bar - p.cost_usd).abs() < 0.01,
            "{name}: {bar} vs {}",
            p.cost_usd
        );
        assert!((cost[2 * i] - s.lower_bound_usd.min(p.cost_usd)).abs() < 0.01);
        let bar: f64 = unused[3 * i..3 * i + 3].iter().sum();
        let want = (p.gpu_hours_allocated - p.gpu_hours_busy).max(0.0);
        assert!((bar - want).abs() < 0.01, "{name}: {bar} vs {want}");
        assert!((unused[3 * i] - p.partial_gang_gpu_hours.min(want)).abs() < 0.01);
    }
}
