//! Prometheus metrics (OpenMetrics text via `prometheus-client`) and the
//! `/metrics`, `/healthz`, `/readyz` endpoint (served by [`crate::controller::http`]). Labels are bounded: queue,
//! pool, phase, capacity_type, reason, result.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

/// Labels of the gangs gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GangLabels {
    /// GPUQueue.
    pub(crate) queue: String,
    /// Gang phase.
    pub(crate) phase: String,
}

/// Labels of the launches counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LaunchLabels {
    /// Pool.
    pub(crate) pool: String,
    /// `spot` or `on-demand`.
    pub(crate) capacity_type: String,
    /// `Launched` or a provider error category.
    pub(crate) result: String,
}

/// Labels of per-queue metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QueueLabels {
    /// GPUQueue.
    pub(crate) queue: String,
}

/// Labels of per-pool metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PoolLabels {
    /// GPUPool.
    pub(crate) pool: String,
}

/// Labels of the idle gangs gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct IdleLabels {
    /// GPUQueue.
    pub(crate) queue: String,
    /// `GPUsIdle`, `IdleRequeued` or `IdleStopped`.
    pub reason: String,
}

/// Labels of counters by kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabels {
    /// A bounded kind (an enum variant name).
    pub(crate) kind: String,
}

/// Labels of counters by reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    /// A bounded reason (an enum variant name).
    pub reason: String,
}

/// What kind of metric a [`MetricDoc`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Monotonic counter (exposed with a `_total` suffix).
    Counter,
    /// Value that goes up and down.
    Gauge,
    /// Distribution in buckets.
    Histogram,
}

impl MetricKind {
    /// The OpenMetrics type name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One metric's name, type, help and label names: the single source both
/// registration and the generated reference read.
#[derive(Clone, Copy, Debug)]
pub struct MetricDoc {
    /// Name without the `muster_` prefix and without `_total`.
    pub name: &'static str,
    /// Type.
    pub kind: MetricKind,
    /// Help text.
    pub help: &'static str,
    /// Label names.
    pub labels: &'static [&'static str],
}

/// Every metric the controller exports, in registration order.
pub const METRICS: &[MetricDoc] = &[
    MetricDoc {
        name: "gangs",
        kind: MetricKind::Gauge,
        help: "Gangs by queue and phase",
        labels: &["queue", "phase"],
    },
    MetricDoc {
        name: "planner_duration_seconds",
        kind: MetricKind::Histogram,
        help: "Time one planning call took",
        labels: &[],
    },
    MetricDoc {
        name: "launches",
        kind: MetricKind::Counter,
        help: "Cloud launch calls by pool, capacity type and result category",
        labels: &["pool", "capacity_type", "result"],
    },
    MetricDoc {
        name: "admission_wait_seconds",
        kind: MetricKind::Histogram,
        help: "Seconds from a gang's arrival to its admission, observed once per admission",
        labels: &["queue"],
    },
    MetricDoc {
        name: "pool_gpus",
        kind: MetricKind::Gauge,
        help: "GPUs of the pool's Ready nodes",
        labels: &["pool"],
    },
    MetricDoc {
        name: "pool_allocated_gpus",
        kind: MetricKind::Gauge,
        help: "GPUs of the pool assigned to admitted or running gangs",
        labels: &["pool"],
    },
    MetricDoc {
        name: "pool_busy_gpus",
        kind: MetricKind::Gauge,
        help: "GPUs of the pool requested by gangs whose pods all run",
        labels: &["pool"],
    },
    MetricDoc {
        name: "pool_cost_dollars_per_hour",
        kind: MetricKind::Gauge,
        help: "Sum of the hourly prices of the pool's nodes, launched or in flight",
        labels: &["pool"],
    },
    MetricDoc {
        name: "evictions",
        kind: MetricKind::Counter,
        help: "Gangs evicted by reason",
        labels: &["reason"],
    },
    MetricDoc {
        name: "preemptions",
        kind: MetricKind::Counter,
        help: "Gangs preempted by the planner by reason",
        labels: &["reason"],
    },
    MetricDoc {
        name: "idle_node_seconds",
        kind: MetricKind::Counter,
        help: "Seconds the pool's Ready nodes ran with no pods, summed over nodes",
        labels: &["pool"],
    },
    MetricDoc {
        name: "gpu_hours",
        kind: MetricKind::Counter,
        help: "GPU-hours held by admitted and running gangs of the queue",
        labels: &["queue"],
    },
    MetricDoc {
        name: "gpu_hours_busy",
        kind: MetricKind::Counter,
        help: "GPU-hours held by gangs of the queue whose pods all run",
        labels: &["queue"],
    },
    MetricDoc {
        name: "queue_cost_dollars_per_hour",
        kind: MetricKind::Gauge,
        help: "Hourly price of the nodes the queue's gangs hold now; a shared node is split by the GPUs each gang requests on it",
        labels: &["queue"],
    },
    MetricDoc {
        name: "queue_cost_dollars",
        kind: MetricKind::Counter,
        help: "Dollars of node time the queue's gangs held (queue_cost_dollars_per_hour integrated over time)",
        labels: &["queue"],
    },
    MetricDoc {
        name: "orphans_terminated",
        kind: MetricKind::Counter,
        help: "Cloud instances tagged for this cluster that no PoolNode accounts for, terminated by orphan collection",
        labels: &[],
    },
    MetricDoc {
        name: "interruptions",
        kind: MetricKind::Counter,
        help: "Interruption notices from the clouds that named a PoolNode, by kind",
        labels: &["kind"],
    },
    MetricDoc {
        name: "idle_gangs",
        kind: MetricKind::Gauge,
        help: "Running gangs whose GPUs stayed below their queue's idlePolicy threshold for its window, by queue and action",
        labels: &["queue", "reason"],
    },
    MetricDoc {
        name: "gpu_utilization_up",
        kind: MetricKind::Gauge,
        help: "1 when the last read of DCGM_FI_DEV_GPU_UTIL from --prometheus-url succeeded; 0 when it failed (no gang is then judged idle) or none was made (no --prometheus-url, or no queue with an idlePolicy)",
        labels: &[],
    },
    MetricDoc {
        name: "gpu_utilization_errors",
        kind: MetricKind::Counter,
        help: "Failed reads of GPU utilisation from Prometheus, by reason",
        labels: &["reason"],
    },
    MetricDoc {
        name: "planning_cycles",
        kind: MetricKind::Counter,
        help: "Planning cycles run",
        labels: &[],
    },
    MetricDoc {
        name: "leader",
        kind: MetricKind::Gauge,
        help: "1 while this instance holds the leader Lease",
        labels: &[],
    },
];

/// The help text of the metric `name` in [`METRICS`].
fn help(name: &str) -> &'static str {
    METRICS
        .iter()
        .find(|m| m.name == name)
        .map_or("", |m| m.help)
}

/// Registers `metric` under `name` with its help text from [`METRICS`].
fn add<M: Metric + Clone>(registry: &mut Registry, name: &'static str, metric: M) -> M {
    registry.register(name, help(name), metric.clone());
    metric
}

/// Buckets of the admission wait: one second to about two days.
fn wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 3.0, 12))
}

/// A floating-point gauge.
pub(crate) type FloatGauge = Gauge<f64, AtomicU64>;
/// A floating-point counter.
pub(crate) type FloatCounter = Counter<f64, AtomicU64>;

/// Every metric of the controller, plus health flags.
pub struct Metrics {
    registry: Registry,
    /// Gangs by queue and phase.
    pub(crate) gangs: Family<GangLabels, Gauge>,
    /// Seconds one `plan()` call took.
    pub(crate) plan_duration: Histogram,
    /// Cloud launch calls by result category.
    pub(crate) launches: Family<LaunchLabels, Counter>,
    /// Seconds from arrival to admission, per queue.
    pub(crate) admission_wait: Family<QueueLabels, Histogram>,
    /// GPUs of Ready nodes per pool.
    pub(crate) pool_gpus: Family<PoolLabels, Gauge>,
    /// GPUs assigned to admitted or running gangs per pool.
    pub(crate) pool_allocated_gpus: Family<PoolLabels, Gauge>,
    /// GPUs requested by running gangs per pool.
    pub(crate) pool_busy_gpus: Family<PoolLabels, Gauge>,
    /// Hourly price of the pool's nodes.
    pub(crate) pool_cost: Family<PoolLabels, FloatGauge>,
    /// Gang evictions by reason.
    pub(crate) evictions: Family<ReasonLabels, Counter>,
    /// Planner preemptions by reason.
    pub(crate) preemptions: Family<ReasonLabels, Counter>,
    /// Node-seconds without pods per pool.
    pub(crate) idle_node_seconds: Family<PoolLabels, FloatCounter>,
    /// GPU-hours of admitted gangs per queue.
    pub(crate) gpu_hours: Family<QueueLabels, FloatCounter>,
    /// GPU-hours of running gangs per queue.
    pub(crate) gpu_hours_busy: Family<QueueLabels, FloatCounter>,
    /// Hourly price of the nodes each queue's gangs hold.
    pub(crate) queue_cost: Family<QueueLabels, FloatGauge>,
    /// Dollars per queue, accumulated.
    pub(crate) queue_dollars: Family<QueueLabels, FloatCounter>,
    /// Orphaned instances terminated.
    pub(crate) orphans_terminated: Counter,
    /// Interruption notices by kind.
    pub(crate) interruptions: Family<KindLabels, Counter>,
    /// Idle gangs by queue and reason.
    pub(crate) idle_gangs: Family<IdleLabels, Gauge>,
    /// Whether the last utilisation read succeeded.
    pub(crate) gpu_utilization_up: Gauge,
    /// Failed utilisation reads by reason.
    pub(crate) gpu_utilization_errors: Family<ReasonLabels, Counter>,
    /// Planning cycles run.
    pub(crate) cycles: Counter,
    /// 1 while this instance holds the leader Lease.
    pub(crate) leader: Gauge,
    synced: AtomicBool,
    /// The webhook's certificate is read from the API server and has not
    /// been loaded yet (controller-managed certificates).
    webhook_cert_pending: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("muster");
        let r = &mut registry;
        let gangs = add(r, "gangs", Family::<GangLabels, Gauge>::default());
        let plan_duration = add(
            r,
            "planner_duration_seconds",
            Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
        );
        let launches = add(r, "launches", Family::<LaunchLabels, Counter>::default());
        let admission_wait = add(
            r,
            "admission_wait_seconds",
            Family::<QueueLabels, Histogram>::new_with_constructor(wait_histogram as fn() -> _),
        );
        let pool_gpus = add(r, "pool_gpus", Family::<PoolLabels, Gauge>::default());
        let pool_allocated_gpus = add(r, "pool_allocated_gpus", Family::default());
        let pool_busy_gpus = add(r, "pool_busy_gpus", Family::default());
        let pool_cost = add(r, "pool_cost_dollars_per_hour", Family::default());
        let evictions = add(r, "evictions", Family::default());
        let preemptions = add(r, "preemptions", Family::default());
        let idle_node_seconds = add(r, "idle_node_seconds", Family::default());
        let gpu_hours = add(r, "gpu_hours", Family::default());
        let gpu_hours_busy = add(r, "gpu_hours_busy", Family::default());
        let queue_cost = add(r, "queue_cost_dollars_per_hour", Family::default());
        let queue_dollars = add(r, "queue_cost_dollars", Family::default());
        let orphans_terminated = add(r, "orphans_terminated", Counter::default());
        let interruptions = add(r, "interruptions", Family::default());
        let idle_gangs = add(r, "idle_gangs", Family::default());
        let gpu_utilization_up = add(r, "gpu_utilization_up", Gauge::default());
        let gpu_utilization_errors = add(r, "gpu_utilization_errors", Family::default());
        let cycles = add(r, "planning_cycles", Counter::default());
        let leader = add(r, "leader", Gauge::default());
        Metrics {
            registry,
            gangs,
            plan_duration,
            launches,
            admission_wait,
            pool_gpus,
            pool_allocated_gpus,
            pool_busy_gpus,
            pool_cost,
            evictions,
            preemptions,
            idle_node_seconds,
            gpu_hours,
            gpu_hours_busy,
            queue_cost,
            queue_dollars,
            orphans_terminated,
            interruptions,
            idle_gangs,
            gpu_utilization_up,
            gpu_utilization_errors,
            cycles,
            leader,
            synced: AtomicBool::new(false),
            webhook_cert_pending: AtomicBool::new(false),
        }
    }

    /// Marks the watch caches synced (readiness).
    pub(crate) fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// True once the caches synced.
    pub(crate) fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// Holds readiness until [`Metrics::set_webhook_cert_loaded`]: the
    /// webhook serves a certificate it reads from the API server.
    pub fn require_webhook_cert(&self) {
        self.webhook_cert_pending.store(true, Ordering::Relaxed);
    }

    /// The webhook serves a certificate.
    pub(crate) fn set_webhook_cert_loaded(&self) {
        self.webhook_cert_pending.store(false, Ordering::Relaxed);
    }

    /// Why this replica is not Ready, if it is not: caches not synced, or
    /// no webhook certificate yet.
    pub(crate) fn not_ready(&self) -> Option<&'static str> {
        if !self.synced() {
            Some("caches not synced\n")
        } else if self.webhook_cert_pending.load(Ordering::Relaxed) {
            Some("no webhook serving certificate yet\n")
        } else {
            None
        }
    }

    /// The OpenMetrics exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The Markdown reference of every metric (`docs/reference/metrics.md`).
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         Generated from `src/controller/base/metrics.rs` by \
         `cargo test --features controller --test references` \
         (`MUSTER_BLESS=1` rewrites it). Served as OpenMetrics text on `/metrics` of \
         `muster controller --metrics-addr`. Counters carry the `_total` suffix on the wire; \
         histograms expose `_bucket`, `_sum` and `_count`. Labels are bounded: never an \
         object name.\n\n\
         | metric | type | labels | help |\n|---|---|---|---|\n",
    );
    for m in METRICS {
        let wire = match m.kind {
            MetricKind::Counter => format!("muster_{}_total", m.name),
            _ => format!("muster_{}", m.name),
        };
        let labels = if m.labels.is_empty() {
            "-".to_string()
        } else {
            m.labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| `{wire}` | {} | {labels} | {} |\n",
            m.kind.as_str(),
            m.help
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every registered metric is described in [`METRICS`] with its type and
    /// help, and every description is registered: the reference cannot drift.
    #[test]
    fn registry_matches_descriptions() {
        let m = Metrics::new();
        // give every family one series so its labels show
        m.gangs
            .get_or_create(&GangLabels {
                queue: "q".into(),
                phase: "Running".into(),
            })
            .set(1);
        m.launches
            .get_or_create(&LaunchLabels {
                pool: "p".into(),
                capacity_type: "spot".into(),
                result: "Launched".into(),
            })
            .inc();
        let q = QueueLabels { queue: "q".into() };
        let p = PoolLabels { pool: "p".into() };
        let r = ReasonLabels {
            reason: "PodsReadyTimeout".into(),
        };
        m.admission_wait.get_or_create(&q).observe(3.0);
        m.pool_gpus.get_or_create(&p).set(8);
        m.pool_allocated_gpus.get_or_create(&p).set(8);
        m.pool_busy_gpus.get_or_create(&p).set(8);
        m.pool_cost.get_or_create(&p).set(1.5);
        m.evictions.get_or_create(&r).inc();
        m.preemptions.get_or_create(&r).inc();
        m.idle_node_seconds.get_or_create(&p).inc_by(2.0);
        m.gpu_hours.get_or_create(&q).inc_by(0.5);
        m.gpu_hours_busy.get_or_create(&q).inc_by(0.5);
        m.queue_cost.get_or_create(&q).set(1.5);
        m.queue_dollars.get_or_create(&q).inc_by(0.75);
        m.orphans_terminated.inc();
        m.interruptions
            .get_or_create(&KindLabels {
                kind: "SpotInterruption".into(),
            })
            .inc();
        m.idle_gangs
            .get_or_create(&IdleLabels {
                queue: "q".into(),
                reason: "GPUsIdle".into(),
            })
            .set(1);
        m.gpu_utilization_errors.get_or_create(&r).inc();
        let text = m.encode();
        let mut registered = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE muster_") {
                let (name, kind) = rest.split_once(' ').expect("type line");
                registered.push((name.to_string(), kind.to_string()));
            }
        }
        let described: Vec<(String, String)> = METRICS
            .iter()
            .map(|d| (d.name.to_string(), d.kind.as_str().to_string()))
            .collect();
        assert_eq!(registered, described);
        for d in METRICS {
            assert!(
                text.contains(&format!("# HELP muster_{} {}.", d.name, d.help))
                    || text.contains(&format!("# HELP muster_{} {}\n", d.name, d.help)),
                "help of {} not exported as described",
                d.name
            );
            let sample = text
                .lines()
                .find(|l| l.starts_with(&format!("muster_{}", d.name)) && !l.starts_with('#'))
                .unwrap_or_else(|| panic!("no sample of {}", d.name));
            for label in d.labels {
                assert!(
                    sample.contains(&format!("{label}=\"")),
                    "{} lacks label {label}: {sample}",
                    d.name
                );
            }
        }
    }
}
