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

/// One effective label of an existing node: derived well-known labels (and
/// its pool's labels, if the pool is known), overridden by the node's own;
/// found without building the whole map (a node selector names a
/// few keys; a node has dozens of labels).
pub fn node_label<'n>(node: &'n Node, pool: Option<&'n Pool>, key: &str) -> Option<&'n str> {
    if let Some(v) = node.labels.get(key) {
        return Some(v);
    }
    let derived = match key {
        POOL => node.pool.as_deref(),
        GPU_MODEL => node.gpu_model.as_ref().map(|m| m.as_str()),
        CAPACITY_TYPE => node.capacity_type.map(|c| c.as_str()),
        ZONE if !node.zone.is_empty() => Some(node.zone.as_str()),
        INSTANCE_TYPE => node.offering.as_ref().map(|o| o.instance_type.as_str()),
        _ => None,
    };
    derived.or_else(|| pool.and_then(|p| p.labels.get(key)).map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{node, pool};
    use crate::model::{CapacityType, GpuModel, OfferingKey, Provider};
    use proptest::prelude::*;

    /// Every effective label of an existing node, built as a map in order of
    /// precedence: its pool's labels, then the derived well-known labels,
    /// then the node's own.
    fn node_labels(node: &Node, pool: Option<&Pool>) -> BTreeMap<String, String> {
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

    /// Keys a selector may name: every derived key, and two others.
    const KEYS: [&str; 7] = [
        POOL,
        GPU_MODEL,
        CAPACITY_TYPE,
        ZONE,
        INSTANCE_TYPE,
        "team",
        "kubernetes.io/arch",
    ];

    fn some_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
        proptest::collection::btree_map(
            proptest::sample::select(KEYS.to_vec()).prop_map(String::from),
            "[ab]",
            0..4,
        )
    }

    proptest! {
        /// A label looked up on its own is the label of the whole map, for
        /// nodes with and without each derived field, own labels that
        /// override derived ones, and pools with and without labels.
        #[test]
        fn one_label_is_the_label_of_the_map(
            own in some_labels(),
            pool_labels in some_labels(),
            in_pool in any::<bool>(),
            known_pool in any::<bool>(),
            offering in any::<bool>(),
            zone in "(|z1)",
            spot in proptest::option::of(any::<bool>()),
            model in proptest::option::of("(A100|H100)"),
        ) {
            let mut n = node("n").labels(own).zone(zone);
            if in_pool {
                n = n.pool("p");
            }
            if offering {
                n = n.offering(OfferingKey {
                    provider: Provider::Aws,
                    zone: "z1".into(),
                    instance_type: "p4d.24xlarge".into(),
                    capacity_type: CapacityType::Spot,
                });
            }
            if let Some(s) = spot {
                n = n.capacity_type(if s { CapacityType::Spot } else { CapacityType::OnDemand });
            }
            if let Some(m) = model {
                n = n.gpu_model(GpuModel::new(&m));
            }
            let n = n.build();
            let p = pool("p").labels(pool_labels).build();
            let p = known_pool.then_some(&p);
            let all = node_labels(&n, p);
            for key in KEYS {
                prop_assert_eq!(node_label(&n, p, key), all.get(key).map(String::as_str), "{}", key);
            }
        }
    }
}
