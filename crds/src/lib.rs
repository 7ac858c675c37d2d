//! Custom resource types of muster (`muster.dev/v1alpha1`) and their generated
//! `CustomResourceDefinition`s.
//!
//! - [`NodeClass`]: how to launch a machine on AWS, GCP or the simulated cloud.
//! - [`GpuPool`] (`GPUPool`): a family of GPU nodes muster may buy.
//! - [`GpuQueue`] (`GPUQueue`): where a team's gangs wait, with quota and fair share.
//! - [`Gang`]: all pods of one workload, admitted all at once or not at all (namespaced).
//! - [`PoolNode`]: one machine muster launched or is launching.
//!
//! [`crds()`], [`render()`], [`render_all()`] and [`reference_markdown()`] produce the committed
//! files `crds/yaml/*.yaml` and `docs/reference/crds.md`; a drift test keeps them equal.

pub mod common;
pub mod gang;
pub mod gpupool;
pub mod gpuqueue;
pub mod kubelet_labels;
pub mod nodeclass;
pub mod poolnode;
pub mod reference;
pub mod render;

pub use gang::{Gang, GangPhase, GangSpec, GangStatus, PodSet, Topology};
pub use gpupool::{GpuPool, GpuPoolSpec, GpuPoolStatus};
pub use gpuqueue::{GpuQueue, GpuQueueSpec, GpuQueueStatus};
pub use nodeclass::{NodeClass, NodeClassSpec, NodeClassStatus};
pub use poolnode::{PoolNode, PoolNodePhase, PoolNodeSpec, PoolNodeStatus};
pub use reference::reference_markdown;
pub use render::{Kind, crds, render, render_all};

/// API group of every muster custom resource.
pub const GROUP: &str = "muster.dev";
/// API version of every muster custom resource.
pub const VERSION: &str = "v1alpha1";
