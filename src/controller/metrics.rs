//! Prometheus metrics (OpenMetrics text via `prometheus-client`) and the
//! `/metrics`, `/healthz`, `/readyz` endpoint. Labels are bounded: queue,
//! pool, phase, capacity_type, reason, result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Labels of the gangs gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GangLabels {
    /// GPUQueue.
    pub queue: String,
    /// Gang phase.
    pub phase: String,
}

/// Labels of the launches counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaunchLabels {
    /// Pool.
    pub pool: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// `Launched` or a provider error category.
    pub result: String,
}

/// Every metric of the controller, plus health flags.
pub struct Metrics {
    registry: Registry,
    /// Gangs by queue and phase.
    pub gangs: Family<GangLabels, Gauge>,
    /// Seconds one `plan()` call took.
    pub plan_duration: Histogram,
    /// Cloud launch calls by result category.
    pub launches: Family<LaunchLabels, Counter>,
    /// Planning cycles run.
    pub cycles: Counter,
    /// 1 while this instance holds the leader Lease.
    pub leader: Gauge,
    synced: AtomicBool,
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
        let gangs = Family::<GangLabels, Gauge>::default();
        registry.register("gangs", "Gangs by queue and phase", gangs.clone());
        let plan_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        registry.register(
            "planner_duration_seconds",
            "Time one planning call took",
            plan_duration.clone(),
        );
        let launches = Family::<LaunchLabels, Counter>::default();
        registry.register(
            "launches",
            "Cloud launch calls by pool, capacity type and result category",
            launches.clone(),
        );
        let cycles = Counter::default();
        registry.register("planning_cycles", "Planning cycles run", cycles.clone());
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this instance holds the leader Lease",
            leader.clone(),
        );
        Metrics {
            registry,
            gangs,
            plan_duration,
            launches,
            cycles,
            leader,
            synced: AtomicBool::new(false),
        }
    }

    /// Marks the watch caches synced (readiness).
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// True once the caches synced.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
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

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` (HTTP/1.1, one
/// request per connection) until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            // read the whole request head: closing a socket with unread bytes
            // resets the connection and the client may lose the response
            let mut buf = Vec::with_capacity(1024);
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf);
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            let (status, ctype, body) = match path {
                "/metrics" => (
                    "200 OK",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    metrics.encode(),
                ),
                "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" if metrics.synced() => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "caches not synced\n".to_string(),
                ),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}
