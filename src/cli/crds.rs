//! `muster crds`.

use super::CliError;

/// Arguments of `muster crds`.
#[derive(Debug, clap::Args)]
pub struct CrdsArgs {}

/// Runs `muster crds`.
pub fn run(_args: CrdsArgs) -> Result<(), CliError> {
    Err(CliError::failed("not built yet"))
}
