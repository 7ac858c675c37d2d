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
/// are compared after the prefix they all share, 24 bytes at a time as
/// three big-endian numbers (sorted as plain integers, the same order as
/// comparing the bytes); runs equal in those bytes are sorted by the next
/// 24, and runs of names that end within them (equal when zero-padded) by
/// the full names. Names of machines launched for one gang share all but
/// their last few bytes, so most runs end in the second round, without a
/// string comparison.
pub(super) fn sorted_unique_by_name<T: Debug>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<&T> {
    // Already in order (stops at the first pair out of order).
    if items.windows(2).all(|p| name(&p[0]) <= name(&p[1])) {
        return unique(items.iter().collect(), |a, b| name(a).cmp(name(b)));
    }
    let mut shared: &[u8] = items.first().map_or(&[], |x| name(x).as_bytes());
    for x in items {
        let b = name(x).as_bytes();
        let n = shared.iter().zip(b).take_while(|(p, q)| p == q).count();
        shared = &shared[..n];
    }
    let mut order: Vec<u32> = (0..items.len() as u32).collect();
    let mut keys: Vec<(u64, u64, u64, u32)> = Vec::with_capacity(items.len());
    sort_from(items, &name, &mut order, shared.len(), &mut keys);
    let v: Vec<&T> = order.iter().map(|&i| &items[i as usize]).collect();
    unique(v, |a, b| name(a).cmp(name(b)))
}

/// Sorts `order` (indexes of `items`, all equal in the bytes before
/// `skip`) by name, from byte `skip` on; `keys` is scratch space.
fn sort_from<T>(
    items: &[T],
    name: &impl Fn(&T) -> &str,
    order: &mut [u32],
    skip: usize,
    keys: &mut Vec<(u64, u64, u64, u32)>,
) {
    const WIDTH: usize = 24;
    let word = |b: &[u8], i: usize| {
        let mut w = [0u8; 8];
        let part = b.get(i * 8..).unwrap_or_default();
        let n = part.len().min(8);
        w[..n].copy_from_slice(&part[..n]);
        u64::from_be_bytes(w)
    };
    keys.clear();
    keys.extend(order.iter().map(|&i| {
        let rest = name(&items[i as usize])
            .as_bytes()
            .get(skip..)
            .unwrap_or_default();
        (word(rest, 0), word(rest, 1), word(rest, 2), i)
    }));
    keys.sort_unstable();
    for (o, k) in order.iter_mut().zip(keys.iter()) {
        *o = k.3;
    }
    // Runs equal in these bytes. The keys are not needed past this point,
    // so the scratch space is reused by the rounds below.
    let mut runs: Vec<(usize, usize)> = Vec::new();
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
        if j - i > 1 {
            runs.push((i, j));
        }
        i = j;
    }
    for (i, j) in runs {
        let run = &mut order[i..j];
        // Names longer than the bytes compared so far go on to the next
        // round; a run with a name that ends within them (a repeat, or a
        // zero byte that padding hides) is sorted by the full names.
        if run
            .iter()
            .all(|&x| name(&items[x as usize]).len() > skip + WIDTH)
        {
            sort_from(items, name, run, skip + WIDTH, keys);
        } else {
            run.sort_by(|&a, &b| name(&items[a as usize]).cmp(name(&items[b as usize])));
        }
    }
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
        /// shared prefixes, names that are prefixes of others and repeats,
        /// and names equal in their first 24 or 48 bytes after the shared
        /// prefix (as machines launched for one gang are), zero bytes among
        /// them.
        #[test]
        fn sorting_by_name_keys_is_sorting_by_names(
            names in proptest::collection::vec(prop_oneof![
                ("ab(c|cd|\\x00)?[a-c]{0,30}", 0u8..3),
                ("(q{22}|q{23}|q{24}|q{25})?[ab\\x00]{0,2}(q{21}|q{22}|q{23}|q{24})?[ab\\x00]{0,3}", 0u8..3),
            ], 0..60),
        ) {
            let items: Vec<(String, u8)> = names;
            let by_keys = sorted_unique_by_name(&items, |x| &x.0);
            let by_names = sorted_unique(&items, |a, b| a.0.cmp(&b.0));
            prop_assert_eq!(by_keys, by_names);
        }
    }
}
