//! Well-known node labels, and the labels a node (existing or not yet
//! launched) carries, so node selectors can be matched before launch.
//!
//! A node of a pool carries the pool's labels, then these well-known labels
//! (which win over pool labels of the same key): instance type, zone,
//! capacity type, GPU model and pool. An existing node's own labels win over
//! everything derived.

use std::collections::BTreeMap;

use crate::model::{Node, Offering, Pool};

/// Instance type label.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Zone label.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// Capacity type label (`spot`, `on-demand`).
pub const CAPACITY_TYPE: &str = "muster.dev/capacity-type";
/// GPU model label (normalised, e.g. `A100`).
pub const GPU_MODEL: &str = "muster.dev/gpu-model";
/// Pool label.
pub const POOL: &str = "muster.dev/pool";

/// Labels a new node of `pool` bought as `offering` will carry.
pub fn new_node_labels(pool: &Pool, offering: &Offering) -> BTreeMap<String, String> {
    let mut l = pool.labels.clone();
    l.insert(INSTANCE_TYPE.into(), offering.instance_type.clone());
    l.insert(ZONE.into(), offering.zone.clone());
    l.insert(
        CAPACITY_TYPE.into(),
        offering.capacity_type.as_str().to_string(),
    );
    if let Some(m) = &offering.gpu_model {
        l.insert(GPU_MODEL.into(), m.as_str().to_string());
    }
    l.insert(POOL.into(), pool.name.clone());
    l
}

/// Effective labels of an existing node: derived well-known labels (and its
/// pool's labels, if the pool is known), overridden by the node's own.
pub fn node_labels(node: &Node, pool: Option<&Pool>) -> BTreeMap<String, String> {
    let mut l = pool.map(|p| p.labels.clone()).unwrap_or_default();
    if let Some(o) = &node.offering {
        l.insert(INSTANCE_TYPE.into(), o.instance_type.clone());
    }
    if !node.zone.is_empty() {
        l.insert(ZONE.into(), node.zone.clone());
    }
    if let Some(c) = node.capacity_type {
        l.insert(CAPACITY_TYPE.into(), c.as_str().to_string());
    }
    if let Some(m) = &node.gpu_model {
        l.insert(GPU_MODEL.into(), m.as_str().to_string());
    }
    if let Some(p) = &node.pool {
        l.insert(POOL.into(), p.clone());
    }
    for (k, v) in &node.labels {
        l.insert(k.clone(), v.clone());
    }
    l
}
