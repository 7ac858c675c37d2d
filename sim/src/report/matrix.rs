//! The matrix report as Markdown: the tables of `docs/benchmarks.md` and the
//! README, rendered from a [`MatrixReport`] and written between markers
//! (`<!-- BEGIN matrix:NAME -->` … `<!-- END matrix:NAME -->`), so the
//! published figures are always the output of a run and a test can check
//! that the committed pages match the committed result.

use std::fmt::Write as _;

use crate::matrix::{Cell, MatrixReport, Row};
use crate::report::table::human_secs;

/// Policy column titles.
fn title(policy: &str) -> &str {
    match policy {
        "muster" => "muster",
        "default-ca" => "CA (priority, least-waste)",
        "default-ca-price" => "CA (price)",
        "kueue-karpenter" => "Kueue + Karpenter",
        "kueue-provreq" => "Kueue + ProvisioningRequest + CA",
        "default-ca-tuned" => "CA, tuned",
        "kueue-karpenter-tuned" => "Kueue + Karpenter, tuned",
        "kueue-provreq-tuned" => "Kueue + ProvisioningRequest + CA, tuned",
        other => other,
    }
}

fn cell<'a>(row: &'a Row, policy: &str) -> Option<&'a Cell> {
    row.policies
        .iter()
        .find(|(n, _)| n == policy)
        .map(|(_, c)| c)
}

fn policies(r: &MatrixReport) -> Vec<String> {
    r.rows
        .first()
        .map(|row| row.policies.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default()
}

/// One table of the benchmarks page: its title and how a cell is written.
type Section = (&'static str, Box<dyn Fn(&Row, &Cell) -> String>);

fn table(r: &MatrixReport, what: &str, f: impl Fn(&Row, &Cell) -> String) -> String {
    table_of(r, what, |_| true, f)
}

/// [`table`] over the rows `keep` keeps.
fn table_of(
    r: &MatrixReport,
    what: &str,
    keep: impl Fn(&Row) -> bool,
    f: impl Fn(&Row, &Cell) -> String,
) -> String {
    let names = policies(r);
    let mut out = String::new();
    let _ = write!(out, "| {what} |");
    for n in &names {
        let _ = write!(out, " {} |", title(n));
    }
    out.push_str("\n|---|");
    for _ in &names {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in r.rows.iter().filter(|row| keep(row)) {
        let _ = write!(out, "| {} |", row.scenario);
        for n in &names {
            let v = cell(row, n).map_or_else(|| "–".to_string(), |c| f(row, c));
            let _ = write!(out, " {v} |");
        }
        out.push('\n');
    }
    out
}

fn dollars(x: f64) -> String {
    let whole = x.round() as i64;
    let s = whole.abs().to_string();
    let mut grouped = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("${grouped}")
}

/// The full tables for `docs/benchmarks.md`.
pub fn render_benchmarks(r: &MatrixReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Workload: {} ({} jobs); {}; seed {}. Every policy on every row: {} runs on {} \
         threads in {:.0} s of wall time.\n",
        r.workload,
        r.jobs_total,
        r.offerings,
        r.seed,
        r.rows.iter().map(|row| row.policies.len()).sum::<usize>(),
        r.workers,
        r.wall_s
    );
    out.push_str("| scenario | conditions | lower bound |\n|---|---|---:|\n");
    for row in &r.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            row.scenario,
            row.conditions,
            dollars(row.lower_bound_usd)
        );
    }
    let sections: [Section; 9] = [
        (
            "cost (× lower bound)",
            Box::new(|_, c| format!("{} ({:.2}×)", dollars(c.cost_usd), c.cost_vs_lower_bound)),
        ),
        (
            "$ per allocated GPU-hour",
            Box::new(|_, c| format!("{:.3}", c.usd_per_allocated_gpu_hour)),
        ),
        (
            "GPU-hours allocated − busy",
            Box::new(|_, c| format!("{:.0}", c.gpu_hours_allocated_minus_busy)),
        ),
        (
            "idle GPU-hours (GPU-weighted; on 4+ GPU machines)",
            Box::new(|_, c| {
                format!(
                    "{:.0} ({:.0})",
                    c.idle_gpu_hours, c.idle_gpu_hours_on_4_plus_gpu_nodes
                )
            }),
        ),
        (
            "GPU-hours lost to interruptions",
            Box::new(|_, c| {
                format!(
                    "{:.0} ({} interruptions)",
                    c.gpu_hours_lost_to_interruptions, c.interruptions
                )
            }),
        ),
        (
            "partial-gang GPU-hours",
            Box::new(|_, c| format!("{:.1}", c.partial_gang_gpu_hours)),
        ),
        (
            "GPU-hours held for gangs not running (partial gangs + Ready nodes held for gangs not started)",
            Box::new(|_, c| format!("{:.1}", c.held_not_running_gpu_hours)),
        ),
        (
            "wait p50 / p95",
            Box::new(|_, c| {
                format!(
                    "{} / {}",
                    human_secs(c.wait_p50_s),
                    human_secs(c.wait_p95_s)
                )
            }),
        ),
        (
            "jobs completed / capacity errors",
            Box::new(|_, c| format!("{} / {}", c.jobs_completed, c.capacity_errors)),
        ),
    ];
    for (what, f) in sections.iter() {
        out.push('\n');
        out.push_str(&table(r, what, f));
    }
    out.push('\n');
    out.push_str(&render_targets(r));
    out.push_str(&render_reservations(r));
    out
}

/// True for a row with reserved capacity or machines that know their rack.
fn has_reservations_or_topology(row: &Row) -> bool {
    row.policies.iter().any(|(_, c)| {
        c.reserved_cost_usd > 0.0 || c.starts_across_racks + c.starts_across_blocks > 0
    })
}

/// The tables of the rows with reservations or a topology: what the
/// reservations cost and how much of them each policy used, and how its
/// multi-node gangs were spread over the network and what that cost.
pub fn render_reservations(r: &MatrixReport) -> String {
    if !r.rows.iter().any(has_reservations_or_topology) {
        return String::new();
    }
    let sections: [Section; 4] = [
        (
            "reservations: paid whole (in the cost above) / GPU-hours on reserved machines",
            Box::new(|_, c| {
                format!(
                    "{} / {:.0}",
                    dollars(c.reserved_cost_usd),
                    c.reserved_gpu_hours_used
                )
            }),
        ),
        (
            "multi-node gang runs: in one rack / over racks / over blocks",
            Box::new(|_, c| {
                let spread = c.starts_across_racks + c.starts_across_blocks;
                format!(
                    "{} / {} / {}",
                    c.multi_node_starts.saturating_sub(spread),
                    c.starts_across_racks,
                    c.starts_across_blocks
                )
            }),
        ),
        (
            "GPU-hours the network slowdown added",
            Box::new(|_, c| format!("{:.0}", c.slowdown_gpu_hours)),
        ),
        (
            "machines taken back at a reservation's end (GPU-hours of work lost)",
            Box::new(|_, c| {
                format!(
                    "{} ({:.0})",
                    c.capacity_reclaims, c.gpu_hours_lost_to_reclaims
                )
            }),
        ),
    ];
    let mut out = String::new();
    for (what, f) in sections.iter() {
        out.push('\n');
        out.push_str(&table_of(r, what, has_reservations_or_topology, f));
    }
    out
}

/// The README table: cost and median and p95 wait per scenario and policy.
pub fn render_readme(r: &MatrixReport) -> String {
    let mut out = table(r, "cost (× lower bound), wait median / p95", |_, c| {
        format!(
            "${:.0}k ({:.2}×), {} / {}",
            c.cost_usd / 1000.0,
            c.cost_vs_lower_bound,
            human_secs(c.wait_p50_s),
            human_secs(c.wait_p95_s)
        )
    });
    out.push('\n');
    out.push_str(&table(
        r,
        "GPU-hours held for gangs not running (partial gangs + Ready nodes held for gangs not started)",
        |_, c| {
            format!(
                "{:.0} ({:.0} + {:.0})",
                c.held_not_running_gpu_hours,
                c.partial_gang_gpu_hours,
                c.held_not_running_gpu_hours - c.partial_gang_gpu_hours
            )
        },
    ));
    out
}

/// Each target, per row: met or missed, with the figure, and for a cost
/// missed, by how much, against which configuration, and what muster's
/// warm machines cost within it (the row's own figures).
pub fn render_targets(r: &MatrixReport) -> String {
    let mut out = String::from(
        "| scenario | muster ≤ 1.05 × lower bound | muster ≤ every baseline configuration | muster wait p50 ≤ 60 s | muster wait p95 ≤ the cheapest tuned baseline's | muster partial-gang GPU-hours = 0 | baselines within 1.15 × lower bound |\n|---|---|---|---|---|---|---|\n",
    );
    let mark = |ok: bool| if ok { "met" } else { "**missed**" };
    for row in &r.rows {
        let Some(m) = cell(row, "muster") else {
            continue;
        };
        let baselines: Vec<&(String, Cell)> =
            row.policies.iter().filter(|(n, _)| n != "muster").collect();
        let cheapest = baselines
            .iter()
            .min_by(|a, b| a.1.cost_usd.total_cmp(&b.1.cost_usd).then(a.0.cmp(&b.0)));
        let tuned = baselines
            .iter()
            .filter(|(n, _)| n.ends_with("-tuned"))
            .min_by(|a, b| a.1.cost_usd.total_cmp(&b.1.cost_usd).then(a.0.cmp(&b.0)));
        let cost_cell = match cheapest {
            Some((n, c)) if m.cost_usd > c.cost_usd => {
                let gap = m.cost_usd - c.cost_usd;
                let warm = if m.warm_cost_usd > 0.0 {
                    format!("; its warm machines cost {}", dollars(m.warm_cost_usd))
                } else {
                    String::new()
                };
                format!(
                    "**missed** by {} ({:.1} %) against {}{warm}",
                    dollars(gap),
                    gap / c.cost_usd * 100.0,
                    title(n)
                )
            }
            Some((n, c)) => format!(
                "met ({} vs {} {})",
                dollars(m.cost_usd),
                title(n),
                dollars(c.cost_usd)
            ),
            None => "–".to_string(),
        };
        // with the share of jobs started within the minute, which says how
        // near the median is to crossing it
        let within = |c: &Cell| format!("{:.1} % within 60 s", c.started_within_60s * 100.0);
        let p50_cell = format!(
            "{} ({}, {}{})",
            mark(m.wait_p50_s <= 60.0),
            human_secs(m.wait_p50_s),
            within(m),
            tuned.map_or_else(String::new, |(n, c)| format!(
                "; {} {}, {}",
                title(n),
                human_secs(c.wait_p50_s),
                within(c)
            ))
        );
        let p95_cell = match tuned {
            Some((n, c)) => format!(
                "{} ({} vs {} {})",
                mark(m.wait_p95_s <= c.wait_p95_s),
                human_secs(m.wait_p95_s),
                title(n),
                human_secs(c.wait_p95_s)
            ),
            None => "–".to_string(),
        };
        let over: Vec<String> = baselines
            .iter()
            .filter(|(_, c)| c.cost_vs_lower_bound > 1.15)
            .map(|(n, c)| format!("{} {:.2}×", title(n), c.cost_vs_lower_bound))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} ({:.3}×) | {} | {} | {} | {} ({:.1}) | {} |",
            row.scenario,
            mark(m.cost_vs_lower_bound <= 1.05),
            m.cost_vs_lower_bound,
            cost_cell,
            p50_cell,
            p95_cell,
            mark(m.partial_gang_gpu_hours == 0.0),
            m.partial_gang_gpu_hours,
            if over.is_empty() {
                "met".to_string()
            } else {
                format!("**missed**: {}", over.join(", "))
            },
        );
    }
    out
}

/// A marked block that could not be found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("no block `{0}` (markers <!-- BEGIN matrix:{0} --> … <!-- END matrix:{0} -->)")]
pub struct MissingBlock(pub String);

fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- BEGIN matrix:{name} -->\n"),
        format!("<!-- END matrix:{name} -->"),
    )
}

/// The content of block `name` in `text`.
pub fn read_block<'a>(text: &'a str, name: &str) -> Result<&'a str, MissingBlock> {
    let (begin, end) = markers(name);
    let start = text.find(&begin).ok_or_else(|| MissingBlock(name.into()))? + begin.len();
    let stop = text[start..]
        .find(&end)
        .ok_or_else(|| MissingBlock(name.into()))?
        + start;
    Ok(&text[start..stop])
}

/// `text` with block `name` replaced by `content`.
pub fn write_block(text: &str, name: &str, content: &str) -> Result<String, MissingBlock> {
    let old = read_block(text, name)?;
    let start = old.as_ptr() as usize - text.as_ptr() as usize;
    let mut out = String::with_capacity(text.len() + content.len());
    out.push_str(&text[..start]);
    out.push_str(content);
    out.push_str(&text[start + old.len()..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_replaced_between_their_markers_only() {
        let text = "a\n<!-- BEGIN matrix:x -->\nold\n<!-- END matrix:x -->\nb\n";
        let out = write_block(text, "x", "new\n").expect("block");
        assert_eq!(
            out,
            "a\n<!-- BEGIN matrix:x -->\nnew\n<!-- END matrix:x -->\nb\n"
        );
        assert_eq!(read_block(&out, "x"), Ok("new\n"));
        assert_eq!(write_block(text, "y", "z"), Err(MissingBlock("y".into())));
    }

    #[test]
    fn dollars_group_thousands() {
        assert_eq!(dollars(1234567.4), "$1,234,567");
        assert_eq!(dollars(999.6), "$1,000");
        assert_eq!(dollars(12.0), "$12");
    }
}
