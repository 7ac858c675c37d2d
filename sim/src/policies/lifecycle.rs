//! Life-cycle timeouts the muster driver enforces around the plan: a
//! machine that does not launch, register or initialize in time is
//! terminated; an admitted gang whose pods do not all run within the
//! pods-ready timeout is evicted. Kept in this one small module so it can be
//! switched to the planner crate's `lifecycle::{pool_node, gang}` state
//! machines when they land.

use muster_planner::{Gang, GangPhase, Node, NodePhase, Policy, Time};

/// What to do with an in-flight node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeVerdict {
    /// Leave it.
    Keep,
    /// Terminate it: it missed a deadline.
    Terminate(&'static str),
}

/// Checks a muster-launched node's phase deadlines.
pub fn pool_node(node: &Node, policy: &Policy, now: Time) -> NodeVerdict {
    let waited = now.since(node.phase_since);
    match node.phase {
        NodePhase::Pending if waited > policy.launch_timeout => NodeVerdict::Terminate("LaunchTimeout"),
        NodePhase::Launched if waited > policy.registration_timeout => {
            NodeVerdict::Terminate("RegistrationTimeout")
        }
        NodePhase::Registered if waited > policy.initialization_timeout => {
            NodeVerdict::Terminate("InitializationTimeout")
        }
        _ => NodeVerdict::Keep,
    }
}

/// What to do with a gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GangVerdict {
    /// Leave it.
    Keep,
    /// Evict it as a whole: its pods did not all run in time.
    Evict,
}

/// Checks an admitted gang's pods-ready deadline.
pub fn gang(g: &Gang, pods_ready_timeout: muster_planner::Dur, now: Time) -> GangVerdict {
    match (g.phase, g.admitted_at) {
        (GangPhase::Admitted, Some(at)) if now.since(at) > pods_ready_timeout => GangVerdict::Evict,
        _ => GangVerdict::Keep,
    }
}

/// Requeue backoff after the `evictions`-th eviction: base doubling, capped.
pub fn backoff(policy: &Policy, evictions: u32) -> muster_planner::Dur {
    let base = policy.requeue_backoff_base.as_secs().max(1);
    let shift = evictions.saturating_sub(1).min(30);
    muster_planner::Dur::secs(
        base.saturating_mul(1u64 << shift)
            .min(policy.requeue_backoff_max.as_secs()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{Dur, Resources};

    #[test]
    fn deadlines() {
        let p = Policy::default();
        let mut n = Node {
            name: "n".into(),
            pool: Some("p".into()),
            offering: None,
            provider: None,
            zone: String::new(),
            placement_group: None,
            capacity_type: None,
            price: None,
            gpu_model: None,
            gpu_memory_mib: 0,
            allocatable: Resources::zero(),
            labels: Default::default(),
            taints: vec![],
            phase: NodePhase::Launched,
            unschedulable: false,
            reserved_for: None,
            pods: vec![],
            created_at: Time(0),
            phase_since: Time(0),
            empty_since: None,
            do_not_disrupt: false,
        };
        assert_eq!(pool_node(&n, &p, Time(60)), NodeVerdict::Keep);
        assert_eq!(
            pool_node(&n, &p, Time(16 * 60)),
            NodeVerdict::Terminate("RegistrationTimeout")
        );
        n.phase = NodePhase::Ready;
        assert_eq!(pool_node(&n, &p, Time(100_000)), NodeVerdict::Keep);
        assert_eq!(backoff(&p, 1), Dur::secs(60));
        assert_eq!(backoff(&p, 3), Dur::secs(240));
        assert_eq!(backoff(&p, 30), Dur::hours(1));
    }
}
