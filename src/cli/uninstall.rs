//! `muster uninstall`: before `helm uninstall`, takes muster out of the
//! cluster so that nothing it bought keeps billing and nothing it
//! registered keeps refusing creates (see
//! [`muster::controller::uninstall`] for the steps).

use std::time::Duration;

use muster::controller::uninstall::{self, Options, Report, Running};

use super::CliError;
use super::explain::ClusterArgs;

/// What happens to gangs that run when the uninstall starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunningArg {
    /// Let them finish (within --timeout); admit nothing new.
    Drain,
    /// Evict them now; their workloads stay suspended.
    Stop,
}

/// Arguments of `muster uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The Helm release whose webhook configuration goes (every muster
    /// webhook configuration when unset).
    #[arg(long)]
    pub release: Option<String>,
    /// Running gangs: drain (let them finish) or stop (evict them now).
    #[arg(long, value_enum, default_value = "drain")]
    pub running: RunningArg,
    /// How long to wait for gangs, then for machines to be terminated.
    #[arg(long, default_value = "15m", value_parser = super::controller::parse_duration)]
    pub timeout: Duration,
    /// Remove the finalizer of PoolNodes whose instances the controller did
    /// not terminate in time; those instances are listed and keep billing
    /// until terminated by hand.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs `muster uninstall`.
pub fn run(args: UninstallArgs) -> Result<(), CliError> {
    let opts = Options {
        release: args.release.clone(),
        running: match args.running {
            RunningArg::Drain => Running::Drain,
            RunningArg::Stop => Running::Stop,
        },
        timeout: args.timeout,
        force: args.force,
        poll: Duration::from_secs(2),
    };
    let report = super::explain::runtime()?.block_on(async {
        let client = super::explain::client(&args.cluster).await?;
        uninstall::run(&client, &opts)
            .await
            .map_err(|e| CliError::failed(format!("muster uninstall: {e}")))
    })?;
    super::explain::print(args.cluster.output, &report, || text(&report))
}

/// The report as lines for people.
pub fn text(r: &Report) -> String {
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    let mut s = format!(
        "queues held: {}\nmachines terminated (PoolNodes deleted): {}\nwebhook configurations deleted: {}\n",
        list(&r.queues_held),
        list(&r.machines_terminated),
        list(&r.webhooks_deleted),
    );
    if !r.instances_left.is_empty() {
        s.push_str("INSTANCES STILL BILLING (finalizer removed with --force; terminate them in the cloud console):\n");
        for (pn, id) in &r.instances_left {
            s.push_str(&format!("  {pn}: {id}\n"));
        }
    }
    if r.suspended_jobs.is_empty() {
        s.push_str("no queued Job left suspended\n");
    } else {
        s.push_str(&format!(
            "{} queued Jobs stay suspended (nothing will start them now; unsuspend or delete them): {}\n",
            r.suspended_jobs.len(),
            list(&r.suspended_jobs)
        ));
    }
    s.push_str("next: helm uninstall the release; the CRDs and their objects stay until `kubectl delete crd` (docs/install.md)\n");
    s
}
