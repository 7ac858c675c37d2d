//! The soak's figures: printed as a Markdown table (`soak | figure | value`),
//! and appended to the file `MUSTER_SOAK_REPORT` names, from which
//! `scripts/soak` writes the generated block of docs/reliability.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one soak run measured.
#[derive(Debug, Default)]
pub struct Summary {
    /// `1 replica` or `2 replicas`.
    pub mode: String,
    /// Seed.
    pub seed: u64,
    /// Gangs submitted.
    pub gangs: usize,
    /// Of those, gangs of low priority.
    pub low_priority: usize,
    /// Pods (= nodes asked for) over all gangs.
    pub pods: u64,
    /// Kills per window: (opened, fell back to the end of the wait).
    pub kills: BTreeMap<&'static str, (u32, u32)>,
    /// Instances the cloud created.
    pub instances_created: usize,
    /// Spot machines the cloud reclaimed.
    pub interrupted: usize,
    /// PoolNodes set Draining (by any controller process).
    pub drains: usize,
    /// Whole-gang evictions written, by reason.
    pub evicted: BTreeMap<String, usize>,
    /// Idempotency keys with more than one instance ever created.
    pub double_launches: usize,
    /// Instances without a PoolNode after one orphan-collection period.
    pub orphans: usize,
    /// Jobs complete.
    pub jobs_complete: usize,
    /// Jobs gone from the API server.
    pub jobs_lost: usize,
    /// Jobs not complete by the deadline.
    pub jobs_stuck: usize,
    /// Gangs partly running beyond the grace.
    pub partial_gangs: usize,
    /// Panics in the controllers' logs.
    pub panics: usize,
    /// Processes that exited without being killed.
    pub unexpected_exits: usize,
    /// Leadership changes measured, with the longest (seconds).
    pub takeovers: Vec<f64>,
    /// Writes by a process while another held the Lease.
    pub non_leader_writes: Option<usize>,
    /// Wall time of the run (seconds).
    pub secs: f64,
    /// A rolling upgrade: the release upgraded from. Its stops are SIGTERMs
    /// (as the kubelet stops a pod of the old ReplicaSet), not SIGKILLs.
    pub upgraded_from: Option<String>,
    /// Of the processes stopped with SIGTERM, those that did not exit 0
    /// within the grace period.
    pub unclean_stops: usize,
    /// Writes of this build's controllers the API server refused as invalid
    /// (422), from the audit log's response codes; `None` when not read.
    pub invalid_writes: Option<usize>,
    /// In a rolling upgrade, writes of the previous release the API server
    /// refused as invalid, by resource.
    pub previous_invalid_writes: BTreeMap<String, usize>,
}

impl Summary {
    /// Whole-gang evictions.
    pub fn evictions(&self) -> usize {
        self.evicted.values().sum()
    }

    /// Total kills.
    pub fn total_kills(&self) -> u32 {
        self.kills.values().map(|(a, b)| a + b).sum()
    }

    /// The table.
    pub fn markdown(&self) -> String {
        let mut t = String::new();
        let mut row = |k: &str, v: String| {
            let _ = writeln!(t, "| {k} | {v} |");
        };
        row("mode", self.mode.clone());
        row("seed", self.seed.to_string());
        row(
            "gangs (pods; of low priority)",
            format!("{} ({}; {})", self.gangs, self.pods, self.low_priority),
        );
        let (stops, by) = match &self.upgraded_from {
            Some(from) => {
                row("upgraded from", from.clone());
                row(
                    "SIGTERMs not ending in exit 0 within the grace period",
                    self.unclean_stops.to_string(),
                );
                ("SIGTERMs (rolling update)", "SIGTERMs by window")
            }
            None => ("SIGKILLs", "kills by window"),
        };
        row(stops, self.total_kills().to_string());
        let by_window: Vec<String> = self
            .kills
            .iter()
            .map(|(w, (hit, miss))| {
                if *miss > 0 {
                    format!("{w} {hit} (+{miss} at the end of the wait)")
                } else {
                    format!("{w} {hit}")
                }
            })
            .collect();
        row(by, by_window.join(", "));
        row("instances created", self.instances_created.to_string());
        row("spot machines reclaimed", self.interrupted.to_string());
        row("PoolNodes drained", self.drains.to_string());
        let evicted: Vec<String> = self
            .evicted
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        row(
            "gang evictions by reason",
            format!("{} ({})", self.evictions(), evicted.join(", ")),
        );
        row("double launches", self.double_launches.to_string());
        row(
            "instances without a PoolNode after one orphan-collection period",
            self.orphans.to_string(),
        );
        row(
            "Jobs complete / lost / stuck",
            format!(
                "{} / {} / {}",
                self.jobs_complete, self.jobs_lost, self.jobs_stuck
            ),
        );
        row("partial gangs running", self.partial_gangs.to_string());
        row("panics", self.panics.to_string());
        row(
            "controller exits without a kill",
            self.unexpected_exits.to_string(),
        );
        if let Some(w) = self.invalid_writes {
            row(
                "writes of this build refused as invalid (422)",
                w.to_string(),
            );
        }
        if self.upgraded_from.is_some() {
            let by: Vec<String> = self
                .previous_invalid_writes
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            row(
                "writes of the previous release refused as invalid (422), by resource",
                if by.is_empty() {
                    "0".into()
                } else {
                    by.join(", ")
                },
            );
        }
        if let Some(w) = self.non_leader_writes {
            row("writes from a non-leader", w.to_string());
            let max = self.takeovers.iter().copied().fold(0.0, f64::max);
            let mean = if self.takeovers.is_empty() {
                0.0
            } else {
                self.takeovers.iter().sum::<f64>() / self.takeovers.len() as f64
            };
            row(
                "leadership moved (count, mean, max)",
                format!("{}, {mean:.1} s, {max:.1} s", self.takeovers.len()),
            );
        }
        row("wall time", format!("{:.0} s", self.secs));
        t
    }

    /// Prints the table and appends it to `MUSTER_SOAK_REPORT`, if set.
    pub fn publish(&self) {
        let table = format!("| figure | value |\n|---|---|\n{}", self.markdown());
        println!("{table}");
        if let Ok(path) = std::env::var("MUSTER_SOAK_REPORT") {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{table}");
            }
        }
    }
}

/// Reads from the audit log (level `Request`) how far the run disrupted:
/// the PoolNodes set Draining and the whole-gang evictions written, each
/// counted once however often a restarted controller wrote it again (a
/// gang's eviction is a status write of phase `Evicted` after one of
/// another phase).
pub fn disruptions(audit: &std::path::Path, s: &mut Summary) {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let mut drained = std::collections::BTreeSet::new();
    let mut evicted: Vec<String> = Vec::new();
    let mut last_phase: BTreeMap<(String, String), String> = BTreeMap::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let st = &e["requestObject"]["status"];
        if e["subresource"] != "status" {
            continue;
        }
        let name = e["name"].as_str().unwrap_or_default().to_string();
        if e["resource"] == "poolnodes" && st["phase"] == "Draining" {
            drained.insert(name);
        } else if e["resource"] == "gangs"
            && let Some(phase) = st["phase"].as_str()
        {
            let key = (
                e["namespace"].as_str().unwrap_or_default().to_string(),
                name,
            );
            let before = last_phase.insert(key, phase.to_string());
            if phase == "Evicted" && before.as_deref() != Some("Evicted") {
                // a preemption sets the phase alone (its reason is the
                // Plan's, in the Event); the life-cycle evictions write
                // their reason
                evicted.push(st["reason"].as_str().unwrap_or("Preempted").to_string());
            }
        }
    }
    s.drains = drained.len();
    s.evicted.clear();
    for reason in evicted {
        *s.evicted.entry(reason).or_default() += 1;
    }
}
