//! The table of `docs/simulate.md` that says what the LLM month produces is
//! rendered from the generator, never typed: this test computes it (ten
//! seeds pooled, and seed 1, the matrix's) and compares it with the page's
//! `llm-month` block; `MUSTER_BLESS=1` rewrites the block.

use std::path::PathBuf;

use muster_sim::report::matrix::{read_block, write_block};
use muster_sim::workload::llm_month::{KALOS, LlmMonthConfig, generate_llm_month, month_figures};

/// `n` with thousands separators.
fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.round());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn render() -> String {
    let cfg = LlmMonthConfig::default();
    let pooled: Vec<_> = (1..11).flat_map(|s| generate_llm_month(&cfg, s)).collect();
    let p = month_figures(&pooled, cfg.days * 10.0);
    let one = month_figures(&generate_llm_month(&cfg, 1), cfg.days);
    let k = KALOS;
    let row = |name: &str,
               kalos: String,
               f: &dyn Fn(&muster_sim::workload::llm_month::MonthFigures) -> String| {
        format!("| {name} | {kalos} | {} | {} |\n", f(&p), f(&one))
    };
    let mut out = String::from(
        "| | Kalos | ten seeds pooled | seed 1 (the matrix's) |\n|---|---:|---:|---:|\n",
    );
    out += &row(
        "jobs",
        format!("{} in the trace", thousands(k.gpu_jobs as f64)),
        &|f| thousands(f.jobs as f64),
    );
    out += &row(
        "GPUs per job: mean / median",
        format!("{:.2} / {}", k.mean_gpus, k.median_gpus),
        &|f| format!("{:.1} / {}", f.mean_gpus, f.median_gpus),
    );
    out += &row(
        "run time: mean / median",
        format!(
            "{} s / {} s",
            thousands(k.mean_run_s),
            thousands(k.median_run_s)
        ),
        &|f| {
            format!(
                "{} s / {} s",
                thousands(f.mean_run_s),
                thousands(f.median_run_s)
            )
        },
    );
    out += &row(
        "GPU-seconds per job",
        thousands(k.gpu_seconds_per_job()),
        &|f| thousands(f.gpu_seconds_per_job),
    );
    out += &row("GPU-hours in multi-node gangs", "–".into(), &|f| {
        format!("{:.1} %", f.multi_node_gpu_share * 100.0)
    });
    out += &row("A100s busy on average", "–".into(), &|f| {
        thousands(f.mean_busy_gpus)
    });
    out
}

#[test]
fn the_llm_month_table_is_what_the_generator_gives() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/simulate.md");
    let page = std::fs::read_to_string(&path).expect("docs/simulate.md");
    let want = render();
    if std::env::var("MUSTER_BLESS").is_ok_and(|v| v == "1") {
        let updated = write_block(&page, "llm-month", &want).expect("llm-month block");
        std::fs::write(&path, updated).expect("write docs/simulate.md");
        return;
    }
    assert_eq!(
        read_block(&page, "llm-month").expect("llm-month block in docs/simulate.md"),
        want,
        "docs/simulate.md's LLM month table drifted: rerun with MUSTER_BLESS=1"
    );
}
