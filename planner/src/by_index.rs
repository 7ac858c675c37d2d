//! Maps keyed by a position in the working state (a gang's or a node's
//! index), for what a cycle notes about many of them: a vector with a slot
//! per position, read and written in constant time and iterated in
//! position order, as a `BTreeMap` keyed by the position would be.

/// A map from a position to a `T`.
#[derive(Debug, Clone)]
pub(crate) struct ByIndex<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for ByIndex<T> {
    fn default() -> Self {
        ByIndex { slots: Vec::new() }
    }
}

impl<T> ByIndex<T> {
    /// Sets the value at `i`, returning the one it replaces.
    pub fn insert(&mut self, i: usize, value: T) -> Option<T> {
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i].replace(value)
    }

    /// The value at `i`.
    pub fn get(&self, i: &usize) -> Option<&T> {
        self.slots.get(*i).and_then(Option::as_ref)
    }

    /// True when `i` has a value.
    pub fn contains_key(&self, i: &usize) -> bool {
        self.get(i).is_some()
    }

    /// The positions with a value and their values, by position.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Any run of inserts leaves the map a `BTreeMap` would hold: the
        /// same replaced values, lookups and iteration order.
        #[test]
        fn a_map_by_index_is_a_btree_map(ops in proptest::collection::vec((0usize..50, 0u8..9), 0..80)) {
            let mut ours = ByIndex::default();
            let mut theirs = BTreeMap::new();
            for (i, v) in ops {
                prop_assert_eq!(ours.insert(i, v), theirs.insert(i, v));
            }
            for i in 0..60 {
                prop_assert_eq!(ours.get(&i), theirs.get(&i));
                prop_assert_eq!(ours.contains_key(&i), theirs.contains_key(&i));
            }
            let a: Vec<(usize, u8)> = ours.iter().map(|(i, v)| (i, *v)).collect();
            let b: Vec<(usize, u8)> = theirs.iter().map(|(i, v)| (*i, *v)).collect();
            prop_assert_eq!(a, b);
        }
    }
}
