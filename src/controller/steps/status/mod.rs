//! Status of the platform objects: GPUPools and GPUQueues (`pools`),
//! NodeClasses (`classes`), and the per-cycle figures reported as metrics
//! and written into queue status (`report`).

pub mod classes;
pub mod pools;
pub mod report;
