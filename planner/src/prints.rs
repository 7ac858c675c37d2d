//! Fingerprints of a snapshot: what a [`crate::Replanner`] keeps of the
//! last snapshot instead of a copy, and the comparison that tells it what
//! changed since.
//!
//! Every queue, pool, offering and node list is fingerprinted as a
//! multiset (the order of a snapshot's lists does not matter to a plan);
//! every gang on its own, by id. A fingerprint is the 128-bit XXH3 hash of
//! everything an item's `Hash` writes (every field; `Hash` agrees with `==`
//! on the model types).

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use xxhash_rust::xxh3::{xxh3_64, xxh3_128};

use crate::model::{Gang, GangId};
use crate::snapshot::Snapshot;

/// Fingerprints of a snapshot.
#[derive(Debug)]
pub(crate) struct Prints {
    queues: u128,
    pools: u128,
    offerings: u128,
    nodes: u128,
    gangs: GangPrints,
}

/// Every gang's fingerprint and whether it is free-floating.
///
/// The ids are kept one after another in one string (a gang is named only
/// when it changed), so fingerprinting a snapshot allocates a handful of
/// times, not once or twice per gang; entries are sorted by a hash of the
/// id first, so that sorting and comparing them seldom compares strings.
#[derive(Debug)]
struct GangPrints {
    ids: String,
    entries: Vec<GangEntry>,
}

/// One gang of [`GangPrints`].
#[derive(Debug)]
struct GangEntry {
    /// XXH3 of the id.
    key: u64,
    /// Where its id is in `ids`.
    start: usize,
    end: usize,
    print: u128,
    floating: bool,
}

/// What a comparison of two snapshots' fingerprints found.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Changes {
    /// Something other than gangs changed, or two gangs share an id.
    pub other: bool,
    /// Gangs that changed, appeared or went: (id, free-floating before,
    /// free-floating after), `None` for absent.
    pub gangs: Vec<(GangId, Option<bool>, Option<bool>)>,
}

impl Prints {
    /// Fingerprints `s`; `floating` tells whether a gang is free-floating.
    pub fn of(s: &Snapshot, floating: impl Fn(&Gang) -> bool) -> Prints {
        let mut buf = Bytes::default();
        Prints {
            queues: multiset(&s.queues, &mut buf),
            pools: multiset(&s.pools, &mut buf),
            offerings: multiset(&s.offerings, &mut buf),
            nodes: multiset(&s.nodes, &mut buf),
            gangs: GangPrints::of(&s.gangs, &floating, &mut buf),
        }
    }

    /// What changed from `old` to `self`.
    pub fn since(&self, old: &Prints) -> Changes {
        let mut c = Changes {
            other: old.queues != self.queues
                || old.pools != self.pools
                || old.offerings != self.offerings
                || old.nodes != self.nodes,
            gangs: Vec::new(),
        };
        let (a, b) = (&old.gangs, &self.gangs);
        let (mut i, mut j) = (0, 0);
        while i < a.entries.len() || j < b.entries.len() {
            let order = match (a.entries.get(i), b.entries.get(j)) {
                (Some(x), Some(y)) => a.cmp_id(x, b, y),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            // The runs of entries with this id on each side.
            let (ri, rj) = match order {
                Ordering::Less => (a.run(i), 0),
                Ordering::Greater => (0, b.run(j)),
                Ordering::Equal => (a.run(i), b.run(j)),
            };
            let same = ri == rj
                && a.entries[i..i + ri]
                    .iter()
                    .zip(&b.entries[j..j + rj])
                    .all(|(x, y)| x.print == y.print && x.floating == y.floating);
            if !same {
                if ri > 1 || rj > 1 {
                    // Duplicate ids: which copy counts is decided in the
                    // cycle.
                    c.other = true;
                } else {
                    let id = if ri == 1 {
                        a.id(&a.entries[i])
                    } else {
                        b.id(&b.entries[j])
                    };
                    c.gangs.push((
                        GangId(id.to_string()),
                        (ri == 1).then(|| a.entries[i].floating),
                        (rj == 1).then(|| b.entries[j].floating),
                    ));
                }
            }
            i += ri;
            j += rj;
        }
        c
    }
}

impl GangPrints {
    fn of(gangs: &[Gang], floating: &impl Fn(&Gang) -> bool, buf: &mut Bytes) -> GangPrints {
        let mut out = GangPrints {
            ids: String::with_capacity(gangs.iter().map(|g| g.id.0.len()).sum()),
            entries: Vec::with_capacity(gangs.len()),
        };
        for g in gangs {
            let start = out.ids.len();
            out.ids.push_str(&g.id.0);
            out.entries.push(GangEntry {
                key: xxh3_64(g.id.0.as_bytes()),
                start,
                end: out.ids.len(),
                print: print(g, buf),
                floating: floating(g),
            });
        }
        // By a hash of the id alone (a plain integer sort); the rare runs
        // of one hash then by id, fingerprint and flag, so that the order
        // the gangs came in does not matter.
        out.entries.sort_unstable_by_key(|e| e.key);
        let ids = &out.ids;
        for run in out.entries.chunk_by_mut(|x, y| x.key == y.key) {
            if run.len() > 1 {
                run.sort_unstable_by(|x, y| {
                    ids[x.start..x.end]
                        .cmp(&ids[y.start..y.end])
                        .then(x.print.cmp(&y.print))
                        .then(x.floating.cmp(&y.floating))
                });
            }
        }
        out
    }

    fn id(&self, e: &GangEntry) -> &str {
        self.ids.get(e.start..e.end).unwrap_or_default()
    }

    /// The order of entry `x` of `self` and entry `y` of `other`.
    fn cmp_id(&self, x: &GangEntry, other: &GangPrints, y: &GangEntry) -> Ordering {
        x.key.cmp(&y.key).then_with(|| self.id(x).cmp(other.id(y)))
    }

    /// How many entries from `k` on have the id of entry `k`.
    fn run(&self, k: usize) -> usize {
        let first = &self.entries[k];
        let mut n = 1;
        while let Some(e) = self.entries.get(k + n)
            && self.cmp_id(first, self, e) == Ordering::Equal
        {
            n += 1;
        }
        n
    }
}

/// Collects what an item's `Hash` writes, to be hashed in one go: one
/// 128-bit XXH3 over the bytes is much cheaper than a hasher called for
/// every field.
#[derive(Default)]
struct Bytes(Vec<u8>);

impl Hasher for Bytes {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        // Only `print` reads what was written.
        xxh3_64(&self.0)
    }
}

/// The fingerprint of one item.
fn print<T: Hash>(item: &T, buf: &mut Bytes) -> u128 {
    buf.0.clear();
    item.hash(buf);
    xxh3_128(&buf.0)
}

/// The fingerprint of a list as a multiset: the sum of its items'
/// fingerprints (modulo 2^128, the same in any order) and its length.
fn multiset<T: Hash>(items: &[T], buf: &mut Bytes) -> u128 {
    let sum = items
        .iter()
        .fold(0u128, |sum, x| sum.wrapping_add(print(x, buf)));
    print(&(sum, items.len()), buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GangPhase;
    use crate::synthetic::{self, Params};

    fn snapshot() -> Snapshot {
        synthetic::generate(&Params {
            pods: 60,
            gangs: 6,
            nodes: 4,
            offerings: 10,
            seed: 2,
        })
    }

    fn floating(g: &Gang) -> bool {
        g.assignments.is_empty()
    }

    fn since(old: &Snapshot, new: &Snapshot) -> Changes {
        Prints::of(new, floating).since(&Prints::of(old, floating))
    }

    /// The order of a snapshot's lists is no change.
    #[test]
    fn reordered_lists_are_no_change() {
        let s = snapshot();
        let mut t = s.clone();
        t.gangs.reverse();
        t.nodes.reverse();
        t.offerings.reverse();
        assert_eq!(since(&s, &t), Changes::default());
    }

    /// A changed, a new and a removed gang are each named once, with
    /// whether they were and are free-floating; a node's change is
    /// something else.
    #[test]
    fn changed_gangs_are_named() {
        let s = snapshot();
        let mut t = s.clone();
        let gone = t.gangs.remove(0);
        t.gangs[0].priority += 1;
        let changed = t.gangs[0].id.clone();
        let mut new = t.gangs[1].clone();
        new.id = GangId("zz/new".into());
        new.phase = GangPhase::Queued;
        t.gangs.insert(2, new);
        let mut got = since(&s, &t);
        got.gangs.sort();
        let mut want = vec![
            (gone.id.clone(), Some(floating(&gone)), None),
            (changed.clone(), Some(true), Some(true)),
            (GangId("zz/new".into()), None, Some(true)),
        ];
        want.sort();
        assert_eq!(
            got,
            Changes {
                other: false,
                gangs: want
            }
        );
        t.nodes[0].unschedulable = !t.nodes[0].unschedulable;
        assert!(since(&s, &t).other);
    }

    /// Two gangs with one id are something else when either copy changes,
    /// and no change when only their order does.
    #[test]
    fn duplicate_ids_are_something_else() {
        let mut s = snapshot();
        let mut twin = s.gangs[3].clone();
        twin.priority += 7;
        s.gangs.push(twin);
        let mut t = s.clone();
        t.gangs.swap(3, 6);
        assert_eq!(since(&s, &t), Changes::default());
        t.gangs[3].priority += 1;
        assert_eq!(
            since(&s, &t),
            Changes {
                other: true,
                gangs: Vec::new()
            }
        );
    }
}
