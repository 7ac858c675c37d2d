//! `muster plan`.

use super::CliError;

/// Arguments of `muster plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {}

/// Runs `muster plan`.
pub fn run(_args: PlanArgs) -> Result<(), CliError> {
    Err(CliError::failed("not built yet"))
}
