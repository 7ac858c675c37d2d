//! Machines whose Node never turns Ready, followed through the PoolNodes
//! that record them: which gangs held each and for how long after its
//! launch, and whether it was terminated.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, ListParams};

use crate::support::ar;

/// One never-Ready machine as the samples saw it.
#[derive(Debug, Clone, Default)]
pub struct Held {
    /// Its PoolNode's creation, seconds since the epoch.
    pub created: i64,
    /// The gangs seen holding it, in the order they were first seen.
    pub holders: Vec<String>,
    /// The last sample that saw it held by a gang, seconds since the epoch.
    pub last_held: Option<i64>,
}

impl Held {
    /// Seconds from its launch to the last sample that saw it held.
    pub fn held_for(&self) -> i64 {
        self.last_held.map_or(0, |t| t - self.created)
    }
}

/// Never-Ready machines by provider id.
#[derive(Debug, Default)]
pub struct NeverReady {
    /// What each machine's PoolNode showed.
    pub machines: BTreeMap<String, Held>,
}

impl NeverReady {
    /// One look at the PoolNodes of the machines in `ids` at `now`
    /// (seconds since the epoch).
    pub async fn sample(&mut self, client: &kube::Client, ids: &BTreeSet<String>, now: i64) {
        if ids.is_empty() {
            return;
        }
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar("PoolNode", "poolnodes"));
        let Ok(list) = api.list(&ListParams::default()).await else {
            return;
        };
        for p in list.items {
            let st = &p.data["status"];
            let Some(id) = st["providerID"].as_str().filter(|id| ids.contains(*id)) else {
                continue;
            };
            // being deleted: cancelled, held by no gang any more
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let created = p
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(now, |t| t.0.as_second());
            let held = self.machines.entry(id.to_string()).or_insert(Held {
                created,
                ..Held::default()
            });
            let gang = p.data["spec"]["gang"]["name"].as_str();
            if let Some(g) = gang {
                if !held.holders.iter().any(|h| h == g) {
                    held.holders.push(g.to_string());
                }
                held.last_held = Some(now);
            }
        }
    }

    /// Gangs that held a never-Ready machine.
    pub fn gangs(&self) -> BTreeSet<String> {
        self.machines
            .values()
            .flat_map(|h| h.holders.iter().cloned())
            .collect()
    }

    /// Machines held longer than `limit` seconds after their launch, with
    /// how long and by whom.
    pub fn held_past(&self, limit: i64) -> Vec<String> {
        self.machines
            .iter()
            .filter(|(_, h)| h.held_for() > limit)
            .map(|(id, h)| format!("{id} held {}s by {:?}", h.held_for(), h.holders))
            .collect()
    }
}
