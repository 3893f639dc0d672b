//! Looking up a map keyed by `(String, String)` (database, table) with two
//! `&str`s, without building an owned key: `Catalog::table` runs for every
//! statement that names a table, and building the key cost two allocations
//! each time.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// A (database, name) pair, owned or borrowed.
pub(crate) trait NamePair {
    fn parts(&self) -> (&str, &str);
}

impl NamePair for (String, String) {
    fn parts(&self) -> (&str, &str) {
        (&self.0, &self.1)
    }
}

impl NamePair for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn NamePair + 'a> for (String, String) {
    fn borrow(&self) -> &(dyn NamePair + 'a) {
        self
    }
}

impl Hash for dyn NamePair + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Exactly as `(String, String)` hashes (`Borrow` requires it): each
        // part in turn, as `str`.
        let (a, b) = self.parts();
        a.hash(state);
        b.hash(state);
    }
}

impl PartialEq for dyn NamePair + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn NamePair + '_ {}

#[cfg(test)]
mod tests {
    use super::NamePair;
    use std::collections::HashMap;
    use std::hash::{BuildHasher, RandomState};

    #[test]
    fn borrowed_pairs_find_owned_keys() {
        let mut m: HashMap<(String, String), u32> = HashMap::new();
        for (i, (d, t)) in [("db", "t"), ("d", "bt"), ("", "dbt"), ("dbt", "")]
            .into_iter()
            .enumerate()
        {
            m.insert((d.to_owned(), t.to_owned()), i as u32);
        }
        for (i, (d, t)) in [("db", "t"), ("d", "bt"), ("", "dbt"), ("dbt", "")]
            .into_iter()
            .enumerate()
        {
            assert_eq!(
                m.get(&(d, t) as &dyn NamePair),
                Some(&(i as u32)),
                "{d}.{t}"
            );
        }
        assert_eq!(m.get(&("db", "u") as &dyn NamePair), None);
        let s = RandomState::new();
        let owned = ("a".to_owned(), "b".to_owned());
        assert_eq!(s.hash_one(&owned), s.hash_one(&("a", "b") as &dyn NamePair));
    }
}
