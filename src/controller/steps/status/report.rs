//! Computes the per-cycle metrics from the snapshot and the plan, in one
//! place, after the planning loop acted: pool GPUs (total, allocated, busy),
//! pool cost, admission waits, preemptions, idle node-seconds and GPU-hours.
//! It observes only; no decision reads these figures.

use std::collections::BTreeMap;
use std::sync::Mutex;

use muster_planner::{GangPhase, Node, NodePhase, Plan, Snapshot, Time};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{Atomic, Gauge};

use crate::controller::base::metrics::{
    FloatCounter, Metrics, PoolLabels, QueueLabels, ReasonLabels,
};

/// What one cycle adds to the metrics; a pure function of its inputs.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Figures {
    /// Per pool: GPUs of Ready nodes.
    pub(crate) pool_gpus: BTreeMap<String, i64>,
    /// Per pool: GPUs assigned to Admitted or Running gangs.
    pub(crate) pool_allocated: BTreeMap<String, i64>,
    /// Per pool: GPUs requested by Running gangs.
    pub(crate) pool_busy: BTreeMap<String, i64>,
    /// Per pool: dollars per hour of its nodes (any phase but Terminating).
    pub(crate) pool_cost: BTreeMap<String, f64>,
    /// Per queue: seconds waited by each gang the plan admits.
    pub(crate) admission_waits: Vec<(String, f64)>,
    /// Preemption reasons of the plan.
    pub(crate) preemptions: Vec<String>,
    /// Per pool: node-seconds without pods since the previous report.
    pub(crate) idle_node_seconds: BTreeMap<String, f64>,
    /// Per queue: GPU-hours held since the previous report.
    pub(crate) gpu_hours: BTreeMap<String, f64>,
    /// Per queue: GPU-hours of gangs whose pods all run, since the previous
    /// report.
    pub(crate) gpu_hours_busy: BTreeMap<String, f64>,
    /// Per queue: dollars per hour of the nodes its gangs hold now
    /// (see [`queue_cost`]).
    pub(crate) queue_cost: BTreeMap<String, f64>,
    /// Per queue: dollars spent since the previous report (`queue_cost` ×
    /// elapsed hours).
    pub(crate) queue_dollars: BTreeMap<String, f64>,
    /// Per queue: GPU-hours held over the last 24 hours (filled by
    /// [`report`] from its [`HourWindow`]).
    pub(crate) gpu_hours_24h: BTreeMap<String, f64>,
    /// Per queue: the hourly buckets behind `gpu_hours_24h` (start of the
    /// hour in unix seconds, GPU-hours), oldest first.
    pub(crate) gpu_hours_by_hour: BTreeMap<String, Vec<(i64, f64)>>,
}

/// GPU-hours per queue in hourly buckets, for "the last 24 hours". The
/// buckets are written to each GPUQueue's `status.gpuHoursByHour` and
/// merged back ([`HourWindow::merge`]) every cycle, so a new leader or a
/// restarted controller goes on from what the previous one counted.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct HourWindow {
    buckets: BTreeMap<String, BTreeMap<i64, f64>>,
}

impl HourWindow {
    /// Adds `amounts` to the hour of `now` and forgets hours older than 24.
    pub(crate) fn add(&mut self, now: Time, amounts: &BTreeMap<String, f64>) {
        let hour = now.0.div_euclid(3600);
        for (q, v) in amounts {
            *self
                .buckets
                .entry(q.clone())
                .or_default()
                .entry(hour)
                .or_default() += v;
        }
        for b in self.buckets.values_mut() {
            b.retain(|h, _| *h > hour - 24);
        }
    }

    /// Takes `hours` in the hour starting at `hour_start` (unix seconds) for
    /// `queue` where it is more than this window holds: a bucket only grows
    /// within its hour, so the larger count is the later one (another
    /// leader's, or this instance's own written earlier).
    pub(crate) fn merge(&mut self, queue: &str, hour_start: i64, hours: f64, now: Time) {
        let hour = hour_start.div_euclid(3600);
        if hour <= now.0.div_euclid(3600) - 24 || !hours.is_finite() || hours < 0.0 {
            return;
        }
        let b = self
            .buckets
            .entry(queue.to_string())
            .or_default()
            .entry(hour)
            .or_default();
        if hours > *b {
            *b = hours;
        }
    }

    /// The buckets of every queue: (start of the hour in unix seconds,
    /// GPU-hours), oldest first.
    pub(crate) fn buckets(&self) -> BTreeMap<String, Vec<(i64, f64)>> {
        self.buckets
            .iter()
            .map(|(q, b)| (q.clone(), b.iter().map(|(h, v)| (h * 3600, *v)).collect()))
            .collect()
    }

    /// The sum per queue over the current hour and the 23 before it.
    pub(crate) fn total(&self) -> BTreeMap<String, f64> {
        self.buckets
            .iter()
            .map(|(q, b)| (q.clone(), b.values().sum()))
            .collect()
    }
}

/// Dollars per hour per queue of the nodes its gangs hold now. A node
/// (launched or in flight, not Terminating) costs its offering's price; the
/// price is split across the gangs holding capacity on it (Provisioning,
/// Admitted, Running) in proportion to the GPUs their pods there request
/// (equally when none requests GPUs); a node held for a gang with no pod
/// placed yet is that gang's. A node nobody holds is charged to no queue
/// (it shows in the pool's cost).
pub(crate) fn queue_cost(snapshot: &Snapshot) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = snapshot
        .queues
        .iter()
        .map(|q| (q.name.clone(), 0.0))
        .collect();
    for node in &snapshot.nodes {
        if !billed(node) {
            continue;
        }
        let Some(price) = node.price.map(|p| p.usd()) else {
            continue;
        };
        // (queue, GPUs its gang requests on this node), per holding gang
        let mut shares: Vec<(&str, u64)> = Vec::new();
        for g in snapshot.gangs.iter().filter(|g| g.phase.holds_capacity()) {
            let on_node: Vec<_> = g
                .assignments
                .iter()
                .filter(|a| a.node == node.name)
                .collect();
            if on_node.is_empty() {
                continue;
            }
            let gpus = on_node
                .iter()
                .map(|a| g.pod_set(&a.pod_set).map_or(0, |s| s.requests.gpus_ceil()))
                .sum();
            shares.push((g.queue.as_str(), gpus));
        }
        if shares.is_empty()
            && let Some(holder) = node.reserved_for.as_ref()
            && let Some(g) = snapshot.gangs.iter().find(|g| &g.id == holder)
        {
            shares.push((g.queue.as_str(), 0));
        }
        let total: u64 = shares.iter().map(|(_, gpus)| gpus).sum();
        for (queue, gpus) in &shares {
            let part = if total == 0 {
                1.0 / shares.len() as f64
            } else {
                *gpus as f64 / total as f64
            };
            *out.entry((*queue).to_string()).or_default() += price * part;
        }
    }
    out
}

/// Whether a node costs money now, the one rule behind the pool and the
/// queue figures: a pool's node does, at its offering's price, while it is
/// launched or in flight (any phase but Terminating).
fn billed(node: &Node) -> bool {
    node.phase != NodePhase::Terminating && node.pool.is_some()
}

/// The figures of one cycle; `elapsed` is the seconds since the previous
/// report (0 on the first).
pub(crate) fn figures(snapshot: &Snapshot, plan: &Plan, now: Time, elapsed: f64) -> Figures {
    let mut f = Figures::default();
    let mut node_pool: BTreeMap<&str, &str> = BTreeMap::new();
    for pool in &snapshot.pools {
        f.pool_gpus.insert(pool.name.clone(), 0);
        f.pool_allocated.insert(pool.name.clone(), 0);
        f.pool_busy.insert(pool.name.clone(), 0);
        f.pool_cost.insert(pool.name.clone(), 0.0);
        f.idle_node_seconds.insert(pool.name.clone(), 0.0);
    }
    for node in &snapshot.nodes {
        let Some(pool) = node.pool.as_deref() else {
            continue;
        };
        node_pool.insert(node.name.as_str(), pool);
        if billed(node) {
            *f.pool_cost.entry(pool.to_string()).or_default() +=
                node.price.map_or(0.0, |p| p.usd());
        }
        if node.phase == NodePhase::Ready {
            *f.pool_gpus.entry(pool.to_string()).or_default() +=
                i64::try_from(node.allocatable.gpus_ceil()).unwrap_or(i64::MAX);
            if node.empty_since.is_some() && node.reserved_for.is_none() {
                *f.idle_node_seconds.entry(pool.to_string()).or_default() += elapsed;
            }
        }
    }
    for gang in &snapshot.gangs {
        let held = matches!(gang.phase, GangPhase::Admitted | GangPhase::Running);
        if !held {
            continue;
        }
        let mut gpus_total = 0u64;
        for a in &gang.assignments {
            let gpus = gang
                .pod_set(&a.pod_set)
                .map_or(0, |s| s.requests.gpus_ceil());
            gpus_total += gpus;
            let Some(pool) = node_pool.get(a.node.as_str()) else {
                continue;
            };
            let gpus = i64::try_from(gpus).unwrap_or(i64::MAX);
            *f.pool_allocated.entry(pool.to_string()).or_default() += gpus;
            if gang.phase == GangPhase::Running {
                *f.pool_busy.entry(pool.to_string()).or_default() += gpus;
            }
        }
        *f.gpu_hours.entry(gang.queue.clone()).or_default() += gpus_total as f64 * elapsed / 3600.0;
        if gang.phase == GangPhase::Running {
            *f.gpu_hours_busy.entry(gang.queue.clone()).or_default() +=
                gpus_total as f64 * elapsed / 3600.0;
        }
    }
    f.queue_cost = queue_cost(snapshot);
    f.queue_dollars = f
        .queue_cost
        .iter()
        .map(|(q, per_hour)| (q.clone(), per_hour * elapsed / 3600.0))
        .collect();
    let gangs: BTreeMap<_, _> = snapshot.gangs.iter().map(|g| (&g.id, g)).collect();
    for adm in &plan.admissions {
        if let Some(g) = gangs.get(&adm.gang) {
            let waited = (now.0 - g.arrival.0).max(0) as f64;
            f.admission_waits.push((g.queue.clone(), waited));
        }
    }
    f.preemptions = plan
        .preemptions
        .iter()
        .map(|p| p.reason.as_str().to_string())
        .collect();
    f
}

/// The report step's memory between cycles: when it last reported (for the
/// counters that accumulate over elapsed time) and the 24-hour window of
/// GPU-hours per queue.
#[derive(Debug, Default)]
pub(crate) struct Reporter {
    last: Mutex<Option<i64>>,
    window: Mutex<HourWindow>,
}

impl Reporter {
    /// Merges the hourly GPU-hours the GPUQueues' statuses hold
    /// (`status.gpuHoursByHour`) into the window, so the 24-hour figure
    /// survives restarts and leader changes.
    pub(crate) fn merge_from_status(
        &self,
        queues: &[std::sync::Arc<kube::api::DynamicObject>],
        now: Time,
    ) {
        let mut window = self
            .window
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for q in queues {
            let Some(name) = q.metadata.name.as_deref() else {
                continue;
            };
            let Some(list) = q
                .data
                .get("status")
                .and_then(|s| s.get("gpuHoursByHour"))
                .and_then(|b| b.as_array())
            else {
                continue;
            };
            for b in list {
                let hour = b["hour"]
                    .as_str()
                    .and_then(crate::controller::base::time::parse);
                let hours = b["gpuHours"].as_str().and_then(|v| v.parse::<f64>().ok());
                if let (Some(hour), Some(hours)) = (hour, hours) {
                    window.merge(name, hour.0, hours, now);
                }
            }
        }
    }

    /// Updates `metrics` after a cycle planned at `now`; returns the figures.
    pub(crate) fn report(
        &self,
        metrics: &Metrics,
        snapshot: &Snapshot,
        plan: &Plan,
        now: Time,
    ) -> Figures {
        let elapsed = {
            let mut last = self
                .last
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let elapsed = last.map_or(0, |t| (now.0 - t).max(0));
            *last = Some(now.0);
            elapsed as f64
        };
        let mut f = figures(snapshot, plan, now, elapsed);
        {
            let mut window = self
                .window
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            window.add(now, &f.gpu_hours);
            f.gpu_hours_24h = window.total();
            f.gpu_hours_by_hour = window.buckets();
        }
        let pool = |p: &String| PoolLabels { pool: p.clone() };
        let queue = |q: &String| QueueLabels { queue: q.clone() };
        set_gauges(&metrics.pool_gpus, &f.pool_gpus, pool);
        set_gauges(&metrics.pool_allocated_gpus, &f.pool_allocated, pool);
        set_gauges(&metrics.pool_busy_gpus, &f.pool_busy, pool);
        set_gauges(&metrics.pool_cost, &f.pool_cost, pool);
        set_gauges(&metrics.queue_cost, &f.queue_cost, queue);
        add_to_counters(&metrics.idle_node_seconds, &f.idle_node_seconds, pool);
        add_to_counters(&metrics.queue_dollars, &f.queue_dollars, queue);
        add_to_counters(&metrics.gpu_hours_busy, &f.gpu_hours_busy, queue);
        add_to_counters(&metrics.gpu_hours, &f.gpu_hours, queue);
        for (q, waited) in &f.admission_waits {
            metrics
                .admission_wait
                .get_or_create(&QueueLabels { queue: q.clone() })
                .observe(*waited);
        }
        for reason in &f.preemptions {
            let labels = ReasonLabels {
                reason: reason.clone(),
            };
            metrics.preemptions.get_or_create(&labels).inc();
            metrics.evictions.get_or_create(&labels).inc();
        }
        f
    }
}

/// Replaces a gauge family with `values`, one gauge per key labelled by
/// `label` (keys that went away disappear from the exposition).
fn set_gauges<L, N, A>(
    family: &Family<L, Gauge<N, A>>,
    values: &BTreeMap<String, N>,
    label: impl Fn(&String) -> L,
) where
    L: Clone + Eq + std::hash::Hash,
    N: Copy,
    A: Atomic<N> + Default,
{
    family.clear();
    for (k, v) in values {
        family.get_or_create(&label(k)).set(*v);
    }
}

/// Adds `values` to a family of float counters, one per key labelled by
/// `label`.
fn add_to_counters<L>(
    family: &Family<L, FloatCounter>,
    values: &BTreeMap<String, f64>,
    label: impl Fn(&String) -> L,
) where
    L: Clone + Eq + std::hash::Hash,
{
    for (k, v) in values {
        family.get_or_create(&label(k)).inc_by(*v);
    }
}

#[cfg(test)]
mod tests {
    use muster_planner::plan::Admission;
    use muster_planner::{GangId, Plan, Snapshot, Time};

    use super::*;

    const SNAPSHOT: &str = r#"
queues:
- name: team-a
  pools: [gpu]
pools:
- name: gpu
  provider: sim
- name: idle
  provider: sim
nodes:
- name: n1
  pool: gpu
  price: 32.0
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
  reservedFor: a/run
- name: n2
  pool: gpu
  price: 32.0
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
  reservedFor: a/adm
- name: n3
  pool: gpu
  price: 10.5
  phase: Launched
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
- name: n4
  pool: gpu
  price: 5.0
  phase: Terminating
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
- name: e1
  pool: idle
  price: 1.25
  allocatable: {cpu: 8, memory: 32Gi, nvidia.com/gpu: 1}
  emptySince: 0
- name: unmanaged
  allocatable: {cpu: 8, memory: 32Gi, nvidia.com/gpu: 4}
gangs:
- id: a/run
  queue: team-a
  arrival: 0
  podSets:
  - {name: w, count: 2, requests: {nvidia.com/gpu: 4}}
  phase: Running
  assignments:
  - {podSet: w, index: 0, node: n1}
  - {podSet: w, index: 1, node: n1}
- id: a/adm
  queue: team-b
  arrival: 0
  podSets:
  - {name: w, count: 1, requests: {nvidia.com/gpu: 6}}
  phase: Admitted
  assignments:
  - {podSet: w, index: 0, node: n2}
- id: a/q
  queue: team-a
  arrival: 400
  podSets:
  - {name: w, count: 1, requests: {nvidia.com/gpu: 1}}
"#;

    #[test]
    fn figures_of_a_cycle() {
        let snapshot: Snapshot = serde_norway::from_str(SNAPSHOT).expect("snapshot");
        let plan = Plan {
            admissions: vec![Admission {
                gang: GangId::new("a/q"),
                assignments: Vec::new(),
            }],
            ..Plan::default()
        };
        let f = figures(&snapshot, &plan, Time(1000), 1800.0);
        let m = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        // Ready nodes only; the unmanaged node belongs to no pool
        assert_eq!(f.pool_gpus, m(&[("gpu", 16), ("idle", 1)]));
        assert_eq!(f.pool_allocated, m(&[("gpu", 14), ("idle", 0)]));
        assert_eq!(f.pool_busy, m(&[("gpu", 8), ("idle", 0)]));
        // every phase but Terminating costs money
        assert_eq!(f.pool_cost["gpu"], 74.5);
        assert_eq!(f.pool_cost["idle"], 1.25);
        assert_eq!(f.idle_node_seconds["gpu"], 0.0);
        assert_eq!(f.idle_node_seconds["idle"], 1800.0);
        // 8 GPUs for half an hour, 6 GPUs for half an hour
        assert_eq!(f.gpu_hours["team-a"], 4.0);
        assert_eq!(f.gpu_hours["team-b"], 3.0);
        assert_eq!(f.admission_waits, vec![("team-a".to_string(), 600.0)]);
        assert!(f.preemptions.is_empty());
    }

    /// A hand-computed case: n1 ($32/h) is shared by a/run (team-a, 2 × 4
    /// GPUs) and a/small (team-b, 1 × 2 GPUs) → team-a pays 8/10, team-b
    /// 2/10; n2 ($10/h, in flight) is held for a/prov (team-b) with no pod
    /// placed yet → all team-b's; n3 ($5/h) is held by nobody → no queue's;
    /// n4 is Terminating → free.
    const SHARED: &str = r#"
queues:
- name: team-a
- name: team-b
- name: team-c
pools:
- name: gpu
  provider: sim
nodes:
- name: n1
  pool: gpu
  price: 32.0
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 10}
- name: n2
  pool: gpu
  price: 10.0
  phase: Launched
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
  reservedFor: b/prov
- name: n3
  pool: gpu
  price: 5.0
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
- name: n4
  pool: gpu
  price: 7.0
  phase: Terminating
  allocatable: {cpu: 96, memory: 1152Gi, nvidia.com/gpu: 8}
  reservedFor: a/run
gangs:
- id: a/run
  queue: team-a
  arrival: 0
  podSets:
  - {name: w, count: 2, requests: {nvidia.com/gpu: 4}}
  phase: Running
  assignments:
  - {podSet: w, index: 0, node: n1}
  - {podSet: w, index: 1, node: n1}
- id: b/small
  queue: team-b
  arrival: 0
  podSets:
  - {name: w, count: 1, requests: {nvidia.com/gpu: 2}}
  phase: Admitted
  assignments:
  - {podSet: w, index: 0, node: n1}
- id: b/prov
  queue: team-b
  arrival: 0
  podSets:
  - {name: w, count: 1, requests: {nvidia.com/gpu: 8}}
  phase: Provisioning
"#;

    #[test]
    fn a_shared_node_is_split_by_gpus_and_dollars_accrue_over_time() {
        let snapshot: Snapshot = serde_norway::from_str(SHARED).expect("snapshot");
        let cost = queue_cost(&snapshot);
        // team-a: 32 × 8/10 = 25.6; team-b: 32 × 2/10 + 10 = 16.4
        assert!((cost["team-a"] - 25.6).abs() < 1e-9, "{cost:?}");
        assert!((cost["team-b"] - 16.4).abs() < 1e-9, "{cost:?}");
        assert_eq!(cost["team-c"], 0.0);
        let metrics = Metrics::new();
        let reporter = Reporter::default();
        reporter.report(&metrics, &snapshot, &Plan::default(), Time(0));
        // 45 minutes later: team-a 25.6 × 0.75 = 19.2 $, team-b 16.4 × 0.75 = 12.3 $;
        // GPU-hours: team-a 8 × 0.75 = 6 allocated and busy, team-b 2 × 0.75 = 1.5
        // allocated (Admitted) and none busy
        let f = reporter.report(&metrics, &snapshot, &Plan::default(), Time(2700));
        assert!((f.queue_dollars["team-a"] - 19.2).abs() < 1e-9, "{f:?}");
        assert!((f.queue_dollars["team-b"] - 12.3).abs() < 1e-9, "{f:?}");
        assert_eq!(f.gpu_hours["team-a"], 6.0);
        assert_eq!(f.gpu_hours_busy["team-a"], 6.0);
        assert_eq!(f.gpu_hours["team-b"], 1.5);
        assert_eq!(f.gpu_hours_busy.get("team-b"), None);
        let text = metrics.encode();
        assert!(
            text.contains("muster_queue_cost_dollars_per_hour{queue=\"team-b\"} 16.4"),
            "{text}"
        );
        assert!(
            text.contains("muster_queue_cost_dollars_total{queue=\"team-a\"} 19.2"),
            "{text}"
        );
        assert!(
            text.contains("muster_gpu_hours_busy_total{queue=\"team-a\"} 6.0"),
            "{text}"
        );
        // the pool's cost counts every node but the Terminating one: 32 + 10 + 5
        assert!(
            text.contains("muster_pool_cost_dollars_per_hour{pool=\"gpu\"} 47.0"),
            "{text}"
        );
    }

    #[test]
    fn the_24_hour_window_forgets_older_hours() {
        let mut w = HourWindow::default();
        let one = |v: f64| BTreeMap::from([("q".to_string(), v)]);
        w.add(Time(0), &one(2.0));
        w.add(Time(3600 * 10), &one(3.0));
        assert_eq!(w.total()["q"], 5.0);
        // hour 24 is 24 hours after hour 0: hour 0 leaves the window
        w.add(Time(3600 * 24 + 5), &one(1.0));
        assert_eq!(w.total()["q"], 4.0);
    }

    #[test]
    fn report_accumulates_counters_between_cycles() {
        let snapshot: Snapshot = serde_norway::from_str(SNAPSHOT).expect("snapshot");
        let metrics = Metrics::new();
        let reporter = Reporter::default();
        reporter.report(&metrics, &snapshot, &Plan::default(), Time(1000));
        reporter.report(&metrics, &snapshot, &Plan::default(), Time(1360));
        let text = metrics.encode();
        assert!(
            text.contains("muster_gpu_hours_total{queue=\"team-a\"} 0.8"),
            "{text}"
        );
        assert!(
            text.contains("muster_idle_node_seconds_total{pool=\"idle\"} 360.0"),
            "{text}"
        );
        assert!(text.contains("muster_pool_gpus{pool=\"gpu\"} 16"), "{text}");
        assert!(
            text.contains("muster_pool_cost_dollars_per_hour{pool=\"gpu\"} 74.5"),
            "{text}"
        );
    }

    #[test]
    fn hour_buckets_survive_a_round_trip_through_the_status() {
        let now = Time(100 * 3600 + 1800);
        let mut first = HourWindow::default();
        first.add(
            Time(97 * 3600 + 10),
            &BTreeMap::from([("q".to_string(), 2.56)]),
        );
        first.add(now, &BTreeMap::from([("q".to_string(), 1.04)]));
        // what the status holds: one decimal, rounded down
        let status = crate::controller::steps::status::pools::hour_buckets(&first.buckets()["q"]);
        let text: Vec<&str> = status.iter().map(|b| b.gpu_hours.as_str()).collect();
        assert_eq!(text, ["2.5", "1.0"]);
        // a new leader: empty window, merges the status, goes on counting
        let mut next = HourWindow::default();
        for b in &status {
            let t = crate::controller::base::time::from_kube(&b.hour);
            next.merge("q", t.0, b.gpu_hours.parse().expect("decimal"), now);
        }
        next.add(now, &BTreeMap::from([("q".to_string(), 0.5)]));
        assert_eq!(next.total()["q"], 2.5 + 1.0 + 0.5);
        // merging its own, larger counts back changes nothing; an older
        // bucket than 24 h is dropped
        let before = next.clone();
        for (start, hours) in before.buckets()["q"].clone() {
            next.merge("q", start, hours - 0.1, now);
        }
        next.merge("q", 70 * 3600, 9.0, now);
        assert_eq!(next, before);
    }
}
