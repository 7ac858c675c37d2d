//! Instances, launch requests and interruption notices.

use std::collections::BTreeMap;

use muster_planner::{OfferingKey, Taint, Time};
use serde::{Deserialize, Serialize};

/// Keys muster tags its instances with. AWS uses them as they are; clouds
/// whose label keys cannot hold `/` or `.` (GCP) write `muster-cluster` and so
/// on (see [`label_key`]).
pub mod tags {
    /// The owning cluster.
    pub const CLUSTER: &str = "muster.dev/cluster";
    /// The pool.
    pub const POOL: &str = "muster.dev/pool";
    /// The PoolNode the instance was launched for.
    pub const POOL_NODE: &str = "muster.dev/poolnode";
    /// The gang the instance was launched for.
    pub const GANG: &str = "muster.dev/gang";
}

/// A tag key written as a GCP-style label key: `muster.dev/pool` →
/// `muster-pool`.
pub fn label_key(tag: &str) -> String {
    match tag.strip_prefix("muster.dev/") {
        Some(rest) => format!("muster-{rest}"),
        None => tag.replace(['/', '.'], "-").to_ascii_lowercase(),
    }
}

/// Everything a provider needs to launch one machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// The PoolNode name; the instance's name where the cloud has names.
    pub name: String,
    /// The PoolNode's idempotency key (AWS `ClientToken`, GCP instance name
    /// and `requestId`).
    pub idempotency_key: String,
    /// Exactly what to buy.
    pub offering: OfferingKey,
    /// The pool.
    pub pool: String,
    /// The cluster; instances are tagged with it.
    pub cluster: String,
    /// The gang the machine is for, if any.
    pub gang: Option<String>,
    /// Labels the kubelet registers the node with.
    pub labels: BTreeMap<String, String>,
    /// Taints the kubelet registers the node with.
    pub taints: Vec<Taint>,
    /// Extra tags or labels on the instance.
    pub tags: BTreeMap<String, String>,
    /// The placement group the planner put the machine in (the planner's
    /// name, one per gang launch attempt): the provider creates it if it does
    /// not exist and launches into it; on EFA-capable types the machine also
    /// gets its EFA interfaces. `None` launches outside any group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group: Option<String>,
    /// The grant request the machine is bought in with the other members
    /// of its launch (flex-start): the cloud creates them all at once or
    /// none. Written on the PoolNode before any cloud call, so the first
    /// member launched after a restart asks for the same request. `None`
    /// buys the machine on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
}

/// One grant request: its name and every machine in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The request's name (the planner's, one per launch attempt; an RFC
    /// 1035 label).
    pub name: String,
    /// Every machine of the request, this one included, in launch order.
    pub members: Vec<GrantMember>,
}

/// A machine of a grant request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantMember {
    /// Its PoolNode's name.
    pub name: String,
    /// Its PoolNode's idempotency key (names the instance where the cloud
    /// derives names from it).
    pub idempotency_key: String,
}

/// The cloud's view of an instance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InstanceState {
    /// Booting.
    Pending,
    /// Running.
    Running,
    /// Stopping or being terminated.
    ShuttingDown,
    /// Gone.
    Terminated,
}

/// A machine in the cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// Kubernetes provider id (`aws:///us-east-1a/i-0abc`, `gce://project/zone/name`).
    pub provider_id: String,
    /// What was bought.
    pub offering: OfferingKey,
    /// State.
    pub state: InstanceState,
    /// When the cloud created it.
    pub launched_at: Time,
    /// The PoolNode it was launched for, read back from its tags (orphan
    /// collection compares it with the PoolNodes that exist).
    pub pool_node: Option<String>,
    /// Its tags or labels.
    pub tags: BTreeMap<String, String>,
    /// Its place in the network, broadest layer first (EC2
    /// `DescribeInstanceTopology` network nodes; GCE block, sub-block,
    /// host); empty when the cloud does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
}

/// What kind of interruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InterruptionKind {
    /// The spot machine will be reclaimed shortly.
    SpotInterruption,
    /// The cloud suggests moving off the machine (no action required).
    RebalanceRecommendation,
    /// The machine was preempted (GCP) or stopped.
    Preempted,
    /// The machine was terminated outside muster.
    Terminated,
    /// The cloud has scheduled maintenance that stops, reboots or retires
    /// the machine (an AWS Health `scheduledChange` event for EC2).
    ScheduledMaintenance,
}

impl InterruptionKind {
    /// The bounded name, for conditions, Events and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptionKind::SpotInterruption => "SpotInterruption",
            InterruptionKind::RebalanceRecommendation => "RebalanceRecommendation",
            InterruptionKind::Preempted => "Preempted",
            InterruptionKind::Terminated => "Terminated",
            InterruptionKind::ScheduledMaintenance => "ScheduledMaintenance",
        }
    }
}

/// An interruption notice for one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interruption {
    /// The instance.
    pub provider_id: String,
    /// What happened.
    pub kind: InterruptionKind,
    /// When the cloud says it happens.
    pub at: Time,
}
