//! Short keys (shorter than the skiplist's 8-byte inline prefix) with many
//! versions: every entry must be found and iteration must stay sorted.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::test_hooks::{
    compare_internal_keys, parse_internal_key, InternalIterator, MemTable, ValueKind,
};
use std::sync::Arc;

#[test]
fn short_keys_with_many_versions() {
    for round in 0..300u64 {
        let m = Arc::new(MemTable::new(1));
        let mut x = round.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut n = 0u64;
        let mut latest = std::collections::BTreeMap::new();
        for seq in 1..=600u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let klen = 1 + (x % 9) as usize;
            let key: Vec<u8> = format!("k{:04}", x % 40).into_bytes()[..klen.min(5)].to_vec();
            m.add(seq, ValueKind::Put, &key, format!("v{seq}").as_bytes());
            latest.insert(key, seq);
            n += 1;
        }
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut count = 0;
        let mut prev: Option<Vec<u8>> = None;
        while it.valid() {
            if let Some(p) = &prev {
                assert_eq!(
                    compare_internal_keys(p, it.key()),
                    std::cmp::Ordering::Less,
                    "round {round}: out of order"
                );
            }
            prev = Some(it.key().to_vec());
            count += 1;
            it.next().unwrap();
        }
        assert_eq!(count, n, "round {round}: iteration lost entries");
        for (k, seq) in &latest {
            let g = m
                .get(k, u64::MAX >> 8)
                .unwrap_or_else(|| panic!("round {round}: {k:?} not found"));
            assert_eq!(g.seq, *seq, "round {round}: {k:?} newest version");
        }
        let _ = parse_internal_key(&prev.unwrap()).unwrap();
    }
}
