//! One gang, one try: quota, then existing capacity, then a launch — at full
//! size, then (for elastic gangs) with every pod set at its `minCount` — and
//! committing the result into the working state and the plan.
//!
//! Elastic gangs: when a gang cannot start at `count` (quota, capacity or
//! launch), it is tried once more with *every* pod set at its `minCount`
//! (`PodSet::min`). Pods are admitted all together or not at all at either
//! size; the assignments say how many pods each set got (indices `0..n`).

use std::collections::BTreeMap;

use crate::decided::{Cycle, Outcome, node_set};
use crate::hole;
use crate::index::{ReleasedFrom, World};
use crate::model::{Assignment, CapacityType, GangId, QuotaResource};
use crate::naming;
use crate::placement::{Group, Scope, groups_for, place};
use crate::plan::{Admission, Launch, NewNode, WaitReason};
use crate::provisioning::{LaunchChoice, LaunchFail, plan_launch};
use crate::quota::{QuotaBook, Short};
use crate::reasons;
use crate::takes::Take;

/// What a successful try decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Admit(Vec<Take>),
    Launch(LaunchChoice),
}

/// A successful try.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub groups: Vec<Group>,
    pub decision: Decision,
    /// Quota amounts, models not yet known.
    pub generic: BTreeMap<QuotaResource, u64>,
}

/// Why a try failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fail {
    Quota {
        short: Short,
        /// Every resource short.
        all: Vec<QuotaResource>,
    },
    Launch(LaunchFail),
}

impl Fail {
    /// Bounded reason.
    pub fn reason(&self) -> WaitReason {
        match self {
            Fail::Quota { .. } => WaitReason::QuotaExhausted,
            Fail::Launch(LaunchFail::Unsatisfiable(_)) => WaitReason::Unsatisfiable,
            Fail::Launch(LaunchFail::NoOffering { .. }) => WaitReason::NoOffering,
            Fail::Launch(LaunchFail::PoolLimit { .. }) => WaitReason::PoolLimit,
            Fail::Launch(LaunchFail::LaunchBudget { .. }) => WaitReason::LaunchBudget,
        }
    }
}

/// Pod counts to try: full size, then every pod set at its minimum.
pub(crate) fn sizes(w: &World<'_>, gi: usize) -> Vec<Vec<u32>> {
    let g = w.gangs[gi].gang;
    let full: Vec<u32> = g.pod_sets.iter().map(|p| p.count).collect();
    let min: Vec<u32> = g.pod_sets.iter().map(|p| p.min()).collect();
    if min != full {
        vec![full, min]
    } else {
        vec![full]
    }
}

/// Tries one size.
pub(crate) fn try_size(
    w: &mut World<'_>,
    book: &QuotaBook,
    gi: usize,
    counts: &[u32],
    skip_quota: bool,
) -> Result<Attempt, Fail> {
    let gang = w.gangs[gi].gang;
    let groups = groups_for(w, gi, counts);
    let Some(q) = w.gangs[gi].queue else {
        return Err(Fail::Launch(LaunchFail::Unsatisfiable(
            "unknown queue".into(),
        )));
    };
    let generic = book.amounts(
        q,
        groups
            .iter()
            .map(|g| (&gang.pod_sets[g.set].requests, g.count, None)),
    );
    let mut excluded = Vec::new();
    if !skip_quota {
        if let Err(short) = book.check(q, &generic) {
            let all = generic
                .iter()
                .filter(|(r, v)| {
                    !matches!(r, QuotaResource::GpuModel(_)) && book.check_one(q, r, **v).is_err()
                })
                .map(|(r, _)| r.clone())
                .collect();
            return Err(Fail::Quota { short, all });
        }
        let gpu = generic.get(&QuotaResource::Gpu).copied().unwrap_or(0);
        excluded = book.excluded_models(q, gpu);
    }
    let scope = Scope::anywhere(gi, &excluded);
    // A failed check of an earlier launch (`replay.rs`) found, on this
    // state, that the whole gang has no room.
    let known = w
        .known_existing
        .as_ref()
        .is_some_and(|k| k.is_for(gi, counts, &excluded));
    let duration = gang
        .expected_duration
        .unwrap_or(w.policy.default_expected_duration);
    if !known && let Some(decision) = size_matched(w, gi, &groups, &scope, &excluded, duration) {
        return Ok(Attempt {
            groups,
            decision,
            generic,
        });
    }
    if !known && let Some(takes) = place(w, &groups, gang.topology, &scope) {
        let decision = match own_machine(w, gi, &groups, &excluded, &takes, duration) {
            Some(c) => Decision::Launch(c),
            None => Decision::Admit(takes),
        };
        return Ok(Attempt {
            groups,
            decision,
            generic,
        });
    }
    match plan_launch(w, gi, &groups, gang.topology, &excluded, duration) {
        Ok(c) => Ok(Attempt {
            groups,
            decision: Decision::Launch(c),
            generic,
        }),
        Err(f) => Err(Fail::Launch(f)),
    }
}

/// With `Policy::size_matched_placement`: the gang on nodes no bigger
/// than its size class, else a launch that avoids the bigger ones (`hole`);
/// `None` leaves the try to the usual order (there is no bigger node, or
/// neither worked).
fn size_matched(
    w: &mut World<'_>,
    gi: usize,
    groups: &[Group],
    scope: &Scope<'_>,
    excluded: &[crate::model::GpuModel],
    duration: crate::time::Dur,
) -> Option<Decision> {
    let class = hole::matched_class(w, gi, groups)?;
    let topology = w.gangs[gi].gang.topology;
    hole::size_matched(w, class, |w| match place(w, groups, topology, scope) {
        Some(takes) => Some(Decision::Admit(takes)),
        None => plan_launch(w, gi, groups, topology, excluded, duration)
            .ok()
            .filter(|c| !c.new.is_empty())
            .map(Decision::Launch),
    })
}

/// A launch for the gang that avoids the idle nodes `takes` would keep up
/// for it alone, when it costs less by the policy's share (`hole`).
fn own_machine(
    w: &mut World<'_>,
    gi: usize,
    groups: &[Group],
    excluded: &[crate::model::GpuModel],
    takes: &[Take],
    duration: crate::time::Dur,
) -> Option<LaunchChoice> {
    let percent = w.policy.own_machine_below_percent;
    if percent == 0 {
        return None;
    }
    let idle = hole::idle_hosts(w, takes);
    if idle.is_empty() {
        return None;
    }
    let keep = hole::keep_cost(w, &idle, duration);
    let topology = w.gangs[gi].gang.topology;
    let alt = w.with_avoided(&idle, |w| {
        plan_launch(w, gi, groups, topology, excluded, duration)
    });
    let mut c = alt.ok()?;
    // (The plan's message does not name the idle nodes: a re-plan that
    // takes this launch over from an earlier cycle checks what the launch
    // reads, not why the placement was passed over.)
    if c.new.is_empty()
        || !hole::own_machine_wins(hole::launch_cost(w, &c, duration), keep, percent)
    {
        return None;
    }
    c.passed_over = true;
    Some(c)
}

/// Tries full size, then minimum size; the failure reported is the one at
/// full size.
#[allow(clippy::result_large_err)]
pub(crate) fn try_gang(
    w: &mut World<'_>,
    book: &QuotaBook,
    gi: usize,
    skip_quota: bool,
) -> Result<Attempt, (Fail, Vec<u32>)> {
    w.flush_index();
    let mut first: Option<(Fail, Vec<u32>)> = None;
    for counts in sizes(w, gi) {
        let r = try_size(w, book, gi, &counts, skip_quota);
        // Found on the state before this try only.
        w.known_existing = None;
        match r {
            Ok(a) => return Ok(a),
            Err(f) => {
                if first.is_none() {
                    first = Some((f, counts));
                }
            }
        }
    }
    Err(first.unwrap_or((
        Fail::Launch(LaunchFail::Unsatisfiable("gang has no pods".into())),
        Vec::new(),
    )))
}

/// Message for a failed try.
pub(crate) fn fail_message(w: &World<'_>, gi: usize, fail: &Fail, counts: &[u32]) -> String {
    let g = w.gangs[gi].gang;
    let need = reasons::describe_need(g, counts);
    match fail {
        Fail::Quota { short, .. } => reasons::quota_message(&g.queue, &need, short),
        Fail::Launch(f) => reasons::launch_fail_message(w, &need, f),
    }
}

/// A plan item an earlier cycle's commit of the same try made.
#[derive(Debug)]
pub(crate) enum Made {
    Admission(Admission),
    Launch(Launch),
}

/// What a commit added to its queue's quota usage.
pub(crate) type Added = BTreeMap<QuotaResource, u64>;

/// Applies a successful try: working state, quota, plan items. True when
/// every new node got the first name derived for it (none was taken).
pub(crate) fn commit(
    w: &mut World<'_>,
    book: &mut QuotaBook,
    cx: &mut Cycle,
    gi: usize,
    a: &Attempt,
) -> bool {
    commit_inner(w, book, cx, gi, a, None, None).0
}

/// Applies a try an earlier cycle committed from the same state: the same
/// working state and quota changes as [`commit`], with the plan item that
/// commit made (its node names, assignments and message are the same; the
/// launch deadline is taken from this cycle's time) and, when given, what
/// it added to the quota usage (a function of the try and the queue).
/// Returns whether the names were clean, and what was added to the quota.
pub(crate) fn commit_again(
    w: &mut World<'_>,
    book: &mut QuotaBook,
    cx: &mut Cycle,
    gi: usize,
    a: &Attempt,
    made: Made,
    added: Option<Added>,
) -> (bool, Added) {
    commit_inner(w, book, cx, gi, a, Some(made), added)
}

/// Like [`commit`], also returning what was added to the quota usage.
pub(crate) fn commit_counted(
    w: &mut World<'_>,
    book: &mut QuotaBook,
    cx: &mut Cycle,
    gi: usize,
    a: &Attempt,
) -> (bool, Added) {
    commit_inner(w, book, cx, gi, a, None, None)
}

fn commit_inner(
    w: &mut World<'_>,
    book: &mut QuotaBook,
    cx: &mut Cycle,
    gi: usize,
    a: &Attempt,
    made: Option<Made>,
    added: Option<Added>,
) -> (bool, Added) {
    let gang = w.gangs[gi].gang;
    let mut names_clean = true;
    let q = w.gangs[gi].queue;
    let made = match (&a.decision, made) {
        (Decision::Admit(_), Some(m @ Made::Admission(_))) => Some(m),
        (Decision::Launch(c), Some(Made::Launch(l))) if l.nodes.len() == c.new.len() => {
            Some(Made::Launch(l))
        }
        _ => None,
    };
    let fresh = made.is_none();
    // (shape, pods, GPU model) of every pod placed, for the quota: not
    // needed when what the commit adds is known.
    let count = added.is_none();
    let mut next_index = vec![0u32; gang.pod_sets.len()];
    let mut assignments = Vec::new();
    let mut model_pods = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    let existing: &[Take] = match &a.decision {
        Decision::Admit(t) => t,
        Decision::Launch(c) => &c.existing,
    };
    for t in existing {
        let g = &a.groups[t.group];
        if fresh {
            let ps = &gang.pod_sets[g.set];
            for _ in 0..t.n {
                assignments.push(Assignment {
                    pod_set: ps.name.clone(),
                    index: next_index[g.set],
                    node: w.nodes[t.node].node.name.clone(),
                });
                next_index[g.set] += 1;
            }
        }
        w.take(t.node, &g.shape, t.n);
        if !w.nodes[t.node].gangs.contains(&gi) {
            w.nodes[t.node].gangs.push(gi);
        }
        if count {
            model_pods.push((g.shape.clone(), t.n, w.nodes[t.node].node.gpu_model.clone()));
        }
        used.push(t.node);
        if w.nodes[t.node].released_from.is_some() {
            cx.handed.insert(t.node, gi);
        }
    }
    let used = node_set(used);
    match (&a.decision, made) {
        (Decision::Admit(_), made) => {
            let admission = match made {
                Some(Made::Admission(m)) => m,
                _ => {
                    assignments.sort();
                    Admission {
                        gang: gang.id.clone(),
                        assignments,
                    }
                }
            };
            cx.plan.admissions.push(admission);
            cx.outcome.insert(gi, Outcome::Admitted);
        }
        (Decision::Launch(c), made) => {
            let mut made = match made {
                Some(Made::Launch(l)) if l.nodes.len() == c.new.len() => Some(l),
                _ => None,
            };
            let attempt = gang.launch_attempts;
            let pool = w.pools[c.pool];
            let pg = c
                .placement_group
                .then(|| naming::placement_group_name(gang.id.as_str(), attempt));
            // a flex-start launch is granted whole: one request for its nodes
            let grant = c
                .new
                .iter()
                .any(|nn| w.offerings[nn.offering].capacity_type == CapacityType::FlexStart)
                .then(|| naming::grant_name(gang.id.as_str(), &gang.uid, attempt));
            let mut nodes = Vec::new();
            let mut idx = 0usize;
            let mut namer: Option<naming::NodeNamer> = None;
            for (i, nn) in c.new.iter().enumerate() {
                let off = w.offerings[nn.offering];
                if let Some(l) = &made {
                    w.new_names
                        .insert(crate::index::name_hash(&l.nodes[i].name));
                    if count {
                        for (k, &n) in nn.pods.iter().enumerate() {
                            model_pods.push((a.groups[k].shape.clone(), n, off.gpu_model.clone()));
                        }
                    }
                } else {
                    let namer = namer.get_or_insert_with(|| {
                        naming::NodeNamer::new(gang.id.as_str(), &gang.uid, attempt)
                    });
                    let name = loop {
                        let candidate = namer.name(idx);
                        idx += 1;
                        if w.node_by_name(&candidate).is_none()
                            && !new_name_taken(w, cx, &nodes, &candidate)
                        {
                            break candidate;
                        }
                    };
                    names_clean &= idx == i + 1;
                    w.new_names.insert(crate::index::name_hash(&name));
                    for (k, &n) in nn.pods.iter().enumerate() {
                        let g = &a.groups[k];
                        let ps = &gang.pod_sets[g.set];
                        for _ in 0..n {
                            assignments.push(Assignment {
                                pod_set: ps.name.clone(),
                                index: next_index[g.set],
                                node: name.clone(),
                            });
                            next_index[g.set] += 1;
                        }
                        model_pods.push((g.shape.clone(), n, off.gpu_model.clone()));
                    }
                    nodes.push(NewNode {
                        name,
                        idempotency_key: namer.key(idx - 1),
                        pool: pool.name.clone(),
                        offering: off.key(),
                        price: off.price.unwrap_or_default(),
                        placement_group: pg.clone(),
                        grant: grant
                            .clone()
                            .filter(|_| off.capacity_type == CapacityType::FlexStart),
                    });
                }
                if let Some(left) = &mut w.reserved_left[nn.offering] {
                    *left = left.saturating_sub(1);
                }
                let price = off.price.unwrap_or_default();
                let u = &mut w.pool_usage[c.pool];
                u.nodes += 1;
                u.gpus += u64::from(off.gpu_count);
                u.price += price.0;
            }
            w.new_nodes_planned = w.new_nodes_planned.saturating_add(c.new.len() as u32);
            let mut reserve = Vec::new();
            for &ni in &used {
                let n = &w.nodes[ni];
                let mine = n.node.reserved_for.as_ref() == Some(&gang.id);
                if n.node.reserved_for.is_none() || mine || n.released_from.is_some() {
                    if made.is_none() {
                        reserve.push(n.node.name.clone());
                    }
                    w.nodes[ni].exclusive = Some(gi);
                }
            }
            let mut timeout = pool
                .provisioning_timeout
                .unwrap_or(w.policy.provisioning_timeout);
            // A flex-start grant may take as long as the queue waits.
            if c.capacity_type == crate::model::CapacityType::FlexStart {
                let wait = q.and_then(|q| w.queues[q].flex_start_max_wait);
                timeout = timeout + wait.unwrap_or(crate::time::Dur::secs(0));
            }
            let launch = match made.take() {
                Some(mut l) => {
                    l.deadline = Some(w.now + timeout);
                    if cx.retimed {
                        // States how long a skipped offering stays
                        // unavailable: rendered at this cycle's time.
                        reasons::retime_launch_message(w, c, &mut cx.notes, &mut l.message);
                    }
                    l
                }
                None => {
                    reserve.sort();
                    assignments.sort();
                    Launch {
                        gang: gang.id.clone(),
                        price_per_hour: crate::Price(c.price),
                        message: reasons::launch_message(w, c),
                        nodes,
                        reserve,
                        assignments,
                        deadline: Some(w.now + timeout),
                    }
                }
            };
            cx.plan.launches.push(launch);
            cx.outcome.insert(gi, Outcome::Launched);
        }
    }
    let mut amounts = Added::new();
    if let Some(q) = q {
        amounts = added.unwrap_or_else(|| {
            book.amounts(q, model_pods.iter().map(|(s, n, m)| (s, *n, m.as_ref())))
        });
        book.add(q, &amounts);
    }
    cx.record_used(gi, used);
    (names_clean, amounts)
}

/// True when a launch of this cycle, or the one being made (`nodes` so
/// far), gave a new node this name.
fn new_name_taken(w: &World<'_>, cx: &Cycle, nodes: &[NewNode], name: &str) -> bool {
    w.new_names.contains(&crate::index::name_hash(name))
        && (nodes.iter().any(|n| n.name == name)
            || cx
                .plan
                .launches
                .iter()
                .any(|l| l.nodes.iter().any(|n| n.name == name)))
}

/// The gang id of a node's release source, for messages.
pub(crate) fn released_label(w: &World<'_>, r: &ReleasedFrom) -> GangId {
    match r {
        ReleasedFrom::Timeout(g) => w.gangs[*g].gang.id.clone(),
        ReleasedFrom::Orphan(s) => GangId(s.clone()),
    }
}
