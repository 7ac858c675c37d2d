//! Kubernetes objects → planner [`Snapshot`]: the only module that knows both
//! kube types and planner types.
//!
//! Translation is a pure function of the cached objects, the offerings
//! listed from the clouds and the time. An object that cannot be read is left
//! out of the snapshot and reported as an [`Issue`] (a condition and an Event
//! on that object); it never stops the translation of the others.

pub mod gang;
pub mod job;
pub mod node;
pub mod pool;
pub mod time;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::{Offering, Snapshot, Time};

use super::objects::Kind;

/// Bounded reasons an object could not be translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IssueReason {
    /// `spec` does not have the expected shape or a value does not parse.
    InvalidSpec,
    /// A reference (NodeClass, pool) names nothing that exists or works.
    InvalidReference,
}

impl IssueReason {
    /// The reason as a condition/Event reason.
    pub fn as_str(self) -> &'static str {
        match self {
            IssueReason::InvalidSpec => "InvalidSpec",
            IssueReason::InvalidReference => "InvalidReference",
        }
    }
}

/// An object left out of the snapshot, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Issue {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace (Gangs only).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Bounded reason.
    pub reason: IssueReason,
    /// For people.
    pub message: String,
}

impl Issue {
    fn new(kind: Kind, obj: &DynamicObject, reason: IssueReason, message: String) -> Issue {
        Issue {
            kind,
            namespace: obj.namespace(),
            name: obj.name_any(),
            reason,
            message,
        }
    }
}

/// What the caches hold, as plain lists.
#[derive(Default, Clone)]
pub struct Observed {
    /// Jobs.
    pub jobs: Vec<Arc<Job>>,
    /// Pods.
    pub pods: Vec<Arc<Pod>>,
    /// Nodes.
    pub nodes: Vec<Arc<KubeNode>>,
    /// muster objects by kind.
    pub objects: BTreeMap<Kind, Vec<Arc<DynamicObject>>>,
}

impl Observed {
    /// The cached objects of one kind.
    pub fn of(&self, kind: Kind) -> &[Arc<DynamicObject>] {
        self.objects.get(&kind).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The result of a translation.
#[derive(Debug, Clone, Default)]
pub struct Translation {
    /// The planner's input.
    pub snapshot: Snapshot,
    /// Objects left out.
    pub issues: Vec<Issue>,
    /// PoolNode name → Node name, for PoolNodes whose Node registered.
    pub registered: BTreeMap<String, String>,
}

/// Builds the snapshot. `offerings` are those listed per pool.
pub fn snapshot(
    observed: &Observed,
    offerings: &BTreeMap<String, Vec<Offering>>,
    now: Time,
) -> Translation {
    let mut issues = Vec::new();
    let node_classes = pool::node_classes(observed.of(Kind::NodeClass), &mut issues);
    let pools = pool::pools(observed.of(Kind::GpuPool), &node_classes, &mut issues);
    let pool_names: BTreeSet<String> = pools.iter().map(|p| p.name.clone()).collect();
    let queues = pool::queues(observed.of(Kind::GpuQueue), &mut issues);
    let mut all_offerings: Vec<Offering> = Vec::new();
    let mut seen = BTreeSet::new();
    for (pool_name, list) in offerings {
        if !pool_names.contains(pool_name) {
            continue;
        }
        for o in list {
            if seen.insert((o.key(), o.node_class.clone())) {
                all_offerings.push(o.clone());
            }
        }
    }
    let gangs = gang::gangs(observed.of(Kind::Gang), &mut issues);
    let gang_jobs: BTreeSet<(String, String)> = gangs
        .iter()
        .filter_map(|g| {
            let (ns, name) = g.id.as_str().split_once('/')?;
            Some((ns.to_string(), name.to_string()))
        })
        .collect();
    let nodes = node::nodes(observed, &all_offerings, &gang_jobs, now, &mut issues);
    let gangs = gangs
        .into_iter()
        .map(|mut g| {
            for a in &mut g.assignments {
                if let Some(n) = nodes.registered.get(&a.node) {
                    a.node = n.clone();
                }
            }
            g
        })
        .collect();
    issues.sort();
    Translation {
        snapshot: Snapshot {
            queues,
            pools,
            offerings: all_offerings,
            nodes: nodes.nodes,
            gangs,
        },
        issues,
        registered: nodes.registered,
    }
}

/// The gang id (`namespace/name`) of an object.
pub fn gang_id(namespace: &str, name: &str) -> muster_planner::GangId {
    muster_planner::GangId::new(format!("{namespace}/{name}"))
}
