//! `muster controller`: runs the Kubernetes controller.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use muster::controller::{
    self, ControllerConfig, Deps, LeaseConfig, TimingError, base::metrics::Metrics,
};

use super::CliError;

/// Log output format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// A cloud `--cloud` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CloudArg {
    /// Amazon EC2 (NodeClasses with `spec.aws`; needs the `aws` build).
    Aws,
    /// Google Compute Engine (`spec.gcp`; needs the `gcp` build).
    Gcp,
    /// muster's simulated cloud (`spec.sim`): Node objects in this cluster,
    /// no machines behind them.
    Sim,
    /// Karpenter's delegate mode (`spec.karpenter`): Karpenter launches the
    /// nodes muster chooses as NodeClaims (needs the `aws` build).
    Karpenter,
}

impl CloudArg {
    fn name(self) -> controller::cloud::clouds::CloudName {
        match self {
            CloudArg::Aws => controller::cloud::clouds::CloudName::Aws,
            CloudArg::Gcp => controller::cloud::clouds::CloudName::Gcp,
            CloudArg::Sim => controller::cloud::clouds::CloudName::Sim,
            CloudArg::Karpenter => controller::cloud::clouds::CloudName::Karpenter,
        }
    }
}

/// Where the webhook's serving certificate comes from (`--webhook-certs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WebhookCerts {
    /// Files (a mounted Secret written by Helm or cert-manager).
    Files,
    /// Issued and renewed by the controller into a Secret.
    Controller,
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
    /// Cluster name, required: every launched instance is tagged with it,
    /// and orphan collection terminates instances of this name that no
    /// PoolNode records, so it must differ from every other cluster's in
    /// the same cloud account or project.
    #[arg(long, env = "MUSTER_CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// Namespaces to watch (repeat or comma-separate); all when omitted.
    #[arg(long = "namespace", env = "MUSTER_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// Workload kinds run as gangs (comma-separated): job, jobset, pod-group,
    /// trainjob, pytorchjob, raycluster, rayjob, leaderworkerset. A kind
    /// whose CRD is not installed is skipped with one log line.
    #[arg(long, env = "MUSTER_WORKLOAD_KINDS", default_value = "job", value_parser = parse_workload_kinds)]
    pub workload_kinds: WorkloadKinds,
    /// Quiet time after a change before planning (e.g. 200ms).
    #[arg(long, env = "MUSTER_DEBOUNCE", default_value = "200ms", value_parser = parse_duration)]
    pub debounce: Duration,
    /// Plan at least this often (e.g. 30s).
    #[arg(long, env = "MUSTER_TICK", default_value = "30s", value_parser = parse_duration)]
    pub tick: Duration,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "MUSTER_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Serve /metrics only over HTTPS on --metrics-secure-addr, to a bearer
    /// token the API server authenticates (TokenReview) and authorizes for
    /// get on /metrics (SubjectAccessReview); --metrics-addr keeps /healthz
    /// and /readyz.
    #[arg(long, env = "MUSTER_METRICS_SECURE")]
    pub metrics_secure: bool,
    /// Address of /metrics over HTTPS with --metrics-secure (a self-signed
    /// certificate made at start).
    #[arg(
        long,
        env = "MUSTER_METRICS_SECURE_ADDR",
        default_value = "0.0.0.0:8443"
    )]
    pub metrics_secure_addr: SocketAddr,
    /// Log format.
    #[arg(long, env = "MUSTER_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Leader-election Lease name.
    #[arg(long, env = "MUSTER_LEASE_NAME", default_value = "muster-controller")]
    pub lease_name: String,
    /// Leader-election Lease namespace.
    #[arg(long, env = "MUSTER_LEASE_NAMESPACE", default_value = "muster-system")]
    pub lease_namespace: String,
    /// How long a follower waits, after it last saw the Lease change, before
    /// it takes over (e.g. 15s; whole seconds).
    #[arg(long, env = "MUSTER_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renewal (e.g.
    /// 10s); must be shorter than --lease-duration.
    #[arg(long, env = "MUSTER_LEASE_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub lease_renew_deadline: Duration,
    /// How often the leader renews and a follower tries (e.g. 2s); 1.2 × it
    /// must be shorter than --lease-renew-deadline.
    #[arg(long, env = "MUSTER_LEASE_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub lease_retry_period: Duration,
    /// Deadline of every Kubernetes API request but watches (e.g. 4s); with
    /// leader election, shorter than --lease-duration − --lease-renew-deadline.
    #[arg(long, env = "MUSTER_API_TIMEOUT", default_value = "4s", value_parser = parse_duration)]
    pub api_timeout: Duration,
    /// How often instances tagged with the cluster name are checked for
    /// orphans (instances no PoolNode accounts for).
    #[arg(long, env = "MUSTER_ORPHAN_GC_PERIOD", default_value = "5m", value_parser = parse_duration)]
    pub orphan_gc_period: Duration,
    /// How old an instance no PoolNode accounts for must be before it is
    /// terminated.
    #[arg(long, env = "MUSTER_ORPHAN_GRACE", default_value = "10m", value_parser = parse_duration)]
    pub orphan_grace: Duration,
    /// How long a muster node may be Ready without allocatable
    /// `nvidia.com/gpu` before its PoolNode gets the `Initialized=False`
    /// condition and a Warning Event (device plugin, taints, driver).
    #[arg(long, env = "MUSTER_GPU_REGISTRATION_TIMEOUT", default_value = "5m", value_parser = parse_duration)]
    pub gpu_registration_timeout: Duration,
    /// Clouds NodeClasses may launch on (repeat or comma-separate): aws,
    /// gcp, sim. When omitted, every real cloud built into this binary; the
    /// simulated cloud (`sim`, Nodes with no machine behind them, for trying
    /// muster) only when named.
    #[arg(
        long = "cloud",
        env = "MUSTER_CLOUDS",
        value_enum,
        value_delimiter = ','
    )]
    pub clouds: Vec<CloudArg>,
    /// How long an offering that failed with a capacity error (stockout,
    /// quota) is planned as unavailable before it is tried again.
    #[arg(long, env = "MUSTER_UNAVAILABLE_OFFERING_TTL", default_value = "3m", value_parser = parse_duration)]
    pub unavailable_offering_ttl: Duration,
    /// How long before the end of the capacity a node runs on (a Capacity
    /// Block's end) it is drained, its gangs requeued whole. EC2 warns 40
    /// minutes before a block ends and terminates its instances from 30
    /// minutes before.
    #[arg(long, env = "MUSTER_RESERVATION_DRAIN_AHEAD", default_value = "40m", value_parser = parse_duration)]
    pub reservation_drain_ahead: Duration,
    /// How often each cloud's interruption notices are read.
    #[arg(long, env = "MUSTER_INTERRUPTION_POLL", default_value = "5s", value_parser = parse_duration)]
    pub interruption_poll: Duration,
    /// Prometheus API holding the DCGM exporter's `DCGM_FI_DEV_GPU_UTIL`
    /// (e.g. http://prometheus.monitoring:9090); GPUQueues' `idlePolicy`
    /// needs it. Plain HTTP. Idle detection is off without it.
    #[arg(long, env = "MUSTER_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// How often GPU utilisation is read from Prometheus (e.g. 1m).
    #[arg(long, env = "MUSTER_PROMETHEUS_INTERVAL", default_value = "1m", value_parser = parse_duration)]
    pub prometheus_interval: Duration,
    /// Resolution of the utilisation read: one sample per GPU per step
    /// (e.g. 1m; at least the exporter's scrape interval).
    #[arg(long, env = "MUSTER_PROMETHEUS_STEP", default_value = "1m", value_parser = parse_duration)]
    pub prometheus_step: Duration,
    /// Most cloud calls (launches, terminations, offerings listings,
    /// NodeClass resolutions) at once per NodeClass; they run off the
    /// planning path.
    #[arg(long, env = "MUSTER_CLOUD_CONCURRENCY", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub cloud_concurrency: u16,
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
    /// GCP: send no credentials, for an endpoint that takes none (a local
    /// Compute test double); needs --gcp-endpoint.
    #[cfg(feature = "gcp")]
    #[arg(long, env = "MUSTER_GCP_ANONYMOUS", requires = "gcp_endpoint")]
    pub gcp_anonymous: bool,
    /// Address of the admission webhook (HTTPS; it also serves /metrics,
    /// /healthz and /readyz). Off unless set.
    #[arg(long, env = "MUSTER_WEBHOOK_ADDR")]
    pub webhook_addr: Option<SocketAddr>,
    /// Where the webhook's serving certificate comes from: `files`
    /// (--webhook-cert and --webhook-key, e.g. a Secret Helm or cert-manager
    /// writes, mounted) or `controller` (issued and renewed by the leader
    /// into --webhook-cert-secret, its CA patched into
    /// --webhook-config-name, and every replica serves it from memory).
    #[arg(
        long,
        env = "MUSTER_WEBHOOK_CERTS",
        value_enum,
        default_value = "files"
    )]
    pub webhook_certs: WebhookCerts,
    /// PEM certificate chain the webhook serves (read again when it changes).
    #[arg(long, env = "MUSTER_WEBHOOK_CERT", requires = "webhook_addr")]
    pub webhook_cert: Option<std::path::PathBuf>,
    /// PEM private key of --webhook-cert.
    #[arg(long, env = "MUSTER_WEBHOOK_KEY", requires = "webhook_addr")]
    pub webhook_key: Option<std::path::PathBuf>,
    /// With --webhook-certs controller: the Secret (in the Service's
    /// namespace) that holds the CA and the serving certificate.
    #[arg(
        long,
        env = "MUSTER_WEBHOOK_CERT_SECRET",
        default_value = "muster-webhook-tls"
    )]
    pub webhook_cert_secret: String,
    /// With --webhook-certs controller: the MutatingWebhookConfiguration
    /// whose webhooks get the CA bundle.
    #[arg(long, env = "MUSTER_WEBHOOK_CONFIG_NAME", default_value = "muster")]
    pub webhook_config_name: String,
    /// With --webhook-certs controller: the webhook's Service as
    /// NAME.NAMESPACE; the certificate names NAME.NAMESPACE.svc.
    #[arg(
        long,
        env = "MUSTER_WEBHOOK_SERVICE",
        default_value = "muster-webhook.muster-system"
    )]
    pub webhook_service: String,
    /// Namespace label naming the namespace's default queue: the webhook puts
    /// unlabelled Jobs of such a namespace in that queue. Empty turns default
    /// queues off.
    #[arg(
        long,
        env = "MUSTER_DEFAULT_QUEUE_LABEL",
        default_value = "muster.dev/default-queue"
    )]
    pub default_queue_label: String,
    /// Run without leader election (a single replica only).
    #[arg(long)]
    pub no_leader_election: bool,
    /// Identity in the Lease and in Events (default: $POD_NAME or $HOSTNAME).
    #[arg(long, env = "MUSTER_IDENTITY")]
    pub identity: Option<String>,
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
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
    // A planning cycle frees most of what it allocates (the snapshot, the
    // working state); with mimalloc's default purge delay each cycle's
    // peak stayed resident. At 5,000 Nodes and 50,000 Pods the RSS peak
    // over 50 cycles went from 143–151 MiB to 128–134 MiB, at the same
    // event-to-plan latency (docs/benchmarks.md, "Controller at scale").
    muster_alloc::return_freed_memory_at_once();
    init_logging(args.log_format);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("tokio runtime: {e}")))?;
    rt.block_on(run_async(args))
}

/// Resolves on SIGTERM (what Kubernetes sends a pod it stops) or SIGINT.
fn stop_signal() -> Result<impl std::future::Future<Output = ()> + Send, CliError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())
            .map_err(|e| CliError::failed(format!("SIGTERM handler: {e}")))?;
        let mut int = signal(SignalKind::interrupt())
            .map_err(|e| CliError::failed(format!("SIGINT handler: {e}")))?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = int.recv() => tracing::info!("SIGINT received"),
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
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
    let mut config =
        super::kube_config::from_flags(args.kube_url.as_deref(), args.kubeconfig.as_deref())
            .await?;
    // connecting and sending are bounded here; the whole request (answer
    // included, watches excepted) by the controller's own deadline, since a
    // read timeout on the connection would also cut idle watches
    config.connect_timeout = Some(args.api_timeout);
    config.write_timeout = Some(args.api_timeout);
    super::kube_config::client(config)
}

/// The leader-election settings of the flags, checked; `None` without election.
fn lease_config(args: &ControllerArgs) -> Result<Option<LeaseConfig>, CliError> {
    if args.no_leader_election {
        return Ok(None);
    }
    let lease = LeaseConfig {
        duration: args.lease_duration,
        renew_deadline: args.lease_renew_deadline,
        retry_period: args.lease_retry_period,
        ..LeaseConfig::new(args.lease_name.clone(), args.lease_namespace.clone())
    };
    lease.check(args.api_timeout).map_err(|e| {
        let flag = match e {
            TimingError::LeaseDuration => "--lease-duration",
            TimingError::RenewDeadline => "--lease-renew-deadline",
            TimingError::RetryPeriod => "--lease-retry-period",
            TimingError::ApiTimeout => "--api-timeout",
        };
        CliError::input(format!(
            "{flag}: {e} (--lease-duration {:?}, --lease-renew-deadline {:?}, \
             --lease-retry-period {:?}, --api-timeout {:?})",
            args.lease_duration,
            args.lease_renew_deadline,
            args.lease_retry_period,
            args.api_timeout
        ))
    })?;
    Ok(Some(lease))
}

/// How the built-in providers reach their clouds.
fn cloud_options(args: &ControllerArgs) -> controller::cloud::clouds::CloudOptions {
    controller::cloud::clouds::CloudOptions {
        enabled: (!args.clouds.is_empty()).then(|| args.clouds.iter().map(|c| c.name()).collect()),
        #[cfg(feature = "aws")]
        aws: muster_provider_aws::AwsOptions {
            endpoint: args.aws_endpoint.clone(),
            interruption_queue: args.aws_interruption_queue.clone(),
            ..Default::default()
        },
        #[cfg(feature = "gcp")]
        gcp: muster_provider_gcp::GcpOptions {
            endpoint: args.gcp_endpoint.clone(),
            anonymous: args.gcp_anonymous,
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
        ("--api-timeout", args.api_timeout),
        ("--prometheus-interval", args.prometheus_interval),
        ("--prometheus-step", args.prometheus_step),
    ] {
        if d.is_zero() {
            return Err(CliError::input(format!("{flag} must be greater than zero")));
        }
    }
    Ok(())
}

/// The webhook's serving certificate: a rustls configuration, and the
/// settings of the controller-managed certificates when it manages them.
type WebhookTls = (
    rustls::ServerConfig,
    Option<Arc<controller::webhook::managed::Settings>>,
);

/// The webhook's TLS from the flags, checked.
fn webhook_tls(args: &ControllerArgs) -> Result<WebhookTls, CliError> {
    use controller::webhook::managed::Settings;
    use controller::webhook::tls::{CertSlot, FileCert};
    match args.webhook_certs {
        WebhookCerts::Files => {
            let (Some(cert), Some(key)) = (&args.webhook_cert, &args.webhook_key) else {
                return Err(CliError::input(
                    "--webhook-addr with --webhook-certs files needs --webhook-cert and --webhook-key",
                ));
            };
            let tls = FileCert::new(cert.clone(), key.clone())
                .and_then(FileCert::server_config)
                .map_err(|e| CliError::input(format!("--webhook-cert/--webhook-key: {e}")))?;
            Ok((tls, None))
        }
        WebhookCerts::Controller => {
            let (service, namespace) = args
                .webhook_service
                .split_once('.')
                .filter(|(n, ns)| !n.is_empty() && !ns.is_empty() && !ns.contains('.'))
                .ok_or_else(|| {
                    CliError::input(format!(
                        "--webhook-service {}: expected NAME.NAMESPACE",
                        args.webhook_service
                    ))
                })?;
            for (flag, v) in [
                ("--webhook-cert-secret", &args.webhook_cert_secret),
                ("--webhook-config-name", &args.webhook_config_name),
            ] {
                if v.is_empty() {
                    return Err(CliError::input(format!("{flag} must not be empty")));
                }
            }
            let slot = Arc::new(CertSlot::default());
            let tls = slot
                .server_config()
                .map_err(|e| CliError::failed(format!("webhook TLS: {e}")))?;
            let settings = Settings {
                secret: args.webhook_cert_secret.clone(),
                namespace: namespace.to_string(),
                service: service.to_string(),
                config: args.webhook_config_name.clone(),
                policy: Default::default(),
                slot,
            };
            Ok((tls, Some(Arc::new(settings))))
        }
    }
}

/// The webhook's HTTPS server, when --webhook-addr is set, and the
/// settings of the controller-managed certificates when it manages them.
/// How /metrics is served: open, or (with `--metrics-secure`) on an HTTPS
/// listener started here, to authorized bearer tokens only — on that
/// listener and on the webhook's.
async fn metrics_access(
    args: &ControllerArgs,
    client: &kube::Client,
    metrics: &Arc<Metrics>,
) -> Result<controller::http::MetricsAccess, CliError> {
    use controller::http::MetricsAccess;
    if !args.metrics_secure {
        return Ok(MetricsAccess::Open);
    }
    let auth = Arc::new(controller::metrics_auth::MetricsAuth::new(client.clone()));
    let access = MetricsAccess::Authorized(auth);
    let now = controller::base::time::now().0 as i64;
    let names = vec![
        "localhost".to_string(),
        std::env::var("POD_NAME").unwrap_or_else(|_| "muster".to_string()),
    ];
    let tls = controller::http::self_signed_tls(names, now)
        .map_err(|e| CliError::failed(format!("--metrics-secure: certificate: {e}")))?;
    let listener = tokio::net::TcpListener::bind(args.metrics_secure_addr)
        .await
        .map_err(|e| {
            CliError::failed(format!(
                "--metrics-secure-addr {}: {e}",
                args.metrics_secure_addr
            ))
        })?;
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics over HTTPS");
    }
    let app = controller::http::App {
        metrics: metrics.clone(),
        webhook: None,
        metrics_access: access.clone(),
    };
    tokio::spawn(controller::http::serve_tls(listener, Arc::new(tls), app));
    Ok(access)
}

async fn webhook_server(
    args: &ControllerArgs,
    client: &kube::Client,
    metrics: Arc<Metrics>,
    access: controller::http::MetricsAccess,
) -> Result<
    Option<(
        impl std::future::Future<Output = ()> + Send + 'static,
        Option<Arc<controller::webhook::managed::Settings>>,
    )>,
    CliError,
> {
    use controller::webhook::Webhook;
    let Some(addr) = args.webhook_addr else {
        return Ok(None);
    };
    let (tls, managed) = webhook_tls(args)?;
    if managed.is_some() {
        // not Ready for webhook traffic before a certificate is served
        metrics.require_webhook_cert();
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::failed(format!("--webhook-addr {addr}: {e}")))?;
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving the admission webhook");
    }
    let hook = Webhook {
        namespaces: (!args.default_queue_label.is_empty()).then(|| kube::Api::all(client.clone())),
        // only where the controller manages LeaderWorkerSets: it alone
        // releases the pods the webhook gates
        leader_worker_sets: args
            .workload_kinds
            .0
            .contains(&controller::workloads::WorkloadKind::LeaderWorkerSet)
            .then(|| client.clone()),
        default_queue_label: args.default_queue_label.clone(),
        queues: Some(client.clone()),
    };
    let app = controller::http::App {
        metrics,
        webhook: Some(Arc::new(hook)),
        metrics_access: access,
    };
    let server = controller::http::serve_tls(listener, Arc::new(tls), app);
    Ok(Some((server, managed)))
}

/// The required `--cluster-name`: absent or blank is refused with the flag,
/// its environment variable and the chart value that set it, rather than
/// a name shared with other clusters whose instances orphan collection
/// would then terminate. The name must be what the chart's schema accepts
/// (lowercase letters, digits and `-`, at most 63): it is a GCP label value
/// as it is, and on AWS no EC2 filter wildcard (`*`, `?`) that would list
/// other clusters' instances.
fn cluster_name(args: &ControllerArgs) -> Result<String, CliError> {
    match args.cluster_name.as_deref() {
        Some(name) if !name.trim().is_empty() => {
            let edge =
                |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            let inner = name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if name.len() <= 63 && inner && edge(name.chars().next()) && edge(name.chars().last()) {
                Ok(name.to_string())
            } else {
                Err(CliError::input(format!(
                    "--cluster-name {name:?}: lowercase letters, digits and '-', starting and \
                     ending with a letter or digit, at most 63 characters (as the chart's \
                     clusterName)"
                )))
            }
        }
        _ => Err(CliError::input(
            "--cluster-name (env MUSTER_CLUSTER_NAME; the Helm chart's value clusterName) is \
             required: every instance muster launches is tagged with it, and orphan collection \
             terminates the instances of that name no PoolNode records, so it must be this \
             cluster's own name, used by no other cluster of the cloud account or project",
        )),
    }
}

async fn run_async(args: ControllerArgs) -> Result<(), CliError> {
    let cluster = cluster_name(&args)?;
    check_periods(&args)?;
    let lease = lease_config(&args)?;
    let client = client(&args).await?;
    let identity = args
        .identity
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("muster-{}", std::process::id()));
    let mut config = ControllerConfig::new(cluster, identity);
    config.namespaces = args.namespaces.clone();
    config.debounce = args.debounce;
    config.tick = args.tick;
    config.orphan_gc_period = args.orphan_gc_period;
    config.orphan_grace = args.orphan_grace;
    config.interruption_poll = args.interruption_poll;
    config.cloud_concurrency = usize::from(args.cloud_concurrency);
    config.policy.gpu_registration_timeout =
        muster_planner::Dur::secs(args.gpu_registration_timeout.as_secs());
    config.policy.unavailable_offering_ttl =
        muster_planner::Dur::secs(args.unavailable_offering_ttl.as_secs());
    config.policy.reservation_drain_ahead =
        muster_planner::Dur::secs(args.reservation_drain_ahead.as_secs());
    config.api_timeout = args.api_timeout;
    config.workload_kinds = args.workload_kinds.0.clone();
    config.prometheus_url = match &args.prometheus_url {
        Some(u) => Some(
            controller::observe::prometheus::Endpoint::parse(u)
                .map_err(|e| CliError::input(format!("--prometheus-url {u}: {e}")))?
                .to_string(),
        ),
        None => None,
    };
    config.prometheus_interval = args.prometheus_interval;
    config.prometheus_step = args.prometheus_step;
    config.lease = lease;
    let metrics = Arc::new(Metrics::new());
    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .map_err(|e| CliError::failed(format!("--metrics-addr {}: {e}", args.metrics_addr)))?;
    // the bound address, so that `--metrics-addr 127.0.0.1:0` says which port it got
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics and health probes");
    }
    let access = metrics_access(&args, &client, &metrics).await?;
    let plain = if args.metrics_secure {
        controller::http::MetricsAccess::Elsewhere(
            "/metrics is served over HTTPS to an authorized bearer token (--metrics-secure)\n",
        )
    } else {
        access.clone()
    };
    tokio::spawn(controller::http::serve_metrics(
        listener,
        metrics.clone(),
        plain,
    ));
    if let Some((task, managed)) = webhook_server(&args, &client, metrics.clone(), access).await? {
        tokio::spawn(task);
        config.webhook_certs = managed;
    }
    let deps = Deps {
        providers: Arc::new(
            controller::cloud::clouds::Clouds::new(cloud_options(&args))
                .with_client(client.clone()),
        ),
        planner: controller::real_planner(),
        metrics,
    };
    let shutdown = stop_signal()?;
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
        let ms = Duration::from_millis;
        // (lease, renew deadline, retry, api timeout, the flag blamed)
        let cases = [
            (s(15), s(10), s(2), s(4), None),
            (s(3), s(2), ms(500), ms(900), None),
            (ms(500), ms(200), ms(100), ms(100), Some("--lease-duration")),
            (s(10), s(10), s(2), s(1), Some("--lease-renew-deadline")),
            (s(10), s(0), s(2), s(1), Some("--lease-renew-deadline")),
            (s(15), s(10), s(0), s(1), Some("--lease-retry-period")),
            // client-go: renew deadline > 1.2 × retry period
            (s(15), s(6), s(5), s(1), Some("--lease-retry-period")),
            (s(15), s(10), s(2), s(5), Some("--api-timeout")),
            (s(15), s(10), s(2), s(0), Some("--api-timeout")),
        ];
        for (duration, deadline, retry, timeout, blamed) in cases {
            let args = ControllerArgs::parse_from([
                "controller",
                "--lease-duration",
                &format!("{}ms", duration.as_millis()),
                "--lease-renew-deadline",
                &format!("{}ms", deadline.as_millis()),
                "--lease-retry-period",
                &format!("{}ms", retry.as_millis()),
                "--api-timeout",
                &format!("{}ms", timeout.as_millis()),
            ]);
            let got = lease_config(&args);
            match (blamed, got) {
                (None, Ok(Some(lease))) => {
                    assert_eq!(lease.renew_deadline, deadline);
                    assert_eq!(lease.retry_period, retry);
                }
                (Some(flag), Err(e)) => {
                    assert!(e.to_string().starts_with(flag), "{flag}: {e}")
                }
                (want, got) => panic!(
                    "{duration:?}/{deadline:?}/{retry:?}/{timeout:?}: want {want:?}, got {got:?}"
                ),
            }
        }
    }

    #[test]
    fn webhook_certificate_flags_are_checked() {
        // (args, accepted)
        let cases: [(&[&str], bool); 5] = [
            (&["--webhook-certs", "controller"], true),
            (
                &[
                    "--webhook-certs",
                    "controller",
                    "--webhook-service",
                    "muster-webhook",
                ],
                false,
            ),
            (
                &[
                    "--webhook-certs",
                    "controller",
                    "--webhook-service",
                    "a.b.c",
                ],
                false,
            ),
            (
                &["--webhook-certs", "controller", "--webhook-config-name", ""],
                false,
            ),
            (&["--webhook-certs", "files"], false),
        ];
        for (extra, accepted) in cases {
            use clap::Parser;
            let mut argv = vec!["controller", "--webhook-addr", "127.0.0.1:0"];
            argv.extend_from_slice(extra);
            let args = Wrapper::parse_from(argv).args;
            match webhook_tls(&args) {
                Ok((_, managed)) => {
                    assert!(accepted, "{extra:?} accepted");
                    let m = managed.expect("managed settings");
                    assert_eq!(m.dns_name(), "muster-webhook.muster-system.svc");
                    assert_eq!(
                        (m.secret.as_str(), m.config.as_str()),
                        ("muster-webhook-tls", "muster")
                    );
                }
                Err(e) => assert!(!accepted, "{extra:?} refused: {e}"),
            }
        }
    }

    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ControllerArgs,
    }

    impl ControllerArgs {
        fn parse_from<const N: usize>(argv: [&str; N]) -> ControllerArgs {
            use clap::Parser;
            Wrapper::parse_from(argv).args
        }
    }
}

/// The kinds of `--workload-kinds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadKinds(
    pub std::collections::BTreeSet<muster::controller::workloads::WorkloadKind>,
);

fn parse_workload_kinds(s: &str) -> Result<WorkloadKinds, String> {
    muster::controller::workloads::parse_kinds(s).map(WorkloadKinds)
}
