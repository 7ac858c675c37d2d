//! `muster simulate`.

use super::CliError;

/// Arguments of `muster simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {}

/// Runs `muster simulate`.
pub fn run(_args: SimulateArgs) -> Result<(), CliError> {
    Err(CliError::failed("not built yet"))
}
