//! Cloud calls off the planning path. A planning cycle never waits for a
//! cloud: it asks [`CloudWork`] for the outcome of a job (launch one
//! PoolNode's machine, terminate one, list a pool's offerings, resolve a
//! NodeClass, read a cloud's interruption notices, collect its orphans),
//! and gets
//! either the outcome of a job that finished since, or [`Progress::Waiting`]
//! while the job runs in the background (started on the first ask). A
//! finished job notifies the planning loop, whose next cycle takes the
//! outcome and writes it (PoolNode status, the offering cache), so the
//! loop acts only on state.
//!
//! Each NodeClass's provider gets at most `per_provider` calls at once (a
//! semaphore per NodeClass); jobs beyond that wait for a permit in the
//! background, never in a cycle. Jobs run as tasks of a `JoinSet` the
//! context owns: when the controller stops (or is killed, or loses the
//! Lease) they are dropped with it, mid-call, which every cloud call
//! tolerates (idempotent by key, terminate twice, list again).

use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

/// One unit of cloud work, by what it is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Job {
    /// Launch the machine of this PoolNode.
    Launch(String),
    /// Terminate the machine of this PoolNode being deleted, then let the
    /// PoolNode go.
    Terminate(String),
    /// List the offerings of this pool.
    Offerings(String),
    /// Resolve this NodeClass's selectors (subnets, images, zones) for its
    /// status.
    Resolve(String),
    /// Read the interruption notices of this NodeClass's cloud.
    Interruptions(String),
    /// Collect the orphans of this NodeClass's cloud.
    Orphans(String),
    /// Describe the machine of this PoolNode, for the network labels of
    /// its Node.
    Describe(String),
}

impl Job {
    /// The PoolNode a job belongs to, if any.
    fn pool_node(&self) -> Option<&str> {
        match self {
            Job::Launch(n) | Job::Terminate(n) | Job::Describe(n) => Some(n),
            Job::Offerings(_) | Job::Resolve(_) | Job::Interruptions(_) | Job::Orphans(_) => None,
        }
    }
}

/// Where a job stands.
#[derive(Debug)]
pub(crate) enum Progress<T> {
    /// Running (or just started, or settled): nothing to do this cycle.
    Waiting,
    /// Finished since the last ask, with its outcome (handed out once).
    Done(T),
}

enum Slot {
    Running,
    Done(Box<dyn Any + Send>),
    /// The outcome was taken and acted on; the job is not started again
    /// until its PoolNode is gone from the caches (which may lag the write
    /// that acted on it).
    Settled,
}

type Slots = Arc<Mutex<BTreeMap<Job, Slot>>>;

/// The background cloud work of one controller.
pub(crate) struct CloudWork {
    slots: Slots,
    limits: Mutex<BTreeMap<String, Arc<Semaphore>>>,
    per_provider: usize,
    tasks: Mutex<JoinSet<()>>,
    changes: Arc<Notify>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CloudWork {
    /// Work with at most `per_provider` calls at once per NodeClass; a
    /// finished job notifies `changes`.
    pub fn new(per_provider: usize, changes: Arc<Notify>) -> CloudWork {
        CloudWork {
            slots: Arc::default(),
            limits: Mutex::default(),
            per_provider: per_provider.max(1),
            tasks: Mutex::new(JoinSet::new()),
            changes,
        }
    }

    /// The outcome of `job` if it finished; otherwise [`Progress::Waiting`],
    /// having started it (as `start()`, on `node_class`'s provider) when it
    /// was not running. `notify` says whether the outcome wakes the planning
    /// loop (an outcome the loop must act on does; a failure the next
    /// regular cycle retries does not, so a failing cloud is not called in a
    /// tight loop).
    pub(crate) fn poll<T, F>(
        &self,
        job: Job,
        node_class: &str,
        notify: fn(&T) -> bool,
        start: impl FnOnce() -> F,
    ) -> Progress<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let mut slots = lock(&self.slots);
        match slots.remove(&job) {
            // (an outcome of another type under the same key cannot happen:
            // each kind of job has one outcome type; it would start afresh)
            Some(Slot::Done(out)) => {
                if let Ok(out) = out.downcast::<T>() {
                    return Progress::Done(*out);
                }
            }
            Some(other @ (Slot::Running | Slot::Settled)) => {
                slots.insert(job, other);
                return Progress::Waiting;
            }
            None => {}
        }
        slots.insert(job.clone(), Slot::Running);
        drop(slots);
        let permits = self.semaphore(node_class);
        let slots = self.slots.clone();
        let changes = self.changes.clone();
        let call = start();
        let mut tasks = lock(&self.tasks);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            // the permit is held for the call only; a closed semaphore never happens
            let out = match permits.acquire_owned().await {
                Ok(_permit) => call.await,
                Err(_) => call.await,
            };
            let wake = notify(&out);
            {
                let mut slots = lock(&slots);
                // a slot purged meanwhile (its PoolNode gone) stays purged
                if let Some(slot) = slots.get_mut(&job) {
                    *slot = Slot::Done(Box::new(out));
                }
            }
            if wake {
                changes.notify_one();
            }
        });
        Progress::Waiting
    }

    /// Keeps `job` from starting again after its outcome was acted on, until
    /// [`CloudWork::retain_pool_nodes`] finds its PoolNode gone.
    pub(crate) fn settle(&self, job: Job) {
        lock(&self.slots).insert(job, Slot::Settled);
    }

    /// Forgets a finished or settled `job` (one still running is kept), so
    /// the next [`CloudWork::poll`] starts it again.
    pub(crate) fn forget(&self, job: &Job) {
        let mut slots = lock(&self.slots);
        if !matches!(slots.get(job), Some(Slot::Running)) {
            slots.remove(job);
        }
    }

    /// True while `job` runs.
    pub(crate) fn running(&self, job: &Job) -> bool {
        matches!(lock(&self.slots).get(job), Some(Slot::Running))
    }

    /// Forgets the jobs of PoolNodes that are no longer observed.
    pub(crate) fn retain_pool_nodes(&self, alive: impl Fn(&str) -> bool) {
        lock(&self.slots).retain(|job, _| job.pool_node().is_none_or(&alive));
    }

    /// How many jobs run (or wait for a permit) now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.slots)
            .values()
            .filter(|s| matches!(s, Slot::Running))
            .count()
    }

    /// Drops every job, mid-call (leadership lost, shutdown); their outcomes
    /// are lost and the next leader asks again (every call is idempotent).
    pub(crate) fn abort_all(&self) {
        lock(&self.tasks).abort_all();
        lock(&self.slots).clear();
    }

    fn semaphore(&self, node_class: &str) -> Arc<Semaphore> {
        lock(&self.limits)
            .entry(node_class.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_provider)))
            .clone()
    }
}

impl Drop for CloudWork {
    fn drop(&mut self) {
        lock(&self.tasks).abort_all();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn always<T>(_: &T) -> bool {
        true
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_runs_in_the_background_and_hands_its_outcome_out_once() {
        let changes = Arc::new(Notify::new());
        let work = CloudWork::new(4, changes.clone());
        let job = Job::Launch("pn-1".into());
        let slow = || async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            7u32
        };
        assert!(matches!(
            work.poll(job.clone(), "nc", always, slow),
            Progress::Waiting
        ));
        assert!(work.running(&job));
        // asking again while it runs starts nothing
        assert!(matches!(
            work.poll(job.clone(), "nc", always, || async { 99u32 }),
            Progress::Waiting
        ));
        changes.notified().await;
        assert!(matches!(
            work.poll(job.clone(), "nc", always, slow),
            Progress::Done(7)
        ));
        // taken: the next ask starts the job again
        assert!(matches!(
            work.poll(job.clone(), "nc", always, || async { 8u32 }),
            Progress::Waiting
        ));
        changes.notified().await;
        work.settle(job.clone());
        assert!(matches!(
            work.poll(job.clone(), "nc", always, || async { 9u32 }),
            Progress::Waiting
        ));
        // forgotten: asked again, it starts again
        work.forget(&job);
        assert!(matches!(
            work.poll(job.clone(), "nc", always, || async { 10u32 }),
            Progress::Waiting
        ));
        assert!(work.running(&job));
        work.retain_pool_nodes(|n| n != "pn-1");
        assert_eq!(work.in_flight(), 0);
        assert!(!work.running(&job));
    }

    #[tokio::test(start_paused = true)]
    async fn calls_per_provider_are_bounded() {
        let changes = Arc::new(Notify::new());
        let work = CloudWork::new(2, changes);
        let now = Arc::new(Mutex::new((0usize, 0usize))); // (running, most at once)
        for i in 0..6 {
            let now = now.clone();
            let _ = work.poll(
                Job::Launch(format!("a-{i}")),
                "a",
                always,
                move || async move {
                    {
                        let mut n = lock(&now);
                        n.0 += 1;
                        n.1 = n.1.max(n.0);
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    lock(&now).0 -= 1;
                },
            );
        }
        // another NodeClass has its own permits
        let other = work.poll(Job::Launch("b-0".into()), "b", always, || async {});
        assert!(matches!(other, Progress::Waiting));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(lock(&now).1, 2, "at most two calls on NodeClass a at once");
        for i in 0..6 {
            assert!(matches!(
                work.poll(Job::Launch(format!("a-{i}")), "a", always, || async {}),
                Progress::Done(())
            ));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn aborted_jobs_leave_nothing_behind() {
        let changes = Arc::new(Notify::new());
        let work = CloudWork::new(2, changes);
        let job = Job::Offerings("pool".into());
        let _ = work.poll(job.clone(), "nc", always, || {
            futures::future::pending::<()>()
        });
        assert_eq!(work.in_flight(), 1);
        work.abort_all();
        assert_eq!(work.in_flight(), 0);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!work.running(&job));
    }
}
