//! The muster policy: a driver of the real planner. It mirrors the world
//! into a [`Snapshot`], calls [`muster_planner::plan`] (debounced on events,
//! plus a periodic tick for time-based decisions) and carries the plan out.
//! It takes **no** decision of its own: every admission, launch, release,
//! preemption and removal comes from the plan; the driver only applies it
//! and reports facts (Ready nodes, finished jobs, capacity errors,
//! interruptions) back through the next snapshot.
//!
//! The plan contract is the planner's own (`muster_planner::plan`, "Driver
//! contract"), carried out against the simulated world. What a plan makes
//! of every gang's record (phase, assignments, deadline, launch attempts,
//! admission time) is the planner's one mapping,
//! `lifecycle::record::after_plan`, which the controller applies to Gang
//! status; this driver applies it to its mirrored gangs first, then does
//! what the world needs:
//! 1. **preemptions**: the victim's pods are unbound, its reservations
//!    cleared;
//! 2. **releases**: nodes handed to `handedTo`, or unreserved and — while
//!    still in flight — terminated; Ready nodes stay as free capacity;
//! 3. **launches**: `reserve` nodes held for the gang, then each `NewNode`
//!    launched (a name that exists already is not launched again). The
//!    cloud's answer goes through `lifecycle::pool_node`: accepted →
//!    `Launched`; insufficient capacity → the node is deleted and the
//!    offering marked unavailable until the time the state machine gives;
//!    the planner re-plans the gang from the next snapshot;
//! 4. **admissions**: every pod bound to its node (the whole admission is
//!    checked first: all pods or none); since simulated pods run as soon as
//!    they are bound, `lifecycle::gang` marks the gang `Running` at once;
//! 5. **removals**: the node is cordoned and terminated; gangs on it are
//!    evicted whole and requeued without backoff; `Replace` launches the
//!    replacement first and terminates the old node once the replacement
//!    is Ready;
//! 6. **waiting**: counted per reason for the report;
//! 7. evictions the records ask for (pods-ready timeouts): pods unbound,
//!    reservations cleared.
//!
//! Machines advance `Launched` → `Registered` → `Ready` (or time out) through
//! `lifecycle::pool_node` at each planning cycle, from what the world shows;
//! spot interruptions, lost nodes and completions go through
//! `lifecycle::gang`. A completed gang releases every node at once.

use std::collections::{BTreeMap, HashMap, HashSet};

use muster_planner::lifecycle::gang::{self as gang_lc, Event as GangEvent, Step as GangStep};
use muster_planner::lifecycle::pool_node::{self, Step as NodeStep, Unavailable};
use muster_planner::lifecycle::record::{self, GangRecord, Outcome};
use muster_planner::plan::{Launch, NewNode, RemovalKind, WaitReason};
use muster_planner::{
    Assignment, Dur, Gang, GangId, NetworkTopology, Node, NodePhase, Plan, PodSet, Pool, Queue,
    Snapshot, Time, Toleration, TolerationOperator, Topology,
};

use super::Policy;
use super::lifecycle;
use crate::clock::{Debouncer, Stopwatch};
use crate::events::{Event, JobId, NodeId};
use crate::world::{EvictCause, JobPhase, World};
use muster_provider_sim::LaunchError;

const PLAN: u32 = 1;
const TICK: u32 = 2;
/// Name of the one pod set of a simulated job's gang.
pub const POD_SET: &str = "worker";

/// Inputs of the muster policy.
#[derive(Debug, Clone)]
pub struct MusterConfig {
    /// Planner knobs.
    pub policy: muster_planner::Policy,
    /// Queues.
    pub queues: Vec<Queue>,
    /// Pools.
    pub pools: Vec<Pool>,
    /// Queue of each team (by team index of the world).
    pub team_queue: Vec<String>,
    /// At most one plan per this much virtual time.
    pub debounce: Dur,
    /// Periodic plan for time-based decisions.
    pub tick: Dur,
    /// Tell the planner each job's true run time (`expectedDuration`);
    /// off by default: a real controller does not know it.
    pub expected_durations: bool,
}

#[derive(Debug, Default)]
struct Stats {
    plans: u64,
    admissions: u64,
    launch_sets: u64,
    nodes_launched: u64,
    launch_capacity_errors: u64,
    releases: u64,
    removals: u64,
    replacements: u64,
    lifecycle_terminations: u64,
    pods_ready_evictions: u64,
    apply_errors: u64,
    waits: BTreeMap<WaitReason, u64>,
}

/// The muster policy.
#[derive(Debug)]
pub struct MusterPolicy {
    cfg: MusterConfig,
    snap: Snapshot,
    node_pos: HashMap<String, usize>,
    /// The world's id of each mirrored node, by its position in the
    /// snapshot (ids are never reused, and a name is never launched twice).
    node_ids: Vec<NodeId>,
    gang_pos: HashMap<JobId, usize>,
    gang_job: HashMap<GangId, JobId>,
    gang_ids: Vec<GangId>,
    /// Cloud offering index → snapshot offering index.
    offering_pos: Vec<Option<usize>>,
    /// Replacement node name → the node it replaces.
    replacing: BTreeMap<String, NodeId>,
    debounce: Debouncer,
    planner_ms: Vec<f64>,
    stats: Stats,
    errors: Vec<String>,
    /// The nodes the last plan keeps warm, since when, and who pays.
    warm: (Time, Vec<WarmCharge>),
}

/// A node kept warm: dollars per hour, and each team's share of them.
type WarmCharge = (f64, Vec<(usize, f64)>);

impl MusterPolicy {
    /// A muster policy for `world`'s workload.
    pub fn new(cfg: MusterConfig, world: &World) -> MusterPolicy {
        let mut offerings = Vec::new();
        let mut offering_pos = Vec::new();
        for o in world.cloud.offerings() {
            let used = cfg
                .pools
                .iter()
                .any(|p| p.provider == o.provider && p.requirements.admits(o));
            if used {
                offering_pos.push(Some(offerings.len()));
                offerings.push(o.clone());
            } else {
                offering_pos.push(None);
            }
        }
        let gang_ids: Vec<GangId> = world
            .jobs
            .iter()
            .map(|j| GangId::new(format!("{}/job-{:06}", namespace(&j.team), j.id)))
            .collect();
        let gang_job = gang_ids
            .iter()
            .enumerate()
            .map(|(i, g)| (g.clone(), i))
            .collect();
        let snap = Snapshot {
            queues: cfg.queues.clone(),
            pools: cfg.pools.clone(),
            offerings,
            nodes: Vec::new(),
            gangs: Vec::new(),
            gpu_utilization: Vec::new(),
            arrivals: Vec::new(),
        };
        let debounce = Debouncer::new(cfg.debounce);
        MusterPolicy {
            cfg,
            snap,
            node_pos: HashMap::new(),
            node_ids: Vec::new(),
            gang_pos: HashMap::new(),
            gang_job,
            gang_ids,
            offering_pos,
            replacing: BTreeMap::new(),
            debounce,
            planner_ms: Vec::new(),
            stats: Stats::default(),
            errors: Vec::new(),
            warm: (Time(0), Vec::new()),
        }
    }

    /// The driver's current snapshot (for diagnostics and tests).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn error(&mut self, msg: String) {
        self.stats.apply_errors += 1;
        if self.errors.len() < 20 {
            self.errors.push(msg);
        }
    }

    fn trigger(&mut self, world: &mut World) {
        if let Some(at) = self.debounce.trigger(world.now) {
            world.schedule(at, Event::Timer(PLAN));
        }
    }

    fn gang_mut(&mut self, job: JobId) -> Option<&mut Gang> {
        let pos = *self.gang_pos.get(&job)?;
        self.snap.gangs.get_mut(pos)
    }

    fn add_gang(&mut self, world: &World, job: JobId) {
        let j = &world.jobs[job];
        let c = &world.constraints[job];
        let pods = PodSet {
            tolerations: vec![Toleration {
                key: "nvidia.com/gpu".into(),
                operator: TolerationOperator::Exists,
                ..Default::default()
            }],
            gpu_models: c.models.clone(),
            min_gpu_memory_mib: c.min_gpu_memory_mib,
            ..PodSet::new(POD_SET, j.workers, world.requests[job].clone())
        };
        let gang = Gang {
            priority: j.priority,
            topology: if j.workers > 1 {
                Topology::SameZone
            } else {
                Topology::Any
            },
            expected_duration: self.cfg.expected_durations.then_some(j.duration),
            // Kueue's podset-preferred-topology at the rack: the tightest
            // domain with room, then anywhere in the zone.
            network: (j.workers > 1 && world.cloud.topology().is_some()).then_some(
                NetworkTopology {
                    level: 2,
                    required: false,
                },
            ),
            ..Gang::new(
                self.gang_ids[job].clone(),
                self.cfg.team_queue[world.team_of[job]].clone(),
                j.submit,
                vec![pods],
            )
        };
        self.gang_pos.insert(job, self.snap.gangs.len());
        if self.snap.arrivals_window().is_some() {
            self.snap
                .arrivals
                .extend(muster_planner::Arrival::of(&gang));
        }
        self.snap.gangs.push(gang);
    }

    fn remove_gang(&mut self, job: JobId) {
        if let Some(pos) = self.gang_pos.remove(&job) {
            self.snap.gangs.swap_remove(pos);
            if let Some(moved) = self.snap.gangs.get(pos)
                && let Some(j) = self.gang_job.get(&moved.id)
            {
                self.gang_pos.insert(*j, pos);
            }
        }
    }

    /// Clears every reservation held for `job` (in the world; the mirror
    /// follows at the next sync).
    fn clear_reservations(world: &mut World, job: JobId) {
        let ids: Vec<NodeId> = world
            .cluster
            .alive_ids()
            .filter(|id| world.cluster.nodes[*id].reserved_for == Some(job))
            .collect();
        for id in ids {
            world.reserve(id, None);
        }
    }

    /// A new PoolNode in the mirror, as the planner's reference driver
    /// writes it.
    fn mirror_node(&self, world: &World, id: NodeId, phase: NodePhase) -> Node {
        let n = &world.cluster.nodes[id];
        let pool = self.snap.pools.iter().find(|p| p.name == n.pool);
        let offering = world
            .cloud
            .index_of(&n.key)
            .and_then(|i| self.offering_pos.get(i).copied().flatten())
            .map(|i| &self.snap.offerings[i]);
        let labels = match (pool, offering) {
            (Some(p), Some(o)) => muster_planner::labels::new_node_labels(p, o),
            _ => Default::default(),
        };
        Node {
            name: n.name.clone(),
            pool: Some(n.pool.clone()),
            offering: Some(n.key.clone()),
            provider: Some(n.key.provider),
            zone: n.key.zone.clone(),
            placement_group: None,
            capacity_type: Some(n.key.capacity_type),
            price: Some(n.price),
            gpu_model: n.gpu_model.clone(),
            gpu_memory_mib: n.gpu_memory_mib,
            allocatable: n.allocatable.clone(),
            labels,
            taints: pool.map(|p| p.taints.clone()).unwrap_or_default(),
            phase,
            unschedulable: n.unschedulable,
            reserved_for: n.reserved_for.map(|j| self.gang_ids[j].clone()),
            pods: Vec::new(),
            created_at: n.created_at,
            phase_since: world.now,
            empty_since: None,
            do_not_disrupt: false,
            capacity_ends_at: offering
                .and_then(|o| o.reservation.as_ref())
                .and_then(|r| r.machines_end()),
            network: n.network.clone(),
        }
    }

    fn add_node(&mut self, world: &World, id: NodeId) {
        let node = self.mirror_node(world, id, NodePhase::Launched);
        self.node_pos
            .insert(node.name.clone(), self.snap.nodes.len());
        self.snap.nodes.push(node);
        self.node_ids.push(id);
    }

    fn remove_node_at(&mut self, i: usize) {
        let name = self.snap.nodes[i].name.clone();
        self.node_pos.remove(&name);
        self.snap.nodes.swap_remove(i);
        self.node_ids.swap_remove(i);
        if let Some(moved) = self.snap.nodes.get(i) {
            self.node_pos.insert(moved.name.clone(), i);
        }
    }

    /// Brings the node mirror up to date: machines advance (or time out)
    /// through `lifecycle::pool_node` from what the world shows; gone nodes
    /// leave; reservations, cordons and emptiness are copied.
    fn sync_nodes(&mut self, world: &mut World) {
        let now = world.now;
        let mut i = 0;
        while i < self.snap.nodes.len() {
            let id = self.node_ids[i];
            if !world.cluster.nodes[id].alive() {
                self.remove_node_at(i);
                continue;
            }
            let m = &self.snap.nodes[i];
            if m.phase.in_flight() {
                let key = world.cluster.nodes[id].key.clone();
                let seen = lifecycle::observed(&world.cluster.nodes[id]);
                match pool_node::next(m.phase, m.phase_since, &key, seen, &self.cfg.policy, now) {
                    NodeStep::Stay => {}
                    NodeStep::Advance(p) => {
                        let m = &mut self.snap.nodes[i];
                        m.phase = p;
                        m.phase_since = now;
                    }
                    // the simulated cloud never deletes a Node on its own
                    NodeStep::Lost => {}
                    NodeStep::Terminate {
                        mark_unavailable, ..
                    } => {
                        self.stats.lifecycle_terminations += 1;
                        if let Some((what, until)) = mark_unavailable {
                            self.mark_unavailable(world, &what, until);
                        }
                        self.terminate(world, id, GangEvent::NodeLost);
                        self.remove_node_at(i);
                        continue;
                    }
                }
            }
            let n = &world.cluster.nodes[id];
            let m = &mut self.snap.nodes[i];
            m.unschedulable = n.unschedulable;
            let want = n.reserved_for.map(|j| &self.gang_ids[j]);
            if m.reserved_for.as_ref() != want {
                m.reserved_for = want.cloned();
            }
            let busy = !n.pods.is_empty() || n.reserved_for.is_some();
            if busy {
                m.empty_since = None;
            } else if m.empty_since.is_none() && m.phase == NodePhase::Ready {
                m.empty_since = Some(now);
            }
            i += 1;
        }
        self.finish_replacements(world);
    }

    /// Old nodes whose replacement is Ready are drained and terminated; a
    /// replacement that is gone un-cordons the old node.
    fn finish_replacements(&mut self, world: &mut World) {
        let pairs: Vec<(String, NodeId)> = self
            .replacing
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (new, old) in pairs {
            let ready = self
                .node_pos
                .get(&new)
                .is_some_and(|i| self.snap.nodes[*i].phase == NodePhase::Ready);
            let gone = world.cluster.by_name(&new).is_none();
            if ready {
                self.replacing.remove(&new);
                self.terminate(world, old, GangEvent::NodeLost);
            } else if gone {
                self.replacing.remove(&new);
                if world.cluster.nodes[old].alive() {
                    world.cluster.nodes[old].unschedulable = false;
                }
            }
        }
    }

    /// Marks the offerings `what` covers unavailable until `until` in the
    /// mirror (the simulated cloud refuses no capacity type, so in practice
    /// one offering).
    fn mark_unavailable(&mut self, world: &World, what: &Unavailable, until: Time) {
        let positions: Vec<usize> = match what {
            Unavailable::Offering(key) => world
                .cloud
                .index_of(key)
                .and_then(|i| self.offering_pos.get(i).copied().flatten())
                .into_iter()
                .collect(),
            Unavailable::CapacityType(..) => (0..self.snap.offerings.len())
                .filter(|&i| what.covers(&self.snap.offerings[i].key()))
                .collect(),
        };
        for pos in positions {
            let o = &mut self.snap.offerings[pos];
            o.unavailable_until = Some(o.unavailable_until.map_or(until, |t| t.max(until)));
        }
    }

    /// Terminates a node in the world; every gang with a pod on it goes
    /// through `lifecycle::gang` with `event` (lost node, interruption).
    fn terminate(&mut self, world: &mut World, id: NodeId, event: GangEvent) {
        world.terminate(id, EvictCause::NodeRemoved);
        self.gang_events(world, event);
        self.reservation_lost(world, id, event);
    }

    /// A gone node was reserved for a gang that holds capacity but had no
    /// pod on it (a Provisioning gang's machine): the gang loses a node.
    fn reservation_lost(&mut self, world: &mut World, id: NodeId, event: GangEvent) {
        let Some(job) = world.cluster.nodes[id].reserved_for else {
            return;
        };
        let now = world.now;
        let timeout = self.pods_ready_timeout(job);
        let policy = self.cfg.policy.clone();
        let Some(g) = self.gang_mut(job) else { return };
        let step = gang_lc::on_event(g, timeout, event, &policy, now);
        if lifecycle::apply_gang_step(g, &step, now) {
            world.evict(job, EvictCause::NodeRemoved);
            world.take_evicted();
            Self::clear_reservations(world, job);
        }
    }

    /// Gangs the world just evicted (their node went away) take `event`.
    fn gang_events(&mut self, world: &mut World, event: GangEvent) {
        let now = world.now;
        for job in world.take_evicted() {
            let policy = self.cfg.policy.clone();
            let timeout = self.pods_ready_timeout(job);
            let Some(g) = self.gang_mut(job) else {
                continue;
            };
            let step = gang_lc::on_event(g, timeout, event, &policy, now);
            let step = match step {
                GangStep::Stay => GangStep::Evict {
                    reason: gang_lc::EvictReason::NodeLost,
                    not_before: now,
                    counts: false,
                },
                s => s,
            };
            if lifecycle::apply_gang_step(g, &step, now) {
                Self::clear_reservations(world, job);
            }
        }
    }

    fn pods_ready_timeout(&self, job: JobId) -> Option<Dur> {
        let pos = *self.gang_pos.get(&job)?;
        let q = &self.snap.gangs[pos].queue;
        self.snap
            .queues
            .iter()
            .find(|x| &x.name == q)
            .and_then(|x| x.pods_ready_timeout)
    }

    fn finish_gang(&mut self, world: &mut World, job: JobId) {
        let now = world.now;
        let timeout = self.pods_ready_timeout(job);
        let policy = self.cfg.policy.clone();
        if let Some(g) = self.gang_mut(job) {
            let step = gang_lc::on_event(g, timeout, GangEvent::Completed, &policy, now);
            if step != GangStep::Finish {
                self.error(format!(
                    "completion of {} in phase {:?}",
                    self.gang_ids[job], step
                ));
            }
        }
        self.remove_gang(job);
        Self::clear_reservations(world, job);
    }

    fn plan(&mut self, world: &mut World) {
        let now = world.now;
        self.debounce.ran(now);
        // Arrivals are kept for the longest warm window (the planner reads
        // no further back); they are pushed in time order.
        if let Some(window) = self.snap.arrivals_window() {
            let keep = self.snap.arrivals.partition_point(|a| a.at < now - window);
            self.snap.arrivals.drain(..keep);
        }
        self.sync_nodes(world);
        self.sync_reservations(world);
        let sw = Stopwatch::start();
        let plan = muster_planner::plan(&self.snap, &self.cfg.policy, now);
        self.planner_ms.push(sw.ms());
        self.charge_warm(world, &plan);
        self.stats.plans += 1;
        self.apply(world, plan);
        self.sync_nodes(world);
    }

    /// Copies what the cloud lists of each reserved offering (machines
    /// still available) into the mirror, as the controller reads them from
    /// `DescribeCapacityReservations` every cycle.
    fn sync_reservations(&mut self, world: &World) {
        for (i, pos) in self.offering_pos.iter().enumerate() {
            let Some(pos) = pos else { continue };
            let Some(r) = world.cloud.offering(i).and_then(|o| o.reservation.as_ref()) else {
                continue;
            };
            if let Some(m) = self.snap.offerings[*pos].reservation.as_mut() {
                m.available = r.available;
            }
        }
    }

    /// Charges the nodes the previous plan kept warm, from then to now, to
    /// the teams whose arrivals in the window sized them (by their share of
    /// those arrivals' pods, a queue's share split evenly among its teams);
    /// then remembers what `plan` keeps. The charge moves their cost from
    /// "idle" to the teams in `cost_by_team`, and counts it in
    /// `warm_cost_usd`.
    fn charge_warm(&mut self, world: &mut World, plan: &Plan) {
        let now = world.now;
        let (since, kept) = std::mem::take(&mut self.warm);
        let hours = now.since(since).as_secs() as f64 / 3600.0;
        for (per_hour, shares) in kept {
            let usd = per_hour * hours;
            world.rec.warm_cost_usd += usd;
            for (team, share) in shares {
                if let Some(c) = world.rec.cost_by_team.get_mut(team) {
                    *c += usd * share;
                }
            }
        }
        let mut by_queue: BTreeMap<&str, f64> = BTreeMap::new();
        for a in &self.snap.arrivals {
            *by_queue.entry(a.queue.as_str()).or_insert(0.0) += f64::from(a.pods);
        }
        let total: f64 = by_queue.values().sum();
        let mut shares = Vec::new();
        if total > 0.0 {
            for (q, n) in &by_queue {
                let teams: Vec<usize> = (0..self.cfg.team_queue.len())
                    .filter(|&t| self.cfg.team_queue[t] == *q)
                    .collect();
                for &t in &teams {
                    shares.push((t, n / total / teams.len() as f64));
                }
            }
        }
        let kept = plan
            .warm
            .iter()
            .map(|w| (w.price.usd(), shares.clone()))
            .collect();
        self.warm = (now, kept);
    }

    /// Every mirrored gang's record after `plan`: the planner's one mapping
    /// from plan items to gang phases (`lifecycle::record::after_plan`), the
    /// controller's too, with what the world shows (an Admitted gang's pods
    /// all run). Node loss reaches gangs as world events (`gang_events`), so
    /// no node is draining here. Returns the jobs whose record asks for an
    /// eviction (pods not all running by the pods-ready timeout; simulated
    /// pods run when bound, so only if binding and running ever come apart).
    /// Gangs whose record the mapping keeps as it is are skipped.
    fn record(&mut self, world: &World, plan: &Plan) -> Vec<JobId> {
        let draining = BTreeMap::new();
        let cx = record::Context::new(plan, &self.snap, &draining, &self.cfg.policy, world.now);
        let mapped: Vec<bool> = self
            .snap
            .gangs
            .iter()
            .map(|g| !cx.keeps(&g.id, Some(g.phase)))
            .collect();
        // The nodes reserved for each gang to map (most gangs are kept, and
        // every running gang's nodes are reserved for it).
        let to_map: HashSet<&GangId> = self
            .snap
            .gangs
            .iter()
            .zip(&mapped)
            .filter(|(_, m)| **m)
            .map(|(g, _)| &g.id)
            .collect();
        if to_map.is_empty() {
            return Vec::new();
        }
        let mut reserved: HashMap<&GangId, Vec<String>> = HashMap::new();
        for n in &self.snap.nodes {
            if let Some(g) = n.reserved_for.as_ref().filter(|g| to_map.contains(g)) {
                reserved.entry(g).or_default().push(n.name.clone());
            }
        }
        let outcomes: Vec<Option<Outcome>> = self
            .snap
            .gangs
            .iter()
            .zip(&mapped)
            .map(|(g, &m)| {
                if !m {
                    return None;
                }
                let held = reserved.get(&g.id).map_or(&[][..], Vec::as_slice);
                let all_running = self
                    .gang_job
                    .get(&g.id)
                    .is_some_and(|j| world.states[*j].phase == JobPhase::Running);
                let seen = record::Seen {
                    finished: false,
                    all_running,
                };
                Some(record::after_plan(
                    &g.id,
                    &GangRecord::of_gang(g, held),
                    Some(g),
                    seen,
                    &cx,
                ))
            })
            .collect();
        let mut evict = Vec::new();
        for (g, out) in self.snap.gangs.iter_mut().zip(outcomes) {
            let Some(out) = out else { continue };
            out.record.write_to(g);
            if out.evict
                && let Some(j) = self.gang_job.get(&g.id)
            {
                evict.push(*j);
            }
        }
        evict
    }

    fn apply(&mut self, world: &mut World, plan: Plan) {
        let evictions = self.record(world, &plan);
        let Plan {
            admissions,
            launches,
            releases,
            preemptions,
            removals,
            waiting,
            // the simulator observes no GPU utilisation, so nothing is idle
            idle: _,
            // kept nodes are nodes not removed: nothing to do
            warm: _,
        } = plan;
        // 1. Preemptions.
        for p in &preemptions {
            let Some(job) = self.gang_job.get(&p.victim).copied() else {
                self.error(format!("preemption of unknown gang {}", p.victim));
                continue;
            };
            world.evict(job, EvictCause::Preemption);
            world.take_evicted();
            Self::clear_reservations(world, job);
        }
        // 2. Releases.
        for r in &releases {
            self.stats.releases += 1;
            let heir = r
                .handed_to
                .as_ref()
                .and_then(|h| self.gang_job.get(h).copied());
            if r.handed_to.is_some() && heir.is_none() {
                self.error(format!(
                    "release of {} hands nodes to an unknown gang",
                    r.gang
                ));
            }
            for name in &r.nodes {
                let Some(id) = world.cluster.by_name(name) else {
                    continue; // already gone
                };
                world.reserve(id, heir);
                if heir.is_none() && world.cluster.nodes[id].phase.in_flight() {
                    self.terminate(world, id, GangEvent::NodeLost);
                }
            }
        }
        // 3. Launches.
        for l in &launches {
            self.apply_launch(world, l);
        }
        // 4. Admissions.
        for a in &admissions {
            self.apply_admission(world, &a.gang, &a.assignments);
        }
        // 5. Removals.
        for r in &removals {
            self.stats.removals += 1;
            let Some(id) = world.cluster.by_name(&r.node) else {
                continue; // already gone
            };
            match &r.kind {
                RemovalKind::Replace { with } => {
                    self.stats.replacements += 1;
                    world.cluster.nodes[id].unschedulable = true;
                    if self.launch_node(world, with, None) {
                        self.replacing.insert(with.name.clone(), id);
                    } else {
                        world.cluster.nodes[id].unschedulable = false;
                    }
                }
                _ => self.terminate(world, id, GangEvent::NodeLost),
            }
        }
        if !removals.is_empty() {
            // the controller sees each removed node go (its PoolNode and
            // Node deletions are watch events) and plans again, debounced:
            // removals a disruption budget held back go then, not at the
            // next tick
            self.trigger(world);
        }
        // 6. Waiting.
        for w in waiting {
            *self.stats.waits.entry(w.reason).or_default() += 1;
        }
        // Evictions the records ask for.
        for job in evictions {
            self.stats.pods_ready_evictions += 1;
            world.evict(job, EvictCause::Preemption);
            world.take_evicted();
            Self::clear_reservations(world, job);
        }
    }

    fn apply_admission(&mut self, world: &mut World, gang: &GangId, assignments: &[Assignment]) {
        let Some(job) = self.gang_job.get(gang).copied() else {
            self.error(format!("admission of unknown gang {gang}"));
            return;
        };
        let workers = world.jobs[job].workers;
        let mut pods: Vec<(u32, NodeId)> = Vec::with_capacity(assignments.len());
        let mut seen = vec![false; workers as usize];
        for a in assignments {
            if a.pod_set != POD_SET || a.index >= workers || seen[a.index as usize] {
                self.error(format!(
                    "admission of {gang}: bad pod {}/{}",
                    a.pod_set, a.index
                ));
                return;
            }
            seen[a.index as usize] = true;
            let Some(id) = world.cluster.by_name(&a.node) else {
                self.error(format!(
                    "admission of {gang}: node {} does not exist",
                    a.node
                ));
                return;
            };
            pods.push((a.index, id));
        }
        if seen.iter().any(|s| !s) {
            self.error(format!("admission of {gang} does not place every pod"));
            return;
        }
        // All pods or none: check every pod, and the pods sharing a node together.
        let mut per_node: BTreeMap<NodeId, muster_planner::Resources> = BTreeMap::new();
        for (pod, id) in &pods {
            if let Err(e) = world.can_bind(job, *pod, *id) {
                self.error(format!("admission of {gang}: {e}"));
                return;
            }
            per_node
                .entry(*id)
                .or_insert_with(|| world.cluster.nodes[*id].used.clone())
                .add(&world.requests[job]);
        }
        for (id, total) in &per_node {
            if !total.fits_in(&world.cluster.nodes[*id].allocatable) {
                let name = world.cluster.nodes[*id].name.clone();
                self.error(format!("admission of {gang}: pods overfill node {name}"));
                return;
            }
        }
        for (pod, id) in pods {
            if let Err(e) = world.bind(job, pod, id) {
                self.error(format!("admission of {gang}: {e}"));
            }
        }
        self.stats.admissions += 1;
        let now = world.now;
        let all_running = world.states[job].phase == JobPhase::Running;
        let timeout = self.pods_ready_timeout(job);
        let policy = self.cfg.policy.clone();
        // Simulated pods run as soon as they are bound: the gang life cycle
        // marks the gang (Admitted by its record) Running at once.
        if let Some(g) = self.gang_mut(job) {
            let step = gang_lc::on_event(
                g,
                timeout,
                GangEvent::PodsCheck { all_running },
                &policy,
                now,
            );
            lifecycle::apply_gang_step(g, &step, now);
        }
    }

    /// Launches one planned machine through `lifecycle::pool_node`; true
    /// when the machine exists afterwards.
    fn launch_node(
        &mut self,
        world: &mut World,
        nn: &NewNode,
        reserved_for: Option<JobId>,
    ) -> bool {
        if world.cluster.name_used(&nn.name) {
            return world.cluster.by_name(&nn.name).is_some();
        }
        let now = world.now;
        let result = world.launch_in(
            nn.name.clone(),
            &nn.offering,
            &nn.pool,
            reserved_for,
            nn.placement_group.as_deref(),
        );
        let seen = match &result {
            Ok(id) => lifecycle::observed(&world.cluster.nodes[*id]),
            Err(_) => lifecycle::refused(),
        };
        match pool_node::next(
            NodePhase::Pending,
            now,
            &nn.offering,
            seen,
            &self.cfg.policy,
            now,
        ) {
            NodeStep::Advance(_) | NodeStep::Stay | NodeStep::Lost => match result {
                Ok(id) => {
                    self.stats.nodes_launched += 1;
                    self.add_node(world, id);
                    true
                }
                Err(e) => {
                    self.error(format!("launch of {}: {e}", nn.name));
                    false
                }
            },
            NodeStep::Terminate {
                mark_unavailable, ..
            } => {
                if matches!(result, Err(LaunchError::InsufficientCapacity(_))) {
                    self.stats.launch_capacity_errors += 1;
                }
                if let Some((what, until)) = mark_unavailable {
                    self.mark_unavailable(world, &what, until);
                }
                if let Ok(id) = result {
                    world.terminate(id, EvictCause::NodeRemoved);
                }
                false
            }
        }
    }

    fn apply_launch(&mut self, world: &mut World, l: &Launch) {
        let Some(job) = self.gang_job.get(&l.gang).copied() else {
            self.error(format!("launch for unknown gang {}", l.gang));
            return;
        };
        self.stats.launch_sets += 1;
        for name in &l.reserve {
            match world.cluster.by_name(name) {
                Some(id) => world.reserve(id, Some(job)),
                None => self.error(format!(
                    "launch for {} reserves unknown node {name}",
                    l.gang
                )),
            }
        }
        for nn in &l.nodes {
            self.launch_node(world, nn, Some(job));
        }
    }
}

/// The namespace of a team's gangs.
fn namespace(team: &str) -> String {
    let s: String = team
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() { "default".into() } else { s }
}

impl Policy for MusterPolicy {
    fn name(&self) -> &'static str {
        "muster"
    }

    fn assumptions(&self) -> String {
        format!(
            "Every admission, launch, release, preemption and removal is taken from the muster \
             planner (muster_planner::plan); the simulator only carries the plan out, following \
             the planner's driver contract and its life-cycle state machines. The planner runs at \
             most once per {} of virtual time after a relevant event (arrival, node Ready, \
             completion, interruption) and every {} for time-based decisions. Gangs are admitted \
             all-or-nothing; new machines for a gang are launched as a set and reserved for it; \
             multi-pod gangs ask for one zone (SameZone). The planner is {}told job run times.",
            self.cfg.debounce,
            self.cfg.tick,
            if self.cfg.expected_durations {
                ""
            } else {
                "not "
            }
        )
    }

    fn start(&mut self, world: &mut World) {
        world.schedule(Time(0) + self.cfg.tick, Event::Timer(TICK));
    }

    fn on_event(&mut self, world: &mut World, event: Event) {
        match event {
            Event::Arrival(j) => {
                self.add_gang(world, j);
                self.trigger(world);
            }
            Event::NodeReady(_) => self.trigger(world),
            Event::JobFinished { job, .. } => {
                self.finish_gang(world, job);
                self.trigger(world);
            }
            Event::Interrupt(n) => {
                self.gang_events(world, GangEvent::SpotInterruption);
                self.reservation_lost(world, n, GangEvent::SpotInterruption);
                self.trigger(world);
            }
            Event::Timer(PLAN) => self.plan(world),
            Event::Timer(TICK) => {
                if !self.snap.gangs.is_empty() || world.cluster.alive_count() > 0 {
                    self.trigger(world);
                }
                world.schedule(world.now + self.cfg.tick, Event::Timer(TICK));
            }
            _ => {}
        }
    }

    fn planner_ms(&self) -> &[f64] {
        &self.planner_ms
    }

    fn messages(&self) -> Vec<String> {
        self.errors.clone()
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = &self.stats;
        let mut v = vec![
            ("plans".to_string(), s.plans),
            ("admissions".to_string(), s.admissions),
            ("launch_sets".to_string(), s.launch_sets),
            ("nodes_launched".to_string(), s.nodes_launched),
            (
                "launch_capacity_errors".to_string(),
                s.launch_capacity_errors,
            ),
            ("releases".to_string(), s.releases),
            ("removals".to_string(), s.removals),
            ("replacements".to_string(), s.replacements),
            (
                "lifecycle_terminations".to_string(),
                s.lifecycle_terminations,
            ),
            ("pods_ready_evictions".to_string(), s.pods_ready_evictions),
            ("plan_apply_errors".to_string(), s.apply_errors),
        ];
        for (r, n) in &s.waits {
            v.push((format!("waiting_{}", r.as_str()), *n));
        }
        v
    }
}
