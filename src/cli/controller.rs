//! `muster controller`: runs the Kubernetes controller.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use muster::controller::{self, ControllerConfig, Deps, LeaseConfig, metrics::Metrics};

use super::CliError;

/// Log output format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// Arguments of `muster controller`.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// API server URL (plain HTTP or HTTPS without auth; tests, kubectl proxy).
    /// Without it: --kubeconfig, then in-cluster configuration, then ~/.kube/config.
    #[arg(long, env = "MUSTER_KUBE_URL")]
    pub kube_url: Option<String>,
    /// Kubeconfig file.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Cluster name; launched instances are tagged with it.
    #[arg(long, env = "MUSTER_CLUSTER_NAME", default_value = "muster")]
    pub cluster_name: String,
    /// Namespaces to watch (repeat or comma-separate); all when omitted.
    #[arg(long = "namespace", env = "MUSTER_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// Quiet time after a change before planning (e.g. 200ms).
    #[arg(long, env = "MUSTER_DEBOUNCE", default_value = "200ms", value_parser = parse_duration)]
    pub debounce: Duration,
    /// Plan at least this often (e.g. 30s).
    #[arg(long, env = "MUSTER_TICK", default_value = "30s", value_parser = parse_duration)]
    pub tick: Duration,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "MUSTER_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Log format.
    #[arg(long, env = "MUSTER_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Leader-election Lease name.
    #[arg(long, env = "MUSTER_LEASE_NAME", default_value = "muster-controller")]
    pub lease_name: String,
    /// Leader-election Lease namespace.
    #[arg(long, env = "MUSTER_LEASE_NAMESPACE", default_value = "muster-system")]
    pub lease_namespace: String,
    /// How long a Lease holder leads without renewing (e.g. 15s); a follower
    /// takes over this long after the leader stopped renewing.
    #[arg(long, env = "MUSTER_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How often the leader renews and a follower retries (e.g. 5s); must be
    /// shorter than --lease-duration.
    #[arg(long, env = "MUSTER_LEASE_RETRY_PERIOD", default_value = "5s", value_parser = parse_duration)]
    pub lease_retry_period: Duration,
    /// How often instances tagged with the cluster name are checked for
    /// orphans (instances no PoolNode accounts for).
    #[arg(long, env = "MUSTER_ORPHAN_GC_PERIOD", default_value = "5m", value_parser = parse_duration)]
    pub orphan_gc_period: Duration,
    /// How old an instance no PoolNode accounts for must be before it is
    /// terminated.
    #[arg(long, env = "MUSTER_ORPHAN_GRACE", default_value = "10m", value_parser = parse_duration)]
    pub orphan_grace: Duration,
    /// How often each cloud's interruption notices are read.
    #[arg(long, env = "MUSTER_INTERRUPTION_POLL", default_value = "5s", value_parser = parse_duration)]
    pub interruption_poll: Duration,
    /// AWS: endpoint override for EC2, SQS, EKS and SSM (private endpoints, tests).
    #[cfg(feature = "aws")]
    #[arg(long, env = "MUSTER_AWS_ENDPOINT")]
    pub aws_endpoint: Option<String>,
    /// AWS: URL of the SQS queue EventBridge delivers EC2 interruption events to.
    #[cfg(feature = "aws")]
    #[arg(long, env = "MUSTER_AWS_INTERRUPTION_QUEUE")]
    pub aws_interruption_queue: Option<String>,
    /// GCP: endpoint override for Compute and the GKE API (private endpoints, tests).
    #[cfg(feature = "gcp")]
    #[arg(long, env = "MUSTER_GCP_ENDPOINT")]
    pub gcp_endpoint: Option<String>,
    /// Run without leader election (a single replica only).
    #[arg(long)]
    pub no_leader_election: bool,
    /// Identity in the Lease and in Events (default: $POD_NAME or $HOSTNAME).
    #[arg(long, env = "MUSTER_IDENTITY")]
    pub identity: Option<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Some(ms) = s.strip_suffix("ms") {
        return ms
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| e.to_string());
    }
    muster_planner::Dur::parse(s)
        .map(|d| Duration::from_secs(d.as_secs()))
        .map_err(|e| e.to_string())
}

/// Runs `muster controller`.
pub fn run(args: ControllerArgs) -> Result<(), CliError> {
    init_logging(args.log_format);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("tokio runtime: {e}")))?;
    rt.block_on(run_async(args))
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

async fn client(args: &ControllerArgs) -> Result<kube::Client, CliError> {
    controller::install_crypto_provider();
    let config = if let Some(url) = &args.kube_url {
        let uri = url
            .parse()
            .map_err(|e| CliError::input(format!("--kube-url {url}: {e}")))?;
        kube::Config::new(uri)
    } else if let Some(path) = &args.kubeconfig {
        let kc = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| CliError::input(format!("--kubeconfig {}: {e}", path.display())))?;
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| CliError::input(format!("--kubeconfig {}: {e}", path.display())))?
    } else {
        kube::Config::infer()
            .await
            .map_err(|e| CliError::input(format!("no Kubernetes configuration: {e}")))?
    };
    kube::Client::try_from(config).map_err(|e| CliError::failed(format!("kube client: {e}")))
}

/// Checks the leader-election timings: a holder must renew well before its
/// Lease expires.
fn check_lease_timing(duration: Duration, retry: Duration) -> Result<(), CliError> {
    if duration < Duration::from_secs(1) {
        return Err(CliError::input(format!(
            "--lease-duration {duration:?}: must be at least 1s (the Lease counts whole seconds)"
        )));
    }
    if retry.is_zero() || retry >= duration {
        return Err(CliError::input(format!(
            "--lease-retry-period {retry:?} must be greater than zero and shorter than \
             --lease-duration {duration:?}"
        )));
    }
    Ok(())
}

/// How the built-in providers reach their clouds.
fn cloud_options(args: &ControllerArgs) -> controller::clouds::CloudOptions {
    let _ = args;
    controller::clouds::CloudOptions {
        #[cfg(feature = "aws")]
        aws: muster_provider_aws::AwsOptions {
            endpoint: args.aws_endpoint.clone(),
            interruption_queue: args.aws_interruption_queue.clone(),
            ..Default::default()
        },
        #[cfg(feature = "gcp")]
        gcp: muster_provider_gcp::GcpOptions {
            endpoint: args.gcp_endpoint.clone(),
            ..Default::default()
        },
    }
}

/// Checks that periodic steps have a period.
fn check_periods(args: &ControllerArgs) -> Result<(), CliError> {
    for (flag, d) in [
        ("--tick", args.tick),
        ("--orphan-gc-period", args.orphan_gc_period),
        ("--interruption-poll", args.interruption_poll),
    ] {
        if d.is_zero() {
            return Err(CliError::input(format!("{flag} must be greater than zero")));
        }
    }
    Ok(())
}

async fn run_async(args: ControllerArgs) -> Result<(), CliError> {
    check_periods(&args)?;
    if !args.no_leader_election {
        check_lease_timing(args.lease_duration, args.lease_retry_period)?;
    }
    let client = client(&args).await?;
    let identity = args
        .identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("muster-{}", std::process::id()));
    let mut config = ControllerConfig::new(args.cluster_name.clone(), identity);
    config.namespaces = args.namespaces.clone();
    config.debounce = args.debounce;
    config.tick = args.tick;
    config.orphan_gc_period = args.orphan_gc_period;
    config.orphan_grace = args.orphan_grace;
    config.interruption_poll = args.interruption_poll;
    if !args.no_leader_election {
        config.lease = Some(LeaseConfig {
            name: args.lease_name.clone(),
            namespace: args.lease_namespace.clone(),
            duration: args.lease_duration,
            renew_every: args.lease_retry_period,
        });
    }
    let metrics = Arc::new(Metrics::new());
    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .map_err(|e| CliError::failed(format!("--metrics-addr {}: {e}", args.metrics_addr)))?;
    tokio::spawn(controller::metrics::serve(listener, metrics.clone()));
    let deps = Deps {
        providers: Arc::new(controller::clouds::Clouds::new(cloud_options(&args))),
        planner: controller::real_planner(),
        metrics,
    };
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    controller::run(client, config, deps, shutdown)
        .await
        .map_err(|e| CliError::failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_timing_is_validated() {
        let s = Duration::from_secs;
        let cases = [
            (s(15), s(5), true),
            (s(2), s(1), true),
            (s(5), s(5), false),
            (s(5), s(10), false),
            (s(5), s(0), false),
            (
                Duration::from_millis(500),
                Duration::from_millis(100),
                false,
            ),
        ];
        for (duration, retry, ok) in cases {
            let got = check_lease_timing(duration, retry);
            assert_eq!(got.is_ok(), ok, "{duration:?} / {retry:?}: {got:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains("--lease-"), "{e}");
            }
        }
    }
}
