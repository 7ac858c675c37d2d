//! `muster crds`: prints the CustomResourceDefinitions.

use std::io::Write;

use muster_crds::Kind;

use super::CliError;

/// Arguments of `muster crds`.
#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Print only this kind (NodeClass, GPUPool, GPUQueue, Gang, PoolNode).
    #[arg(long)]
    pub kind: Option<String>,
}

/// Prints all CRDs as one multi-document YAML (or one kind's).
pub fn run(args: CrdsArgs) -> Result<(), CliError> {
    let text = match args.kind.as_deref() {
        None => muster_crds::render_all(),
        Some(name) => {
            let kind = Kind::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                CliError::input(format!(
                    "--kind {name:?}: unknown kind (expected one of {})",
                    known.join(", ")
                ))
            })?;
            muster_crds::render(kind)
        }
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| CliError::failed(format!("writing to stdout: {e}")))
}
