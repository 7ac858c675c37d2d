//! Per-object reconcilers, run every cycle from what is observed (not from
//! the plan): Gangs for labelled workloads ([`gangs`]), each workload's
//! life cycle ([`workloads`]), each PoolNode's life cycle ([`pool_nodes`]), the clouds'
//! interruption notices ([`interruptions`]), orphaned instances
//! ([`orphans`]), and status: Gangs ([`gang_status`], from the plan and
//! what is observed), GPUPools and GPUQueues ([`pool_status`]), NodeClasses
//! ([`class_status`]).

pub mod class_status;
pub mod gang_status;
pub mod gangs;
pub mod interruptions;
pub mod orphans;
pub mod pool_nodes;
pub mod pool_status;
pub mod workloads;
