//! The election loop against an in-memory Lease with resourceVersion
//! preconditions, in tokio's paused time: who leads when, measured.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::time::Instant;

use crate::controller::base::metrics::Metrics;
use crate::controller::leader::campaign::{Candidate, Timing};
use crate::controller::leader::record::Elector;
use crate::controller::leader::store::{LeaderError, LeaseStore};
use crate::controller::leader::{Leadership, campaign_until, while_leading};

/// The API server's copy of the Lease.
#[derive(Default)]
struct Server {
    lease: Option<Lease>,
    version: u64,
}

/// One candidate's connection to the shared Lease.
#[derive(Clone)]
struct TestStore {
    server: Arc<Mutex<Server>>,
    /// Requests never answer (a partition) while set.
    hang: Arc<AtomicBool>,
    /// Successful writes of this candidate.
    writes: Arc<AtomicU32>,
}

impl TestStore {
    fn new(server: &Arc<Mutex<Server>>) -> TestStore {
        TestStore {
            server: server.clone(),
            hang: Arc::default(),
            writes: Arc::default(),
        }
    }

    async fn answer(&self) {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }

    fn store(&self, spec: LeaseSpec) -> Lease {
        let mut server = self.server.lock().expect("lock");
        server.version += 1;
        let mut lease = Lease::default();
        lease.metadata.name = Some("l".into());
        lease.metadata.resource_version = Some(server.version.to_string());
        lease.spec = Some(spec);
        server.lease = Some(lease.clone());
        self.writes.fetch_add(1, Ordering::SeqCst);
        lease
    }
}

impl LeaseStore for TestStore {
    async fn get(&self) -> Result<Option<Lease>, LeaderError> {
        self.answer().await;
        Ok(self.server.lock().expect("lock").lease.clone())
    }

    async fn create(&self, spec: LeaseSpec) -> Result<Lease, LeaderError> {
        self.answer().await;
        if self.server.lock().expect("lock").lease.is_some() {
            return Err(LeaderError::Conflict);
        }
        Ok(self.store(spec))
    }

    async fn replace(&self, base: &Lease, spec: LeaseSpec) -> Result<Lease, LeaderError> {
        self.answer().await;
        let current = self
            .server
            .lock()
            .expect("lock")
            .lease
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        if current.is_none() || current != base.metadata.resource_version {
            return Err(LeaderError::Conflict);
        }
        Ok(self.store(spec))
    }
}

const TIMING: Timing = Timing {
    renew_deadline: Duration::from_secs(10),
    retry_period: Duration::from_secs(2),
};
const LEASE: Duration = Duration::from_secs(15);

struct Running {
    leadership: Leadership,
    store: TestStore,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    /// When leadership turned on (true) and off (false).
    changes: Arc<Mutex<Vec<(bool, Instant)>>>,
}

impl Running {
    fn changes(&self) -> Vec<(bool, Instant)> {
        self.changes.lock().expect("lock").clone()
    }

    async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        (&mut self.task).await.expect("campaign ends");
    }
}

fn candidate(server: &Arc<Mutex<Server>>, identity: &str) -> Running {
    let leadership = Leadership::elected(Arc::new(Metrics::new()));
    let store = TestStore::new(server);
    let c = Candidate::new(
        store.clone(),
        Elector::new(identity, LEASE),
        TIMING,
        leadership.clone(),
        || 0.0,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(campaign_until(c, stopped));
    let changes = Arc::new(Mutex::new(Vec::new()));
    let mut rx = leadership.subscribe();
    let log = changes.clone();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let leading = *rx.borrow_and_update();
            log.lock().expect("lock").push((leading, Instant::now()));
        }
    });
    Running {
        leadership,
        store,
        stop: Some(stop),
        task,
        changes,
    }
}

fn holder(server: &Arc<Mutex<Server>>) -> Option<String> {
    server
        .lock()
        .expect("lock")
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
}

fn transitions(server: &Arc<Mutex<Server>>) -> Option<i32> {
    server
        .lock()
        .expect("lock")
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref()?.lease_transitions)
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

#[tokio::test(start_paused = true)]
async fn one_leader_and_a_silent_follower() {
    let server = Arc::new(Mutex::new(Server::default()));
    let a = candidate(&server, "a");
    sleep(0.1).await;
    let b = candidate(&server, "b");
    sleep(60.0).await;
    assert_eq!(holder(&server).as_deref(), Some("a"));
    assert!(a.leadership.may_write());
    assert!(!b.leadership.may_write());
    assert_eq!(
        b.store.writes.load(Ordering::SeqCst),
        0,
        "a follower never writes a valid Lease"
    );
    // a renews every retry period: about 60 / 2 writes, not more
    let writes = a.store.writes.load(Ordering::SeqCst);
    assert!((29..=31).contains(&writes), "{writes} writes");
    assert_eq!(transitions(&server), Some(0));
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_leader_stops_before_the_other_can_take_over() {
    let server = Arc::new(Mutex::new(Server::default()));
    let a = candidate(&server, "a");
    sleep(0.1).await;
    let b = candidate(&server, "b");
    sleep(10.0).await;
    assert!(a.leadership.may_write());
    // a's requests stop being answered (a partition; a paused process alike)
    let cut = Instant::now();
    a.store.hang.store(true, Ordering::SeqCst);
    sleep(40.0).await;
    let a_changes = a.changes();
    let b_changes = b.changes();
    assert_eq!(a_changes.len(), 2, "a led, then stopped: {a_changes:?}");
    assert_eq!(b_changes.len(), 1, "b leads: {b_changes:?}");
    let (false, a_lost) = *a_changes.last().expect("a changed") else {
        panic!("a still leads: {a_changes:?}");
    };
    let (true, b_won) = *b_changes.last().expect("b changed") else {
        panic!("b does not lead: {b_changes:?}");
    };
    assert!(!a.leadership.may_write());
    assert!(b.leadership.may_write());
    assert_eq!(holder(&server).as_deref(), Some("b"));
    assert_eq!(transitions(&server), Some(1));
    // a's last renewal was sent at most a retry period before the cut: it
    // stops at most a renew deadline later
    let lost_after = a_lost - cut;
    assert!(
        lost_after <= TIMING.renew_deadline,
        "a lost {lost_after:?} after the cut"
    );
    // b takes over a lease duration after it last saw a's record change, at
    // its next try: never earlier than lease − renew deadline after a stopped
    let margin = b_won - a_lost;
    assert!(
        margin >= LEASE - TIMING.renew_deadline,
        "b took over {margin:?} after a stopped"
    );
    let took = b_won - cut;
    assert!(took <= LEASE + TIMING.retry_period, "b took {took:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stopped_leader_releases_and_the_other_takes_over_at_its_next_try() {
    let server = Arc::new(Mutex::new(Server::default()));
    let mut a = candidate(&server, "a");
    sleep(0.1).await;
    let b = candidate(&server, "b");
    sleep(5.0).await;
    let stopped = Instant::now();
    a.stop().await;
    assert!(!a.leadership.may_write(), "the fence closes at once");
    {
        let server = server.lock().expect("lock");
        let spec = server
            .lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .expect("spec");
        assert_eq!(spec.holder_identity, None, "released");
        assert_eq!(spec.lease_duration_seconds, Some(1));
    }
    sleep(5.0).await;
    let (true, b_won) = *b.changes().last().expect("b changed") else {
        panic!("b does not lead");
    };
    let took = b_won - stopped;
    assert!(took <= TIMING.retry_period, "b took {took:?}");
    assert_eq!(holder(&server).as_deref(), Some("b"));
    assert_eq!(transitions(&server), Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_stops_at_once() {
    let server = Arc::new(Mutex::new(Server::default()));
    let a = candidate(&server, "a");
    sleep(3.0).await;
    assert!(a.leadership.may_write());
    // someone else wrote the Lease (an operator, a misconfigured twin)
    let intruder = TestStore::new(&server);
    let current = server.lock().expect("lock").lease.clone().expect("lease");
    let mut spec = current.spec.clone().expect("spec");
    spec.holder_identity = Some("z".into());
    intruder.replace(&current, spec).await.expect("write");
    sleep(TIMING.retry_period.as_secs_f64() + 0.5).await;
    assert!(!a.leadership.may_write());
    assert_eq!(a.changes().last().map(|c| c.0), Some(false));
    assert_eq!(
        holder(&server).as_deref(),
        Some("z"),
        "a does not write over it"
    );
}

#[tokio::test(start_paused = true)]
async fn losing_leadership_cancels_the_work_in_flight() {
    let server = Arc::new(Mutex::new(Server::default()));
    let a = candidate(&server, "a");
    sleep(0.1).await;
    assert!(a.leadership.may_write());
    let mut leading = a.leadership.subscribe();
    let steps = Arc::new(AtomicU32::new(0));
    let counted = steps.clone();
    // a long cycle: one step a second
    let work = async move {
        loop {
            sleep(1.0).await;
            counted.fetch_add(1, Ordering::SeqCst);
        }
    };
    let cut = Instant::now();
    a.store.hang.store(true, Ordering::SeqCst);
    let out = while_leading(&mut leading, work).await;
    assert!(out.is_none(), "the work was cancelled");
    let ran = Instant::now() - cut;
    assert!(
        ran <= TIMING.renew_deadline,
        "cancelled {ran:?} after the cut"
    );
    let done = steps.load(Ordering::SeqCst);
    sleep(5.0).await;
    assert_eq!(
        steps.load(Ordering::SeqCst),
        done,
        "nothing runs after the loss"
    );
    // work that ends while leading gives its result
    let b = candidate(&Arc::new(Mutex::new(Server::default())), "b");
    sleep(0.1).await;
    let mut leading = b.leadership.subscribe();
    assert_eq!(while_leading(&mut leading, async { 7 }).await, Some(7));
}
