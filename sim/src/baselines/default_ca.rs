//! `default-ca`: the default Kubernetes scheduler with Cluster Autoscaler.
//!
//! Modelled on Cluster Autoscaler's documented behaviour:
//! - no queue, no quota, no gangs: every pod of a job is created at
//!   submission and placed first-fit on Ready nodes as it comes; pods that do
//!   not fit stay pending, and pods already placed hold their GPUs while the
//!   rest of the job pends (a distributed job starts only when all its pods
//!   run);
//! - one node group per instance type and capacity type allowed by a pool,
//!   spanning the pool's zones (an ASG / MIG); the group tries zones in turn;
//! - every scan (10 s) a pending pod that does not fit an upcoming (booting)
//!   node triggers a scale-up of one node; the node group is chosen by the
//!   `least-waste` expander (least idle CPU + memory fraction after placing
//!   the pod), ties broken by a seeded random draw (`expander: random` draws
//!   among all fitting groups, CA's default);
//! - a failed scale-up (no capacity in any zone) backs the group off for 5 min;
//! - scale-down: a node under 50 % GPU utilization for 10 min is removed if
//!   its pods can move; job pods are not safe to evict (`safe-to-evict:
//!   false`, standard for batch GPU work), so only empty nodes go; no
//!   scale-down for 10 min after a scale-up (`scale-down-delay-after-add`).

use std::collections::HashMap;

use muster_planner::{Dur, NodePhase, Pool, Resources, Time};
use muster_provider_sim::Rng;
use serde::{Deserialize, Serialize};

use super::{buyable, schedule_first_fit, unbound_pods};
use crate::events::{Event, JobId, NodeId};
use crate::policies::Policy;
use crate::world::{EvictCause, World};

const SCAN: u32 = 1;

/// CA's node-group expander.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expander {
    /// Least wasted CPU and memory; ties random.
    #[default]
    LeastWaste,
    /// Any fitting group at random (CA's default).
    Random,
}

/// Cluster Autoscaler knobs (defaults as documented).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct CaConfig {
    /// Loop period.
    pub scan_interval: Dur,
    /// Time a node must be unneeded before removal.
    pub scale_down_unneeded_time: Dur,
    /// Utilization below which a node is unneeded (0–1).
    pub scale_down_utilization_threshold: f64,
    /// No scale-down for this long after a scale-up.
    pub scale_down_delay_after_add: Dur,
    /// Back-off of a node group after a failed scale-up.
    pub scale_up_backoff: Dur,
    /// Expander.
    pub expander: Expander,
}

impl Default for CaConfig {
    fn default() -> Self {
        CaConfig {
            scan_interval: Dur::secs(10),
            scale_down_unneeded_time: Dur::mins(10),
            scale_down_utilization_threshold: 0.5,
            scale_down_delay_after_add: Dur::mins(10),
            scale_up_backoff: Dur::mins(5),
            expander: Expander::LeastWaste,
        }
    }
}

#[derive(Debug, Clone)]
struct NodeGroup {
    name: String,
    pool: String,
    /// Cloud offering index per zone.
    zones: Vec<usize>,
    backoff_until: Time,
    next_zone: usize,
}

/// The default scheduler + Cluster Autoscaler model.
#[derive(Debug)]
pub struct DefaultCa {
    cfg: CaConfig,
    groups: Vec<NodeGroup>,
    pending: Vec<(JobId, u32)>,
    rng: Rng,
    last_scale_up: Option<Time>,
    unneeded_since: HashMap<NodeId, Time>,
    scan_scheduled: bool,
    nodes_made: u64,
    scale_up_failures: u64,
}

impl DefaultCa {
    /// A model over the pools' offerings.
    pub fn new(cfg: CaConfig, pools: &[Pool], world: &World, seed: u64) -> DefaultCa {
        let mut groups: Vec<NodeGroup> = Vec::new();
        for (idx, pool) in buyable(world, pools) {
            let o = &world.cloud.offerings()[idx];
            let name = format!("{}-{}", o.instance_type, o.capacity_type);
            match groups.iter_mut().find(|g| g.name == name && g.pool == pool) {
                Some(g) => g.zones.push(idx),
                None => groups.push(NodeGroup {
                    name,
                    pool,
                    zones: vec![idx],
                    backoff_until: Time(0),
                    next_zone: 0,
                }),
            }
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        for g in &mut groups {
            g.zones.sort();
        }
        DefaultCa {
            cfg,
            groups,
            pending: Vec::new(),
            rng: Rng::for_stream(seed, "default-ca"),
            last_scale_up: None,
            unneeded_since: HashMap::new(),
            scan_scheduled: false,
            nodes_made: 0,
            scale_up_failures: 0,
        }
    }

    fn ensure_scan(&mut self, world: &mut World) {
        if !self.scan_scheduled {
            self.scan_scheduled = true;
            let period = self.cfg.scan_interval.as_secs().max(1) as i64;
            let next = (world.now.0 / period + 1) * period;
            world.schedule(Time(next), Event::Timer(SCAN));
        }
    }

    fn schedule_pending(&mut self, world: &mut World) {
        let pods = std::mem::take(&mut self.pending);
        self.pending = schedule_first_fit(world, pods);
    }

    fn waste(world: &World, idx: usize, req: &Resources) -> f64 {
        let o = &world.cloud.offerings()[idx];
        let cpu = o.resources.cpu_millis.max(1) as f64;
        let mem = o.resources.memory_bytes.max(1) as f64;
        (cpu - req.cpu_millis as f64) / cpu + (mem - req.memory_bytes as f64) / mem
    }

    fn scale_up(&mut self, world: &mut World) {
        let now = world.now;
        // Upcoming nodes: booting, with what this scan already counted on them.
        let mut upcoming: Vec<(NodeId, Resources)> = world
            .cluster
            .alive_ids()
            .filter(|id| world.cluster.nodes[*id].phase.in_flight())
            .map(|id| (id, world.cluster.nodes[id].allocatable.clone()))
            .collect();
        let pending = self.pending.clone();
        for (job, _pod) in pending {
            let req = world.requests[job].clone();
            let c = world.constraints[job].clone();
            if let Some(slot) = upcoming.iter_mut().find(|(id, free)| {
                c.accepts_node(&world.cluster.nodes[*id]) && req.fits_in(free)
            }) {
                slot.1.saturating_sub(&req);
                continue;
            }
            let fitting: Vec<usize> = (0..self.groups.len())
                .filter(|g| self.groups[*g].backoff_until <= now)
                .filter(|g| {
                    let idx = self.groups[*g].zones[0];
                    c.accepts_offering(&world.cloud.offerings()[idx], &req)
                })
                .collect();
            if fitting.is_empty() {
                continue;
            }
            let choice = match self.cfg.expander {
                Expander::Random => fitting[self.rng.range_u64(0, fitting.len() as u64 - 1) as usize],
                Expander::LeastWaste => {
                    let best = fitting
                        .iter()
                        .map(|g| Self::waste(world, self.groups[*g].zones[0], &req))
                        .fold(f64::INFINITY, f64::min);
                    let ties: Vec<usize> = fitting
                        .iter()
                        .copied()
                        .filter(|g| {
                            (Self::waste(world, self.groups[*g].zones[0], &req) - best).abs() < 1e-9
                        })
                        .collect();
                    ties[self.rng.range_u64(0, ties.len() as u64 - 1) as usize]
                }
            };
            if let Some(id) = self.launch_in_group(world, choice) {
                let mut free = world.cluster.nodes[id].allocatable.clone();
                free.saturating_sub(&req);
                upcoming.push((id, free));
                self.last_scale_up = Some(now);
            }
        }
    }

    fn launch_in_group(&mut self, world: &mut World, g: usize) -> Option<NodeId> {
        let zones = self.groups[g].zones.clone();
        let n = zones.len();
        for k in 0..n {
            let zi = (self.groups[g].next_zone + k) % n;
            let key = world.cloud.offerings()[zones[zi]].key();
            self.nodes_made += 1;
            let name = format!("ca-{}-{}", self.groups[g].name, self.nodes_made);
            let pool = self.groups[g].pool.clone();
            if let Ok(id) = world.launch(name, &key, &pool, None) {
                self.groups[g].next_zone = (zi + 1) % n;
                return Some(id);
            }
        }
        self.scale_up_failures += 1;
        self.groups[g].backoff_until = world.now + self.cfg.scale_up_backoff;
        None
    }

    fn scale_down(&mut self, world: &mut World) {
        let now = world.now;
        let ids: Vec<NodeId> = world.cluster.alive_ids().collect();
        self.unneeded_since.retain(|id, _| world.cluster.nodes[*id].alive());
        let delay_over = self
            .last_scale_up
            .is_none_or(|t| now.since(t) >= self.cfg.scale_down_delay_after_add);
        for id in ids {
            let n = &world.cluster.nodes[id];
            if n.phase != NodePhase::Ready {
                continue;
            }
            let util = n.used.gpu_millis as f64 / n.allocatable.gpu_millis.max(1) as f64;
            if util >= self.cfg.scale_down_utilization_threshold {
                self.unneeded_since.remove(&id);
                continue;
            }
            let since = *self.unneeded_since.entry(id).or_insert(now);
            // Pods of running jobs are not safe to evict: only empty nodes go.
            if delay_over
                && n.pods.is_empty()
                && now.since(since) >= self.cfg.scale_down_unneeded_time
            {
                world.terminate(id, EvictCause::NodeRemoved);
                self.unneeded_since.remove(&id);
            }
        }
    }

    fn requeue_evicted(&mut self, world: &mut World) {
        for job in world.take_evicted() {
            for pod in unbound_pods(world, job) {
                self.pending.push((job, pod));
            }
        }
    }
}

impl Policy for DefaultCa {
    fn name(&self) -> &'static str {
        "default-ca"
    }

    fn assumptions(&self) -> String {
        format!(
            "Default kube-scheduler + Cluster Autoscaler. No queue, quota or gang: every pod is \
             created at submission and placed first-fit on Ready nodes; pods already placed hold \
             their GPUs while the rest of their job pends. One node group per instance type and \
             capacity type allowed by a pool ({} groups), spanning the pool's zones. Every {} a \
             pending pod that fits no booting node scales one group up by one node, chosen by the \
             {} expander (ties: seeded random). A scale-up with no capacity in any zone backs the \
             group off for {}. Scale-down: nodes under {:.0}% GPU utilization for {} are removed \
             if their pods can move; job pods are treated as not safe to evict, so only empty \
             nodes are removed, and none within {} of a scale-up.",
            self.groups.len(),
            self.cfg.scan_interval,
            match self.cfg.expander {
                Expander::LeastWaste => "least-waste",
                Expander::Random => "random",
            },
            self.cfg.scale_up_backoff,
            self.cfg.scale_down_utilization_threshold * 100.0,
            self.cfg.scale_down_unneeded_time,
            self.cfg.scale_down_delay_after_add,
        )
    }

    fn start(&mut self, _world: &mut World) {}

    fn on_event(&mut self, world: &mut World, event: Event) {
        match event {
            Event::Arrival(job) => {
                for pod in 0..world.jobs[job].workers {
                    self.pending.push((job, pod));
                }
                self.schedule_pending(world);
                self.ensure_scan(world);
            }
            Event::NodeReady(_) | Event::JobFinished { .. } => {
                self.schedule_pending(world);
                self.ensure_scan(world);
            }
            Event::Interrupt(_) => {
                self.requeue_evicted(world);
                self.schedule_pending(world);
                self.ensure_scan(world);
            }
            Event::Timer(SCAN) => {
                self.scan_scheduled = false;
                self.schedule_pending(world);
                self.scale_up(world);
                self.scale_down(world);
                self.requeue_evicted(world);
                if !self.pending.is_empty() || world.cluster.alive_count() > 0 {
                    self.ensure_scan(world);
                }
            }
            _ => {}
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("node_groups".into(), self.groups.len() as u64),
            ("scale_up_failures".into(), self.scale_up_failures),
        ]
    }
}
