//! The muster policy: a driver of the real planner. It mirrors the world
//! into a [`Snapshot`], calls [`muster_planner::plan`] (debounced on events,
//! plus a periodic tick for time-based decisions) and carries the plan out.
//! It takes **no** decision of its own: every admission, launch, release,
//! preemption and removal comes from the plan; the driver only applies it
//! and reports facts (Ready nodes, finished jobs, capacity errors,
//! interruptions) back through the next snapshot.
//!
//! The plan contract implemented here:
//! - **admissions**: bind every pod to the node the plan names (all pods or
//!   none: the whole admission is checked first); pods run at once, so the
//!   gang goes straight to `Running`;
//! - **launches**: mark the `reserve` nodes as held for the gang; create every
//!   `NewNode` as an in-flight node (`Launched` → `Registered` → `Ready` on
//!   the cloud's boot plan) reserved for the gang (`Node::reserved_for`); the
//!   gang becomes `Provisioning` with the launch's assignments and a
//!   `provisioning_deadline` (the pool's `provisioningTimeout`, else the
//!   policy's). A `NewNode` whose name already exists is not launched again
//!   (idempotency). An insufficient-capacity error deletes that node, sets
//!   the offering's `unavailable_until = now + unavailable_offering_ttl` and
//!   bumps the gang's `launch_attempts`; the gang stays `Provisioning`, and
//!   the planner re-plans it whole from the next snapshot;
//! - **releases**: drop the reservation, or hand the nodes to `handed_to`;
//!   a released node nobody takes over that is still in flight is
//!   terminated; a released Ready node stays (empty: the planner
//!   consolidates it). A `Provisioning` gang left with no reserved node goes
//!   back to `Queued`;
//! - **preemptions**: evict the victim as a whole; it becomes `Evicted` with
//!   `not_before = now + backoff` (base doubling per eviction, capped);
//! - **removals**: terminate the node (gangs on it are evicted and requeued);
//!   `Replace` first launches the replacement, unreserved;
//! - **waiting**: counted per reason for the report.
//!
//! A finished gang releases its nodes at once. A spot interruption evicts
//! the gang as a whole (`Evicted`, with backoff) and the node disappears.

use std::collections::{BTreeMap, HashMap};

use muster_planner::{
    Assignment, Dur, Gang, GangId, GangPhase, Node, Plan, PodSet, Pool, Queue, Snapshot, Time,
    Toleration, TolerationOperator, Topology,
};
use muster_planner::plan::{RemovalKind, WaitReason};

use super::Policy;
use super::lifecycle::{self, GangVerdict, NodeVerdict};
use crate::clock::{Debouncer, Stopwatch};
use crate::events::{Event, JobId, NodeId};
use crate::world::{EvictCause, World};
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
    nodes_planned: u64,
    launch_capacity_errors: u64,
    releases: u64,
    removals: u64,
    lifecycle_terminations: u64,
    apply_errors: u64,
    waits: BTreeMap<WaitReason, u64>,
}

/// The muster policy.
#[derive(Debug)]
pub struct MusterPolicy {
    cfg: MusterConfig,
    snap: Snapshot,
    node_pos: HashMap<String, usize>,
    gang_pos: HashMap<JobId, usize>,
    gang_job: HashMap<GangId, JobId>,
    gang_ids: Vec<GangId>,
    /// Cloud offering index → snapshot offering index.
    offering_pos: Vec<Option<usize>>,
    debounce: Debouncer,
    planner_ms: Vec<f64>,
    stats: Stats,
    errors: Vec<String>,
}

impl MusterPolicy {
    /// A muster policy for `world`'s workload.
    pub fn new(cfg: MusterConfig, world: &World) -> MusterPolicy {
        let mut offerings = Vec::new();
        let mut offering_pos = Vec::new();
        for o in world.cloud.offerings() {
            let used = cfg.pools.iter().any(|p| {
                p.provider == o.provider
                    && muster_provider_sim::satisfies_requirements(o, &p.requirements)
            });
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
        };
        let debounce = Debouncer::new(cfg.debounce);
        MusterPolicy {
            cfg,
            snap,
            node_pos: HashMap::new(),
            gang_pos: HashMap::new(),
            gang_job,
            gang_ids,
            offering_pos,
            debounce,
            planner_ms: Vec::new(),
            stats: Stats::default(),
            errors: Vec::new(),
        }
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
        let gang = Gang {
            id: self.gang_ids[job].clone(),
            queue: self.cfg.team_queue[world.team_of[job]].clone(),
            priority: j.priority,
            arrival: j.submit,
            pod_sets: vec![PodSet {
                name: POD_SET.to_string(),
                count: j.workers,
                min_count: None,
                requests: world.requests[job].clone(),
                node_selector: Default::default(),
                tolerations: vec![Toleration {
                    key: "nvidia.com/gpu".into(),
                    operator: TolerationOperator::Exists,
                    ..Default::default()
                }],
                gpu_models: c.models.clone(),
                min_gpu_memory_mib: c.min_gpu_memory_mib,
            }],
            topology: if j.workers > 1 {
                Topology::SameZone
            } else {
                Topology::Any
            },
            phase: GangPhase::Queued,
            assignments: Vec::new(),
            provisioning_deadline: None,
            admitted_at: None,
            started_at: None,
            expected_duration: self.cfg.expected_durations.then_some(j.duration),
            not_before: None,
            evictions: 0,
            launch_attempts: 0,
            disruptible: false,
        };
        self.gang_pos.insert(job, self.snap.gangs.len());
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

    fn mirror_node(&self, world: &World, id: NodeId) -> Node {
        let n = &world.cluster.nodes[id];
        let pool = self.snap.pools.iter().find(|p| p.name == n.pool);
        let mut labels = BTreeMap::new();
        labels.insert("node.kubernetes.io/instance-type".into(), n.key.instance_type.clone());
        labels.insert("topology.kubernetes.io/zone".into(), n.key.zone.clone());
        labels.insert("karpenter.sh/capacity-type".into(), n.key.capacity_type.as_str().into());
        labels.insert("muster.dev/pool".into(), n.pool.clone());
        if let Some(p) = pool {
            labels.extend(p.labels.clone());
        }
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
            phase: n.phase,
            unschedulable: n.unschedulable,
            reserved_for: n.reserved_for.map(|j| self.gang_ids[j].clone()),
            pods: Vec::new(),
            created_at: n.created_at,
            phase_since: n.phase_since,
            empty_since: n.empty_since,
            do_not_disrupt: false,
        }
    }

    /// Brings the node mirror up to date with the world: drops nodes that
    /// are gone, copies phases, reservations and emptiness.
    fn sync_nodes(&mut self, world: &World) {
        let mut i = 0;
        while i < self.snap.nodes.len() {
            let name = &self.snap.nodes[i].name;
            match world.cluster.by_name(name) {
                None => {
                    self.node_pos.remove(name);
                    self.snap.nodes.swap_remove(i);
                    if let Some(moved) = self.snap.nodes.get(i) {
                        self.node_pos.insert(moved.name.clone(), i);
                    }
                }
                Some(id) => {
                    let n = &world.cluster.nodes[id];
                    let m = &mut self.snap.nodes[i];
                    m.phase = n.phase;
                    m.phase_since = n.phase_since;
                    m.empty_since = n.empty_since;
                    m.unschedulable = n.unschedulable;
                    let want = n.reserved_for.map(|j| &self.gang_ids[j]);
                    if m.reserved_for.as_ref() != want {
                        m.reserved_for = want.cloned();
                    }
                    i += 1;
                }
            }
        }
    }

    fn add_node(&mut self, world: &World, id: NodeId) {
        let node = self.mirror_node(world, id);
        self.node_pos.insert(node.name.clone(), self.snap.nodes.len());
        self.snap.nodes.push(node);
    }

    /// A job was evicted by the world (interruption, node removal,
    /// preemption): the gang is requeued whole, with backoff.
    fn gang_evicted(&mut self, world: &mut World, job: JobId) {
        let now = world.now;
        let policy = self.cfg.policy.clone();
        if let Some(g) = self.gang_mut(job) {
            g.evictions += 1;
            g.phase = GangPhase::Evicted;
            g.not_before = Some(now + lifecycle::backoff(&policy, g.evictions));
            g.assignments.clear();
            g.admitted_at = None;
            g.started_at = None;
            g.provisioning_deadline = None;
        }
        let ids: Vec<NodeId> = world.cluster.alive_ids().collect();
        for id in ids {
            if world.cluster.nodes[id].reserved_for == Some(job) {
                world.cluster.nodes[id].reserved_for = None;
            }
        }
    }

    fn drain_evictions(&mut self, world: &mut World) {
        for job in world.take_evicted() {
            self.gang_evicted(world, job);
        }
    }

    fn finish_gang(&mut self, world: &mut World, job: JobId) {
        self.remove_gang(job);
        let ids: Vec<NodeId> = world.cluster.alive_ids().collect();
        for id in ids {
            if world.cluster.nodes[id].reserved_for == Some(job) {
                world.cluster.nodes[id].reserved_for = None;
            }
        }
    }

    fn plan(&mut self, world: &mut World) {
        let now = world.now;
        self.debounce.ran(now);
        self.sync_nodes(world);
        self.enforce_lifecycle(world);
        let sw = Stopwatch::start();
        let plan = muster_planner::plan(&self.snap, &self.cfg.policy, now);
        self.planner_ms.push(sw.ms());
        self.stats.plans += 1;
        self.apply(world, plan);
        self.sync_nodes(world);
    }

    fn enforce_lifecycle(&mut self, world: &mut World) {
        let now = world.now;
        let mut doomed = Vec::new();
        for n in &self.snap.nodes {
            if let NodeVerdict::Terminate(_) = lifecycle::pool_node(n, &self.cfg.policy, now)
                && let Some(id) = world.cluster.by_name(&n.name)
            {
                doomed.push(id);
            }
        }
        for id in doomed {
            self.stats.lifecycle_terminations += 1;
            world.terminate(id, EvictCause::NodeRemoved);
        }
        let mut evict = Vec::new();
        for g in &self.snap.gangs {
            if g.phase != GangPhase::Admitted {
                continue;
            }
            let timeout = self
                .snap
                .queues
                .iter()
                .find(|q| q.name == g.queue)
                .and_then(|q| q.pods_ready_timeout)
                .unwrap_or(self.cfg.policy.pods_ready_timeout);
            if lifecycle::gang(g, timeout, now) == GangVerdict::Evict
                && let Some(j) = self.gang_job.get(&g.id)
            {
                evict.push(*j);
            }
        }
        for j in evict {
            world.evict(j, EvictCause::Preemption);
        }
        self.drain_evictions(world);
        self.sync_nodes(world);
    }

    fn apply(&mut self, world: &mut World, plan: Plan) {
        let Plan {
            admissions,
            launches,
            releases,
            preemptions,
            removals,
            waiting,
        } = plan;
        for r in releases {
            self.stats.releases += 1;
            self.apply_release(world, &r.gang, &r.nodes, r.handed_to.as_ref());
        }
        for p in preemptions {
            match self.gang_job.get(&p.victim).copied() {
                Some(job) => {
                    world.evict(job, EvictCause::Preemption);
                    self.drain_evictions(world);
                    // A victim that held capacity but had not started.
                    if let Some(g) = self.gang_mut(job)
                        && g.phase != GangPhase::Evicted
                    {
                        self.gang_evicted(world, job);
                    }
                }
                None => self.error(format!("preemption of unknown gang {}", p.victim)),
            }
        }
        for r in removals {
            self.stats.removals += 1;
            let Some(id) = world.cluster.by_name(&r.node) else {
                self.error(format!("removal of unknown node {}", r.node));
                continue;
            };
            if let RemovalKind::Replace { with } = &r.kind
                && self.launch_node(world, with, None).is_err()
            {
                continue; // no replacement, so the node stays
            }
            world.terminate(id, EvictCause::NodeRemoved);
            self.drain_evictions(world);
        }
        for a in admissions {
            self.apply_admission(world, &a.gang, &a.assignments);
        }
        for l in launches {
            self.apply_launch(world, &l);
        }
        for w in waiting {
            *self.stats.waits.entry(w.reason).or_default() += 1;
        }
    }

    fn apply_release(
        &mut self,
        world: &mut World,
        gang: &GangId,
        nodes: &[String],
        handed_to: Option<&GangId>,
    ) {
        let job = self.gang_job.get(gang).copied();
        let heir = handed_to.and_then(|h| self.gang_job.get(h).copied());
        if handed_to.is_some() && heir.is_none() {
            self.error(format!("release of {gang} hands nodes to an unknown gang"));
        }
        for name in nodes {
            let Some(id) = world.cluster.by_name(name) else {
                continue; // already gone: nothing to release
            };
            world.cluster.nodes[id].reserved_for = heir;
            if heir.is_none() && world.cluster.nodes[id].phase.in_flight() {
                world.terminate(id, EvictCause::NodeRemoved);
                self.drain_evictions(world);
            }
        }
        if let Some(job) = job {
            let holds = world
                .cluster
                .alive_ids()
                .any(|id| world.cluster.nodes[id].reserved_for == Some(job));
            if let Some(g) = self.gang_mut(job)
                && g.phase == GangPhase::Provisioning
                && !holds
            {
                g.phase = GangPhase::Queued;
                g.assignments.clear();
                g.provisioning_deadline = None;
            }
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
                self.error(format!("admission of {gang}: bad pod {}/{}", a.pod_set, a.index));
                return;
            }
            seen[a.index as usize] = true;
            let Some(id) = world.cluster.by_name(&a.node) else {
                self.error(format!("admission of {gang}: node {} does not exist", a.node));
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
        if let Some(g) = self.gang_mut(job) {
            g.phase = GangPhase::Running;
            g.admitted_at = Some(now);
            g.started_at = Some(now);
            g.assignments = assignments.to_vec();
            g.provisioning_deadline = None;
            g.not_before = None;
        }
    }

    /// Launches one planned machine; `Ok(true)` when launched, `Ok(false)`
    /// when it existed already, `Err(())` on a capacity error.
    fn launch_node(
        &mut self,
        world: &mut World,
        nn: &muster_planner::plan::NewNode,
        reserved_for: Option<JobId>,
    ) -> Result<bool, ()> {
        if world.cluster.name_used(&nn.name) {
            return Ok(false);
        }
        self.stats.nodes_planned += 1;
        match world.launch(nn.name.clone(), &nn.offering, &nn.pool, reserved_for) {
            Ok(id) => {
                self.add_node(world, id);
                Ok(true)
            }
            Err(LaunchError::InsufficientCapacity(key)) => {
                self.stats.launch_capacity_errors += 1;
                let until = world.now + self.cfg.policy.unavailable_offering_ttl;
                if let Some(pos) = world
                    .cloud
                    .index_of(&key)
                    .and_then(|i| self.offering_pos.get(i).copied().flatten())
                {
                    self.snap.offerings[pos].unavailable_until = Some(until);
                }
                Err(())
            }
            Err(e) => {
                self.error(format!("launch of {}: {e}", nn.name));
                Ok(false)
            }
        }
    }

    fn apply_launch(&mut self, world: &mut World, l: &muster_planner::plan::Launch) {
        let Some(job) = self.gang_job.get(&l.gang).copied() else {
            self.error(format!("launch for unknown gang {}", l.gang));
            return;
        };
        self.stats.launch_sets += 1;
        for name in &l.reserve {
            match world.cluster.by_name(name) {
                Some(id) => world.cluster.nodes[id].reserved_for = Some(job),
                None => self.error(format!("launch for {} reserves unknown node {name}", l.gang)),
            }
        }
        let mut failed = false;
        for nn in &l.nodes {
            if self.launch_node(world, nn, Some(job)).is_err() {
                failed = true;
            }
        }
        let timeout = l
            .nodes
            .first()
            .and_then(|nn| self.snap.pools.iter().find(|p| p.name == nn.pool))
            .and_then(|p| p.provisioning_timeout)
            .unwrap_or(self.cfg.policy.provisioning_timeout);
        let now = world.now;
        if let Some(g) = self.gang_mut(job) {
            if failed {
                g.launch_attempts += 1;
            }
            g.phase = GangPhase::Provisioning;
            g.assignments = l.assignments.clone();
            if g.provisioning_deadline.is_none() {
                g.provisioning_deadline = Some(now + timeout);
            }
        }
    }
}

/// The namespace of a team's gangs.
fn namespace(team: &str) -> String {
    let s: String = team
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '-' })
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
             planner (muster_planner::plan); the simulator only carries the plan out. The planner \
             runs at most once per {} of virtual time after a relevant event (arrival, node Ready, \
             completion, interruption) and every {} for time-based decisions. Gangs are admitted \
             all-or-nothing; new machines for a gang are launched as a set and reserved for it; \
             multi-pod gangs ask for one zone (SameZone). The planner is {} told job run times.",
            self.cfg.debounce,
            self.cfg.tick,
            if self.cfg.expected_durations { "" } else { "not" }
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
            Event::Interrupt(_) => {
                self.drain_evictions(world);
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
            ("nodes_planned".to_string(), s.nodes_planned),
            ("launch_capacity_errors".to_string(), s.launch_capacity_errors),
            ("releases".to_string(), s.releases),
            ("removals".to_string(), s.removals),
            ("lifecycle_terminations".to_string(), s.lifecycle_terminations),
            ("plan_apply_errors".to_string(), s.apply_errors),
        ];
        for (r, n) in &s.waits {
            v.push((format!("waiting_{}", r.as_str()), *n));
        }
        v
    }
}
