//! Well-known node labels, and the labels a node (existing or not yet
//! launched) carries, so node selectors can be matched before launch.
//!
//! A node of a pool carries the pool's labels, then the labels its offering
//! lists (what the cloud and kubelet set that only the provider knows: CPU
//! architecture, a managed node pool's labels), then these well-known
//! labels (which win over both): instance type, zone, region, capacity
//! type, GPU model, pool, operating system, and on a machine with GPUs
//! [`GPU_PRESENT`]. An existing node's own labels win over everything
//! derived. [`registration_labels`] is the part the kubelet itself sets at
//! registration (`--node-labels`); the cloud and the kubelet add the rest.

use std::collections::BTreeMap;

use crate::model::{Node, Offering, Pool};

/// Instance type label.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Zone label.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// Region label, set with the zone by the cloud's node controller
/// (kubernetes/cloud-provider `controllers/node/node_controller.go`,
/// `getNodeModifiersFromCloudProvider`).
pub const REGION: &str = "topology.kubernetes.io/region";
/// Capacity type label (`spot`, `on-demand`).
pub const CAPACITY_TYPE: &str = "muster.dev/capacity-type";
/// Capacity reservation label: the reservation a `reserved` node was
/// launched into (EC2 `cr-…` id, GCE reservation name).
pub const RESERVATION_ID: &str = "muster.dev/capacity-reservation-id";
/// GPU model label (normalised, e.g. `A100`).
pub const GPU_MODEL: &str = "muster.dev/gpu-model";
/// Pool label.
pub const POOL: &str = "muster.dev/pool";
/// Operating system label. The kubelet sets it on its Node at every
/// registration, from the OS it runs on (kubernetes/kubernetes
/// `pkg/kubelet/kubelet_node_status.go`, `initialNode`:
/// `v1.LabelOSStable: goruntime.GOOS`); every image muster boots a node
/// from (EKS AL2023 and Bottlerocket, GKE's node images, the simulated
/// cloud) is Linux, so a node of a pool carries `linux` before it exists.
pub const OS: &str = "kubernetes.io/os";
/// The value of [`OS`] on every node muster launches.
pub const LINUX: &str = "linux";
/// CPU architecture label, set by the kubelet beside [`OS`]
/// (`v1.LabelArchStable: goruntime.GOARCH`), so in Go's names: [`AMD64`],
/// [`ARM64`]. The image a machine boots is of its processor's
/// architecture, which only the provider knows: it lists the label with
/// each offering ([`Offering::labels`]).
pub const ARCH: &str = "kubernetes.io/arch";
/// [`ARCH`] of x86-64 machines.
pub const AMD64: &str = "amd64";
/// [`ARCH`] of 64-bit Arm machines (Graviton, Axion, Grace).
pub const ARM64: &str = "arm64";

/// `true` on every node muster launches with GPUs, set by its kubelet at
/// registration. The NVIDIA device plugin's Helm chart runs its DaemonSet
/// only on nodes with this label or with Node Feature Discovery's
/// `feature.node.kubernetes.io/pci-10de.present=true` or
/// `feature.node.kubernetes.io/cpu-model.vendor_id=NVIDIA`
/// (NVIDIA/k8s-device-plugin `deployments/helm/nvidia-device-plugin/values.yaml`,
/// `affinity:`); muster's nodes need not run NFD, so without this label their
/// GPUs never become allocatable. The key is outside the `kubernetes.io` and
/// `k8s.io` namespaces, so the NodeRestriction admission plugin lets a kubelet
/// set it on its own Node (kubernetes/kubernetes
/// `plugin/pkg/admission/noderestriction/admission.go`).
pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";

/// Network-topology label keys, broadest layer first, per cloud: EC2's
/// network nodes as EKS labels them from `DescribeInstanceTopology` (the
/// keys Kueue's topology-aware scheduling documents for EKS), and GCE's
/// block, sub-block and host as GKE labels them.
pub const NETWORK_LAYERS: [&[&str]; 2] = [
    &[
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
    ],
    &[
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
    ],
];

/// A node's place in the network from its labels, broadest first
/// ([`crate::Node::network`]): the layers of the first cloud's keys the
/// node has, up to the first missing one; empty without any.
pub fn network_of(labels: &BTreeMap<String, String>) -> Vec<String> {
    for keys in NETWORK_LAYERS {
        let layers: Vec<String> = keys
            .iter()
            .map_while(|k| labels.get(*k).filter(|v| !v.is_empty()).cloned())
            .collect();
        if !layers.is_empty() {
            return layers;
        }
    }
    Vec::new()
}

/// The labels the kubelet of a new node of pool `pool` sets at registration
/// (`--node-labels`), for every cloud and image: the pool's `labels`, then
/// muster's (which win): the pool's name and, when the machine has GPUs,
/// [`GPU_PRESENT`]` = true`. Drivers add their own (the PoolNode's name).
pub fn registration_labels(
    pool: &str,
    labels: &BTreeMap<String, String>,
    gpu_count: u32,
) -> BTreeMap<String, String> {
    let mut l = labels.clone();
    if gpu_count > 0 {
        l.insert(GPU_PRESENT.into(), "true".into());
    }
    l.insert(POOL.into(), pool.to_string());
    l
}

/// Labels a new node of `pool` bought as `offering` will carry: those it
/// registers with, those its offering lists, and the well-known ones the
/// cloud and kubelet add.
pub fn new_node_labels(pool: &Pool, offering: &Offering) -> BTreeMap<String, String> {
    let mut l = registration_labels(&pool.name, &pool.labels, offering.gpu_count);
    for (k, v) in &offering.labels {
        l.insert(k.clone(), v.clone());
    }
    l.insert(INSTANCE_TYPE.into(), offering.instance_type.clone());
    l.insert(ZONE.into(), offering.zone.clone());
    if !offering.region.is_empty() {
        l.insert(REGION.into(), offering.region.clone());
    }
    l.insert(OS.into(), LINUX.into());
    l.insert(
        CAPACITY_TYPE.into(),
        offering.capacity_type.as_str().to_string(),
    );
    if let Some(m) = &offering.gpu_model {
        l.insert(GPU_MODEL.into(), m.as_str().to_string());
    }
    if let Some(r) = &offering.reservation {
        l.insert(RESERVATION_ID.into(), r.id.clone());
    }
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
        OS if node.pool.is_some() => Some(LINUX),
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
            l.insert(OS.into(), LINUX.into());
        }
        for (k, v) in &node.labels {
            l.insert(k.clone(), v.clone());
        }
        l
    }

    /// A machine with GPUs registers with `nvidia.com/gpu.present=true`, one
    /// without does not; muster's keys win over the pool's.
    #[test]
    fn gpu_machines_register_as_gpu_present() {
        let pool_labels = BTreeMap::from([
            ("team".to_string(), "a".to_string()),
            (GPU_PRESENT.to_string(), "false".to_string()),
            (POOL.to_string(), "other".to_string()),
        ]);
        let gpu = registration_labels("a100", &pool_labels, 8);
        assert_eq!(gpu.get(GPU_PRESENT).map(String::as_str), Some("true"));
        assert_eq!(gpu.get(POOL).map(String::as_str), Some("a100"));
        assert_eq!(gpu.get("team").map(String::as_str), Some("a"));
        let cpu = registration_labels("cpu", &BTreeMap::new(), 0);
        assert_eq!(cpu.get(GPU_PRESENT), None);
        assert_eq!(cpu.get(POOL).map(String::as_str), Some("cpu"));
    }

    /// A new node carries its pool's labels, then its offering's (the
    /// cloud's and kubelet's: architecture, a managed pool's labels), then
    /// the well-known ones, region included, each winning over the ones
    /// before.
    #[test]
    fn a_new_node_carries_its_offerings_labels_and_region() {
        let p = pool("gpu")
            .label("team", "a")
            .label("cloud.google.com/gke-accelerator", "from-pool")
            .build();
        let o = crate::fixtures::offering("g2-standard-8", "us-central1-a")
            .region("us-central1")
            .gpu_count(1)
            .label(ARCH, AMD64)
            .label("cloud.google.com/gke-accelerator", "nvidia-l4")
            .label(ZONE, "elsewhere")
            .build();
        let l = new_node_labels(&p, &o);
        let get = |k: &str| l.get(k).map(String::as_str);
        assert_eq!(get(ARCH), Some(AMD64));
        assert_eq!(get("cloud.google.com/gke-accelerator"), Some("nvidia-l4"));
        assert_eq!(get(REGION), Some("us-central1"));
        assert_eq!(get(ZONE), Some("us-central1-a"));
        assert_eq!(get("team"), Some("a"));
        assert_eq!(get(POOL), Some("gpu"));
        // an offering listed without a region or labels derives neither
        let bare = crate::fixtures::offering("g2-standard-8", "us-central1-a").build();
        let l = new_node_labels(&p, &bare);
        assert_eq!(l.get(REGION), None);
        assert_eq!(l.get(ARCH), None);
    }

    /// Keys a selector may name: every derived key, and two others.
    const KEYS: [&str; 8] = [
        POOL,
        OS,
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
                    reservation: None,
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

    #[test]
    fn network_layers_come_from_one_cloud_broadest_first_up_to_the_first_gap() {
        let of = |kv: &[(&str, &str)]| -> Vec<String> {
            network_of(
                &kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        assert_eq!(
            of(&[
                ("topology.k8s.aws/network-node-layer-3", "nn-c"),
                ("topology.k8s.aws/network-node-layer-1", "nn-a"),
                ("topology.k8s.aws/network-node-layer-2", "nn-b"),
            ]),
            ["nn-a", "nn-b", "nn-c"]
        );
        // a missing middle layer ends the path: a deeper layer alone says
        // nothing about the domains above it
        assert_eq!(
            of(&[
                ("topology.k8s.aws/network-node-layer-1", "nn-a"),
                ("topology.k8s.aws/network-node-layer-3", "nn-c"),
            ]),
            ["nn-a"]
        );
        assert_eq!(
            of(&[
                ("cloud.google.com/gce-topology-block", "b1"),
                ("cloud.google.com/gce-topology-subblock", "s2"),
            ]),
            ["b1", "s2"]
        );
        assert!(of(&[("topology.kubernetes.io/zone", "z")]).is_empty());
    }
}
