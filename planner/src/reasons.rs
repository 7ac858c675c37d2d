//! Human messages for waiting gangs and planned launches. Every message
//! names the numbers behind the decision ("needs 32 A100 GPUs; queue team-a
//! at nominal quota 16 (using 16), cohort has 8 to lend").

use std::collections::BTreeMap;

use crate::index::World;
use crate::model::{Gang, QuotaResource};
use crate::provisioning::{LaunchChoice, LaunchFail};
use crate::quota::{Short, show};
use crate::resources::Resources;

/// What a gang needs at the given pod counts: "needs 4 pods, 32 A100 GPUs".
pub(crate) fn describe_need(gang: &Gang, counts: &[u32]) -> String {
    let mut total = Resources::zero();
    let mut pods = 0u64;
    for (ps, c) in gang.pod_sets.iter().zip(counts) {
        total.add(&ps.requests.times(u64::from(*c)));
        pods += u64::from(*c);
    }
    let mut models: Vec<&str> = gang
        .pod_sets
        .iter()
        .flat_map(|p| p.gpu_models.iter().map(|m| m.as_str()))
        .collect();
    models.sort_unstable();
    models.dedup();
    let pods_s = if pods == 1 {
        "1 pod".to_string()
    } else {
        format!("{pods} pods")
    };
    if total.gpu_millis > 0 {
        let gpus = show(&QuotaResource::Gpu, total.gpu_millis);
        let model = if models.is_empty() {
            String::new()
        } else {
            format!("{} ", models.join("/"))
        };
        format!("needs {pods_s}, {gpus} {model}GPUs")
    } else {
        format!("needs {pods_s}, {total}")
    }
}

/// Why a gang does not fit its quota.
pub(crate) fn quota_message(queue: &str, need: &str, s: &Short) -> String {
    let r = &s.resource;
    let mut m = format!(
        "{need}; queue {queue} at {} of nominal quota {} {r}, asks {} more",
        show(r, s.used),
        show(r, s.nominal),
        show(r, s.need)
    );
    if let Some(b) = s.borrow_limit {
        m.push_str(&format!("; borrowing limit {} reached", show(r, b)));
    } else if let Some(f) = s.cohort_free {
        m.push_str(&format!(", cohort has {} to lend", show(r, f)));
    }
    m
}

/// Why no launch was planned.
pub(crate) fn launch_fail_message(w: &World<'_>, need: &str, f: &LaunchFail) -> String {
    match f {
        LaunchFail::Unsatisfiable(why) => format!(
            "{need}; unsatisfiable: {why}; change the gang's requests or GPU model, or let its queue use a pool with larger machines"
        ),
        LaunchFail::NoOffering { skipped } => {
            let mut m = format!(
                "{need}; no free capacity fits and no usable offering holds it (allow more instance types, zones or capacity types in the queue's pools, or wait)"
            );
            if let Some(o) = skipped {
                let off = w.offerings[*o];
                match off.unavailable_until {
                    Some(t) if t > w.now => m.push_str(&format!(
                        "; offering {} unavailable for another {} after a capacity error",
                        off.key(),
                        t.since(w.now)
                    )),
                    _ => {}
                }
            }
            m
        }
        LaunchFail::PoolLimit { pool, what } => format!(
            "{need}; pool {} limit: launching would make {what}; raise the pool's spec.limits or wait for its gangs to finish",
            w.pools[*pool].name
        ),
        LaunchFail::LaunchBudget { need: n } => format!(
            "{need}; would launch {n} nodes but the cycle's budget of {} new nodes is spent",
            w.policy.max_new_nodes_per_cycle.unwrap_or(0)
        ),
    }
}

/// Why this launch: "launching 2× p4d.24xlarge (us-east-1a, spot) in pool
/// gpu for $65.540/h, 1 existing node".
pub(crate) fn launch_message(w: &World<'_>, c: &LaunchChoice) -> String {
    // Counted by offering first (a launch has few), rendered once each.
    let mut per_offering: Vec<(usize, u32)> = Vec::new();
    for n in &c.new {
        match per_offering.iter_mut().find(|(o, _)| *o == n.offering) {
            Some((_, k)) => *k += 1,
            None => per_offering.push((n.offering, 1)),
        }
    }
    let mut by_type: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
    for (o, k) in per_offering {
        let o = w.offerings[o];
        *by_type
            .entry(format!("{} ({})", o.instance_type, o.zone))
            .or_default() += k;
    }
    let types: Vec<String> = by_type.iter().map(|(t, n)| format!("{n}× {t}")).collect();
    let mut m = if c.new.is_empty() {
        "using nodes already in flight".to_string()
    } else {
        format!(
            "launching {} {} in pool {} for {}/h",
            types.join(", "),
            c.capacity_type,
            w.pools[c.pool].name,
            crate::Price(c.price)
        )
    };
    let existing: std::collections::BTreeSet<usize> = c.existing.iter().map(|t| t.node).collect();
    if !existing.is_empty() {
        m.push_str(&format!(
            "; {} existing node(s) hold part of the gang",
            existing.len()
        ));
    }
    if c.capacity_type == crate::CapacityType::Spot || c.expected != c.price {
        m.push_str(&format!(
            "; expected cost with spot risk {}",
            crate::Price(c.expected)
        ));
    }
    push_skipped_note(w, c, &mut m);
    m
}

/// The end of a launch message that names the offering skipped as
/// unavailable and for how long: the only part of a launch message that
/// depends on the time ([`retime_launch_message`]).
fn push_skipped_note(w: &World<'_>, c: &LaunchChoice, m: &mut String) {
    if let Some((start, duration, rest)) = note_parts(w, c) {
        m.push_str(&start);
        m.push_str(&duration);
        m.push_str(&rest);
    }
}

/// The note's three parts: "; offering K unavailable for another ", the
/// duration, " after a capacity error; planning T".
fn note_parts(w: &World<'_>, c: &LaunchChoice) -> Option<(String, String, String)> {
    let off = w.offerings[c.skipped?];
    let t = off.unavailable_until?;
    let first = c
        .new
        .first()
        .map(|n| w.offerings[n.offering].instance_type.as_str());
    Some((
        format!("; offering {} unavailable for another ", off.key()),
        t.since(w.now).to_string(),
        format!(
            " after a capacity error; planning {}",
            first.unwrap_or("existing capacity")
        ),
    ))
}

/// Launch-message notes of one cycle, in parts (`note_parts`), by skipped
/// offering and first new offering.
pub(crate) type Notes = BTreeMap<(usize, Option<usize>), Option<(String, String, String)>>;

/// Renders a launch message made at another time at this cycle's time:
/// the same as [`launch_message`] gives now, at the cost of its last part.
/// `notes` keeps the parts rendered this cycle, by skipped offering and
/// first new offering: many launches share them.
pub(crate) fn retime_launch_message(
    w: &World<'_>,
    c: &LaunchChoice,
    notes: &mut Notes,
    message: &mut String,
) {
    let Some(skipped) = c.skipped else {
        return;
    };
    let parts = notes
        .entry((skipped, c.new.first().map(|n| n.offering)))
        .or_insert_with(|| note_parts(w, c));
    let Some((start, duration, rest)) = parts else {
        return;
    };
    // The note ends the message; only its duration differs. Its start
    // stands right before the duration ("1h4m28s": digits and units, none
    // of which ends the start), which stands right before the rest.
    let found = message.strip_suffix(rest.as_str()).and_then(|head| {
        let end = head
            .trim_end_matches(|c: char| c.is_ascii_digit() || matches!(c, 'h' | 'm' | 's'))
            .len();
        head[..end]
            .ends_with(start.as_str())
            .then(|| end - start.len())
    });
    match found {
        Some(at) => {
            message.truncate(at + start.len());
            message.push_str(duration);
            message.push_str(rest);
        }
        None => *message = launch_message(w, c),
    }
}

/// Why a gang is idle and what happens: "its GPUs stayed below 10 %
/// utilisation (highest 3.5 %) for 1h, past the 30m window of queue q's
/// idlePolicy; action Requeue: …".
pub(crate) fn idle_message(
    g: &Gang,
    q: &crate::model::Queue,
    p: &crate::model::IdlePolicy,
    idle_for: crate::Dur,
    peak: f64,
    now: crate::Time,
    not_before: Option<crate::Time>,
) -> String {
    let gpus = show(&QuotaResource::Gpu, g.total_requests().gpu_millis);
    let seen = format!(
        "its {gpus} GPU(s) stayed below {}% utilisation (highest {peak:.1}%) for {}, past the {} window of queue {}'s idlePolicy",
        p.threshold_percent, idle_for, p.window, q.name
    );
    let what = match p.action {
        crate::IdleAction::Report => "action Report: nothing is stopped; end the workload if its work is done, or set the queue's spec.idlePolicy.action to Requeue or Stop to free idle GPUs automatically".to_string(),
        crate::IdleAction::Requeue => format!(
            "action Requeue: evicted as a whole, its GPUs freed; it queues again in {} and restarts from its last checkpoint",
            not_before.map_or(crate::Dur(0), |t| t.since(now))
        ),
        crate::IdleAction::Stop => "action Stop: evicted as a whole and not queued again; its Job stays suspended: delete it, or delete and resubmit it to run again".to_string(),
    };
    format!("{seen}; {what}")
}
