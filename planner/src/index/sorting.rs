//! Sorting the long input lists of the working state by name.

use std::cmp::Ordering;
use std::fmt::Debug;

/// Sorts with `cmp` and drops duplicates (equal under `cmp`), keeping the
/// one with the smallest debug text, so the result does not depend on input
/// order.
pub(super) fn sorted_unique<T: Debug>(items: &[T], cmp: impl Fn(&T, &T) -> Ordering) -> Vec<&T> {
    let mut v: Vec<&T> = items.iter().collect();
    v.sort_by(|a, b| cmp(a, b));
    unique(v, cmp)
}

/// [`sorted_unique`] by a name, for the long lists (nodes, gangs): names
/// are compared after the prefix they all share, first by their next 24
/// bytes as three numbers (sorted as plain integers) — the same order as
/// comparing the names; runs equal in those bytes are then sorted by the
/// full names.
pub(super) fn sorted_unique_by_name<T: Debug>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<&T> {
    // Already in order, without repeats (stops at the first pair that is
    // not): nothing to sort or drop.
    if items.windows(2).all(|p| name(&p[0]) < name(&p[1])) {
        return items.iter().collect();
    }
    let mut shared: &[u8] = items.first().map_or(&[], |x| name(x).as_bytes());
    for x in items {
        let b = name(x).as_bytes();
        let n = shared.iter().zip(b).take_while(|(p, q)| p == q).count();
        shared = &shared[..n];
    }
    let skip = shared.len();
    let word = |b: &[u8], i: usize| {
        let mut w = [0u8; 8];
        let part = b.get(i * 8..).unwrap_or_default();
        let n = part.len().min(8);
        w[..n].copy_from_slice(&part[..n]);
        u64::from_be_bytes(w)
    };
    let mut keys: Vec<(u64, u64, u64, u32)> = items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let rest = name(x).as_bytes().get(skip..).unwrap_or_default();
            (word(rest, 0), word(rest, 1), word(rest, 2), i as u32)
        })
        .collect();
    keys.sort_unstable();
    // Runs whose first 24 bytes are equal are sorted by the full names;
    // only they can hold repeats.
    let mut out: Vec<&T> = Vec::with_capacity(keys.len());
    let mut i = 0;
    while i < keys.len() {
        let mut j = i + 1;
        while j < keys.len()
            && keys[j].0 == keys[i].0
            && keys[j].1 == keys[i].1
            && keys[j].2 == keys[i].2
        {
            j += 1;
        }
        if j - i == 1 {
            out.push(&items[keys[i].3 as usize]);
        } else {
            let mut run: Vec<&T> = keys[i..j].iter().map(|k| &items[k.3 as usize]).collect();
            run.sort_by(|a, b| name(a).cmp(name(b)));
            out.extend(unique(run, |a, b| name(a).cmp(name(b))));
        }
        i = j;
    }
    out
}

/// Drops duplicates from a sorted list (see [`sorted_unique`]).
fn unique<T: Debug>(v: Vec<&T>, cmp: impl Fn(&T, &T) -> Ordering) -> Vec<&T> {
    let mut out: Vec<&T> = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        let mut j = i + 1;
        while j < v.len() && cmp(v[j], v[i]) == Ordering::Equal {
            j += 1;
        }
        if j - i == 1 {
            out.push(v[i]);
        } else {
            let best = v[i..j]
                .iter()
                .min_by_key(|x| format!("{x:?}"))
                .copied()
                .unwrap_or(v[i]);
            out.push(best);
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Sorting by precomputed name keys gives the order (and the
        /// duplicates dropped) of sorting by the names, for names with long
        /// shared prefixes, names that are prefixes of others and repeats.
        #[test]
        fn sorting_by_name_keys_is_sorting_by_names(
            names in proptest::collection::vec(("ab(c|cd|\\x00)?[a-c]{0,30}", 0u8..3), 0..60),
        ) {
            let items: Vec<(String, u8)> = names;
            let by_keys = sorted_unique_by_name(&items, |x| &x.0);
            let by_names = sorted_unique(&items, |a, b| a.0.cmp(&b.0));
            prop_assert_eq!(by_keys, by_names);
        }
    }
}
