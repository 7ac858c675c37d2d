//! Outputs: the terminal table, `summary.json` and `report.html`.

pub mod html;
pub mod matrix;
pub mod summary;
pub mod svg;
pub mod table;

use std::path::Path;

use crate::runner::{PolicyRun, Prepared};

/// Writes `summary.json` and `report.html` into `dir` (created if needed).
pub fn write_outputs(
    dir: &Path,
    p: &Prepared,
    runs: &[PolicyRun],
    summary: &summary::Summary,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("summary.json"), summary.to_json() + "\n")?;
    std::fs::write(dir.join("report.html"), html::render(p, runs, summary))?;
    Ok(())
}
