//! Seeks and walks over levels of many small extents, against a sorted
//! model: every seek lands in some extent of L1 and L2, and walks of `next`
//! and `prev` (with direction changes) cross extent boundaries, with
//! versions in the memtable, point deletes and range tombstones on top, and
//! at an older snapshot. The level iterators borrow the pinned version's
//! extent lists (`iter/level_iter.rs`, `Run`); the read path takes the
//! thread's cached super version (`db/sv_cache.rs`), so reads between
//! flushes and compactions also check that a stale cached copy is never used.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use proptest::prelude::*;
use shaledb::{Db, Options, ReadOptions};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(k: u32) -> Vec<u8> {
    format!("key{:05}", k % 3000).into_bytes()
}

fn opts() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        block_cache_size: 64 << 10,
        extent_size: 8 << 10,
        block_size: 1 << 10,
        max_key_size: 64,
        max_value_size: 1024,
        l1_target_size: 48 << 10,
        max_compaction_bytes: 16 << 10,
        extents_per_file: 16,
        background_threads: false,
        ..Options::default()
    }
}

/// Checks a seek (forward or, with `back`, `seek_for_prev`) at `target`
/// and a walk of `steps` (true = next) from there against `model`.
fn check_walk(db: &Db, ro: &ReadOptions, model: &Model, target: &[u8], back: bool, steps: &[bool]) {
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut it = db.iter(ro).unwrap();
    let mut pos = if back {
        it.seek_for_prev(target).unwrap();
        keys.partition_point(|k| k.as_slice() <= target)
            .checked_sub(1)
    } else {
        it.seek(target).unwrap();
        Some(keys.partition_point(|k| k.as_slice() < target)).filter(|&p| p < keys.len())
    };
    for (i, &forward) in steps.iter().enumerate() {
        let want = pos.map(|p| (keys[p].clone(), model[keys[p]].clone()));
        let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
        assert_eq!(
            got.as_ref()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned()),
            want.as_ref()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned()),
            "target {} back {back} step {i}",
            String::from_utf8_lossy(target)
        );
        assert_eq!(got, want);
        let Some(p) = pos else { break };
        if forward {
            it.next().unwrap();
            pos = Some(p + 1).filter(|&p| p < keys.len());
        } else {
            it.prev().unwrap();
            pos = p.checked_sub(1);
        }
    }
}

fn run(seed: u64, probes: &[(u32, bool, Vec<bool>)]) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let mut model = Model::new();
    let mut rng = seed | 1;
    let mut rand = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    // Three layers: most keys in L2 after a full compaction, newer versions
    // and deletes in L1, the newest in the memtable.
    let mut snap = None;
    for layer in 0..3u32 {
        let n = [2400, 600, 150][layer as usize];
        for i in 0..n {
            let k = key(rand(3000) as u32);
            if layer > 0 && i % 7 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("v{layer}-{i}-{}", "x".repeat(40)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if layer > 0 {
            let b = rand(2900) as u32;
            let (lo, hi) = (key(b), key(b + 1 + rand(60) as u32));
            db.delete_range(&lo, &hi).unwrap();
            model.retain(|k, _| *k < lo || *k >= hi);
        }
        match layer {
            0 => db.compact_range(None, None).unwrap(),
            1 => db.flush().unwrap(),
            _ => {}
        }
        if layer == 1 {
            snap = Some((db.snapshot(), model.clone()));
        }
    }
    let extents = |level: u32| -> u64 {
        db.property(&format!("shale.num-extents-at-level{level}"))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        extents(1) + extents(2) >= 8,
        "L1 {} L2 {}",
        extents(1),
        extents(2)
    );
    let (snapshot, old_model) = snap.unwrap();
    let at_snap = ReadOptions {
        snapshot: Some(snapshot),
        ..Default::default()
    };
    for (k, back, steps) in probes {
        let target = key(*k);
        check_walk(&db, &ReadOptions::default(), &model, &target, *back, steps);
        check_walk(&db, &at_snap, &old_model, &target, !*back, steps);
        assert_eq!(db.get(&target).unwrap().as_ref(), model.get(&target));
    }
    // A flush and a compaction between reads: the next reads must not use
    // the thread's cached (now stale) super version.
    db.put(&key(1), b"after").unwrap();
    model.insert(key(1), b"after".to_vec());
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    for (k, back, steps) in probes.iter().take(4) {
        check_walk(&db, &ReadOptions::default(), &model, &key(*k), *back, steps);
    }
    assert_eq!(db.get(&key(1)).unwrap().as_deref(), Some(&b"after"[..]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn seeks_and_walks_across_extents_match_a_model(
        seed in any::<u64>(),
        probes in proptest::collection::vec(
            (0u32..3100, any::<bool>(), proptest::collection::vec(any::<bool>(), 1..40)),
            1..24,
        ),
    ) {
        run(seed, &probes);
    }
}
