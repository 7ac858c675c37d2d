//! The steps of a cycle, one folder per concern. Each is idempotent, safe
//! to repeat after a crash, and reads one cycle's observation; siblings
//! never import each other: the cycle passes what one step found to the
//! next.
//!
//! - `gangs`: a Gang per labelled workload, and every Gang's status;
//! - `workloads`: each workload's life cycle (suspend, pin, start, evict),
//!   admissions and preemptions carried out on the workload;
//! - `pool_nodes`: PoolNode life cycle, launches, releases, removals
//!   (Draining, cordon, drain, delete), interruptions, orphan collection;
//! - `gpu_usage`: GPU utilisation for the snapshot and the idle verdicts;
//! - `status`: GPUPool, GPUQueue and NodeClass status, per-cycle metrics.

pub(crate) mod gangs;
pub(crate) mod gpu_usage;
pub(crate) mod pool_nodes;
pub(crate) mod status;
pub(crate) mod workloads;
