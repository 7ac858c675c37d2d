//! When to kill: a window is a kind of step of the controller, recognised in
//! the API server's audit log (a matching request of the process to kill,
//! read with its body) or in the cloud's counts of launch and terminate
//! calls; the kill follows the
//! match after a short seeded delay, so it lands right after the write or
//! in the gap to the next one.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The windows the soak kills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Window {
    /// A PoolNode was written, its cloud call not yet made (0–30 ms after).
    PoolNodeCreated,
    /// The cloud created an instance, its PoolNode status not yet written.
    InstanceCreated,
    /// A PoolNode's status was written (other than to Draining).
    PoolNodeStatus,
    /// A PoolNode's status was set to Draining (consolidation, a released
    /// or interrupted node): the drain's first step.
    Draining,
    /// A Node was cordoned (the drain's second step).
    Cordon,
    /// A Gang's status was set to Evicted (preemption, or its node
    /// draining): the whole-gang eviction's first step.
    GangEvicted,
    /// A Job was suspended by the controller: the eviction's write to the
    /// workload (its pods then go; its start time and template follow).
    JobRequeued,
    /// The cloud received a terminate call (a PoolNode's finalizer), its
    /// Node and finalizer not yet removed.
    InstanceTerminated,
    /// A Node was deleted (a PoolNode's finalizer).
    NodeDeleted,
    /// A PoolNode's finalizer or deletion (the end of its life).
    PoolNodeRemoved,
    /// A Job was written otherwise (unsuspend, pinning, status).
    JobWrite,
    /// A Gang was created or its status written otherwise.
    GangWrite,
    /// Any moment.
    Random,
}

impl Window {
    /// All windows, with their weights: the launch path, the drain and
    /// eviction steps and the Job life cycle first.
    pub const WEIGHTED: [(Window, u32); 13] = [
        (Window::PoolNodeCreated, 4),
        (Window::InstanceCreated, 4),
        (Window::PoolNodeStatus, 3),
        (Window::Draining, 3),
        (Window::Cordon, 2),
        (Window::GangEvicted, 3),
        (Window::JobRequeued, 3),
        (Window::InstanceTerminated, 2),
        (Window::NodeDeleted, 2),
        (Window::PoolNodeRemoved, 2),
        (Window::JobWrite, 3),
        (Window::GangWrite, 2),
        (Window::Random, 2),
    ];

    /// Its name in the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            Window::PoolNodeCreated => "poolnode-created",
            Window::InstanceCreated => "instance-created",
            Window::PoolNodeStatus => "poolnode-status",
            Window::Draining => "draining",
            Window::Cordon => "cordon",
            Window::GangEvicted => "gang-evicted",
            Window::JobRequeued => "job-requeued",
            Window::InstanceTerminated => "instance-terminated",
            Window::NodeDeleted => "node-deleted",
            Window::PoolNodeRemoved => "poolnode-removed",
            Window::JobWrite => "job-write",
            Window::GangWrite => "gang-write",
            Window::Random => "random",
        }
    }

    /// Whether an audit record of the process to kill opens this window
    /// (the record's `requestObject` is the write's body: the server runs
    /// with `--audit-level Request`). The cloud's launch and terminate open
    /// [`Window::InstanceCreated`] and [`Window::InstanceTerminated`] by its
    /// counts instead.
    fn matches(self, e: &Value) -> bool {
        let s = |k: &str| e[k].as_str().unwrap_or_default();
        let write = matches!(s("verb"), "create" | "update" | "patch" | "delete");
        let body = &e["requestObject"];
        let status_write = write && s("subresource") == "status";
        let spec_write = matches!(s("verb"), "update" | "patch") && s("subresource").is_empty();
        match self {
            Window::PoolNodeCreated => s("verb") == "create" && s("resource") == "poolnodes",
            Window::PoolNodeStatus => {
                status_write
                    && s("resource") == "poolnodes"
                    && body["status"]["phase"] != "Draining"
            }
            Window::Draining => {
                status_write
                    && s("resource") == "poolnodes"
                    && body["status"]["phase"] == "Draining"
            }
            Window::Cordon => {
                spec_write && s("resource") == "nodes" && body["spec"]["unschedulable"] == true
            }
            Window::GangEvicted => {
                status_write && s("resource") == "gangs" && body["status"]["phase"] == "Evicted"
            }
            Window::JobRequeued => {
                s("verb") == "patch"
                    && s("resource") == "jobs"
                    && s("subresource").is_empty()
                    && body["spec"]["suspend"] == true
                    && body["metadata"]["annotations"]["muster.dev/stopping"] == "true"
            }
            Window::NodeDeleted => s("verb") == "delete" && s("resource") == "nodes",
            Window::PoolNodeRemoved => {
                s("resource") == "poolnodes"
                    && s("subresource").is_empty()
                    && matches!(s("verb"), "delete" | "patch" | "update")
            }
            Window::JobWrite => write && s("resource") == "jobs" && !Window::JobRequeued.matches(e),
            Window::GangWrite => {
                write && s("resource") == "gangs" && !Window::GangEvicted.matches(e)
            }
            Window::InstanceCreated | Window::InstanceTerminated | Window::Random => false,
        }
    }
}

/// The cloud's call counters, read while waiting for a window.
pub struct Counters<'a> {
    /// Launch calls so far.
    pub launches: &'a (dyn Fn() -> usize + Send + Sync),
    /// Terminate calls so far.
    pub terminations: &'a (dyn Fn() -> usize + Send + Sync),
}

/// Reads the audit log as it grows.
pub struct AuditTail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl AuditTail {
    /// From the current end of `path`.
    pub fn at_end(path: PathBuf) -> AuditTail {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        AuditTail {
            path,
            offset,
            partial: String::new(),
        }
    }

    /// Records appended since the last call.
    pub fn next_records(&mut self) -> Vec<Value> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = String::new();
        let n = f.read_to_string(&mut buf).unwrap_or(0);
        self.offset += n as u64;
        self.partial.push_str(&buf);
        let mut out = Vec::new();
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            if let Ok(v) = serde_json::from_str(&line) {
                out.push(v);
            }
        }
        out
    }
}

/// Waits up to `limit` for `window` to open for the process `identity`.
/// Returns whether it opened (else the kill falls at the end of the wait,
/// a random moment).
pub async fn wait_for(
    window: Window,
    identity: &str,
    tail: &mut AuditTail,
    counters: &Counters<'_>,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    let agent = format!("({identity})");
    let counter = match window {
        Window::InstanceCreated => Some(counters.launches),
        Window::InstanceTerminated => Some(counters.terminations),
        _ => None,
    };
    let before = counter.map(|c| c());
    while Instant::now() < deadline {
        if window == Window::Random {
            return false;
        }
        if let (Some(c), Some(before)) = (counter, before) {
            if c() > before {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
            continue;
        }
        let hit = tail.next_records().iter().any(|e| {
            e["userAgent"].as_str().unwrap_or_default().contains(&agent) && window.matches(e)
        });
        if hit {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}
