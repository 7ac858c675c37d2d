//! `muster explain`, `muster queues`, `muster pools`: the cluster as the
//! controller plans it, for people. Installed as the kubectl plugin
//! `kubectl-muster` (a link to this binary; see docs/kubectl-plugin.md).

use muster::controller::{self, base::time, explain};

use super::CliError;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Lines for people.
    Text,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

/// How to reach the cluster, and the output format.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// API server URL (plain HTTP or HTTPS without auth; kubectl proxy).
    /// Without it: --kubeconfig, then the usual kubeconfig and in-cluster
    /// configuration.
    #[arg(long, env = "MUSTER_KUBE_URL")]
    pub kube_url: Option<String>,
    /// Kubeconfig file.
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Output,
}

/// Arguments of `muster explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The Job or Gang (same name), or `namespace/name`.
    pub name: String,
    /// Its namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

pub(crate) async fn client(args: &ClusterArgs) -> Result<kube::Client, CliError> {
    let config =
        super::kube_config::from_flags(args.kube_url.as_deref(), args.kubeconfig.as_deref())
            .await?;
    super::kube_config::client(config)
}

async fn translation(
    args: &ClusterArgs,
) -> Result<(controller::translate::Translation, Vec<String>), CliError> {
    let client = client(args).await?;
    let observed = controller::observe::once::once(&client)
        .await
        .map_err(|e| {
            CliError::failed(format!(
                "reading the cluster: {}",
                controller::observe::crd_check::short_error(&e)
            ))
        })?;
    // every cloud built in, the simulated one included: explain only lists
    // offerings, it never launches
    let options = controller::cloud::clouds::CloudOptions::default()
        .enable(&controller::cloud::clouds::CloudName::ALL);
    let providers = controller::cloud::clouds::Clouds::new(options).with_client(client.clone());
    Ok(explain::snapshot(&observed, &providers, time::now()).await)
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("runtime: {e}")))
}

pub(crate) fn print<T: serde::Serialize>(
    output: Output,
    value: &T,
    text: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let s = match output {
        Output::Text => text(),
        Output::Json => {
            serde_json::to_string_pretty(value).map_err(|e| CliError::failed(e.to_string()))? + "\n"
        }
        Output::Yaml => {
            serde_norway::to_string(value).map_err(|e| CliError::failed(e.to_string()))?
        }
    };
    print!("{s}");
    Ok(())
}

/// Runs `muster explain`.
pub fn run_explain(args: ExplainArgs) -> Result<(), CliError> {
    let (tr, notes) = runtime()?.block_on(translation(&args.cluster))?;
    let id = if args.name.contains('/') {
        args.name.clone()
    } else {
        format!("{}/{}", args.namespace, args.name)
    };
    let now = time::now();
    let Some(mut e) = explain::explain(&tr, &Default::default(), now, &id) else {
        return Err(CliError::input(format!(
            "no gang {id}: is the Job labelled muster.dev/queue, and is the controller running?"
        )));
    };
    e.notes = notes;
    print(args.cluster.output, &e, || text(&e))
}

/// The explanation as lines for people.
pub fn text(e: &explain::Explanation) -> String {
    let mut s = format!(
        "Gang:     {}\nQueue:    {}\nState:    {}\nDecision: {}\n",
        e.gang, e.queue, e.state, e.decision
    );
    if let Some(p) = e.position {
        s += &format!("Position: {p}\n");
    }
    if let (Some(r), Some(m)) = (&e.reason, &e.message) {
        s += &format!("Waits:    {r}: {m}\n");
    }
    for u in &e.unblock {
        s += &format!("Unblock:  {u}\n");
    }
    for l in &e.launches {
        s += &format!(
            "Launch:   {} in pool {} at ${:.3}/h\n",
            l.offering, l.pool, l.price_per_hour
        );
    }
    if let (Some(t), Some(g)) = (&e.start_estimate, &e.starts_after) {
        s += &format!("Starts:   about {t}, when {g} ends\n");
    }
    for i in &e.issues {
        s += &format!("Problem:  {i}\n");
    }
    for n in &e.notes {
        s += &format!("Note:     {n}\n");
    }
    s
}

/// Runs `muster queues`.
pub fn run_queues(args: ClusterArgs) -> Result<(), CliError> {
    let (tr, _) = runtime()?.block_on(translation(&args))?;
    let lines = explain::queues(&tr.snapshot);
    print(args.output, &lines, || {
        let mut s = format!(
            "{:<20} {:>7} {:>8} {:>10} {:>10} {:>9}\n",
            "QUEUE", "PENDING", "ADMITTED", "GPUS", "QUOTA", "$/H"
        );
        for l in &lines {
            s += &format!(
                "{:<20} {:>7} {:>8} {:>10} {:>10} {:>9.3}\n",
                l.queue, l.pending, l.admitted, l.gpus_used, l.gpu_quota, l.price_per_hour
            );
        }
        s
    })
}

/// Runs `muster pools`.
pub fn run_pools(args: ClusterArgs) -> Result<(), CliError> {
    let (tr, _) = runtime()?.block_on(translation(&args))?;
    let plan = muster_planner::plan(&tr.snapshot, &Default::default(), time::now());
    let lines = explain::pools(&tr.snapshot, &plan);
    print(args.output, &lines, || pools_table(&lines))
}

/// The text table of `muster pools`: RESERVED is the machines left in the
/// capacity reservations the pool may launch into, ENDS when the first of
/// them ends (`-` when none ends).
fn pools_table(lines: &[explain::PoolLine]) -> String {
    let mut s = format!(
        "{:<20} {:>5} {:>5} {:>9} {:>9} {:>5} {:>7} {:>8} {:<20}\n",
        "POOL", "NODES", "GPUS", "ALLOCATED", "$/H", "WARM", "WARM$/H", "RESERVED", "ENDS"
    );
    for l in lines {
        s += &format!(
            "{:<20} {:>5} {:>5} {:>9} {:>9.3} {:>5} {:>7.3} {:>8} {:<20}\n",
            l.pool,
            l.nodes,
            l.gpus,
            l.gpus_allocated,
            l.price_per_hour,
            l.warm_nodes,
            l.warm_price_per_hour,
            l.reserved,
            l.reserved_ends_at.as_deref().unwrap_or("-")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pools_table_shows_reserved_capacity_and_its_end() {
        let line = |pool: &str, reserved: u64, ends: Option<&str>| explain::PoolLine {
            pool: pool.into(),
            nodes: 2,
            gpus: 16,
            gpus_allocated: 8,
            price_per_hour: 20.0,
            warm_nodes: 1,
            warm_price_per_hour: 10.0,
            reserved,
            reserved_ends_at: ends.map(String::from),
        };
        let table = pools_table(&[
            line("h100", 4, Some("2026-12-01T00:00:00Z")),
            line("l4", 0, None),
        ]);
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(&rows[0][7..], ["RESERVED", "ENDS"]);
        assert_eq!(&rows[1][7..], ["4", "2026-12-01T00:00:00Z"]);
        assert_eq!(&rows[2][7..], ["0", "-"]);
    }
}
