//! The simulated world every policy acts on: the workload, the cluster, the
//! cloud, the event queue and the accounting. It carries out mechanics —
//! launching machines, booting them, binding pods, starting and finishing
//! jobs, evicting, interrupting, billing — and never decides anything: the
//! policies ([`crate::policies`], [`crate::baselines`]) do.

use muster_planner::{Dur, NodePhase, OfferingKey, Resources, Time};
use muster_provider_sim::{LaunchError, SimCloud};

use crate::binder::{BindError, Constraint, check};
use crate::cluster::{BoundPod, Cluster, SimNode};
use crate::events::{Event, EventQueue, JobId, NodeId};
use crate::metrics::Recorder;
use crate::workload::Job;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    /// Not submitted yet.
    Future,
    /// Submitted, not running (some pods may be bound).
    Pending,
    /// All pods run.
    Running,
    /// Completed.
    Done,
}

/// Runtime state of one job.
#[derive(Debug, Clone)]
pub struct JobState {
    /// Phase.
    pub phase: JobPhase,
    /// Node of each pod, when bound.
    pub bindings: Vec<Option<NodeId>>,
    /// Pods bound.
    pub bound: u32,
    /// Current run number (stale finish events carry an older one).
    pub run: u32,
    /// Start of the current run.
    pub started_at: Option<Time>,
    /// First start ever (queue wait ends here).
    pub first_start: Option<Time>,
    /// Completion.
    pub finished_at: Option<Time>,
    /// Times it was evicted.
    pub evictions: u32,
    /// Completed runs (must end at most 1).
    pub completions: u32,
    /// Work saved by checkpoints of earlier, evicted runs (trace seconds).
    pub progress: Dur,
    /// Wall seconds per trace second of the current run (its GPU's speed
    /// and the network slowdown).
    pub stretch: f64,
    /// The network slowdown of the current run (1: none).
    pub slowdown: f64,
    partial_mark: Time,
}

/// Why a job is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictCause {
    /// A policy preempted it.
    Preemption,
    /// Its node was removed by a policy.
    NodeRemoved,
    /// Its spot machine was interrupted.
    Interruption,
    /// The cloud took its machine back at the end of a reservation.
    Reclaim,
}

/// The world of one policy's run.
#[derive(Debug)]
pub struct World {
    /// Virtual now.
    pub now: Time,
    /// The workload.
    pub jobs: Vec<Job>,
    /// Requests of one pod of each job.
    pub requests: Vec<Resources>,
    /// What machines each job's pods accept.
    pub constraints: Vec<Constraint>,
    /// Job states.
    pub states: Vec<JobState>,
    /// Team index of each job.
    pub team_of: Vec<usize>,
    /// Team names.
    pub teams: Vec<String>,
    /// Nodes.
    pub cluster: Cluster,
    /// The cloud.
    pub cloud: SimCloud,
    /// Accounting.
    pub rec: Recorder,
    /// Jobs completed.
    pub done: usize,
    /// The run stops here even if jobs remain.
    pub horizon: Time,
    /// Jobs checkpoint this often; an eviction loses only the work since
    /// the last checkpoint (0: every eviction restarts from scratch).
    pub checkpoint_every: Dur,
    /// Relative speed of the GPU the trace was measured on (1 by default).
    pub trace_speed: f64,
    /// Relative speed per GPU model (models not listed: 1).
    pub gpu_speeds: std::collections::BTreeMap<String, f64>,
    /// Extra run time of a gang spread over racks of one block (0.1: +10 %).
    pub cross_rack_slowdown: f64,
    /// Extra run time of a gang spread over blocks.
    pub cross_block_slowdown: f64,
    queue: EventQueue,
    evicted: Vec<JobId>,
    sample_every: Dur,
}

impl World {
    /// A world for `jobs` (sorted by submit time) on `cloud`.
    pub fn new(
        jobs: Vec<Job>,
        requests: Vec<Resources>,
        constraints: Vec<Constraint>,
        cloud: SimCloud,
        sample_every: Dur,
    ) -> World {
        let mut teams: Vec<String> = jobs.iter().map(|j| j.team.clone()).collect();
        teams.sort();
        teams.dedup();
        let team_of = jobs
            .iter()
            .map(|j| teams.binary_search(&j.team).unwrap_or(0))
            .collect();
        let states = jobs
            .iter()
            .map(|j| JobState {
                phase: JobPhase::Future,
                bindings: vec![None; j.workers as usize],
                bound: 0,
                run: 0,
                started_at: None,
                first_start: None,
                finished_at: None,
                evictions: 0,
                completions: 0,
                progress: Dur(0),
                stretch: 1.0,
                slowdown: 1.0,
                partial_mark: Time(0),
            })
            .collect();
        let last_submit = jobs.iter().map(|j| j.submit).max().unwrap_or(Time(0));
        let longest = jobs.iter().map(|j| j.duration).max().unwrap_or(Dur(0));
        let horizon = last_submit + longest + Dur::hours(7 * 24);
        let mut queue = EventQueue::default();
        for j in &jobs {
            queue.push(j.submit, Event::Arrival(j.id));
        }
        queue.push(Time(0), Event::Sample);
        let n_teams = teams.len();
        World {
            now: Time(0),
            jobs,
            requests,
            constraints,
            states,
            team_of,
            teams,
            cluster: Cluster::default(),
            cloud,
            rec: Recorder::new(n_teams),
            done: 0,
            horizon,
            checkpoint_every: Dur(0),
            trace_speed: 1.0,
            gpu_speeds: std::collections::BTreeMap::new(),
            cross_rack_slowdown: 0.0,
            cross_block_slowdown: 0.0,
            queue,
            evicted: Vec::new(),
            sample_every: Dur(sample_every.as_secs().max(1)),
        }
    }

    /// Schedules an event.
    pub fn schedule(&mut self, at: Time, event: Event) {
        self.queue.push(at.max(self.now), event);
    }

    /// The next event.
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        self.queue.pop()
    }

    /// True when every job completed.
    pub fn all_done(&self) -> bool {
        self.done == self.jobs.len()
    }

    /// Jobs evicted since the last call.
    pub fn take_evicted(&mut self) -> Vec<JobId> {
        std::mem::take(&mut self.evicted)
    }

    /// Launches one machine of `key` named `name` for `pool`. The node is
    /// `Launched` at once; it registers and becomes Ready on the cloud's
    /// boot plan; spot machines may be interrupted later, and the cloud
    /// takes a Capacity Block's machines back before its end.
    pub fn launch(
        &mut self,
        name: String,
        key: &OfferingKey,
        pool: &str,
        reserved_for: Option<JobId>,
    ) -> Result<NodeId, LaunchError> {
        self.launch_in(name, key, pool, reserved_for, None)
    }

    /// [`World::launch`] into a placement group (where the cloud puts its
    /// machines close together).
    pub fn launch_in(
        &mut self,
        name: String,
        key: &OfferingKey,
        pool: &str,
        reserved_for: Option<JobId>,
        placement_group: Option<&str>,
    ) -> Result<NodeId, LaunchError> {
        let plan = match self.cloud.launch_in(key, &name, self.now, placement_group) {
            Ok(p) => p,
            Err(e) => {
                if matches!(e, LaunchError::InsufficientCapacity(_)) {
                    self.rec.capacity_errors += 1;
                }
                return Err(e);
            }
        };
        let offering = self
            .cloud
            .index_of(key)
            .and_then(|i| self.cloud.offering(i))
            .cloned()
            .ok_or_else(|| LaunchError::UnknownOffering(key.clone()))?;
        let mut node = SimNode::new(name, &offering, pool, self.now);
        node.reserved_for = reserved_for;
        node.network = plan.network.clone();
        node.reclaim_at = plan.reclaim_at;
        let gpus = u64::from(node.gpu_count) * 1000;
        let id = self.cluster.add(node);
        self.rec.launches += 1;
        self.rec.cur_alloc_gpu_millis += gpus;
        self.rec.peak_nodes = self.rec.peak_nodes.max(self.cluster.alive_count());
        self.schedule(self.now + plan.register_after, Event::NodeRegistered(id));
        self.schedule(self.now + plan.ready_after, Event::NodeReady(id));
        let end = match (plan.interrupt_at, plan.reclaim_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = end {
            self.schedule(t, Event::Interrupt(id));
        }
        Ok(id)
    }

    /// A job arrives.
    pub fn arrive(&mut self, job: JobId) {
        if self.states[job].phase == JobPhase::Future {
            self.states[job].phase = JobPhase::Pending;
            self.rec.cur_pending[self.team_of[job]] += 1;
        }
    }

    /// A node registers; false when the event is stale.
    pub fn node_registered(&mut self, id: NodeId) -> bool {
        let now = self.now;
        let n = &mut self.cluster.nodes[id];
        if !n.alive() || n.phase != NodePhase::Launched {
            return false;
        }
        n.phase = NodePhase::Registered;
        n.phase_since = now;
        true
    }

    /// A node becomes Ready; false when the event is stale.
    pub fn node_ready(&mut self, id: NodeId) -> bool {
        let now = self.now;
        let n = &mut self.cluster.nodes[id];
        if !n.alive() || !n.phase.in_flight() {
            return false;
        }
        n.phase = NodePhase::Ready;
        n.phase_since = now;
        if n.pods.is_empty() {
            n.empty_since = Some(now);
        }
        true
    }

    /// Whether pod `pod` of `job` may be bound to `node` now.
    pub fn can_bind(&self, job: JobId, pod: u32, node: NodeId) -> Result<(), BindError> {
        let st = &self.states[job];
        if st.phase != JobPhase::Pending || st.bindings.get(pod as usize) != Some(&None) {
            return Err(BindError::BadPod(pod));
        }
        check(
            &self.cluster.nodes[node],
            &self.constraints[job],
            &self.requests[job],
        )
    }

    /// Binds pod `pod` of `job` to `node`; the job starts when its last pod
    /// is bound (pods run as soon as they are bound).
    pub fn bind(&mut self, job: JobId, pod: u32, node: NodeId) -> Result<(), BindError> {
        self.can_bind(job, pod, node)?;
        self.touch_partial(job);
        let now = self.now;
        self.close_idle(node);
        let req = self.requests[job].clone();
        let n = &mut self.cluster.nodes[node];
        n.used.add(&req);
        n.pods.push(BoundPod {
            job,
            pod,
            since: now,
        });
        n.empty_since = None;
        let st = &mut self.states[job];
        st.bindings[pod as usize] = Some(node);
        st.bound += 1;
        if st.bound == self.jobs[job].workers {
            self.start(job);
        }
        Ok(())
    }

    fn start(&mut self, job: JobId) {
        let now = self.now;
        let st = &mut self.states[job];
        st.phase = JobPhase::Running;
        st.started_at = Some(now);
        st.run += 1;
        let run = st.run;
        if st.first_start.is_none() {
            st.first_start = Some(now);
            let wait = now.since(self.jobs[job].submit).as_secs() as f64;
            self.rec.waits.push((self.team_of[job], wait));
        }
        self.rec.cur_busy_gpu_millis += self.jobs[job].total_gpu_millis();
        let team = self.team_of[job];
        self.rec.cur_pending[team] = self.rec.cur_pending[team].saturating_sub(1);
        let left = self.jobs[job]
            .duration
            .as_secs()
            .saturating_sub(self.states[job].progress.as_secs());
        let slowdown = self.slowdown_of(job);
        let stretch = self.stretch_of(job) * slowdown;
        self.states[job].stretch = stretch;
        self.states[job].slowdown = slowdown;
        let wall = (left as f64 * stretch).ceil() as u64;
        let end = now + Dur(wall.max(1));
        self.schedule(end, Event::JobFinished { job, run });
    }

    /// Wall seconds per trace second for `job` on the nodes it is bound to:
    /// the trace GPU's speed over the slowest bound GPU's.
    fn stretch_of(&self, job: JobId) -> f64 {
        if self.gpu_speeds.is_empty() {
            return 1.0;
        }
        let slowest = self.states[job]
            .bindings
            .iter()
            .flatten()
            .map(|n| {
                self.cluster.nodes[*n]
                    .gpu_model
                    .as_ref()
                    .and_then(|m| self.gpu_speeds.get(m.as_str()).copied())
                    .unwrap_or(1.0)
            })
            .fold(f64::INFINITY, f64::min);
        if slowest.is_finite() && slowest > 0.0 {
            self.trace_speed / slowest
        } else {
            1.0
        }
    }

    /// The network slowdown of `job` on the nodes it is bound to: 1 on one
    /// node, in one rack, or on nodes that say nothing of their network;
    /// `1 + cross_rack_slowdown` over racks of one block;
    /// `1 + cross_block_slowdown` over blocks. Counts the run.
    fn slowdown_of(&mut self, job: JobId) -> f64 {
        let mut nodes: Vec<NodeId> = self.states[job]
            .bindings
            .iter()
            .flatten()
            .copied()
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.len() < 2 {
            return 1.0;
        }
        self.rec.multi_node_starts += 1;
        let nets: Vec<&Vec<String>> = nodes
            .iter()
            .map(|n| &self.cluster.nodes[*n].network)
            .collect();
        if nets.iter().any(|n| n.len() < 2) {
            return 1.0;
        }
        let same_block = nets.iter().all(|n| n[0] == nets[0][0]);
        if same_block && nets.iter().all(|n| n[1] == nets[0][1]) {
            return 1.0;
        }
        if same_block {
            self.rec.starts_across_racks += 1;
            1.0 + self.cross_rack_slowdown
        } else {
            self.rec.starts_across_blocks += 1;
            1.0 + self.cross_block_slowdown
        }
    }

    /// GPU-seconds of `wall` seconds of a run of `job` that its network
    /// slowdown added.
    fn note_slowdown(&mut self, job: JobId, wall: u64) {
        let s = self.states[job].slowdown;
        if s > 1.0 {
            let gpus = self.jobs[job].total_gpu_millis() as f64 / 1000.0;
            self.rec.slowdown_gpu_secs += gpus * wall as f64 * (1.0 - 1.0 / s);
        }
    }

    /// A run ends; false when the event is stale.
    pub fn finish(&mut self, job: JobId, run: u32) -> bool {
        let st = &self.states[job];
        if st.phase != JobPhase::Running || st.run != run {
            return false;
        }
        let ran = st.started_at.map_or(0, |t| self.now.since(t).as_secs());
        self.note_slowdown(job, ran);
        self.unbind_all(job);
        let st = &mut self.states[job];
        st.phase = JobPhase::Done;
        st.finished_at = Some(self.now);
        st.completions += 1;
        let gpus = self.jobs[job].total_gpu_millis() as f64 / 1000.0;
        let left = self.jobs[job]
            .duration
            .as_secs()
            .saturating_sub(st.progress.as_secs());
        self.rec.busy_gpu_secs += gpus * left as f64;
        st.progress = self.jobs[job].duration;
        self.rec.cur_busy_gpu_millis = self
            .rec
            .cur_busy_gpu_millis
            .saturating_sub(self.jobs[job].total_gpu_millis());
        self.rec.completed += 1;
        self.done += 1;
        true
    }

    /// Evicts a job as a whole: every pod unbound, the run lost, the job
    /// pending again.
    pub fn evict(&mut self, job: JobId, cause: EvictCause) {
        let now = self.now;
        match self.states[job].phase {
            JobPhase::Running => {
                let started = self.states[job].started_at.unwrap_or(now);
                let gpus = self.jobs[job].total_gpu_millis();
                let ran = now.since(started).as_secs();
                let every = self.jobs[job]
                    .checkpoint
                    .unwrap_or(self.checkpoint_every)
                    .as_secs();
                let left = self.jobs[job]
                    .duration
                    .as_secs()
                    .saturating_sub(self.states[job].progress.as_secs());
                // Work up to the last checkpoint (every `every` wall seconds)
                // is kept, in trace seconds (never the whole job: a job
                // always finishes through a completed run).
                let stretch = self.states[job].stretch.max(f64::MIN_POSITIVE);
                let saved_wall = ran.checked_div(every).map_or(0, |k| k * every);
                let saved =
                    ((saved_wall as f64 / stretch).floor() as u64).min(left.saturating_sub(1));
                self.states[job].progress = Dur(self.states[job].progress.as_secs() + saved);
                self.rec.busy_gpu_secs += gpus as f64 / 1000.0 * saved as f64;
                let lost = gpus as f64 / 1000.0 * (ran - saved_wall.min(ran)) as f64;
                self.rec.wasted_gpu_secs += lost;
                match cause {
                    EvictCause::Interruption => self.rec.lost_interruption_gpu_secs += lost,
                    EvictCause::Reclaim => self.rec.lost_reclaim_gpu_secs += lost,
                    EvictCause::Preemption | EvictCause::NodeRemoved => {}
                }
                self.note_slowdown(job, ran);
                self.rec.cur_busy_gpu_millis = self.rec.cur_busy_gpu_millis.saturating_sub(gpus);
                self.rec.cur_pending[self.team_of[job]] += 1;
            }
            JobPhase::Pending => self.touch_partial(job),
            JobPhase::Future | JobPhase::Done => return,
        }
        self.unbind_all(job);
        let st = &mut self.states[job];
        st.phase = JobPhase::Pending;
        st.started_at = None;
        st.run += 1;
        st.evictions += 1;
        st.partial_mark = now;
        self.rec.evictions += 1;
        if cause == EvictCause::Preemption {
            self.rec.preemptions += 1;
        }
        self.evicted.push(job);
    }

    /// Unbinds the pods of a job that has not started (a baseline giving up
    /// a partial placement); no-op for running jobs.
    pub fn unbind_pending(&mut self, job: JobId) {
        if self.states[job].phase == JobPhase::Pending {
            self.touch_partial(job);
            self.unbind_all(job);
        }
    }

    fn unbind_all(&mut self, job: JobId) {
        let now = self.now;
        let req = self.requests[job].clone();
        let team = self.team_of[job];
        let bindings = std::mem::take(&mut self.states[job].bindings);
        let workers = bindings.len();
        for node in bindings.into_iter().flatten() {
            let n = &mut self.cluster.nodes[node];
            if let Some(pos) = n.pods.iter().position(|p| p.job == job) {
                let p = n.pods.swap_remove(pos);
                n.used.saturating_sub(&req);
                let share = req.gpu_millis as f64 / (f64::from(n.gpu_count.max(1)) * 1000.0);
                let secs = now.since(p.since).as_secs() as f64;
                self.rec.bound_gpu_secs += req.gpu_millis as f64 / 1000.0 * secs;
                n.bound_gpu_secs += req.gpu_millis as f64 / 1000.0 * secs;
                self.rec.cost_by_team[team] += n.price.usd() * share * secs / 3600.0;
                if n.pods.is_empty() && n.alive() && n.phase == NodePhase::Ready {
                    n.empty_since = Some(now);
                }
            }
        }
        let st = &mut self.states[job];
        st.bindings = vec![None; workers];
        st.bound = 0;
    }

    fn touch_partial(&mut self, job: JobId) {
        let now = self.now;
        let st = &mut self.states[job];
        if st.phase == JobPhase::Pending && st.bound > 0 {
            let gpus = f64::from(st.bound) * self.jobs[job].pod_gpu_millis as f64 / 1000.0;
            self.rec.partial_gpu_secs += gpus * now.since(st.partial_mark).as_secs() as f64;
        }
        st.partial_mark = now;
    }

    /// Sets the job `node` is held for (`None`: for none). An empty Ready
    /// node's idle time so far counts under its former holder, held or not,
    /// and counting starts again: held time begins when the node is held,
    /// not when it became empty.
    pub fn reserve(&mut self, node: NodeId, job: Option<JobId>) {
        if self.cluster.nodes[node].reserved_for == job {
            return;
        }
        let empty = self.cluster.nodes[node].empty_since.is_some();
        self.close_idle(node);
        let now = self.now;
        let n = &mut self.cluster.nodes[node];
        n.reserved_for = job;
        if empty {
            n.empty_since = Some(now);
        }
    }

    fn close_idle(&mut self, node: NodeId) {
        let now = self.now;
        let n = &mut self.cluster.nodes[node];
        if let Some(t) = n.empty_since.take()
            && n.phase == NodePhase::Ready
        {
            let secs = now.since(t).as_secs() as f64;
            self.rec.idle_node_secs += secs;
            if n.reserved_for.is_some() {
                self.rec.reserved_idle_gpu_secs += f64::from(n.gpu_count) * secs;
            }
        }
    }

    /// Removes a node: evicts every job with a pod on it, stops its bill.
    /// Returns the evicted jobs.
    pub fn terminate(&mut self, node: NodeId, cause: EvictCause) -> Vec<JobId> {
        if !self.cluster.nodes[node].alive() {
            return Vec::new();
        }
        let mut jobs: Vec<JobId> = self.cluster.nodes[node]
            .pods
            .iter()
            .map(|p| p.job)
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        for j in &jobs {
            self.evict(*j, cause);
        }
        self.close_idle(node);
        self.bill_node(node);
        let key = self.cluster.nodes[node].key.clone();
        self.cluster.remove(node, self.now);
        self.cloud.machine_gone(&key);
        jobs
    }

    fn bill_node(&mut self, node: NodeId) {
        let now = self.now;
        let n = &self.cluster.nodes[node];
        let secs = now.since(n.created_at).as_secs();
        let micros = u128::from(n.price.0) * u128::from(secs) / 3600;
        let gpus = u64::from(n.gpu_count);
        let cap = n.capacity_type();
        self.rec.bill(micros, cap);
        self.rec.gpu_alloc_secs += (gpus * secs) as f64;
        let booting = if n.phase == NodePhase::Ready {
            n.phase_since.since(n.created_at).as_secs().min(secs)
        } else {
            secs
        };
        self.rec.booting_gpu_secs += (gpus * booting) as f64;
        if cap == muster_planner::CapacityType::Reserved {
            self.rec.reserved_gpu_secs += (gpus * secs) as f64;
        }
        let idle = ((gpus * (secs - booting)) as f64 - n.bound_gpu_secs).max(0.0);
        *self
            .rec
            .idle_gpu_secs_by_node_gpus
            .entry(n.gpu_count)
            .or_default() += idle;
        self.rec.cur_alloc_gpu_millis = self.rec.cur_alloc_gpu_millis.saturating_sub(gpus * 1000);
    }

    /// The cloud interrupts a machine (a spot interruption, or the end of
    /// its reservation); false when the node is already gone.
    pub fn interrupt(&mut self, node: NodeId) -> bool {
        let n = &self.cluster.nodes[node];
        if !n.alive() {
            return false;
        }
        if n.reclaim_at.is_some_and(|t| t <= self.now) {
            self.rec.capacity_reclaims += 1;
            self.terminate(node, EvictCause::Reclaim);
        } else {
            self.rec.interruptions += 1;
            self.terminate(node, EvictCause::Interruption);
        }
        true
    }

    /// Records a sample and schedules the next.
    pub fn sample(&mut self) {
        self.rec.sample(self.now);
        let next = self.now + self.sample_every;
        self.schedule(next, Event::Sample);
    }

    /// Ends the run at `now`: bills every live node, closes open intervals.
    pub fn finalize(&mut self) {
        let ids: Vec<NodeId> = self.cluster.alive_ids().collect();
        for id in ids {
            self.close_idle(id);
            self.bill_node(id);
            self.cluster.remove(id, self.now);
        }
        for j in 0..self.jobs.len() {
            self.touch_partial(j);
        }
        self.rec.sample(self.now);
    }
}
