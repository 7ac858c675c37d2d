//! `default-ca`, `default-ca-price` and `kueue-provreq`: kube-scheduler with
//! Cluster Autoscaler, in one cloud; the third with Kueue and
//! ProvisioningRequests in front.
//!
//! Modelled on Cluster Autoscaler's documented behaviour (its FAQ and
//! `expander/`, `provisioningrequest/` code; `docs/simulate.md` names the
//! source of each point):
//! - **default-ca**: no queue, quota or gang: every pod of a job is created
//!   at submission and placed first-fit on Ready nodes as it comes; pods that
//!   do not fit stay pending, and pods already placed hold their GPUs while
//!   the rest of the job pends (a distributed job starts only when all its
//!   pods run);
//! - one node group per instance type and capacity type allowed by a pool,
//!   spanning the pool's zones (an ASG / MIG); the group tries zones in turn;
//! - every scan (10 s) a pending pod that does not fit an upcoming (booting)
//!   node triggers a scale-up of one node; the node group is chosen by the
//!   expander chain `priority,least-waste` (spot groups first, then least
//!   idle CPU + memory fraction, ties by a seeded draw), or `price`
//!   (`default-ca-price`: the cheapest node, ties least-waste);
//! - a failed scale-up (no capacity in any zone) backs the group off for 5 min;
//! - scale-down: a node under 50 % GPU utilization for 10 min is removed if
//!   its pods can move; job pods are not safe to evict (`safe-to-evict:
//!   false`, standard for batch GPU work), so only empty nodes go; no
//!   scale-down for 10 min after a scale-up (`scale-down-delay-after-add`);
//! - **kueue-provreq**: Kueue reserves quota ([`super::kueue`]) and creates a
//!   ProvisioningRequest of class `best-effort-atomic-scale-up`; each loop
//!   Cluster Autoscaler takes one request (the oldest whose retry time has
//!   come; with `--frequent-loops-enabled`, the default, a loop that
//!   provisioned one starts the next at once, so every due request is
//!   served in one scan), drops the pods that already fit free capacity, and scales one
//!   node group up by the nodes all the others need, all or nothing: on GCP
//!   (managed instance groups resize atomically) a capacity error on any node
//!   creates none; on AWS (no atomic increase: Cluster Autoscaler falls back
//!   to a plain increase) the nodes that launched stay and the rest are
//!   ordinary pending pods. A request that could not be served is retried
//!   after 1 min, doubling to 10 min. Once provisioned, Kueue admits the
//!   workload, its pods are created and take their booked nodes first.

use std::collections::HashMap;

use std::collections::BTreeMap;

use muster_planner::{CapacityType, Dur, NodePhase, Pool, Provider, Queue, Resources, Time};
use muster_provider_sim::Rng;
use serde::{Deserialize, Serialize};

use super::kueue::Kueue;
use super::{buyable, place_in_one_domain, schedule_first_fit, unbound_pods};
use crate::binder::Constraint;
use crate::events::{Event, JobId, NodeId};
use crate::policies::Policy;
use crate::world::{EvictCause, World};

const SCAN: u32 = 1;

/// CA's node-group expander (`--expander`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expander {
    /// `priority,least-waste`: spot groups first (a priority ConfigMap
    /// ranking `.*-spot` above the rest), then least wasted CPU and memory;
    /// ties random.
    #[default]
    PrioritySpotFirst,
    /// Least wasted CPU and memory; ties random.
    LeastWaste,
    /// The cheapest scale-up option; ties least-waste.
    Price,
    /// Any fitting group at random (CA's default).
    Random,
}

impl Expander {
    fn as_str(self) -> &'static str {
        match self {
            Expander::PrioritySpotFirst => "priority (spot first), then least-waste",
            Expander::LeastWaste => "least-waste",
            Expander::Price => "price",
            Expander::Random => "random",
        }
    }
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
    /// GPU node groups are defined for machines of at most this many GPUs
    /// (the same limit as the Karpenter model's NodePools).
    pub max_gpus_per_node: u32,
    /// `--frequent-loops-enabled`: after a productive loop (a
    /// ProvisioningRequest provisioned) the next starts at once instead of
    /// at the next scan, so every due request is served in one scan. On by
    /// default, as in Cluster Autoscaler since kubernetes/autoscaler#8019
    /// (2025; off in earlier releases, where one request is served per scan).
    pub frequent_loops: bool,
    /// The ProvisioningRequest admission check only for workloads of more
    /// than one pod (a ClusterQueue per kind of workload); single pods are
    /// admitted on quota and scale up as ordinary pending pods.
    pub provreq_gangs_only: bool,
    /// How long capacity a ProvisioningRequest provisioned stays booked for
    /// its pods: past it the booking expires (the request's `BookingExpired`
    /// condition, KEP-1136 "ProvisioningRequest support") and pods not yet
    /// on their node are ordinary pending pods. Cluster Autoscaler books for
    /// 10 minutes.
    pub booking_expiry: Dur,
}

impl Default for CaConfig {
    fn default() -> Self {
        CaConfig {
            scan_interval: Dur::secs(10),
            scale_down_unneeded_time: Dur::mins(10),
            scale_down_utilization_threshold: 0.5,
            scale_down_delay_after_add: Dur::mins(10),
            scale_up_backoff: Dur::mins(5),
            expander: Expander::PrioritySpotFirst,
            max_gpus_per_node: 8,
            frequent_loops: true,
            provreq_gangs_only: false,
            booking_expiry: Dur::mins(10),
        }
    }
}

#[derive(Debug, Clone)]
struct NodeGroup {
    name: String,
    pool: String,
    spot: bool,
    /// Cloud offering index per zone.
    zones: Vec<usize>,
    backoff_until: Time,
    next_zone: usize,
}

/// Kueue + ProvisioningRequest state.
#[derive(Debug)]
struct ProvReq {
    kueue: Kueue,
    /// Requests waiting to be provisioned: (created, job) → (retry at, tries).
    requests: BTreeMap<(Time, JobId), (Time, u32)>,
    provisioned: u64,
    not_found: u64,
}

/// The default scheduler + Cluster Autoscaler model (with Kueue and
/// ProvisioningRequests in front for `kueue-provreq`).
#[derive(Debug)]
pub struct DefaultCa {
    name: &'static str,
    cfg: CaConfig,
    groups: Vec<NodeGroup>,
    pending: Vec<(JobId, u32)>,
    /// Pods booked on a node a ProvisioningRequest launched for them.
    booked: HashMap<(JobId, u32), NodeId>,
    /// When each pod's booking was made (it expires after
    /// [`CaConfig::booking_expiry`]).
    booked_at: HashMap<(JobId, u32), Time>,

    provreq: Option<ProvReq>,
    rng: Rng,
    last_scale_up: Option<Time>,
    unneeded_since: HashMap<NodeId, Time>,
    scan_scheduled: bool,
    nodes_made: u64,
    scale_up_failures: u64,
    /// Nodes launched per node group.
    launched: BTreeMap<String, u64>,
}

/// A scale-up option: `nodes` machines of group `group`.
#[derive(Debug, Clone, Copy)]
struct Option_ {
    group: usize,
    nodes: u32,
}

impl DefaultCa {
    /// A model over the pools' offerings. `provreq`: Kueue and
    /// ProvisioningRequests in front (queues, team index → queue name).
    pub fn new(
        name: &'static str,
        cfg: CaConfig,
        pools: &[Pool],
        world: &World,
        seed: u64,
        provreq: Option<(&[Queue], &[String])>,
    ) -> DefaultCa {
        let mut groups: Vec<NodeGroup> = Vec::new();
        for (idx, pool) in buyable(world, pools) {
            let o = &world.cloud.offerings()[idx];
            if o.gpu_count > cfg.max_gpus_per_node {
                continue;
            }
            let name = format!("{}-{}", o.instance_type, o.capacity_type);
            match groups.iter_mut().find(|g| g.name == name && g.pool == pool) {
                Some(g) => g.zones.push(idx),
                None => groups.push(NodeGroup {
                    name,
                    pool,
                    spot: o.capacity_type == CapacityType::Spot,
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
            name,
            cfg,
            groups,
            pending: Vec::new(),
            booked: HashMap::new(),
            booked_at: HashMap::new(),

            provreq: provreq.map(|(queues, team_queue)| ProvReq {
                kueue: Kueue::new(queues, team_queue),
                requests: BTreeMap::new(),
                provisioned: 0,
                not_found: 0,
            }),
            rng: Rng::for_stream(seed, name),
            last_scale_up: None,
            unneeded_since: HashMap::new(),
            scan_scheduled: false,
            nodes_made: 0,
            scale_up_failures: 0,
            launched: BTreeMap::new(),
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
        if self.provreq.is_some() {
            place_in_one_domain(world, &pods);
        }
        self.pending = schedule_first_fit(world, pods);
    }

    /// How many pods of `req` one machine of offering `idx` holds.
    fn per_node(world: &World, idx: usize, req: &Resources) -> u64 {
        let a = &world.cloud.offerings()[idx].resources;
        let per = |have: u64, want: u64| have.checked_div(want).unwrap_or(u64::MAX);
        per(a.gpu_millis, req.gpu_millis)
            .min(per(a.cpu_millis, req.cpu_millis))
            .min(per(a.memory_bytes, req.memory_bytes))
    }

    /// least-waste's score of an option: idle CPU fraction + idle memory
    /// fraction of the new nodes once `pods` pods of `req` are on them.
    fn waste(world: &World, idx: usize, nodes: u32, pods: u64, req: &Resources) -> f64 {
        let o = &world.cloud.offerings()[idx];
        let n = f64::from(nodes);
        let cpu = o.resources.cpu_millis.max(1) as f64 * n;
        let mem = o.resources.memory_bytes.max(1) as f64 * n;
        let p = pods as f64;
        (cpu - req.cpu_millis as f64 * p) / cpu + (mem - req.memory_bytes as f64 * p) / mem
    }

    /// The expander's choice among options for `pods` pods of `req`.
    fn expand(
        &mut self,
        world: &World,
        options: &[Option_],
        pods: u64,
        req: &Resources,
    ) -> Option<Option_> {
        if options.is_empty() {
            return None;
        }
        let mut pool: Vec<Option_> = options.to_vec();
        match self.cfg.expander {
            Expander::Random => {
                let k = self.rng.range_u64(0, pool.len() as u64 - 1) as usize;
                return Some(pool[k]);
            }
            Expander::PrioritySpotFirst => {
                if pool.iter().any(|o| self.groups[o.group].spot) {
                    pool.retain(|o| self.groups[o.group].spot);
                }
            }
            Expander::Price => {
                let cost = |o: &Option_| {
                    let idx = self.groups[o.group].zones[0];
                    world.cloud.offerings()[idx].price.map_or(u64::MAX, |p| p.0)
                        * u64::from(o.nodes)
                };
                let best = pool.iter().map(cost).min().unwrap_or(u64::MAX);
                pool.retain(|o| cost(o) == best);
            }
            Expander::LeastWaste => {}
        }
        let w = |o: &Option_| Self::waste(world, self.groups[o.group].zones[0], o.nodes, pods, req);
        let best = pool.iter().map(w).fold(f64::INFINITY, f64::min);
        pool.retain(|o| (w(o) - best).abs() < 1e-9);
        let k = self.rng.range_u64(0, pool.len() as u64 - 1) as usize;
        Some(pool[k])
    }

    /// Options for `pods` pods of `req` under `c`: every group not backed
    /// off whose machines take the pod, with the nodes the pods need.
    fn options(&self, world: &World, c: &Constraint, req: &Resources, pods: u64) -> Vec<Option_> {
        let now = world.now;
        (0..self.groups.len())
            .filter(|g| self.groups[*g].backoff_until <= now)
            .filter_map(|g| {
                let idx = self.groups[g].zones[0];
                if !c.accepts_offering(&world.cloud.offerings()[idx], req) {
                    return None;
                }
                let per = Self::per_node(world, idx, req).max(1);
                Some(Option_ {
                    group: g,
                    nodes: u32::try_from(pods.div_ceil(per)).unwrap_or(u32::MAX),
                })
            })
            .collect()
    }

    fn scale_up(&mut self, world: &mut World) {
        let now = world.now;
        // Upcoming nodes: booting, with what this scan already counted on them.
        let mut upcoming: Vec<(NodeId, Resources)> = world
            .cluster
            .alive_ids()
            .filter(|id| world.cluster.nodes[*id].phase.in_flight())
            .map(|id| {
                let mut free = world.cluster.nodes[id].allocatable.clone();
                for ((job, _), n) in &self.booked {
                    if *n == id {
                        free.saturating_sub(&world.requests[*job]);
                    }
                }
                (id, free)
            })
            .collect();
        let pending: Vec<(JobId, u32)> = self
            .pending
            .iter()
            .copied()
            .filter(|p| !self.booked.contains_key(p))
            .collect();
        for (job, _pod) in pending {
            let req = world.requests[job].clone();
            let c = world.constraints[job].clone();
            if let Some(slot) = upcoming
                .iter_mut()
                .find(|(id, free)| c.accepts_node(&world.cluster.nodes[*id]) && req.fits_in(free))
            {
                slot.1.saturating_sub(&req);
                continue;
            }
            let options = self.options(world, &c, &req, 1);
            let Some(choice) = self.expand(world, &options, 1, &req) else {
                continue;
            };
            if let Some(id) = self.launch_in_group(world, choice.group) {
                let mut free = world.cluster.nodes[id].allocatable.clone();
                free.saturating_sub(&req);
                upcoming.push((id, free));
                self.last_scale_up = Some(now);
            } else {
                self.back_off(world, choice.group);
            }
        }
    }

    /// One node of group `g`, trying its zones in turn; `None` when every
    /// zone refused.
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
                *self
                    .launched
                    .entry(self.groups[g].name.clone())
                    .or_default() += 1;
                return Some(id);
            }
        }
        None
    }

    fn back_off(&mut self, world: &World, g: usize) {
        self.scale_up_failures += 1;
        self.groups[g].backoff_until = world.now + self.cfg.scale_up_backoff;
    }

    /// Kueue admission (quota only): each admitted workload gets a
    /// ProvisioningRequest.
    fn kueue_admit(&mut self, world: &World) {
        let Some(pr) = &mut self.provreq else { return };
        for job in pr.kueue.admit(world) {
            if self.cfg.provreq_gangs_only && world.jobs[job].workers == 1 {
                // no admission check: admitted, its pod is created
                self.pending.push((job, 0));
                continue;
            }
            pr.requests.insert((world.now, job), (world.now, 0));
        }
    }

    /// One `best-effort-atomic-scale-up` ProvisioningRequest per loop;
    /// true when it was provisioned (a productive loop).
    fn provision_one(&mut self, world: &mut World) -> bool {
        let now = world.now;
        let Some(pr) = &self.provreq else {
            return false;
        };
        let Some((&key, _)) = pr.requests.iter().find(|(_, (at, _))| *at <= now) else {
            return false;
        };
        let job = key.1;
        let req = world.requests[job].clone();
        let c = world.constraints[job].clone();
        let workers = u64::from(world.jobs[job].workers);
        // Pods that fit free capacity of Ready nodes (less what is booked)
        // need no scale-up.
        let mut free: Vec<(NodeId, Resources)> = world
            .cluster
            .alive_ids()
            .filter(|id| world.cluster.nodes[*id].schedulable())
            .map(|id| (id, world.cluster.nodes[id].free()))
            .collect();
        let mut fit = 0u64;
        for _ in 0..workers {
            match free
                .iter_mut()
                .find(|(id, f)| c.accepts_node(&world.cluster.nodes[*id]) && req.fits_in(f))
            {
                Some(slot) => {
                    slot.1.saturating_sub(&req);
                    fit += 1;
                }
                None => break,
            }
        }
        let need = workers - fit;
        let mut launched: Vec<NodeId> = Vec::new();
        let mut per = 1;
        if need > 0 {
            let options = self.options(world, &c, &req, need);
            let Some(choice) = self.expand(world, &options, need, &req) else {
                self.retry_later(world, key);
                return false;
            };
            let idx = self.groups[choice.group].zones[0];
            per = Self::per_node(world, idx, &req).max(1);
            let atomic = world.cloud.offerings()[idx].provider == Provider::Gcp;
            let mut failed = false;
            for _ in 0..choice.nodes {
                match self.launch_in_group(world, choice.group) {
                    Some(id) => launched.push(id),
                    None => failed = true,
                }
            }
            if failed {
                self.back_off(world, choice.group);
                if atomic || launched.is_empty() {
                    // All or nothing: nothing stays.
                    for id in launched {
                        world.terminate(id, EvictCause::NodeRemoved);
                    }
                    self.retry_later(world, key);
                    return false;
                }
            }
            self.last_scale_up = Some(now);
        }
        // Provisioned: Kueue admits, the pods are created and booked on the
        // new nodes.
        for pod in 0..world.jobs[job].workers {
            let k = u64::from(pod).saturating_sub(fit);
            if u64::from(pod) >= fit
                && let Some(id) = launched.get((k / per) as usize)
            {
                self.booked.insert((job, pod), *id);
                self.booked_at.insert((job, pod), now);
            }
            self.pending.push((job, pod));
        }
        if let Some(pr) = &mut self.provreq {
            pr.requests.remove(&key);
            pr.provisioned += 1;
        }
        self.schedule_pending(world);
        true
    }

    fn retry_later(&mut self, world: &World, key: (Time, JobId)) {
        if let Some(pr) = &mut self.provreq {
            pr.not_found += 1;
            if let Some((at, tries)) = pr.requests.get_mut(&key) {
                *tries += 1;
                let backoff = (60u64 << (*tries - 1).min(4)).min(600);
                *at = world.now + Dur::secs(backoff);
            }
        }
    }

    fn node_ready(&mut self, world: &mut World, node: NodeId) {
        let mut mine: Vec<(JobId, u32)> = self
            .booked
            .iter()
            .filter(|(_, n)| **n == node)
            .map(|(p, _)| *p)
            .collect();
        mine.sort_unstable();
        for (job, pod) in mine {
            self.booked.remove(&(job, pod));
            self.booked_at.remove(&(job, pod));
            let _ = world.bind(job, pod, node);
        }
        self.schedule_pending(world);
    }

    fn scale_down(&mut self, world: &mut World) {
        let now = world.now;
        let ids: Vec<NodeId> = world.cluster.alive_ids().collect();
        self.unneeded_since
            .retain(|id, _| world.cluster.nodes[*id].alive());
        self.booked.retain(|_, n| world.cluster.nodes[*n].alive());
        // bookings past their expiry: the pods pend like any other
        let expiry = self.cfg.booking_expiry;
        let expired: Vec<(JobId, u32)> = self
            .booked_at
            .iter()
            .filter(|(_, at)| now.since(**at) >= expiry)
            .map(|(p, _)| *p)
            .collect();
        for p in &expired {
            self.booked.remove(p);
        }
        self.booked_at.retain(|p, _| self.booked.contains_key(p));
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
        self.name
    }

    fn assumptions(&self) -> String {
        let front = if self.provreq.is_some() {
            "Kueue reserves quota (back-to-back admission cycles) and creates a ProvisioningRequest \
             (best-effort-atomic-scale-up) per workload; each loop Cluster Autoscaler takes one \
             request, drops the pods that fit free capacity and scales one node group up by every \
             node the rest need, all or nothing on GCP, falling back to a plain increase on AWS \
             (no atomic increase there); requests not served retry after 1 min doubling to 10 min; \
             once provisioned the workload is admitted and its pods take their booked nodes first. \
             Pods of admitted workloads that lose their node are ordinary pending pods."
        } else {
            "No queue, quota or gang: every pod is created at submission and placed first-fit on \
             Ready nodes; pods already placed hold their GPUs while the rest of their job pends."
        };
        let loops = match (self.provreq.is_some(), self.cfg.frequent_loops) {
            (true, true) => {
                " Frequent loops: after a productive loop the next starts at once, so every due \
                 request is served in one scan."
            }
            _ => "",
        };
        let scoped = if self.provreq.is_some() && self.cfg.provreq_gangs_only {
            " The admission check applies to workloads of more than one pod only; single pods \
             are admitted on quota and scale up as ordinary pending pods."
        } else {
            ""
        };
        format!(
            "Default kube-scheduler + Cluster Autoscaler, one cloud. {front}{loops}{scoped} One node group per \
             instance type (at most {} GPUs per machine) and capacity type allowed by a pool ({} \
             groups), spanning the pool's zones. Every {} a pending pod that fits no booting node scales one group up by one \
             node, chosen by the {} expander (ties: seeded random). A scale-up with no capacity in \
             any zone backs the group off for {}. Scale-down: nodes under {:.0}% GPU utilization \
             for {} are removed if their pods can move; job pods are treated as not safe to evict, \
             so only empty nodes are removed, and none within {} of a scale-up.",
            self.cfg.max_gpus_per_node,
            self.groups.len(),
            self.cfg.scan_interval,
            self.cfg.expander.as_str(),
            self.cfg.scale_up_backoff,
            self.cfg.scale_down_utilization_threshold * 100.0,
            self.cfg.scale_down_unneeded_time,
            self.cfg.scale_down_delay_after_add,
        ) + super::tuned_layout(self.name)
    }

    fn start(&mut self, _world: &mut World) {}

    fn on_event(&mut self, world: &mut World, event: Event) {
        match event {
            Event::Arrival(job) => {
                match &mut self.provreq {
                    Some(pr) => {
                        pr.kueue.submit(world, job);
                        self.kueue_admit(world);
                    }
                    None => {
                        for pod in 0..world.jobs[job].workers {
                            self.pending.push((job, pod));
                        }
                        self.schedule_pending(world);
                    }
                }
                self.ensure_scan(world);
            }
            Event::NodeReady(node) => {
                self.node_ready(world, node);
                self.ensure_scan(world);
            }
            Event::JobFinished { job, .. } => {
                if let Some(pr) = &mut self.provreq {
                    pr.kueue.release(world, job);
                    self.kueue_admit(world);
                }
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
                // with frequent loops, each productive loop starts the next
                // at once (bounded by the requests there are)
                let loops = if self.cfg.frequent_loops {
                    self.provreq.as_ref().map_or(1, |p| p.requests.len().max(1))
                } else {
                    1
                };
                for _ in 0..loops {
                    if !self.provision_one(world) {
                        break;
                    }
                }
                self.scale_up(world);
                self.scale_down(world);
                self.requeue_evicted(world);
                let waiting = self
                    .provreq
                    .as_ref()
                    .is_some_and(|p| !p.requests.is_empty() || p.kueue.has_pending());
                if waiting || !self.pending.is_empty() || world.cluster.alive_count() > 0 {
                    self.ensure_scan(world);
                }
            }
            _ => {}
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut out = vec![
            ("node_groups".into(), self.groups.len() as u64),
            ("scale_up_failures".into(), self.scale_up_failures),
        ];
        for (group, n) in &self.launched {
            out.push((format!("launched_{group}"), *n));
        }
        if let Some(pr) = &self.provreq {
            out.push(("admissions".into(), pr.kueue.admissions));
            out.push(("provisioning_requests_provisioned".into(), pr.provisioned));
            out.push(("provisioning_requests_not_found".into(), pr.not_found));
        }
        out
    }
}
