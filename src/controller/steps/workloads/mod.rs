//! The workload life cycle: brings each gang's workload (a Job, a JobSet, a
//! pod group, ...) to what the gang's state asks (queued: suspended with the
//! submitted templates; admitted: each pod set pinned to its nodes, and
//! running), one write at a time, each chosen by the planner's table
//! ([`muster_planner::lifecycle::workload`]) under the kind's rules from the
//! object as the API server returned it. The adapters behind
//! [`crate::controller::workloads`] turn each step into writes, which
//! [`crate::controller::workloads::writer`] carries out; the sequence and
//! the upstream rule behind each step are in `docs/controller.md` and
//! `docs/workloads.md`.

pub(crate) mod admit;
pub(crate) mod preempt;

use std::collections::{BTreeMap, BTreeSet};

use kube_runtime::events::EventType;
use muster_planner::lifecycle::record::GangRecord;
use muster_planner::lifecycle::workload::{self as table, Pins, Step, Want};
use muster_planner::{GangPhase, Snapshot};

use crate::controller::base::api::{ActError, gang_label_value};
use crate::controller::base::objects::Kind;
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::translate::{Translation, gang};
use crate::controller::workloads::{self, Directives, Workload, writer};

/// The most writes one workload gets in one cycle (a stop and a start are five).
const MAX_STEPS: usize = 6;

/// How long after this process started a workload a cache that still shows
/// its Gang unadmitted is taken to be behind, not the workload to run
/// unadmitted.
pub(crate) const STARTED_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Workloads this process unsuspended, by UID, with when and the version
/// of their Gang it saw then. Only ever delays the stop of a workload found
/// running unadmitted (the caches of workloads and Gangs are not updated
/// together), and only while the Gang's cache still shows the version seen
/// at the start: a Gang written since (evicted after a start whose stop
/// write was refused) is not behind, and is stopped at once. After a
/// restart it is empty and the observed state alone decides, which is the
/// safe side.
#[derive(Debug, Default)]
pub(crate) struct Started(
    std::sync::Mutex<std::collections::BTreeMap<String, (std::time::Instant, Option<String>)>>,
);

impl Started {
    /// Notes that the workload with `uid` was unsuspended now, its Gang
    /// seen at version `gang_version`.
    pub(crate) fn note(&self, uid: &str, gang_version: Option<&str>) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, (at, _)| at.elapsed() < STARTED_GRACE);
        m.insert(
            uid.to_string(),
            (std::time::Instant::now(), gang_version.map(String::from)),
        );
    }

    /// True when the workload with `uid` was unsuspended here within the
    /// grace and its Gang, seen now at `gang_version`, was not written since
    /// (when the version was known).
    pub(crate) fn lately(&self, uid: &str, gang_version: Option<&str>) -> bool {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(uid).is_some_and(|(at, seen)| {
            at.elapsed() < STARTED_GRACE
                && seen
                    .as_deref()
                    .is_none_or(|v| gang_version.is_none_or(|g| g == v))
        })
    }
}

/// True when the workload has pods or its status counts active ones: it was
/// started.
fn has_pods(w: &dyn Workload, observed: &Observed) -> bool {
    w.counts_active()
        || crate::controller::observe::workloads::live_pods(observed, w)
            .iter()
            .any(|p| !workloads::pod_group::gated(p))
}

/// Pods admitted by pod set, from a gang's assignments.
pub(crate) fn counts_of<'a>(pod_sets: impl Iterator<Item = &'a String>) -> BTreeMap<String, u32> {
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    for set in pod_sets {
        *out.entry(set.clone()).or_default() += 1;
    }
    out
}

/// The pins an admitted gang's assignments ask for: each pod set's nodes,
/// PoolNode names replaced by the Nodes registered for them.
pub(crate) fn pins_of(view: &GangRecord, tr: &Translation) -> Pins {
    let mut pins = Pins::new();
    for a in &view.assignments {
        pins.entry(a.pod_set.clone())
            .or_default()
            .insert(tr.registered.get(&a.node).unwrap_or(&a.node).clone());
    }
    pins
}

/// Every labelled workload towards what its Gang's state asks: admitted or
/// running gangs keep (or get) their pins and run; every other workload is
/// queued — a fresh one is suspended, and one found running without an
/// admission is stopped (its owning controller deletes its pods) and
/// queued. Returns how many writes it made.
pub(crate) async fn reconcile(
    ctx: &Ctx,
    started: &Started,
    observed: &Observed,
    tr: &Translation,
) -> usize {
    let mut writes = 0;
    for w in crate::controller::observe::workloads::all(observed) {
        let ns = w.namespace();
        let name = w.gang_name();
        let gang_obj = observed.of(Kind::Gang).iter().find(|g| {
            g.metadata.namespace.as_deref() == Some(ns.as_str())
                && g.metadata.name.as_deref() == Some(name.as_str())
        });
        let view = gang_obj.map(|g| gang::record_of(g));
        let gang_version = gang_obj.and_then(|g| g.metadata.resource_version.as_deref());
        let phase = view.as_ref().and_then(|v| v.phase).unwrap_or_default();
        if phase == GangPhase::Finished {
            continue;
        }
        let (want, counts) = match (&view, phase) {
            (Some(v), GangPhase::Admitted | GangPhase::Running) if !v.assignments.is_empty() => (
                Want::Run(pins_of(v, tr)),
                counts_of(v.assignments.iter().map(|a| &a.pod_set)),
            ),
            _ => (Want::Queued, BTreeMap::new()),
        };
        let o = w.observe();
        if want == Want::Queued
            && !o.suspended
            && !o.stopping
            && o.pinned.is_some()
            && w.uid().is_some_and(|u| started.lately(&u, gang_version))
        {
            // started here a moment ago: the Gang's cache is behind the workload's
            continue;
        }
        if want == Want::Queued && !o.suspended && !o.stopping && has_pods(w.as_ref(), observed) {
            ctx.events
                .publish_ref(
                    w.object_ref(),
                    EventType::Warning,
                    crate::controller::base::reasons::STARTED_OUTSIDE_MUSTER,
                    format!(
                        "the {}'s pods started before muster admitted it; it is suspended and queued (submit it suspended, or through muster's admission webhook)",
                        w.object_ref().kind.unwrap_or_default()
                    ),
                )
                .await;
        }
        if let Want::Run(pins) = &want {
            // the admission labelled the nodes; a label write refused then
            // is made now, before the pin that selects it
            let gang_id = format!("{ns}/{name}");
            if let Err(e) = crate::controller::steps::workloads::admit::label_nodes(
                ctx, &gang_id, pins, observed,
            )
            .await
            {
                tracing::warn!(workload = %name, namespace = %ns, error = %e, "workload life cycle");
                continue;
            }
        }
        let reference = w.object_ref();
        match drive(ctx, started, w, &want, counts, &tr.snapshot, gang_version).await {
            Ok(n) => writes += n,
            Err(e) => {
                tracing::warn!(workload = %name, namespace = %ns, error = %e, "workload life cycle");
                // the user's object says why it does not start or stop (a
                // repeated Event is aggregated by the recorder into a series)
                if let ActError::Api { action, source } = &e {
                    ctx.events
                        .publish_ref(
                            reference,
                            EventType::Warning,
                            crate::controller::base::reasons::WORKLOAD_WRITE_FAILED,
                            format!(
                                "{action}: {}",
                                crate::controller::observe::crd_check::short_error(source)
                            ),
                        )
                        .await;
                }
            }
        }
    }
    writes
}

/// The directives of a pin: the gang's node label, the taints of the nodes
/// in the snapshot, and the pods admitted by pod set.
pub(crate) fn directives(
    gang_id: &str,
    snapshot: &Snapshot,
    pins: Option<&Pins>,
    counts: BTreeMap<String, u32>,
) -> Directives {
    let nodes: BTreeSet<&String> = pins
        .into_iter()
        .flat_map(|p| p.values())
        .flatten()
        .collect();
    Directives {
        gang_label: gang_label_value(gang_id),
        taints: snapshot
            .nodes
            .iter()
            .filter(|n| nodes.contains(&n.name))
            .map(|n| (n.name.clone(), n.taints.clone()))
            .collect(),
        counts,
    }
}

/// Writes, one step at a time, until the workload is where `want` asks or a
/// write fails (the next cycle goes on from what it then observes). Each
/// step is decided from the object the previous write returned; a write
/// refused with 409 Conflict (the owning controller wrote the object in
/// between: a JobSet's status after it was suspended) is decided again
/// from the object read anew. `gang_version` is the resourceVersion of the
/// gang's Gang as observed, noted with an unsuspend (see [`Started`]).
/// Returns the number of writes.
pub(crate) async fn drive(
    ctx: &Ctx,
    started: &Started,
    w: Box<dyn Workload>,
    want: &Want,
    counts: BTreeMap<String, u32>,
    snapshot: &Snapshot,
    gang_version: Option<&str>,
) -> Result<usize, ActError> {
    let gang_id = format!("{}/{}", w.namespace(), w.gang_name());
    let rules = w.kind().rules();
    let pins = match want {
        Want::Run(p) => Some(p),
        Want::Queued => None,
    };
    let dirs = directives(&gang_id, snapshot, pins, counts);
    let mut current = w;
    let mut writes = 0;
    for _ in 0..MAX_STEPS {
        let step = table::next_step(&current.observe(), want, rules);
        if step == Step::None {
            break;
        }
        tracing::debug!(workload = %gang_id, kind = current.kind().as_str(), step = step.as_str(), want = ?want, "workload life cycle");
        current = match writer::write(&ctx.client, current.as_ref(), &step, &dirs).await {
            Ok(next) => next,
            Err(e) if e.is_conflict() => match writer::reread(&ctx.client, current.as_ref()).await?
            {
                Some(fresh) => {
                    current = fresh;
                    continue;
                }
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if step == Step::Unsuspend
            && let Some(uid) = current.uid()
        {
            started.note(&uid, gang_version);
        }
        writes += 1;
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_workloads_are_remembered_for_the_grace_only() {
        let s = Started::default();
        assert!(!s.lately("u1", None));
        s.note("u1", Some("7"));
        assert!(s.lately("u1", Some("7")));
        assert!(s.lately("u1", None), "a Gang not seen: the grace alone");
        assert!(
            !s.lately("u1", Some("9")),
            "the Gang was written since the start: its cache is not behind"
        );
        assert!(!s.lately("u2", Some("7")));
        s.note("u3", None);
        assert!(s.lately("u3", Some("9")));
        // an entry older than the grace no longer counts
        s.0.lock().expect("lock").insert(
            "old".into(),
            (
                std::time::Instant::now() - STARTED_GRACE - std::time::Duration::from_secs(1),
                None,
            ),
        );
        assert!(!s.lately("old", None));
    }
}
