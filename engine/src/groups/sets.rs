//! Sets of partitions (or tasks) keyed by topic (or subtopology): what
//! members own, are assigned and give up, in both KIP-848 consumer groups
//! and streams groups.

use std::collections::{BTreeMap, BTreeSet};

/// Numbers (partitions) by key (a topic id, a subtopology id).
pub type Keyed<K> = BTreeMap<K, BTreeSet<i32>>;

/// What `a` holds that `b` does not.
pub fn minus<K: Ord + Clone>(a: &Keyed<K>, b: &Keyed<K>) -> Keyed<K> {
    let mut out = Keyed::new();
    for (k, ps) in a {
        let rest: BTreeSet<i32> = match b.get(k) {
            Some(bs) => ps.difference(bs).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(k.clone(), rest);
        }
    }
    out
}

/// Whether `a` and `b` share anything.
pub fn intersects<K: Ord>(a: &Keyed<K>, b: &Keyed<K>) -> bool {
    a.iter()
        .any(|(k, ps)| b.get(k).is_some_and(|bs| !ps.is_disjoint(bs)))
}

/// How many numbers `a` holds.
pub fn count<K>(a: &Keyed<K>) -> usize {
    a.values().map(BTreeSet::len).sum()
}
