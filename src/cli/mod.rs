//! Command-line interface: one module per subcommand.

#[cfg(feature = "controller")]
pub mod controller;
pub mod crds;
#[cfg(feature = "controller")]
pub mod explain;
#[cfg(feature = "controller")]
mod kube_config;
pub mod plan;
pub mod simulate;
#[cfg(feature = "controller")]
pub mod uninstall;

use clap::{Parser, Subcommand};

/// Gang admission and right-sized, atomic GPU provisioning for Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "muster", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a workload through muster and the usual stacks on a simulated cloud.
    Simulate(simulate::SimulateArgs),
    /// Print the plan the planner makes for a snapshot file.
    Plan(plan::PlanArgs),
    /// Print the CustomResourceDefinitions as one multi-document YAML.
    Crds(crds::CrdsArgs),
    /// Run the Kubernetes controller.
    #[cfg(feature = "controller")]
    Controller(Box<controller::ControllerArgs>),
    /// Why a gang waits: queue, position, the planner's reason, what would
    /// unblock it, what it would launch, when it would start.
    #[cfg(feature = "controller")]
    Explain(explain::ExplainArgs),
    /// One line per GPUQueue: pending, admitted, GPUs used and quota, $/h.
    #[cfg(feature = "controller")]
    Queues(explain::ClusterArgs),
    /// One line per GPUPool: nodes, GPUs, GPUs allocated, $/h.
    #[cfg(feature = "controller")]
    Pools(explain::ClusterArgs),
    /// Before `helm uninstall`: hold every queue, let running gangs finish
    /// (or stop them), have the controller terminate every machine it
    /// launched, delete muster's webhook configurations, and report.
    #[cfg(feature = "controller")]
    Uninstall(uninstall::UninstallArgs),
}

/// A failed command: a message for people and an exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// What went wrong and where.
    pub message: String,
    /// 1 for failures of the work, 2 for bad input.
    pub code: u8,
}

impl CliError {
    /// Bad input (file, flag, value): exit code 2.
    pub fn input(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: 2,
        }
    }

    /// The work failed (I/O while writing output, …): exit code 1.
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: 1,
        }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        self.code
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Simulate(a) => simulate::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Crds(a) => crds::run(a),
        #[cfg(feature = "controller")]
        Command::Controller(a) => controller::run(*a),
        #[cfg(feature = "controller")]
        Command::Explain(a) => explain::run_explain(a),
        #[cfg(feature = "controller")]
        Command::Queues(a) => explain::run_queues(a),
        #[cfg(feature = "controller")]
        Command::Pools(a) => explain::run_pools(a),
        #[cfg(feature = "controller")]
        Command::Uninstall(a) => uninstall::run(a),
    }
}
