//! `kueue-karpenter`: Kueue admission in front of kube-scheduler, with
//! Karpenter provisioning nodes for pending pods, in one cloud.
//!
//! Modelled on the documented behaviour of Kueue (v0.19) and Karpenter
//! (v1.x); `docs/simulate.md` names the upstream source of each point:
//! - **Kueue** ([`super::kueue`]): quota admission, back-to-back cycles;
//!   `waitForPodsReady` off by default (its default), as an option with a
//!   5-minute timeout and a 60 s doubling requeue backoff;
//! - **kube-scheduler**: admitted pods are placed first-fit on Ready nodes,
//!   nominated pods first on the node launched for them;
//! - **Karpenter**: GPU NodePools limited to machines of at most
//!   `maxGpusPerNode` GPUs (`karpenter.k8s.aws/instance-gpu-count`), spot
//!   and on-demand. Pending pods are batched (window closes 1 s after the
//!   last pod, at most 10 s after the first); pods are sorted by CPU then
//!   memory (GPU is not in the sort) and packed onto in-flight nodes (a
//!   pod that started elsewhere no longer takes room on the node launched
//!   for it), then onto new NodeClaims, each NodeClaim keeping every offering that fits
//!   all its pods; a NodeClaim launches the cheapest such offering (spot
//!   before on-demand where cheaper, price-capacity-optimized modelled as
//!   the lowest price among pools with capacity) in one fleet call that
//!   falls back through its offerings on insufficient capacity; offerings
//!   that failed are cached unavailable for 3 minutes. One launch per node:
//!   a gang's nodes are independent, so capacity errors leave partial gangs;
//! - **consolidation** (`WhenEmptyOrUnderutilized`) every 10 s within a 10 %
//!   disruption budget: job pods carry `karpenter.sh/do-not-disrupt` (the
//!   documented setting for jobs that must not be interrupted), so only
//!   nodes empty for `consolidateAfter` are removed.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};

use muster_planner::{Dur, NodePhase, Pool, Queue, Resources, Time};
use serde::{Deserialize, Serialize};

use super::kueue::Kueue;
use super::{
    KARPENTER_BLOCK_EXPIRY, buyable, capacity_block_end, karpenter_may_launch, place_in_one_domain,
    schedule_first_fit, unbound_pods,
};
use crate::events::{Event, JobId, NodeId};
use crate::policies::Policy;
use crate::world::{EvictCause, JobPhase, World};

const CYCLE: u32 = 1;
const BATCH: u32 = 2;
const DISRUPT: u32 = 3;
const READY: u32 = 4;

/// Kueue + Karpenter knobs (defaults as documented).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct KkConfig {
    /// Kueue admission cycle.
    pub admission_cycle: Dur,
    /// Karpenter batch idle window.
    pub batch_idle: Dur,
    /// Karpenter batch maximum window.
    pub batch_max: Dur,
    /// Insufficient-capacity cache TTL.
    pub ice_cache_ttl: Dur,
    /// Empty nodes are removed after this.
    pub consolidate_after: Dur,
    /// Disruption loop period.
    pub disruption_interval: Dur,
    /// Most nodes disrupted per pass, percent of nodes.
    pub disruption_budget_percent: u32,
    /// GPU NodePools launch machines of at most this many GPUs.
    pub max_gpus_per_node: u32,
    /// Kueue `waitForPodsReady`.
    pub wait_for_pods_ready: bool,
    /// Its timeout.
    pub pods_ready_timeout: Dur,
}

impl Default for KkConfig {
    fn default() -> Self {
        KkConfig {
            admission_cycle: Dur::secs(1),
            batch_idle: Dur::secs(1),
            batch_max: Dur::secs(10),
            ice_cache_ttl: Dur::mins(3),
            consolidate_after: Dur::secs(0),
            disruption_interval: Dur::secs(10),
            disruption_budget_percent: 10,
            max_gpus_per_node: 8,
            wait_for_pods_ready: false,
            pods_ready_timeout: Dur::mins(5),
        }
    }
}

#[derive(Debug)]
struct Claim {
    pods: Vec<(JobId, u32)>,
    requests: Resources,
    candidates: Vec<usize>,
}

/// The Kueue + Karpenter model.
#[derive(Debug)]
pub struct KueueKarpenter {
    name: &'static str,
    cfg: KkConfig,
    kueue: Kueue,
    /// Offerings the GPU NodePools may launch (cloud index, pool), cheapest
    /// first.
    offerings: Vec<(usize, String)>,
    ice: HashMap<usize, Time>,
    pending: Vec<(JobId, u32)>,
    nominated: HashMap<(JobId, u32), NodeId>,
    nominated_use: HashMap<NodeId, Resources>,
    /// Admitted workloads not running yet: admission time and requeues.
    admitted_at: HashMap<JobId, Time>,
    requeues: HashMap<JobId, u32>,
    batch_start: Option<Time>,
    batch_last: Time,
    batch_scheduled: bool,
    cycle_scheduled: bool,
    disrupt_scheduled: bool,
    ready_scheduled: bool,
    nodes_made: u64,
    fleet_failures: u64,
    pods_ready_evictions: u64,
    block_expirations: u64,
}

impl KueueKarpenter {
    /// A model over the scenario's queues (team index → queue name) and pools.
    pub fn new(
        cfg: KkConfig,
        queues: &[Queue],
        team_queue: &[String],
        pools: &[Pool],
        world: &World,
    ) -> KueueKarpenter {
        KueueKarpenter::named("kueue-karpenter", cfg, queues, team_queue, pools, world)
    }

    /// [`KueueKarpenter::new`] under another name in reports (a name ending
    /// in `-tuned` runs on NodePools split by GPU count: the world's
    /// constraints say so, and the assumptions name it).
    pub fn named(
        name: &'static str,
        cfg: KkConfig,
        queues: &[Queue],
        team_queue: &[String],
        pools: &[Pool],
        world: &World,
    ) -> KueueKarpenter {
        let max_gpus = cfg.max_gpus_per_node;
        let offerings = buyable(world, pools)
            .into_iter()
            .filter(|(i, _)| world.cloud.offerings()[*i].gpu_count <= max_gpus)
            .collect();
        KueueKarpenter {
            name,
            kueue: Kueue::new(queues, team_queue),
            cfg,
            offerings,
            ice: HashMap::new(),
            pending: Vec::new(),
            nominated: HashMap::new(),
            nominated_use: HashMap::new(),
            admitted_at: HashMap::new(),
            requeues: HashMap::new(),
            batch_start: None,
            batch_last: Time(0),
            batch_scheduled: false,
            cycle_scheduled: false,
            disrupt_scheduled: false,
            ready_scheduled: false,
            nodes_made: 0,
            fleet_failures: 0,
            pods_ready_evictions: 0,
            block_expirations: 0,
        }
    }

    fn ensure(&mut self, world: &mut World, timer: u32, after: Dur) {
        let flag = match timer {
            CYCLE => &mut self.cycle_scheduled,
            BATCH => &mut self.batch_scheduled,
            READY => &mut self.ready_scheduled,
            _ => &mut self.disrupt_scheduled,
        };
        if !*flag {
            *flag = true;
            world.schedule(world.now + after, Event::Timer(timer));
        }
    }

    fn admission_cycle(&mut self, world: &mut World) {
        for job in self.kueue.admit(world) {
            self.admitted_at.insert(job, world.now);
            for pod in 0..world.jobs[job].workers {
                self.pending.push((job, pod));
            }
        }
        self.place_pending(world);
        if self.cfg.wait_for_pods_ready && !self.admitted_at.is_empty() {
            self.ensure(world, READY, Dur::secs(10));
        }
        if self.kueue.has_pending() {
            let c = self.cfg.admission_cycle;
            let after = match self.kueue.next_release() {
                Some(t) if t > world.now + c => t.since(world.now),
                _ => c,
            };
            self.ensure(world, CYCLE, after);
        }
    }

    /// `waitForPodsReady`: an admitted workload whose pods are not all
    /// running within the timeout is evicted (placed pods unbound, quota
    /// released) and requeued after a backoff of 60 s doubling up to 1 h.
    fn pods_ready_check(&mut self, world: &mut World) {
        self.ready_scheduled = false;
        let now = world.now;
        let mut late: Vec<JobId> = self
            .admitted_at
            .iter()
            .filter(|(_, t)| now.since(**t) >= self.cfg.pods_ready_timeout)
            .map(|(j, _)| *j)
            .collect();
        late.sort_unstable();
        for job in late {
            self.admitted_at.remove(&job);
            if world.states[job].phase != JobPhase::Pending {
                continue;
            }
            world.unbind_pending(job);
            self.pending.retain(|(j, _)| *j != job);
            for pod in 0..world.jobs[job].workers {
                self.forget_nomination(world, (job, pod));
            }
            let n = self.requeues.entry(job).or_insert(0);
            *n += 1;
            let backoff = (60u64 << (*n - 1).min(6)).min(3600);
            self.kueue.requeue(world, job, now + Dur::secs(backoff));
            self.pods_ready_evictions += 1;
            let c = self.cfg.admission_cycle;
            self.ensure(world, CYCLE, c);
        }
        if !self.admitted_at.is_empty() {
            self.ensure(world, READY, Dur::secs(10));
        }
    }

    /// Drops the nomination of `pod`, which no longer waits for the node
    /// launched for it: Karpenter counts on an in-flight node only the pods
    /// bound to it, and simulates every pending pod afresh in each batch
    /// (kubernetes-sigs/karpenter `provisioning/provisioner.go`
    /// `GetPendingPods`: pods with no `spec.nodeName`;
    /// `provisioning/scheduling/existingnode.go`: a node's `Available()`),
    /// so the room it held goes to the next pods.
    fn forget_nomination(&mut self, world: &World, pod: (JobId, u32)) {
        let Some(node) = self.nominated.remove(&pod) else {
            return;
        };
        if let Some(used) = self.nominated_use.get_mut(&node) {
            used.saturating_sub(&world.requests[pod.0]);
        }
    }

    /// kube-scheduler pass; pods left pending go to Karpenter's batch.
    fn place_pending(&mut self, world: &mut World) {
        let pods = std::mem::take(&mut self.pending);
        place_in_one_domain(world, &pods);
        let tried = pods.clone();
        let left = schedule_first_fit(world, pods);
        // pods bound now, where they were nominated or elsewhere
        if left.len() < tried.len() {
            let still: HashSet<(JobId, u32)> = left.iter().copied().collect();
            for p in tried {
                if !still.contains(&p) {
                    self.forget_nomination(world, p);
                }
            }
        }
        let mut fresh = false;
        for p in &left {
            if !self.nominated.contains_key(p) {
                fresh = true;
            }
        }
        self.pending = left;
        if fresh {
            let now = world.now;
            self.batch_last = now;
            if self.batch_start.is_none() {
                self.batch_start = Some(now);
            }
            let idle = self.cfg.batch_idle;
            self.ensure(world, BATCH, idle);
        }
    }

    fn node_ready(&mut self, world: &mut World, node: NodeId) {
        // Nominated pods first, on their node.
        let mine: Vec<(JobId, u32)> = self
            .pending
            .iter()
            .copied()
            .filter(|p| self.nominated.get(p) == Some(&node))
            .collect();
        for (job, pod) in mine {
            let _ = world.bind(job, pod, node);
            self.nominated.remove(&(job, pod));
        }
        self.nominated_use.remove(&node);
        self.nominated.retain(|_, n| *n != node);
        self.place_pending(world);
    }

    fn batch_timer(&mut self, world: &mut World) {
        self.batch_scheduled = false;
        let Some(start) = self.batch_start else {
            return;
        };
        let close = (self.batch_last + self.cfg.batch_idle).min(start + self.cfg.batch_max);
        if world.now < close {
            self.batch_scheduled = true;
            world.schedule(close, Event::Timer(BATCH));
            return;
        }
        self.batch_start = None;
        self.provision(world);
    }

    fn provision(&mut self, world: &mut World) {
        let now = world.now;
        self.ice.retain(|_, until| *until > now);
        // Drop nominations to nodes that are gone.
        self.nominated
            .retain(|_, n| world.cluster.nodes[*n].alive());
        self.nominated_use
            .retain(|n, _| world.cluster.nodes[*n].alive());
        let mut pods: Vec<(JobId, u32)> = self
            .pending
            .iter()
            .copied()
            .filter(|p| !self.nominated.contains_key(p))
            .filter(|(j, pod)| {
                world.states[*j].phase == JobPhase::Pending
                    && world.states[*j].bindings.get(*pod as usize) == Some(&None)
            })
            .collect();
        pods.sort_by_key(|(j, pod)| {
            let r = &world.requests[*j];
            (Reverse(r.cpu_millis), Reverse(r.memory_bytes), *j, *pod)
        });
        let mut claims: Vec<Claim> = Vec::new();
        let mut unplaced = false;
        let in_flight: Vec<NodeId> = world
            .cluster
            .alive_ids()
            .filter(|id| world.cluster.nodes[*id].phase.in_flight())
            .collect();
        for (job, pod) in pods {
            let req = world.requests[job].clone();
            let c = &world.constraints[job];
            // In-flight nodes with room left.
            let inflight = in_flight.iter().copied().find(|id| {
                let n = &world.cluster.nodes[*id];
                if !n.phase.in_flight() || !c.accepts_node(n) {
                    return false;
                }
                let mut used = self.nominated_use.get(id).cloned().unwrap_or_default();
                used.add(&req);
                used.fits_in(&n.allocatable)
            });
            if let Some(id) = inflight {
                self.nominated.insert((job, pod), id);
                self.nominated_use.entry(id).or_default().add(&req);
                continue;
            }
            let offs = world.cloud.offerings();
            let mut placed = false;
            for claim in claims.iter_mut() {
                let mut total = claim.requests.clone();
                total.add(&req);
                let keep: Vec<usize> = claim
                    .candidates
                    .iter()
                    .copied()
                    .filter(|i| c.accepts_offering(&offs[self.offerings[*i].0], &total))
                    .collect();
                if !keep.is_empty() {
                    claim.candidates = keep;
                    claim.requests = total;
                    claim.pods.push((job, pod));
                    placed = true;
                    break;
                }
            }
            if placed {
                continue;
            }
            let candidates: Vec<usize> = (0..self.offerings.len())
                .filter(|i| !self.ice.contains_key(&self.offerings[*i].0))
                .filter(|i| karpenter_may_launch(world, self.offerings[*i].0))
                .filter(|i| c.accepts_offering(&offs[self.offerings[*i].0], &req))
                .collect();
            if candidates.is_empty() {
                unplaced = true;
                continue;
            }
            claims.push(Claim {
                pods: vec![(job, pod)],
                requests: req,
                candidates,
            });
        }
        for claim in claims {
            let mut launched = None;
            for i in &claim.candidates {
                let (idx, pool) = self.offerings[*i].clone();
                if self.ice.contains_key(&idx) || !karpenter_may_launch(world, idx) {
                    continue;
                }
                let key = world.cloud.offerings()[idx].key();
                self.nodes_made += 1;
                let name = format!("karpenter-{}", self.nodes_made);
                match world.launch(name, &key, &pool, None) {
                    Ok(id) => {
                        launched = Some(id);
                        break;
                    }
                    Err(_) => {
                        self.ice.insert(idx, now + self.cfg.ice_cache_ttl);
                    }
                }
            }
            match launched {
                Some(id) => {
                    for p in &claim.pods {
                        self.nominated.insert(*p, id);
                    }
                    self.nominated_use.insert(id, claim.requests.clone());
                }
                None => {
                    self.fleet_failures += 1;
                    unplaced = true;
                }
            }
        }
        if unplaced {
            // Pods still pending: Karpenter looks at them again on a later batch.
            self.batch_start = Some(now);
            self.batch_last = now;
            let max = self.cfg.batch_max;
            self.ensure(world, BATCH, max);
        }
    }

    /// The capacity-reservation expiration controller: NodeClaims of a
    /// Capacity Block are deleted [`KARPENTER_BLOCK_EXPIRY`] before its end,
    /// whatever runs on them (their pods pend again, as after an
    /// interruption).
    fn expire_blocks(&mut self, world: &mut World) {
        let now = world.now;
        let ids: Vec<NodeId> = world.cluster.alive_ids().collect();
        let mut expired = false;
        for id in ids {
            let key = &world.cluster.nodes[id].key;
            let end = world
                .cloud
                .index_of(key)
                .and_then(|i| capacity_block_end(world, i));
            if end.is_some_and(|e| now >= e - KARPENTER_BLOCK_EXPIRY) {
                world.terminate(id, EvictCause::NodeRemoved);
                self.block_expirations += 1;
                expired = true;
                for job in world.take_evicted() {
                    for pod in unbound_pods(world, job) {
                        self.pending.push((job, pod));
                    }
                }
            }
        }
        if expired {
            self.place_pending(world);
        }
    }

    fn disrupt(&mut self, world: &mut World) {
        self.disrupt_scheduled = false;
        self.expire_blocks(world);
        let now = world.now;
        let alive = world.cluster.alive_count();
        let budget =
            ((alive as u64 * u64::from(self.cfg.disruption_budget_percent)).div_ceil(100)).max(1);
        let mut removed = 0;
        let ids: Vec<NodeId> = world.cluster.alive_ids().collect();
        for id in ids {
            if removed >= budget {
                break;
            }
            let n = &world.cluster.nodes[id];
            let empty_long = n.phase == NodePhase::Ready
                && n.pods.is_empty()
                && !self.nominated_use.contains_key(&id)
                && n.empty_since
                    .is_some_and(|t| now.since(t) >= self.cfg.consolidate_after);
            if empty_long {
                world.terminate(id, EvictCause::NodeRemoved);
                removed += 1;
            }
        }
        if world.cluster.alive_count() > 0 {
            let d = self.cfg.disruption_interval;
            self.ensure(world, DISRUPT, d);
        }
    }
}

impl Policy for KueueKarpenter {
    fn name(&self) -> &'static str {
        self.name
    }

    fn assumptions(&self) -> String {
        format!(
            "Kueue: one ClusterQueue per queue with GPU quota (nominal, cohort borrowing); \
             admission checks quota, never capacity, in back-to-back cycles; waitForPodsReady {}. \
             kube-scheduler places admitted pods first-fit. Karpenter, one cloud: GPU NodePools of \
             machines with at most {} GPUs ({} offerings), spot and on-demand; it batches pending \
             pods ({} idle / {} max window), sorts them by CPU then memory, packs them on in-flight \
             nodes then on new NodeClaims (each keeps every offering that fits all its pods), and \
             launches the cheapest offering per NodeClaim in one fleet call that falls back \
             through the rest on insufficient capacity; failed offerings are cached for {}. One \
             launch per node, so a capacity error can leave part of a gang running. Consolidation \
             WhenEmptyOrUnderutilized every {}, consolidateAfter {}, {}% budget; job pods are \
             do-not-disrupt, so only empty nodes are removed.",
            if self.cfg.wait_for_pods_ready {
                format!(
                    "on ({} timeout, requeue backoff 60 s doubling to 1 h)",
                    self.cfg.pods_ready_timeout
                )
            } else {
                "off (its default)".to_string()
            },
            self.cfg.max_gpus_per_node,
            self.offerings.len(),
            self.cfg.batch_idle,
            self.cfg.batch_max,
            self.cfg.ice_cache_ttl,
            self.cfg.disruption_interval,
            self.cfg.consolidate_after,
            self.cfg.disruption_budget_percent,
        ) + super::tuned_layout(self.name)
    }

    fn start(&mut self, _world: &mut World) {}

    fn on_event(&mut self, world: &mut World, event: Event) {
        match event {
            Event::Arrival(job) => {
                self.kueue.submit(world, job);
                let c = self.cfg.admission_cycle;
                self.ensure(world, CYCLE, c);
            }
            Event::Timer(CYCLE) => {
                self.cycle_scheduled = false;
                self.admission_cycle(world);
            }
            Event::NodeReady(n) => {
                self.node_ready(world, n);
                let d = self.cfg.disruption_interval;
                self.ensure(world, DISRUPT, d);
            }
            Event::JobFinished { job, .. } => {
                self.kueue.release(world, job);
                self.admitted_at.remove(&job);
                self.place_pending(world);
                let c = self.cfg.admission_cycle;
                self.ensure(world, CYCLE, c);
            }
            Event::Interrupt(_) => {
                for job in world.take_evicted() {
                    for pod in unbound_pods(world, job) {
                        self.pending.push((job, pod));
                    }
                }
                self.place_pending(world);
            }
            Event::Timer(BATCH) => self.batch_timer(world),
            Event::Timer(DISRUPT) => self.disrupt(world),
            Event::Timer(READY) => self.pods_ready_check(world),
            _ => {}
        }
    }

    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("admissions".into(), self.kueue.admissions),
            ("pods_ready_evictions".into(), self.pods_ready_evictions),
            ("fleet_failures".into(), self.fleet_failures),
            ("capacity_block_expirations".into(), self.block_expirations),
        ]
    }
}
