//! Status of the platform objects: GPUPools and GPUQueues (`pools`),
//! NodeClasses (`classes`, `subnets` for the resolved subnets no launch can
//! use, and `capacity_types` for the capacity types their cloud account
//! refuses), and the per-cycle figures reported as
//! metrics and written into queue status (`report`).

pub(crate) mod capacity_types;
pub(crate) mod classes;
pub(crate) mod pools;
pub(crate) mod report;
pub(crate) mod subnets;
