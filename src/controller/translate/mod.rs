//! Kubernetes objects → planner [`Snapshot`]: the only module that knows both
//! kube types and planner types.
//!
//! Translation is a pure function of the cached objects, the offerings
//! listed from the clouds and the time. An object that cannot be read is left
//! out of the snapshot and reported as an [`Issue`] (a condition and an Event
//! on that object); it never stops the translation of the others.

pub(crate) mod gang;
pub(crate) mod namespaces;
pub(crate) mod node;
pub(crate) mod pool;
pub(crate) mod workload;

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::{Offering, Snapshot, Time};

pub(crate) use crate::controller::base::errors::IssueReason;
use crate::controller::base::objects::Kind;
use crate::controller::observe::Observed;

/// An object left out of the snapshot, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Issue {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace (Gangs only).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Bounded reason.
    pub reason: IssueReason,
    /// For people.
    pub message: String,
}

impl Issue {
    fn new(kind: Kind, obj: &DynamicObject, reason: IssueReason, message: String) -> Issue {
        Issue {
            kind,
            namespace: obj.namespace(),
            name: obj.name_any(),
            reason,
            message,
        }
    }
}

/// The result of a translation.
#[derive(Debug, Clone, Default)]
pub struct Translation {
    /// The planner's input.
    pub snapshot: Snapshot,
    /// Objects left out.
    pub issues: Vec<Issue>,
    /// PoolNode name → Node name, for PoolNodes whose Node registered.
    pub registered: BTreeMap<String, String>,
}

/// The NodeClasses and pools of one observation, translated once per cycle:
/// the offerings are listed for these pools and the snapshot is built from
/// them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    /// Valid pools.
    pub(crate) pools: Vec<muster_planner::Pool>,
    /// NodeClasses and pools left out.
    pub(crate) issues: Vec<Issue>,
}

/// Translates the NodeClasses and pools of `observed`.
pub(crate) fn catalog(observed: &Observed) -> Catalog {
    let mut issues = Vec::new();
    let node_classes = pool::node_classes(observed.of(Kind::NodeClass), &mut issues);
    let pools = pool::pools(observed.of(Kind::GpuPool), &node_classes, &mut issues);
    Catalog { pools, issues }
}

/// Builds the snapshot, translating the catalog too. `offerings` are those
/// listed per pool.
#[cfg(test)]
pub(crate) fn snapshot(
    observed: &Observed,
    offerings: &BTreeMap<String, Vec<Offering>>,
    now: Time,
) -> Translation {
    snapshot_with(observed, &catalog(observed), offerings, now)
}

/// Builds the snapshot from a catalog translated before.
pub(crate) fn snapshot_with(
    observed: &Observed,
    catalog: &Catalog,
    offerings: &BTreeMap<String, Vec<Offering>>,
    now: Time,
) -> Translation {
    let mut issues = catalog.issues.clone();
    let pools = catalog.pools.clone();
    let pool_names: BTreeSet<String> = pools.iter().map(|p| p.name.clone()).collect();
    let queues = pool::queues(observed.of(Kind::GpuQueue), &mut issues);
    let mut all_offerings: Vec<Offering> = Vec::new();
    let mut seen = BTreeSet::new();
    for (pool_name, list) in offerings {
        if !pool_names.contains(pool_name) {
            continue;
        }
        for o in list {
            if seen.insert((o.key(), o.node_class.clone())) {
                all_offerings.push(o.clone());
            }
        }
    }
    let gangs = gang::gangs(observed.of(Kind::Gang), &mut issues);
    let window = muster_planner::model::pool::arrivals_window(&pools);
    let arrivals = window.map_or_else(Vec::new, |w| {
        gang::arrivals(observed.of(Kind::Gang), now - w)
    });
    let selectors = namespaces::selectors(observed.of(Kind::GpuQueue));
    let gangs: Vec<_> = gangs
        .into_iter()
        .filter(|g| {
            let Some(selector) = selectors.get(&g.queue) else {
                return true; // unknown queue: the planner says so
            };
            let ns = g.id.as_str().split_once('/').map_or("", |(ns, _)| ns);
            let labels = namespaces::labels(&observed.namespaces, ns);
            if g.phase.holds_capacity() || namespaces::selects(selector.as_ref(), &labels) {
                return true;
            }
            let name = g.id.as_str().split_once('/').map_or("", |(_, n)| n);
            issues.push(Issue {
                kind: Kind::Gang,
                namespace: Some(ns.to_string()),
                name: name.to_string(),
                reason: IssueReason::NamespaceNotAllowed,
                message: format!(
                    "GPUQueue {} does not select namespace {ns} (spec.namespaceSelector{}); the Job stays suspended",
                    g.queue,
                    if selector.is_none() { " is omitted, which selects no namespace" } else { "" }
                ),
            });
            false
        })
        .collect();
    // a gang whose Job still has pods but no admission (started before it
    // was suspended, or pods of an eviction still going) gets no capacity
    // until they are gone
    let running_unadmitted = unadmitted_with_pods(observed);
    let gangs: Vec<_> = gangs
        .into_iter()
        .filter(|g| !(g.phase.pending() && running_unadmitted.contains(g.id.as_str())))
        .collect();
    let gang_jobs: BTreeSet<(String, String)> = gangs
        .iter()
        .filter_map(|g| {
            let (ns, name) = g.id.as_str().split_once('/')?;
            Some((ns.to_string(), name.to_string()))
        })
        .collect();
    let mut nodes = node::nodes(observed, &all_offerings, &gang_jobs, now, &mut issues);
    // a PoolNode whose Node has not registered yet is planned with the
    // labels and taints its pool gives the Node at launch, and the labels
    // its offering lists (architecture, a GKE node pool's), as it was
    // when the planner chose it: planned untainted, a pod set that does not
    // tolerate the pool's taints (a CPU driver beside GPU workers) would be
    // placed on it; planned without its offering's labels, a pod selecting
    // `kubernetes.io/arch` would not wait for it
    let unregistered: BTreeSet<String> = observed
        .of(Kind::PoolNode)
        .iter()
        .map(|pn| pn.name_any())
        .filter(|n| !nodes.registered.contains_key(n))
        .collect();
    for n in &mut nodes.nodes {
        if !unregistered.contains(&n.name) {
            continue;
        }
        if let Some(p) = n
            .pool
            .as_ref()
            .and_then(|name| pools.iter().find(|p| &p.name == name))
        {
            for t in &p.taints {
                if !n.taints.contains(t) {
                    n.taints.push(t.clone());
                }
            }
            let offering = n
                .offering
                .as_ref()
                .and_then(|k| all_offerings.iter().find(|o| &o.key() == k));
            let given = match offering {
                Some(o) => muster_planner::labels::new_node_labels(p, o),
                None => p.labels.clone(),
            };
            for (k, v) in given {
                n.labels.entry(k).or_insert(v);
            }
        }
    }
    let network_defaults = pool::network_defaults(observed.of(Kind::GpuPool), &pools, &queues);
    let gangs = gangs
        .into_iter()
        .map(|mut g| {
            if g.network.is_none() {
                g.network = network_defaults.get(&g.queue).copied();
            }
            for a in &mut g.assignments {
                if let Some(n) = nodes.registered.get(&a.node) {
                    a.node = n.clone();
                }
            }
            g
        })
        .collect();
    issues.sort();
    Translation {
        snapshot: Snapshot {
            queues,
            pools,
            offerings: all_offerings,
            nodes: nodes.nodes,
            gangs,
            gpu_utilization: Vec::new(),
            arrivals,
        },
        issues,
        registered: nodes.registered,
    }
}

/// Gang ids (`namespace/name`) of workloads that have pods which have not
/// finished, or whose status counts active ones.
pub(crate) fn unadmitted_with_pods(observed: &Observed) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = crate::controller::observe::workloads::all(observed)
        .iter()
        .filter(|w| w.counts_active())
        .map(|w| format!("{}/{}", w.namespace(), w.gang_name()))
        .collect();
    for p in &observed.pods {
        if matches!(p.phase.as_deref(), Some("Succeeded") | Some("Failed")) {
            continue;
        }
        if let Some((ns, name)) = crate::controller::workloads::pod_gang(p) {
            // a pod group's pods exist before admission, held by their gate
            if crate::controller::workloads::pod_group::gated(p) {
                continue;
            }
            out.insert(format!("{ns}/{name}"));
        }
    }
    out
}

/// The gang id (`namespace/name`) of an object.
pub(crate) fn gang_id(namespace: &str, name: &str) -> muster_planner::GangId {
    muster_planner::GangId::new(format!("{namespace}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_planner::{GangPhase, NodePhase, Provider};
    use serde_json::json;
    use std::sync::Arc;

    fn dynamic(kind: Kind, body: serde_json::Value) -> Arc<DynamicObject> {
        let mut obj: DynamicObject = serde_json::from_value(body).expect("object");
        obj.types = Some(kube::core::TypeMeta {
            api_version: "muster.dev/v1alpha1".into(),
            kind: kind.name().into(),
        });
        Arc::new(obj)
    }

    fn typed<T: serde::de::DeserializeOwned>(body: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(body).expect("object"))
    }

    fn observed() -> Observed {
        let mut o = Observed::default();
        o.objects.insert(
            Kind::NodeClass,
            vec![dynamic(
                Kind::NodeClass,
                json!({"metadata": {"name": "nc"}, "spec": {"gcp": {"project": "p"}}}),
            )],
        );
        o.objects.insert(
            Kind::GpuPool,
            vec![
                dynamic(
                    Kind::GpuPool,
                    json!({"metadata": {"name": "good"}, "spec": {"nodeClassRef": {"name": "nc"}, "limits": {"maxGPUs": 64}, "provisioningTimeout": "10m"}}),
                ),
                dynamic(
                    Kind::GpuPool,
                    json!({"metadata": {"name": "bad"}, "spec": {"nodeClassRef": {"name": "nc"}, "requirements": {"zones": "a"}}}),
                ),
            ],
        );
        o.objects.insert(
            Kind::GpuQueue,
            vec![dynamic(
                Kind::GpuQueue,
                json!({"metadata": {"name": "q"}, "spec": {"pools": ["good"], "queueingStrategy": "StrictFIFO", "resources": [{"name": "nvidia.com/gpu", "gpuModel": "A100", "nominal": "16"}], "weight": "2"}}),
            )],
        );
        o.objects.insert(
            Kind::Gang,
            vec![dynamic(
                Kind::Gang,
                json!({
                    "metadata": {"name": "g", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"queue": "q", "podSets": [{"name": "main", "count": 2, "requests": {"nvidia.com/gpu": "8", "cpu": "4"}}]},
                    "status": {"phase": "Provisioning", "assignments": [{"podSet": "main", "index": 0, "node": "pn-1"}, {"podSet": "main", "index": 1, "node": "pn-2"}]}
                }),
            )],
        );
        let pn = |name: &str, status: serde_json::Value| {
            dynamic(
                Kind::PoolNode,
                json!({
                    "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"pool": "good", "nodeClass": "nc", "offering": {"provider": "gcp", "region": "r", "zone": "z", "instanceType": "a2", "capacityType": "spot", "pricePerHour": "3.5", "gpuModel": "A100", "gpuCount": 8}, "gang": {"namespace": "ns", "name": "g"}, "idempotencyKey": name},
                    "status": status
                }),
            )
        };
        o.objects.insert(
            Kind::PoolNode,
            vec![
                pn(
                    "pn-1",
                    json!({"phase": "Launched", "providerID": "gce://p/z/pn-1"}),
                ),
                pn(
                    "pn-2",
                    json!({"phase": "Ready", "providerID": "gce://p/z/vm-2", "nodeName": "vm-2"}),
                ),
            ],
        );
        o.nodes = vec![typed(json!({
            "metadata": {"name": "vm-2", "labels": {"muster.dev/pool": "good"}},
            "spec": {"providerID": "gce://p/z/vm-2", "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "90"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }))];
        o
    }

    /// A gang whose Gang names no network topology takes its queue's pool
    /// default; one that names its own keeps it, and its capacity opt-in
    /// reaches the planner.
    #[test]
    fn gangs_take_their_pools_network_default_unless_they_name_one() {
        let mut o = observed();
        o.objects.insert(
            Kind::GpuPool,
            vec![dynamic(
                Kind::GpuPool,
                json!({"metadata": {"name": "good"}, "spec": {"nodeClassRef": {"name": "nc"},
                       "networkTopology": {"mode": "Required", "level": "cloud.google.com/gce-topology-subblock"}}}),
            )],
        );
        o.objects.insert(
            Kind::GpuQueue,
            vec![dynamic(
                Kind::GpuQueue,
                json!({"metadata": {"name": "q"}, "spec": {"pools": ["good"], "namespaceSelector": {}}}),
            )],
        );
        let gang = |name: &str, extra: serde_json::Value| {
            let mut spec = json!({"queue": "q", "podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": "8"}}]});
            for (k, v) in extra.as_object().into_iter().flatten() {
                spec[k] = v.clone();
            }
            dynamic(
                Kind::Gang,
                json!({"metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}),
            )
        };
        o.objects.insert(
            Kind::Gang,
            vec![
                gang("plain", json!({})),
                gang(
                    "own",
                    json!({"networkTopology": {"mode": "Preferred", "level": "cloud.google.com/gce-topology-host"},
                           "mayOutliveCapacity": true}),
                ),
            ],
        );
        let tr = snapshot(&o, &BTreeMap::new(), Time(1_800_000_000));
        let of = |name: &str| {
            tr.snapshot
                .gangs
                .iter()
                .find(|g| g.id.as_str() == format!("ns/{name}"))
                .expect("the gang")
        };
        assert_eq!(
            of("plain").network,
            Some(muster_planner::NetworkTopology {
                level: 2,
                required: true
            })
        );
        assert!(!of("plain").may_outlive_capacity);
        assert_eq!(
            of("own").network,
            Some(muster_planner::NetworkTopology {
                level: 3,
                required: false
            })
        );
        assert!(of("own").may_outlive_capacity);
    }

    #[test]
    fn translates_pools_queues_gangs_and_nodes() {
        let tr = snapshot(&observed(), &BTreeMap::new(), Time(1_800_000_000));
        let s = &tr.snapshot;
        assert_eq!(s.pools.len(), 1);
        assert_eq!(s.pools[0].provider, Provider::Gcp);
        assert_eq!(s.pools[0].limits.max_gpus, Some(64));
        assert_eq!(
            s.pools[0].provisioning_timeout,
            Some(muster_planner::Dur::mins(10))
        );
        assert_eq!(tr.issues.len(), 1, "{:?}", tr.issues);
        assert_eq!(tr.issues[0].name, "bad");
        assert_eq!(tr.issues[0].reason, IssueReason::InvalidSpec);
        assert!(
            tr.issues[0].message.starts_with("spec.requirements.zones"),
            "{}",
            tr.issues[0].message
        );
        assert_eq!(
            s.queues[0].strategy,
            muster_planner::QueueingStrategy::StrictFifo
        );
        let g = &s.gangs[0];
        assert_eq!(g.id.as_str(), "ns/g");
        assert_eq!(g.phase, GangPhase::Provisioning);
        assert_eq!(g.pod_sets[0].requests.gpu_millis, 8000);
        // the registered PoolNode is the Node, and the gang's assignment follows it
        assert_eq!(tr.registered.get("pn-2").map(String::as_str), Some("vm-2"));
        assert_eq!(g.assignments[1].node, "vm-2");
        let in_flight = s.nodes.iter().find(|n| n.name == "pn-1").expect("pn-1");
        assert_eq!(in_flight.phase, NodePhase::Launched);
        assert_eq!(
            in_flight.reserved_for.as_ref().map(|g| g.as_str()),
            Some("ns/g")
        );
        let ready = s.nodes.iter().find(|n| n.name == "vm-2").expect("vm-2");
        assert_eq!(ready.phase, NodePhase::Ready);
        assert_eq!(ready.pool.as_deref(), Some("good"));
        assert_eq!(ready.allocatable.gpu_millis, 8000);
        assert_eq!(ready.price, muster_planner::Price::from_usd(3.5));
        assert_eq!(ready.taints.len(), 1);
        assert_eq!(s.nodes.len(), 2, "a Node of a PoolNode is not listed twice");
    }

    /// A pool keeps nodes warm by default (one hour, twelve-minute bursts);
    /// the arrivals are every Gang created within the window, Finished ones
    /// included, one per pod set asking for GPUs; `window: 0s` turns it
    /// off and no arrivals are read.
    #[test]
    fn keep_warm_and_the_arrivals_it_reads() {
        let gang = |name: &str, created: &str, phase: &str| {
            dynamic(
                Kind::Gang,
                json!({
                    "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                    "spec": {"queue": "q", "podSets": [
                        {"name": "main", "count": 2, "requests": {"nvidia.com/gpu": "1"},
                         "gpuModel": if name == "new" { json!("A100") } else { json!(null) }},
                        {"name": "launcher", "count": 1, "requests": {"cpu": "1"}}
                    ]},
                    "status": {"phase": phase}
                }),
            )
        };
        let mut o = observed();
        o.objects.insert(
            Kind::Gang,
            vec![
                gang("old", "2026-01-01T00:00:00Z", "Finished"),
                gang("done", "2026-01-01T09:30:00Z", "Finished"),
                gang("new", "2026-01-01T09:59:00Z", "Queued"),
            ],
        );
        let now = crate::controller::base::time::from_kube(
            &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T10:00:00Z".parse().expect("time"),
            ),
        );
        let tr = snapshot(&o, &BTreeMap::new(), now);
        let kw = tr.snapshot.pools[0]
            .disruption
            .keep_warm
            .as_ref()
            .expect("kept warm by default");
        assert_eq!(kw.window, muster_planner::Dur::hours(1));
        assert_eq!(kw.burst, muster_planner::Dur::mins(20));
        assert_eq!(kw.max_price_per_hour, None);
        assert!(
            !kw.all_sizes,
            "arrivals of the smallest size only, by default"
        );
        let got: Vec<(i64, u32, u32, Vec<String>)> = tr
            .snapshot
            .arrivals
            .iter()
            .map(|a| {
                let models = a.gpu_models.iter().map(|m| m.as_str().to_string());
                (now.0 - a.at.0, a.gpus_per_pod, a.pods, models.collect())
            })
            .collect();
        assert_eq!(
            got,
            vec![(1800, 1, 2, vec![]), (60, 1, 2, vec!["A100".to_string()])],
            "the finished gang in the window counts, the old one and the CPU pod set do not; \
             a pod set's GPU model comes along"
        );

        let mut off = o.clone();
        off.objects.insert(
            Kind::GpuPool,
            vec![dynamic(
                Kind::GpuPool,
                json!({"metadata": {"name": "good"}, "spec": {"nodeClassRef": {"name": "nc"}, "disruption": {"keepWarm": {"window": "0s", "maxPricePerHour": "5.00"}}}}),
            )],
        );
        let tr = snapshot(&off, &BTreeMap::new(), now);
        assert_eq!(tr.snapshot.pools[0].disruption.keep_warm, None);
        assert!(tr.snapshot.arrivals.is_empty());

        let mut capped = o;
        capped.objects.insert(
            Kind::GpuPool,
            vec![dynamic(
                Kind::GpuPool,
                json!({"metadata": {"name": "good"}, "spec": {"nodeClassRef": {"name": "nc"}, "disruption": {"keepWarm": {"window": "30m", "burst": "5m", "maxPricePerHour": "5.00", "allSizes": true}}}}),
            )],
        );
        let tr = snapshot(&capped, &BTreeMap::new(), now);
        let kw = tr.snapshot.pools[0]
            .disruption
            .keep_warm
            .clone()
            .expect("on");
        assert_eq!(
            (kw.window, kw.burst, kw.max_price_per_hour, kw.all_sizes),
            (
                muster_planner::Dur::mins(30),
                muster_planner::Dur::mins(5),
                muster_planner::Price::from_usd(5.0),
                true
            )
        );
        assert_eq!(
            tr.snapshot.arrivals.len(),
            2,
            "the gangs of the last 30 minutes, its start included"
        );
    }

    /// A PoolNode whose Node has not registered is planned with the taints
    /// and labels the launch gives its Node (the pool's), so a pod set that
    /// does not tolerate them is never placed on it; a registered one has
    /// its Node's own.
    #[test]
    fn unregistered_pool_nodes_carry_their_pools_taints_and_labels() {
        let mut o = observed();
        // the registered Node lost its taint: its own state wins
        o.nodes = vec![typed(json!({
            "metadata": {"name": "vm-2", "labels": {"muster.dev/pool": "good"}},
            "spec": {"providerID": "gce://p/z/vm-2"},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "90"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }))];
        let tr = snapshot(&o, &BTreeMap::new(), Time(1_800_000_000));
        let s = &tr.snapshot;
        let pool = &s.pools[0];
        assert!(!pool.taints.is_empty(), "GPUPools are tainted by default");
        let node = |name: &str| s.nodes.iter().find(|n| n.name == name).expect(name);
        let launching = node("pn-1");
        assert_eq!(launching.taints, pool.taints);
        for (k, v) in &pool.labels {
            assert_eq!(launching.labels.get(k), Some(v), "label {k}");
        }
        assert!(node("vm-2").taints.is_empty());

        // with its offering listed, it also carries the offering's labels
        // and region, as the planner saw them when it chose the machine
        let listed = muster_planner::fixtures::offering("a2", "z")
            .provider(muster_planner::Provider::Gcp)
            .capacity_type(muster_planner::CapacityType::Spot)
            .node_class("nc")
            .region("r")
            .label(muster_planner::labels::ARCH, muster_planner::labels::ARM64)
            .label("cloud.google.com/gke-accelerator", "nvidia-tesla-a100")
            .build();
        let offerings = BTreeMap::from([("good".to_string(), vec![listed])]);
        let tr = snapshot(&o, &offerings, Time(1_800_000_000));
        let node = |name: &str| {
            tr.snapshot
                .nodes
                .iter()
                .find(|n| n.name == name)
                .expect(name)
        };
        let launching = node("pn-1");
        let label = |k: &str| launching.labels.get(k).map(String::as_str);
        assert_eq!(label(muster_planner::labels::ARCH), Some("arm64"));
        assert_eq!(
            label("cloud.google.com/gke-accelerator"),
            Some("nvidia-tesla-a100")
        );
        assert_eq!(label(muster_planner::labels::REGION), Some("r"));
        assert_eq!(
            node("vm-2").labels.get(muster_planner::labels::ARCH),
            None,
            "its Node's own labels"
        );
    }

    /// A registered PoolNode whose Node is gone is lost, whatever its
    /// status still says: the planner sees it Draining (the PoolNode step
    /// drains it as `NodeLost` this cycle), so it neither places pods on it
    /// nor removes it as an empty node.
    #[test]
    fn a_registered_pool_node_whose_node_is_gone_is_draining() {
        let mut o = observed();
        let tr = snapshot(&o, &BTreeMap::new(), Time(1_800_000_000));
        let ready = tr.snapshot.nodes.iter().find(|n| n.name == "vm-2");
        assert_eq!(ready.map(|n| n.phase), Some(NodePhase::Ready));
        o.nodes.clear();
        let tr = snapshot(&o, &BTreeMap::new(), Time(1_800_000_000));
        let lost = tr
            .snapshot
            .nodes
            .iter()
            .find(|n| n.name == "pn-2")
            .expect("pn-2");
        assert_eq!(lost.phase, NodePhase::Draining);
        // a node still in flight has no Node yet, and is not lost
        let in_flight = tr.snapshot.nodes.iter().find(|n| n.name == "pn-1");
        assert_eq!(in_flight.map(|n| n.phase), Some(NodePhase::Launched));
    }

    #[test]
    fn unknown_node_class_is_an_invalid_reference() {
        let mut o = observed();
        o.objects.insert(Kind::NodeClass, Vec::new());
        let tr = snapshot(&o, &BTreeMap::new(), Time(0));
        assert!(tr.snapshot.pools.is_empty());
        assert!(
            tr.issues
                .iter()
                .any(|i| i.name == "good" && i.reason == IssueReason::InvalidReference)
        );
    }

    #[test]
    fn pods_on_nodes_muster_did_not_launch_are_summed() {
        let mut o = observed();
        o.nodes.push(typed(json!({
            "metadata": {"name": "cpu-1"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        })));
        let pod = |name: &str, node: &str, cpu: &str, daemon: bool| {
            let owners = if daemon {
                json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}])
            } else {
                json!([])
            };
            typed(json!({
                "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": "Running"}
            }))
        };
        o.pods = vec![
            pod("a", "cpu-1", "1", false),
            pod("b", "cpu-1", "2", false),
            pod("d", "cpu-1", "500m", true),
            pod("x", "vm-2", "1", false),
            pod("y", "vm-2", "1", false),
        ];
        let tr = snapshot(&o, &BTreeMap::new(), Time(0));
        let node = |name: &str| {
            tr.snapshot
                .nodes
                .iter()
                .find(|n| n.name == name)
                .cloned()
                .expect("node")
        };
        // not launched by muster: one entry per kind, requests summed
        let cpu = node("cpu-1");
        assert_eq!(cpu.pods.len(), 2);
        let others = cpu.pods.iter().find(|p| !p.daemon).expect("others");
        assert_eq!(others.requests.cpu_millis, 3000);
        let daemons = cpu.pods.iter().find(|p| p.daemon).expect("daemons");
        assert_eq!(daemons.requests.cpu_millis, 500);
        // launched by muster: pod by pod, by name, for consolidation
        let managed = node("vm-2");
        let names: Vec<&str> = managed.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ns/x", "ns/y"]);
    }

    #[test]
    fn pods_under_an_exhausted_pdb_must_not_be_disrupted() {
        let mut o = observed();
        o.pods = vec![typed(json!({
            "metadata": {"name": "db-0", "namespace": "ns", "labels": {"app": "db"}},
            "spec": {"nodeName": "vm-2", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"}
        }))];
        o.pdbs = vec![typed(json!({
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        }))];
        let tr = snapshot(&o, &BTreeMap::new(), Time(0));
        let node = tr
            .snapshot
            .nodes
            .iter()
            .find(|n| n.name == "vm-2")
            .expect("vm-2");
        assert_eq!(node.pods.len(), 1);
        assert!(node.pods[0].do_not_disrupt);
        assert_eq!(node.pods[0].requests.cpu_millis, 1000);
        assert_eq!(node.empty_since, None);
    }
}
