//! Tests of the skiplist: order, duplicates, cursor movement at the edges,
//! concurrent inserts with concurrent readers.

use super::*;
use crate::types::{compare_internal_keys, make_internal_key, ValueKind};

/// `normal` in ordinary runs, `miri` under Miri (about 1000x slower), where
/// a few hundred entries per thread still make inserts and arena refills race.
const fn scaled(normal: u64, miri: u64) -> u64 {
    if cfg!(miri) {
        miri
    } else {
        normal
    }
}

fn trailer(seq: u64) -> u64 {
    crate::types::pack_trailer(seq, ValueKind::Put)
}

fn ikey(uk: &[u8], seq: u64) -> Vec<u8> {
    make_internal_key(uk, seq, ValueKind::Put)
}

fn collect_forward(list: &Arc<SkipList>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut c = list.cursor();
    c.seek_to_first();
    let mut out = Vec::new();
    while c.valid() {
        out.push((c.key().to_vec(), c.value().to_vec()));
        c.next();
    }
    out
}

#[test]
fn empty_list_has_no_positions() {
    let list = Arc::new(SkipList::new());
    let mut c = list.cursor();
    assert!(!c.valid());
    assert!(c.key().is_empty() && c.value().is_empty());
    c.seek_to_first();
    assert!(!c.valid());
    c.seek_to_last();
    assert!(!c.valid());
    c.seek(b"anything");
    assert!(!c.valid());
    c.seek_for_prev(b"anything");
    assert!(!c.valid());
    c.next();
    c.prev();
    assert!(!c.valid());
    assert!(list.get_ge(b"x", trailer(1)).is_none());
}

#[test]
fn iterates_in_internal_key_order() {
    let list = Arc::new(SkipList::new());
    let mut model = Vec::new();
    // Scrambled user keys, several versions each.
    for i in 0..500u64 {
        let uk = format!("k{:04}", (i * 7919) % 200).into_bytes();
        let value = format!("v{i}").into_bytes();
        assert!(list.insert(&uk, trailer(i + 1), &value));
        model.push((ikey(&uk, i + 1), value));
    }
    model.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    assert_eq!(collect_forward(&list), model);
    let levels = list.check_invariants();
    assert_eq!(levels.first(), Some(&500));
    assert!(
        levels.get(1).is_some_and(|&n| (150..350).contains(&n)),
        "{levels:?}"
    );

    // Backwards with prev from the last entry.
    let mut c = list.cursor();
    c.seek_to_last();
    let mut back = Vec::new();
    while c.valid() {
        back.push((c.key().to_vec(), c.value().to_vec()));
        c.prev();
    }
    back.reverse();
    assert_eq!(back, model);
}

#[test]
fn duplicate_internal_keys_are_rejected() {
    let list = Arc::new(SkipList::new());
    assert!(list.insert(b"a", trailer(5), b"first"));
    assert!(!list.insert(b"a", trailer(5), b"second"));
    // Same user key, other sequence: a distinct entry.
    assert!(list.insert(b"a", trailer(6), b"newer"));
    let all = collect_forward(&list);
    assert_eq!(
        all,
        vec![
            (ikey(b"a", 6), b"newer".to_vec()),
            (ikey(b"a", 5), b"first".to_vec())
        ]
    );
}

#[test]
fn seek_and_seek_for_prev_at_boundaries() {
    let list = Arc::new(SkipList::new());
    for (uk, seq) in [(&b"b"[..], 3), (b"b", 1), (b"d", 2)] {
        assert!(list.insert(uk, trailer(seq), uk));
    }
    let mut c = list.cursor();
    // Before everything.
    c.seek(b"a");
    assert_eq!(c.key(), ikey(b"b", 3));
    c.seek_for_prev(&ikey(b"a", 9));
    assert!(!c.valid());
    // Exact hits.
    c.seek(&ikey(b"b", 1));
    assert_eq!(c.key(), ikey(b"b", 1));
    c.seek_for_prev(&ikey(b"b", 1));
    assert_eq!(c.key(), ikey(b"b", 1));
    // Between versions: b@2 lies between b@3 and b@1.
    c.seek(&ikey(b"b", 2));
    assert_eq!(c.key(), ikey(b"b", 1));
    c.seek_for_prev(&ikey(b"b", 2));
    assert_eq!(c.key(), ikey(b"b", 3));
    // Between user keys.
    c.seek(&ikey(b"c", 100));
    assert_eq!(c.key(), ikey(b"d", 2));
    c.seek_for_prev(&ikey(b"c", 100));
    assert_eq!(c.key(), ikey(b"b", 1));
    // After everything.
    c.seek(&ikey(b"d", 1));
    assert!(!c.valid());
    c.seek_for_prev(b"zzzzzzzzzzzz");
    assert_eq!(c.key(), ikey(b"d", 2));
    // A short target (no trailer) orders like compare_internal_keys: trailer 0.
    c.seek(b"b");
    assert_eq!(c.key(), ikey(b"d", 2));
    // Walking off both ends invalidates.
    c.seek_to_first();
    c.prev();
    assert!(!c.valid());
    c.seek_to_last();
    c.next();
    assert!(!c.valid());
    // get_ge agrees with seek.
    let (k, v) = list.get_ge(b"b", trailer(2)).expect("b@1 follows b@2");
    assert_eq!((k, v), (&ikey(b"b", 1)[..], &b"b"[..]));
}

#[test]
fn empty_keys_and_values_are_stored() {
    let list = Arc::new(SkipList::new());
    assert!(list.insert(b"", trailer(1), b""));
    assert!(list.insert(b"", trailer(2), b"v"));
    let all = collect_forward(&list);
    assert_eq!(
        all,
        vec![(ikey(b"", 2), b"v".to_vec()), (ikey(b"", 1), Vec::new())]
    );
}

/// Key of entry `i`; the value is derived from the key so readers can check
/// they never see a torn node.
fn key_of(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn value_of(key: &[u8]) -> Vec<u8> {
    key.iter().rev().copied().cycle().take(24).collect()
}

#[test]
fn concurrent_inserts_with_concurrent_readers() {
    const WRITERS: u64 = 4;
    const PER_WRITER: u64 = scaled(5_000, 120);
    // Small chunks so arena refills race too.
    let list = Arc::new(SkipList::with_arena(Arena::with_chunk_size(4096)));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let list = Arc::clone(&list);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut passes = 0u64;
                loop {
                    let finished = done.load(Atomic::Acquire);
                    let mut c = list.cursor();
                    if r == 0 {
                        c.seek_to_first();
                    } else {
                        c.seek_to_last();
                    }
                    let mut last: Option<Vec<u8>> = None;
                    let mut seen = 0u64;
                    while c.valid() {
                        let k = c.key().to_vec();
                        let (uk, _) = split_key(&k);
                        assert_eq!(c.value(), value_of(uk), "torn node");
                        if let Some(prev) = &last {
                            let want = if r == 0 {
                                Ordering::Less
                            } else {
                                Ordering::Greater
                            };
                            assert_eq!(compare_internal_keys(prev, &k), want, "order broken");
                        }
                        last = Some(k);
                        seen += 1;
                        if r == 0 {
                            c.next();
                        } else {
                            c.prev();
                        }
                    }
                    passes += 1;
                    if finished {
                        assert_eq!(seen, WRITERS * PER_WRITER);
                        return passes;
                    }
                }
            })
        })
        .collect();

    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let list = Arc::clone(&list);
            std::thread::spawn(move || {
                // Interleaved keys: neighbours belong to other threads, so CAS
                // races on the same predecessor are common.
                for i in 0..PER_WRITER {
                    let k = key_of(i * WRITERS + t);
                    assert!(list.insert(&k, trailer(1), &value_of(&k)));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer panicked");
    }
    done.store(true, Atomic::Release);
    for r in readers {
        assert!(r.join().expect("reader panicked") >= 1);
    }

    let all = collect_forward(&list);
    assert_eq!(all.len() as u64, WRITERS * PER_WRITER);
    assert_eq!(list.check_invariants().first().copied(), Some(all.len()));
    for (i, (k, v)) in all.iter().enumerate() {
        assert_eq!(split_key(k).0, key_of(i as u64));
        assert_eq!(v, &value_of(&key_of(i as u64)));
    }
}

#[test]
fn concurrent_duplicate_inserts_have_one_winner() {
    const KEYS: u64 = scaled(3_000, 150);
    let list = Arc::new(SkipList::with_arena(Arena::with_chunk_size(4096)));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let list = Arc::clone(&list);
            std::thread::spawn(move || {
                (0..KEYS)
                    .filter(|&i| {
                        let k = key_of(i);
                        list.insert(&k, trailer(7), &value_of(&k))
                    })
                    .count() as u64
            })
        })
        .collect();
    let wins: u64 = threads
        .into_iter()
        .map(|t| t.join().expect("inserter panicked"))
        .sum();
    assert_eq!(wins, KEYS);
    assert_eq!(collect_forward(&list).len() as u64, KEYS);
    list.check_invariants();
}

#[test]
fn keys_sharing_or_lacking_an_8_byte_prefix() {
    // Long keys with a common 8-byte prefix (bounds never decide), short keys
    // (zero-padded prefixes), and 0xff keys (prefix u64::MAX, like a null link).
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for i in 0..scaled(300, 40) as u32 {
        let mut k = b"commonpf".to_vec();
        k.extend_from_slice(&((i * 7919) % 1000).to_be_bytes());
        keys.push(k);
        keys.push(((i * 31) % 97).to_be_bytes().into_iter().skip(2).collect());
    }
    keys.push(vec![0xff; 8]);
    keys.push(vec![0xff; 12]);
    keys.push(vec![0xff; 3]);
    keys.sort();
    keys.dedup();
    let list = Arc::new(SkipList::new());
    // Insert in a scrambled order.
    for i in 0..keys.len() {
        let k = keys.get((i * 389) % keys.len()).expect("index below len");
        assert!(list.insert(k, trailer(1), k));
    }
    list.check_invariants();
    let want: Vec<Vec<u8>> = keys.iter().map(|k| ikey(k, 1)).collect();
    let got: Vec<Vec<u8>> = collect_forward(&list).into_iter().map(|e| e.0).collect();
    assert_eq!(got, want);
    let mut c = list.cursor();
    for (i, k) in keys.iter().enumerate() {
        // Exact, just-after (older seq of the same key) and prefix targets.
        c.seek(&ikey(k, 1));
        assert_eq!(Some(c.key()), want.get(i).map(Vec::as_slice));
        c.seek(&ikey(k, 0));
        assert_eq!(
            c.valid().then(|| c.key().to_vec()),
            want.get(i + 1).cloned()
        );
        c.seek_for_prev(&ikey(k, 2));
        let before = i.checked_sub(1).and_then(|j| want.get(j)).cloned();
        assert_eq!(c.valid().then(|| c.key().to_vec()), before);
        assert_eq!(list.get_ge(k, trailer(5)).map(|e| e.1), Some(&k[..]));
    }
}

#[test]
fn completed_inserts_are_always_found_by_concurrent_readers() {
    use std::sync::atomic::AtomicU64;
    const WRITERS: u64 = 4;
    const PER_WRITER: u64 = scaled(20_000, 120);
    let list = Arc::new(SkipList::with_arena(Arena::with_chunk_size(4096)));
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());

    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (list, progress) = (Arc::clone(&list), Arc::clone(&progress));
            std::thread::spawn(move || {
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ r;
                let mut c = list.cursor();
                let mut checks = 0u64;
                loop {
                    let mut all_done = true;
                    for (t, p) in (0u64..).zip(progress.iter()) {
                        // Acquire: pairs with the writer's Release after insert.
                        let done = p.load(Atomic::Acquire);
                        all_done &= done == PER_WRITER;
                        if done == 0 {
                            continue;
                        }
                        rng = rng
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // Mostly the newest key: other writers are inserting
                        // its neighbours right now, which is where races bite.
                        let i = if rng >> 62 == 0 {
                            (rng >> 33) % done
                        } else {
                            done - 1
                        };
                        let k = key_of(i * WRITERS + t);
                        let got = list.get_ge(&k, trailer(crate::types::MAX_SEQUENCE));
                        assert_eq!(
                            got.map(|e| split_key(e.0).0),
                            Some(&k[..]),
                            "lost a completed insert"
                        );
                        c.seek(&ikey(&k, 9));
                        assert_eq!(split_key(c.key()).0, k, "seek missed a completed insert");
                        c.seek_for_prev(&ikey(&k, 0));
                        assert_eq!(split_key(c.key()).0, k, "seek_for_prev missed it");
                        checks += 1;
                    }
                    if all_done {
                        return checks;
                    }
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (list, progress) = (Arc::clone(&list), Arc::clone(&progress));
            std::thread::spawn(move || {
                for i in 0..PER_WRITER {
                    let k = key_of(i * WRITERS + t);
                    assert!(list.insert(&k, trailer(1), &value_of(&k)));
                    if let Some(p) = progress.get(t as usize) {
                        p.store(i + 1, Atomic::Release);
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer panicked");
    }
    for r in readers {
        assert!(r.join().expect("reader panicked") > 0);
    }
    list.check_invariants();
}

/// `Cursor::seek_forward` from any entry before the target lands where a
/// seek from the head does, over rows with up to 30 versions inserted in a
/// scrambled sequence order (so some versions land after the node a hint
/// names, as parallel inserts can make them), with a key inserted between
/// two runs afterwards; and every hint names a later node of its own key.
#[test]
fn seek_forward_matches_seek_over_version_runs() {
    let list = Arc::new(SkipList::new());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let rows = scaled(40, 8);
    for row in 0..rows {
        let versions = 1 + rand(30);
        let mut seqs: Vec<u64> = (1..=versions).map(|s| s * 3).collect();
        // Mostly ascending (one writer), sometimes swapped (parallel ones).
        for i in 1..seqs.len() {
            if rand(4) == 0 {
                seqs.swap(i - 1, i);
            }
        }
        for seq in seqs {
            let uk = key_of(row * 2);
            assert!(list.insert(&uk, trailer(seq), &value_of(&uk)));
        }
    }
    for row in (1..rows).step_by(3) {
        let uk = key_of(row * 2 - 1);
        assert!(list.insert(&uk, trailer(1), &value_of(&uk)));
    }
    list.check_invariants();
    let entries: Vec<Vec<u8>> = collect_forward(&list).into_iter().map(|(k, _)| k).collect();
    let mut jumped = 0;
    for (i, start) in entries.iter().enumerate() {
        let (uk, _) = split_key(start);
        let mut targets = vec![
            make_internal_key(uk, 0, ValueKind::Delete),
            make_internal_key(uk, 1 + rand(100), ValueKind::Put),
            make_internal_key(&key_of(rand(rows * 2 + 2)), rand(100), ValueKind::Put),
        ];
        if let Some(later) = entries.get(i + 1 + rand(40) as usize) {
            targets.push(later.clone());
        }
        for target in targets {
            let mut head = list.cursor();
            head.seek(&target);
            let mut from = list.cursor();
            from.seek(start);
            assert_eq!(from.key(), start.as_slice());
            from.seek_forward(&target);
            assert_eq!(from.key(), head.key(), "from entry {i} to {target:?}");
            if compare_internal_keys(start, &target) == Ordering::Less {
                jumped += 1;
            }
        }
    }
    assert!(jumped > entries.len(), "too few forward targets: {jumped}");
}
