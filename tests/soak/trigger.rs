//! When to kill: a window is a kind of step of the controller, recognised in
//! the API server's audit log (a matching request of the process to kill)
//! or in the cloud's record of created instances; the kill follows the
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
    /// A PoolNode's status was written.
    PoolNodeStatus,
    /// A PoolNode's finalizer or deletion (the end of its life).
    PoolNodeRemoved,
    /// A Node was cordoned or deleted (drain and removal).
    NodeWrite,
    /// A pod was evicted.
    Eviction,
    /// A Job was written (suspend, unsuspend, pinning).
    JobWrite,
    /// A Gang was created or its status written.
    GangWrite,
    /// Any moment.
    Random,
}

impl Window {
    /// All windows, with their weights: the launch path and the Job life
    /// cycle first.
    pub const WEIGHTED: [(Window, u32); 9] = [
        (Window::PoolNodeCreated, 4),
        (Window::InstanceCreated, 4),
        (Window::PoolNodeStatus, 3),
        (Window::PoolNodeRemoved, 2),
        (Window::NodeWrite, 2),
        (Window::Eviction, 1),
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
            Window::PoolNodeRemoved => "poolnode-removed",
            Window::NodeWrite => "node-write",
            Window::Eviction => "eviction",
            Window::JobWrite => "job-write",
            Window::GangWrite => "gang-write",
            Window::Random => "random",
        }
    }

    /// Whether an audit record of the process to kill opens this window.
    fn matches(self, e: &Value) -> bool {
        let s = |k: &str| e[k].as_str().unwrap_or_default();
        let write = matches!(s("verb"), "create" | "update" | "patch" | "delete");
        match self {
            Window::PoolNodeCreated => s("verb") == "create" && s("resource") == "poolnodes",
            Window::PoolNodeStatus => {
                write && s("resource") == "poolnodes" && s("subresource") == "status"
            }
            Window::PoolNodeRemoved => {
                s("resource") == "poolnodes"
                    && s("subresource").is_empty()
                    && matches!(s("verb"), "delete" | "patch" | "update")
            }
            Window::NodeWrite => write && s("resource") == "nodes",
            Window::Eviction => s("resource") == "pods" && s("subresource") == "eviction",
            Window::JobWrite => write && s("resource") == "jobs",
            Window::GangWrite => write && s("resource") == "gangs",
            Window::InstanceCreated | Window::Random => false,
        }
    }
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

/// Waits up to `limit` for `window` to open for the process `identity`;
/// `created` counts the instances the cloud created so far. Returns whether
/// it opened (else the kill falls at the end of the wait, a random moment).
pub async fn wait_for(
    window: Window,
    identity: &str,
    tail: &mut AuditTail,
    created: &(dyn Fn() -> usize + Send + Sync),
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    let agent = format!("({identity})");
    let before = if window == Window::InstanceCreated {
        created()
    } else {
        0
    };
    while Instant::now() < deadline {
        match window {
            Window::Random => return false,
            Window::InstanceCreated => {
                if created() > before {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            w => {
                let hit = tail.next_records().iter().any(|e| {
                    e["userAgent"].as_str().unwrap_or_default().contains(&agent) && w.matches(e)
                });
                if hit {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    false
}
