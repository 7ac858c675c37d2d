//! Status: Gang status from the plan (phase, position, reason, reserved
//! nodes, assignments, timestamps) and from what is observed (all pods
//! Running, Job finished); `Valid` conditions and Events for objects the
//! translation had to leave out. Writes only what changed.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use muster_planner::lifecycle::record::{self, GangRecord, Outcome};
use muster_planner::{GangId, GangPhase, Plan, Policy, Snapshot, Time};

use crate::controller::base::api::patch_status;
use crate::controller::base::conditions::ConditionType;
use crate::controller::base::metrics::GangLabels;
use crate::controller::base::objects::{Condition, GangSpec, Kind};
use crate::controller::ctx::Ctx;
use crate::controller::observe::Observed;
use crate::controller::translate::node::pod_active;
use crate::controller::translate::pool::spec;
use crate::controller::translate::{Issue, gang};
use crate::controller::workloads::pod_gang;

/// What the status of every Gang is decided from besides the Gang itself,
/// gathered once per cycle from the same observation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// Nodes going away ([`draining_nodes`]).
    pub(crate) draining: BTreeMap<String, record::Leaving>,
    /// Gang ids whose workload completed or failed for good
    /// ([`finished_gangs`]).
    pub(crate) finished: BTreeSet<String>,
    /// By gang id, the pod sets its workload's own controller holds back
    /// ([`waiting_pod_sets`]); gangs without any are absent.
    pub(crate) waiting: BTreeMap<String, BTreeSet<String>>,
}

/// One Gang's record before and after this plan.
struct Decision {
    /// The Gang object as observed.
    obj: Arc<DynamicObject>,
    /// `namespace/name`.
    id: String,
    /// Its record as read.
    before: GangRecord,
    /// The planner's mapping of this plan onto it.
    outcome: Outcome,
}

/// Every Gang's record after this plan: the planner's one mapping from plan
/// items to gang phases ([`muster_planner::lifecycle::record`]), applied
/// once per cycle to every observed Gang; [`record`] and [`update`] write
/// from it.
pub(crate) struct Decided(Vec<Decision>);

impl Decided {
    /// Maps `plan` onto every Gang of `observed`.
    pub(crate) fn of(
        plan: &Plan,
        snapshot: &Snapshot,
        observed: &Observed,
        facts: &Facts,
        policy: &Policy,
        now: Time,
    ) -> Decided {
        let cx = record::Context::new(plan, snapshot, &facts.draining, policy, now);
        let decisions = observed
            .of(Kind::Gang)
            .iter()
            .map(|obj| {
                let ns = obj.namespace().unwrap_or_default();
                let name = obj.name_any();
                let id = format!("{ns}/{name}");
                let before = gang::record_of(obj);
                let planned = gang::gang(obj).ok().flatten();
                let seen = record::Seen {
                    finished: facts.finished.contains(&id),
                    all_running: before.phase == Some(GangPhase::Admitted)
                        && all_running(
                            obj,
                            &before,
                            observed,
                            facts.waiting.get(&id).unwrap_or(&BTreeSet::new()),
                            (&ns, &name),
                        ),
                };
                let outcome = record::after_plan(
                    &GangId::new(id.clone()),
                    &before,
                    planned.as_ref(),
                    seen,
                    &cx,
                );
                Decision {
                    obj: obj.clone(),
                    id,
                    before,
                    outcome,
                }
            })
            .collect();
        Decided(decisions)
    }
}

/// Whether every pod an Admitted gang was admitted with runs or has run
/// (succeeded): its assignments (fewer than submitted for an elastic gang
/// admitted at its least count), else its full size — less the pods of the
/// pod sets in `waiting`, which the workload's own controller creates only
/// once the others got somewhere (a JobSet's `dependsOn`: an initializer
/// that must complete before the trainers exist).
fn all_running(
    obj: &DynamicObject,
    st: &GangRecord,
    observed: &Observed,
    waiting: &BTreeSet<String>,
    (ns, name): (&str, &str),
) -> bool {
    let want: u64 = if st.assignments.is_empty() {
        spec::<GangSpec>(Kind::Gang, obj)
            .map(|s| {
                s.pod_sets
                    .iter()
                    .filter(|p| !waiting.contains(&p.name))
                    .map(|p| u64::try_from(p.count).unwrap_or(0))
                    .sum()
            })
            .unwrap_or(u64::MAX)
    } else {
        st.assignments
            .iter()
            .filter(|a| !waiting.contains(&a.pod_set))
            .count() as u64
    };
    let running = observed
        .pods
        .iter()
        .filter(|p| pod_gang(p).is_some_and(|(n, g)| n == ns && g == name))
        .filter(|p| {
            (pod_active(p) && p.phase.as_deref() == Some("Running"))
                || p.phase.as_deref() == Some("Succeeded")
        })
        .count() as u64;
    running >= want
}

impl Facts {
    /// The facts of one observation, gathered once per cycle.
    pub(crate) fn of(observed: &Observed) -> Facts {
        let workloads = crate::controller::observe::workloads::all(observed);
        Facts {
            draining: draining_nodes(observed),
            finished: finished_gangs(&workloads),
            waiting: waiting_pod_sets(&workloads),
        }
    }
}

/// Names (PoolNode and Node) of the PoolNodes being drained, and why. Every
/// Draining node counts, whatever its reason: the record mapping evicts
/// each gang holding one whole and requeues it at once without counting the
/// eviction, under the reason the PoolNode's own tells (`SpotInterruption`
/// for an interruption, `CapacityEnding` when its reserved capacity ends,
/// `NodeLost` otherwise).
pub(crate) fn draining_nodes(observed: &Observed) -> BTreeMap<String, record::Leaving> {
    let mut out = BTreeMap::new();
    for pn in observed.of(Kind::PoolNode) {
        let st = crate::controller::translate::node::poolnode_status(pn);
        if st.phase != muster_crds::PoolNodePhase::Draining {
            continue;
        }
        use crate::controller::base::reasons::{CAPACITY_ENDING, INTERRUPTED};
        let leaving = match st.reason.as_deref() {
            Some(INTERRUPTED) => record::Leaving::Interrupted,
            Some(CAPACITY_ENDING) => record::Leaving::CapacityEnding,
            _ => record::Leaving::Drained,
        };
        out.insert(pn.name_any(), leaving);
        if let Some(n) = st.node_name {
            out.insert(n, leaving);
        }
    }
    out
}

/// By gang id (`namespace/name`), the pod sets each workload's own
/// controller holds back for now ([`crate::controller::workloads::Workload::waiting_pod_sets`]).
fn waiting_pod_sets(
    workloads: &[Box<dyn crate::controller::workloads::Workload>],
) -> BTreeMap<String, BTreeSet<String>> {
    workloads
        .iter()
        .filter_map(|w| {
            let waiting = w.waiting_pod_sets();
            (!waiting.is_empty()).then(|| (format!("{}/{}", w.namespace(), w.gang_name()), waiting))
        })
        .collect()
}

/// Gang ids (`namespace/name`) whose workload completed or failed for good,
/// as its adapter observes it.
fn finished_gangs(
    workloads: &[Box<dyn crate::controller::workloads::Workload>],
) -> BTreeSet<String> {
    workloads
        .iter()
        .filter(|w| w.observe().finished)
        .map(|w| format!("{}/{}", w.namespace(), w.gang_name()))
        .collect()
}

/// Writes, before their workloads are written, the status of the gangs in
/// `ids` that this plan evicts (`Evicted`) or admits (`Admitted`): intent
/// before action, as a PoolNode is written before its cloud call. A kill
/// between the two leaves a Gang whose phase says what its workload is to
/// become, and the next process's workload life cycle
/// ([`crate::controller::steps::workloads::reconcile`]) carries it out. Returns the ids
/// recorded (written now, or already so); a gang whose write failed is
/// left out, and its workload is not to be written this cycle.
pub(crate) async fn record(ctx: &Ctx, decided: &Decided, ids: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut recorded = BTreeSet::new();
    for d in &decided.0 {
        if !ids.contains(d.id.as_str()) {
            continue;
        }
        if !matches!(
            d.outcome.record.phase,
            Some(GangPhase::Admitted | GangPhase::Evicted)
        ) {
            // finished meanwhile: nothing to carry out
            continue;
        }
        if write(ctx, &d.obj, &d.before, &d.outcome.record)
            .await
            .is_ok()
        {
            recorded.insert(d.id.clone());
        }
    }
    recorded
}

/// Writes `after` over `before` when they differ; `Ok(false)` when there
/// was nothing to write.
async fn write(
    ctx: &Ctx,
    obj: &DynamicObject,
    before: &GangRecord,
    after: &GangRecord,
) -> Result<bool, ()> {
    if before == after {
        return Ok(false);
    }
    let Some(status) = gang::write_record(obj, before, after) else {
        return Ok(false);
    };
    let ns = obj.namespace();
    match patch_status(
        &ctx.client,
        Kind::Gang,
        ns.as_deref(),
        &obj.name_any(),
        status,
    )
    .await
    {
        Ok(()) => Ok(true),
        Err(e) => {
            tracing::warn!(gang = %obj.name_any(), error = %e, "could not write gang status");
            Err(())
        }
    }
}

/// A gang whose life-cycle table evicts it: its status says `Evicted`
/// already; its workload is to be stopped by the workloads step
/// ([`crate::controller::steps::workloads::evict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Eviction {
    /// The Gang's namespace.
    pub(crate) namespace: String,
    /// The Gang's name.
    pub(crate) name: String,
    /// The reason written on the Gang (a metric label).
    pub(crate) reason: String,
}

/// Writes Gang statuses that changed (all but those [`record`] wrote this
/// cycle, `recorded`) and refreshes the gangs gauge. Returns the gangs its
/// life-cycle table evicts, written `Evicted` first: the workloads step
/// stops their workloads after.
pub(crate) async fn update(
    ctx: &Ctx,
    decided: &Decided,
    recorded: &BTreeSet<String>,
) -> Vec<Eviction> {
    let mut evictions = Vec::new();
    let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
    for d in &decided.0 {
        let after = &d.outcome.record;
        let queue = spec::<GangSpec>(Kind::Gang, &d.obj)
            .map(|s| s.queue)
            .unwrap_or_default();
        let phase = after.phase.map(GangPhase::as_str).unwrap_or_default();
        *counts.entry((queue, phase.to_string())).or_default() += 1;
        if recorded.contains(&d.id) {
            continue;
        }
        match write(ctx, &d.obj, &d.before, after).await {
            Ok(_) => {}
            // an eviction not recorded is not carried out: decided again next cycle
            Err(()) => continue,
        }
        if d.outcome.evict {
            evictions.push(Eviction {
                namespace: d.obj.namespace().unwrap_or_default(),
                name: d.obj.name_any(),
                reason: after
                    .reason
                    .clone()
                    .unwrap_or_else(|| "Unknown".to_string()),
            });
        }
    }
    ctx.deps.metrics.gangs.clear();
    for ((queue, phase), n) in counts {
        ctx.deps
            .metrics
            .gangs
            .get_or_create(&GangLabels { queue, phase })
            .set(n);
    }
    evictions
}

/// Sets `Valid=False` (and publishes a Warning Event) on objects left out of
/// the snapshot; sets `Valid=True` on pools, queues and NodeClasses that read.
pub(crate) async fn report_issues(ctx: &Ctx, issues: &[Issue], observed: &Observed, now: Time) {
    for kind in [
        Kind::NodeClass,
        Kind::GpuPool,
        Kind::GpuQueue,
        Kind::Gang,
        Kind::PoolNode,
    ] {
        for obj in observed.of(kind) {
            let issue = issues.iter().find(|i| {
                i.kind == kind && i.name == obj.name_any() && i.namespace == obj.namespace()
            });
            let conds: Vec<Condition> = crate::controller::base::api::conditions(obj);
            let current = conds
                .iter()
                .find(|c| c.type_ == ConditionType::Valid.as_str());
            let (ok, reason, message) = match issue {
                Some(i) => (false, i.reason.as_str(), i.message.clone()),
                None if matches!(kind, Kind::Gang | Kind::PoolNode) && current.is_none() => {
                    continue;
                }
                None => (true, "Valid", "read and part of planning".to_string()),
            };
            let cond = crate::controller::base::api::condition(
                ConditionType::Valid,
                ok,
                reason,
                message.clone(),
                now,
                obj.metadata.generation,
            );
            if current.is_some_and(|c| {
                c.status == cond.status && c.reason == reason && c.message == message
            }) {
                continue;
            }
            let mut next: Vec<Condition> = conds
                .iter()
                .filter(|c| c.type_ != "Valid")
                .cloned()
                .collect();
            next.push(cond);
            let ns = obj.namespace();
            if let Err(e) = patch_status(
                &ctx.client,
                kind,
                ns.as_deref(),
                &obj.name_any(),
                serde_json::json!({"conditions": next}),
            )
            .await
            {
                tracing::warn!(name = %obj.name_any(), error = %e, "could not write condition");
            }
            if issue.is_some() {
                ctx.events.warn(kind, obj, reason, message).await;
            }
        }
    }
}
