//! Kubernetes plumbing, the lowest layer: the objects muster reads and
//! writes and the helpers every write goes through (`api`), the API client
//! with its deadline and write fence (`client`), typed conditions, the
//! bounded reasons of every Event and condition (`reasons`, `errors`) and
//! their Events (`events`), the metrics registry (`metrics`), the slim Pod
//! the caches keep (`cached`) and Kubernetes time (`time`). It imports no
//! other module of the controller.

pub mod api;

pub(crate) mod client;
pub(crate) mod conditions;
pub(crate) mod errors;
pub(crate) mod events;
pub(crate) mod leadership;
pub mod metrics;
pub(crate) mod objects;
pub mod reasons;
pub mod time;
