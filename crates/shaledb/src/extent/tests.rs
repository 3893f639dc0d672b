//! Builder + reader round trips, compression, size control and corruption
//! tests over real files (`PosixFs` in a temporary directory).
#![allow(clippy::indexing_slicing)] // tests index fixtures they built

use super::builder::FinishedExtent;
use super::*;
use crate::cache::BlockCache;
use crate::env::posix::PosixFs;
use crate::env::{FileSystem, RandomAccessFile};
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::types::{
    compare_internal_keys, make_internal_key, parse_internal_key, user_key, ValueKind,
    KIND_FOR_SEEK, MAX_SEQUENCE,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Where test extents are placed in their file (not at 0, to test offsets).
const EXTENT_OFFSET: u64 = 3 * 4096;

struct Placed {
    _dir: tempfile::TempDir,
    path: PathBuf,
    file: Arc<dyn RandomAccessFile>,
    size: u64,
}

fn place(data: &[u8]) -> Placed {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000007.dat");
    let f = PosixFs.open_extent_file(&path).expect("create");
    f.write_all_at(0, &vec![0xa5; EXTENT_OFFSET as usize])
        .expect("write prefix");
    f.write_all_at(EXTENT_OFFSET, data).expect("write extent");
    // Trailing bytes of the slot that do not belong to the extent.
    f.write_all_at(EXTENT_OFFSET + data.len() as u64, &[0x5a; 100])
        .expect("write suffix");
    let file = PosixFs.open_random(&path).expect("open");
    Placed {
        _dir: dir,
        path,
        file,
        size: data.len() as u64,
    }
}

fn open(p: &Placed, cache: Option<Arc<BlockCache>>, pin: bool) -> crate::Result<Arc<ExtentReader>> {
    ExtentReader::open(
        p.file.clone(),
        p.path.clone(),
        EXTENT_OFFSET,
        p.size,
        42,
        cache,
        pin,
    )
}

/// Sorted entries: user keys `key{i}` with 1-4 versions, ~10% deletes.
fn model(n: usize, value_len: usize, seed: u64) -> Entries {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut seq = 1u64;
    for i in 0..n {
        let uk = format!("key{:06}", i * 3).into_bytes();
        let versions = rng.gen_range(1..=4);
        let mut seqs: Vec<u64> = (0..versions)
            .map(|_| {
                seq += rng.gen_range(1..5);
                seq
            })
            .collect();
        seqs.reverse(); // newest first
        for s in seqs {
            let del = rng.gen_bool(0.1);
            let kind = if del {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let v = if del {
                Vec::new()
            } else {
                let mut v = format!("value-{i}-{s}-").into_bytes();
                v.resize(value_len.max(v.len()), b'a' + (i % 26) as u8);
                v
            };
            out.push((make_internal_key(&uk, s, kind), v));
        }
    }
    out
}

fn build(es: &Entries, opts: ExtentBuilderOptions) -> FinishedExtent {
    let mut b = ExtentBuilder::new(opts);
    for (k, v) in es {
        assert!(!b.would_overflow(k.len(), v.len()));
        b.add(k, v).expect("add");
    }
    b.finish().expect("finish")
}

fn small_blocks(compression: CompressionType) -> ExtentBuilderOptions {
    ExtentBuilderOptions {
        block_size: 1024,
        compression,
        ..Default::default()
    }
}

/// Newest entry of `uk` visible at `snap` in the model.
fn model_get(es: &Entries, uk: &[u8], snap: u64) -> Option<(ValueKind, u64, Vec<u8>)> {
    es.iter().find_map(|(k, v)| {
        let p = parse_internal_key(k)?;
        (p.user_key == uk && p.seq <= snap).then(|| (p.kind, p.seq, v.clone()))
    })
}

fn collect_forward(it: &mut ExtentIterator) -> Entries {
    let mut out = Vec::new();
    it.seek_to_first().expect("seek_to_first");
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    out
}

fn collect_backward(it: &mut ExtentIterator) -> Entries {
    let mut out = Vec::new();
    it.seek_to_last().expect("seek_to_last");
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().expect("prev");
    }
    out.reverse();
    out
}

fn check_reader(r: &Arc<ExtentReader>, es: &Entries) {
    // Point lookups at many snapshots, present and absent keys.
    let max_seq = es
        .iter()
        .filter_map(|(k, _)| parse_internal_key(k).map(|p| p.seq))
        .max()
        .unwrap_or(0);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..2000 {
        let i = rng.gen_range(0..(es.len() / 2 + 2) * 3 + 3);
        let uk = format!("key{i:06}").into_bytes();
        let snap = if rng.gen_bool(0.2) {
            u64::MAX
        } else {
            rng.gen_range(0..=max_seq + 1)
        };
        let got = r.get(&uk, snap).expect("get");
        assert_eq!(got, model_get(es, &uk, snap), "get({i}, {snap})");
    }
    assert_eq!(r.get(b"a", MAX_SEQUENCE).expect("get"), None);
    assert_eq!(r.get(b"zzz", MAX_SEQUENCE).expect("get"), None);

    // Full scans both ways.
    let mut it = r.iter();
    assert_eq!(&collect_forward(&mut it), es);
    assert_eq!(&collect_backward(&mut it), es);

    // seek / seek_for_prev at every key (so at every block boundary) and
    // between keys, then step both ways.
    let first_ge =
        |t: &[u8]| es.partition_point(|(e, _)| compare_internal_keys(e, t) == Ordering::Less);
    let last_le = |t: &[u8]| {
        es.partition_point(|(e, _)| compare_internal_keys(e, t) != Ordering::Greater)
            .checked_sub(1)
    };
    for (idx, (k, _)) in es.iter().enumerate() {
        it.seek(k).expect("seek");
        assert_eq!(it.key(), &k[..]);
        it.prev().expect("prev");
        match idx.checked_sub(1) {
            Some(j) => assert_eq!(it.key(), &es[j].0[..]),
            None => assert!(!it.valid()),
        }
        it.seek_for_prev(k).expect("seek_for_prev");
        assert_eq!(it.key(), &k[..]);
        it.next().expect("next");
        match es.get(idx + 1) {
            Some(e) => assert_eq!((it.key(), it.value()), (&e.0[..], &e.1[..])),
            None => assert!(!it.valid()),
        }
        // Between keys: the oldest possible version of this user key and
        // the newest possible one.
        let p = parse_internal_key(k).expect("ikey");
        let t = make_internal_key(p.user_key, 0, ValueKind::Delete);
        it.seek(&t).expect("seek");
        let want = es.get(first_ge(&t)).map(|e| e.0.clone());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want);
        let t = make_internal_key(p.user_key, MAX_SEQUENCE, KIND_FOR_SEEK);
        it.seek_for_prev(&t).expect("seek_for_prev");
        let want = last_le(&t).map(|j| es[j].0.clone());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want);
    }
    it.seek(&make_internal_key(b"zzz", 1, ValueKind::Put))
        .expect("seek");
    assert!(!it.valid());
    it.seek_for_prev(&make_internal_key(b"a", 1, ValueKind::Put))
        .expect("seek_for_prev");
    assert!(!it.valid());
    it.seek_for_prev(&make_internal_key(b"zzz", 1, ValueKind::Put))
        .expect("seek_for_prev");
    assert_eq!(it.key(), &es.last().expect("non-empty").0[..]);
    r.verify_checksums().expect("verify");
}

#[test]
fn round_trip_with_every_reader_configuration() {
    let es = model(3000, 40, 1);
    let f = build(&es, small_blocks(CompressionType::None));
    assert!(f.props.num_data_blocks > 50, "{}", f.props.num_data_blocks);
    assert_eq!(f.props.num_entries, es.len() as u64);
    assert_eq!(f.props.smallest_key, es[0].0);
    assert_eq!(f.props.largest_key, es[es.len() - 1].0);
    let p = place(&f.data);
    for (cache, pin) in [
        (None, false),
        (None, true),
        (Some(BlockCache::new(64 << 10)), false),
        (Some(BlockCache::new(8 << 20)), true),
    ] {
        let r = open(&p, cache.clone(), pin).expect("open");
        assert_eq!(r.properties(), &f.props);
        check_reader(&r, &es);
        if let Some(c) = cache {
            let s = c.stats();
            assert!(
                s.hits > 0 && s.misses > 0 && s.usage_bytes <= s.capacity_bytes,
                "{s:?}"
            );
        }
    }
}

#[test]
fn each_compression_type_round_trips() {
    let es = model(2000, 200, 2);
    for c in [
        CompressionType::None,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ] {
        let f = build(
            &es,
            ExtentBuilderOptions {
                compression: c,
                ..Default::default()
            },
        );
        assert_eq!(f.props.compression, c);
        let p = place(&f.data);
        let r = open(&p, Some(BlockCache::new(1 << 20)), false).expect("open");
        check_reader(&r, &es);
        let d = r.describe().expect("describe");
        assert!(d.contains(&format!(" {} ", c.name())), "{c:?}: {d}");
        if c != CompressionType::None {
            assert!(f.props.data_size * 2 < f.props.raw_key_bytes + f.props.raw_value_bytes);
        }
    }
}

#[test]
fn filter_skips_absent_keys() {
    let es = model(5000, 10, 3);
    let f = build(&es, ExtentBuilderOptions::default());
    let p = place(&f.data);
    let r = open(&p, None, true).expect("open");
    assert_eq!(f.props.num_filter_keys, 5000);
    for (k, _) in &es {
        assert!(r.may_contain(user_key(k)));
    }
    // key{i*3 + 1} never exists.
    let fp = (0..5000)
        .filter(|i| r.may_contain(format!("key{:06}", i * 3 + 1).as_bytes()))
        .count();
    assert!(fp < 150, "false positives {fp}/5000");
    let no_filter = build(
        &es,
        ExtentBuilderOptions {
            bloom_bits_per_key: 0,
            ..Default::default()
        },
    );
    assert_eq!(no_filter.props.filter_size, 0);
    let p = place(&no_filter.data);
    let r = open(&p, None, true).expect("open");
    assert!(r.may_contain(b"anything"));
    assert_eq!(r.get(b"key000001", MAX_SEQUENCE).expect("get"), None);
}

#[test]
fn range_tombstones_round_trip() {
    let mut b = ExtentBuilder::new(ExtentBuilderOptions::default());
    b.add(&make_internal_key(b"b", 5, ValueKind::Put), b"x")
        .expect("add");
    b.add_range_tombstone(b"m", b"q", 3);
    b.add_range_tombstone(b"c", b"h", 7);
    b.add_range_tombstone(b"c", b"h", 7);
    b.add_range_tombstone(b"c", b"e", 9);
    let f = b.finish().expect("finish");
    assert_eq!(f.props.num_range_deletions, 3);
    assert_eq!((f.props.smallest_seq, f.props.largest_seq), (3, 9));
    let p = place(&f.data);
    for pin in [false, true] {
        let r = open(&p, Some(BlockCache::new(1 << 20)), pin).expect("open");
        assert_eq!(
            r.range_tombstones().expect("tombstones"),
            vec![
                (b"c".to_vec(), b"e".to_vec(), 9),
                (b"c".to_vec(), b"h".to_vec(), 7),
                (b"m".to_vec(), b"q".to_vec(), 3),
            ]
        );
        assert!(r.describe().expect("describe").contains("[c, e) @9"));
        r.verify_checksums().expect("verify");
    }
    // Tombstones only: no point entries, iterators empty.
    let mut b = ExtentBuilder::new(ExtentBuilderOptions::default());
    b.add_range_tombstone(b"a", b"z", 1);
    let f = b.finish().expect("finish");
    let p = place(&f.data);
    let r = open(&p, None, false).expect("open");
    let mut it = r.iter();
    it.seek_to_first().expect("first");
    assert!(!it.valid());
    it.seek_to_last().expect("last");
    assert!(!it.valid());
    assert_eq!(r.get(b"k", MAX_SEQUENCE).expect("get"), None);
    assert_eq!(r.range_tombstones().expect("rt").len(), 1);
}

#[test]
fn empty_extent_is_valid() {
    let f = ExtentBuilder::new(ExtentBuilderOptions::default())
        .finish()
        .expect("finish");
    let p = place(&f.data);
    let r = open(&p, None, true).expect("open");
    assert_eq!(r.properties().num_entries, 0);
    let mut it = r.iter();
    it.seek(b"anything").expect("seek");
    assert!(!it.valid());
    r.verify_checksums().expect("verify");
}

#[test]
fn short_or_truncated_extents_are_corruption() {
    let es = model(200, 10, 4);
    let f = build(&es, ExtentBuilderOptions::default());
    let p = place(&f.data);
    for size in [0, 1, 47, 48, p.size - 1] {
        let e = ExtentReader::open(
            p.file.clone(),
            p.path.clone(),
            EXTENT_OFFSET,
            size,
            1,
            None,
            true,
        )
        .expect_err("must fail");
        assert!(e.is_corruption(), "size {size}: {e}");
    }
    // Extent claims to extend past the end of the file.
    let e = ExtentReader::open(
        p.file.clone(),
        p.path.clone(),
        EXTENT_OFFSET + 200,
        p.size,
        1,
        None,
        true,
    )
    .expect_err("past EOF");
    assert!(matches!(e, Error::Corruption { offset, .. } if offset == EXTENT_OFFSET + 200));
}

#[test]
fn corruption_reports_the_absolute_block_offset() {
    let es = model(500, 30, 5);
    let f = build(&es, small_blocks(CompressionType::None));
    let mut data = f.data.clone();
    // Damage the second data block.
    let p = place(&f.data);
    let r = open(&p, None, true).expect("open");
    let desc = r.describe().expect("describe");
    let second = desc
        .lines()
        .find(|l| l.trim_start().starts_with("#1 "))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|s| s.parse::<u64>().ok())
        .expect("offset of block #1");
    assert!(second > 0);
    data[second as usize + 3] ^= 0x40;
    let p = place(&data);
    let r = open(&p, None, true).expect("meta blocks are intact");
    let e = r.verify_checksums().expect_err("detected");
    assert!(
        matches!(e, Error::Corruption { offset, .. } if offset == EXTENT_OFFSET + second),
        "{e}"
    );
}

/// Opens `data` (possibly damaged) and checks that every answer is either
/// a corruption error or equal to the model.
fn check_damaged(data: &[u8], es: &Entries, tombstones: &[RangeTombstone]) {
    let p = place(data);
    for (cache, pin) in [(Some(BlockCache::new(1 << 20)), false), (None, true)] {
        let r = match open(&p, cache, pin) {
            Ok(r) => r,
            Err(e) => {
                assert!(e.is_corruption(), "open: {e}");
                continue;
            }
        };
        let mut it = r.iter();
        let mut i = 0;
        let mut res = it.seek_to_first();
        while res.is_ok() && it.valid() {
            assert_eq!(
                (it.key(), it.value()),
                (&es[i].0[..], &es[i].1[..]),
                "entry {i}"
            );
            i += 1;
            res = it.next();
        }
        match res {
            Ok(()) => assert_eq!(i, es.len(), "scan ended early without an error"),
            Err(e) => assert!(e.is_corruption(), "scan: {e}"),
        }
        let mut res = it.seek_to_last();
        let mut j = es.len();
        while res.is_ok() && it.valid() {
            j -= 1;
            assert_eq!(
                (it.key(), it.value()),
                (&es[j].0[..], &es[j].1[..]),
                "entry {j}"
            );
            res = it.prev();
        }
        if let Err(e) = res {
            assert!(e.is_corruption(), "reverse scan: {e}");
        }
        for (k, _) in es.iter().step_by(5) {
            let pk = parse_internal_key(k).expect("ikey");
            for snap in [pk.seq, pk.seq.saturating_sub(1), MAX_SEQUENCE] {
                match r.get(pk.user_key, snap) {
                    Ok(got) => assert_eq!(got, model_get(es, pk.user_key, snap)),
                    Err(e) => assert!(e.is_corruption(), "get: {e}"),
                }
            }
        }
        match r.range_tombstones() {
            Ok(t) => assert_eq!(t, tombstones),
            Err(e) => assert!(e.is_corruption(), "tombstones: {e}"),
        }
        let _ = r.describe();
        if let Err(e) = r.verify_checksums() {
            assert!(e.is_corruption(), "verify: {e}");
        }
    }
}

fn damage_fixture() -> (Vec<u8>, Entries, Vec<RangeTombstone>) {
    let es = model(150, 20, 6);
    let mut b = ExtentBuilder::new(ExtentBuilderOptions {
        block_size: 512,
        restart_interval: 4,
        compression: CompressionType::Lz4,
        ..Default::default()
    });
    for (k, v) in &es {
        b.add(k, v).expect("add");
    }
    b.add_range_tombstone(b"key000010", b"key000020", 3);
    b.add_range_tombstone(b"key000100", b"key000200", 1);
    let f = b.finish().expect("finish");
    let t = vec![
        (b"key000010".to_vec(), b"key000020".to_vec(), 3),
        (b"key000100".to_vec(), b"key000200".to_vec(), 1),
    ];
    (f.data, es, t)
}

#[test]
fn undamaged_fixture_passes_the_damage_check() {
    let (data, es, t) = damage_fixture();
    check_damaged(&data, &es, &t);
    let p = place(&data);
    open(&p, None, true)
        .expect("open")
        .verify_checksums()
        .expect("verify");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// A flipped byte anywhere is detected: opening or verification fails,
    /// and every answer in between is a corruption error or correct data.
    #[test]
    fn flipped_bytes_never_yield_wrong_data(pos_frac in 0.0f64..1.0, bit in 0u8..8, tail in any::<bool>()) {
        let (mut data, es, t) = damage_fixture();
        // Half the cases target the meta blocks and footer (the last ~2 KiB).
        let pos = if tail {
            let start = data.len().saturating_sub(2048);
            start + ((data.len() - start) as f64 * pos_frac) as usize
        } else {
            (data.len() as f64 * pos_frac) as usize
        }.min(data.len() - 1);
        data[pos] ^= 1 << bit;
        check_damaged(&data, &es, &t);
        let p = place(&data);
        let detected = match open(&p, None, true) {
            Err(e) => e.is_corruption(),
            Ok(r) => r.verify_checksums().is_err_and(|e| e.is_corruption()),
        };
        prop_assert!(detected, "flip at {} not detected", pos);
    }

    /// Stopping at `would_overflow` keeps the finished extent within
    /// `extent_size`, whatever the entry sizes and compression.
    #[test]
    fn would_overflow_bounds_finish(
        sizes in proptest::collection::vec((0usize..120, 0usize..3000), 1..400),
        extent_kib in 8usize..96,
        comp in 0u8..3,
        tombstones in 0usize..4,
        bits in prop_oneof![Just(0u32), Just(10u32), Just(20u32)],
    ) {
        let extent_size = extent_kib * 1024;
        let mut b = ExtentBuilder::new(ExtentBuilderOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: bits,
            compression: CompressionType::from_u8(comp).unwrap_or_default(),
            extent_size,
        });
        let mut rng = rand::rngs::StdRng::seed_from_u64(extent_size as u64);
        for t in 0..tombstones {
            let (bl, el) = (rng.gen_range(1..50), rng.gen_range(1..50));
            if b.would_overflow_tombstone(bl, el) {
                break;
            }
            b.add_range_tombstone(&vec![b'a'; bl], &vec![b'z'; el], t as u64);
        }
        let mut added = 0usize;
        for (i, (extra, vlen)) in sizes.iter().enumerate() {
            let mut uk = format!("{i:08}").into_bytes();
            uk.extend(std::iter::repeat_n(b'k', *extra));
            let k = make_internal_key(&uk, 100, ValueKind::Put);
            let v: Vec<u8> = (0..*vlen).map(|_| rng.gen()).collect();
            if b.would_overflow(k.len(), v.len()) {
                break;
            }
            b.add(&k, &v).expect("add");
            added += 1;
        }
        let est = b.estimated_size();
        let f = b.finish().expect("finish stays within extent_size");
        prop_assert!(f.data.len() <= extent_size);
        prop_assert!(f.data.len() <= est);
        prop_assert_eq!(f.props.num_entries as usize, added);
    }
}

#[test]
fn would_overflow_is_not_wildly_conservative() {
    let opts = ExtentBuilderOptions {
        compression: CompressionType::None,
        ..Default::default()
    };
    let extent_size = opts.extent_size;
    let mut b = ExtentBuilder::new(opts);
    let mut i = 0u64;
    loop {
        let k = make_internal_key(format!("user{i:012}").as_bytes(), i + 1, ValueKind::Put);
        let v = vec![b'v'; 100];
        if b.would_overflow(k.len(), v.len()) {
            break;
        }
        b.add(&k, &v).expect("add");
        i += 1;
    }
    let f = b.finish().expect("finish");
    assert!(
        f.data.len() > extent_size * 97 / 100,
        "only {} of {extent_size} used",
        f.data.len()
    );
}

#[test]
fn concurrent_readers_with_a_small_cache() {
    let es = model(4000, 60, 8);
    let f = build(&es, ExtentBuilderOptions::default());
    let p = place(&f.data);
    let cache = BlockCache::new(40 << 10); // a couple of blocks: constant eviction
    let r = open(&p, Some(cache.clone()), false).expect("open");
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let r = &r;
            let es = &es;
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                for _ in 0..500 {
                    let (k, _) = &es[rng.gen_range(0..es.len())];
                    let pk = parse_internal_key(k).expect("ikey");
                    let got = r.get(pk.user_key, pk.seq).expect("get");
                    assert_eq!(got, model_get(es, pk.user_key, pk.seq));
                }
                let mut it = r.iter();
                assert_eq!(collect_forward(&mut it).len(), es.len());
            });
        }
    });
    let s = cache.stats();
    assert!(
        s.usage_bytes <= s.capacity_bytes && s.evictions > 0,
        "{s:?}"
    );
}

/// Rough lookup speed check: `cargo test --release -p shaledb --lib get_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn get_speed() {
    let es = model(20_000, 100, 9);
    let f = build(
        &es,
        ExtentBuilderOptions {
            extent_size: 64 << 20,
            ..Default::default()
        },
    );
    let p = place(&f.data);
    let r = open(&p, Some(BlockCache::new(64 << 20)), true).expect("open");
    let keys: Vec<Vec<u8>> = es.iter().map(|(k, _)| user_key(k).to_vec()).collect();
    let n = 1_000_000;
    let start = std::time::Instant::now();
    let mut found = 0;
    for i in 0..n {
        let k = &keys[(i * 7919) % keys.len()];
        if r.get(k, MAX_SEQUENCE).expect("get").is_some() {
            found += 1;
        }
    }
    let el = start.elapsed();
    println!("{} ns/get (hit), found {found}", el.as_nanos() / n as u128);
    let start = std::time::Instant::now();
    for i in 0..n {
        let k = &keys[(i * 7919) % 500];
        let _ = r.get(k, MAX_SEQUENCE).expect("get");
    }
    println!(
        "{} ns/get (hit, hot set of 500 keys)",
        start.elapsed().as_nanos() / n as u128
    );
    let start = std::time::Instant::now();
    for i in 0..n {
        let k = format!("key{:06}", (i * 7919) % 60_000 * 3 + 1);
        let _ = r.get(k.as_bytes(), MAX_SEQUENCE).expect("get");
    }
    println!(
        "{} ns/get (miss, incl. format!)",
        start.elapsed().as_nanos() / n as u128
    );
}

#[test]
#[ignore]
fn get_speed_hot() {
    let es = model(20_000, 100, 9);
    let f = build(
        &es,
        ExtentBuilderOptions {
            extent_size: 64 << 20,
            ..Default::default()
        },
    );
    let p = place(&f.data);
    let r = open(&p, Some(BlockCache::new(64 << 20)), true).expect("open");
    let keys: Vec<Vec<u8>> = es.iter().map(|(k, _)| user_key(k).to_vec()).collect();
    let start = std::time::Instant::now();
    let n = 5_000_000;
    for i in 0..n {
        let k = &keys[(i * 7919) % 500];
        let _ = r.get(k, MAX_SEQUENCE).expect("get");
    }
    println!(
        "{} ns/get (hit, hot set of 500 keys) blocks {}",
        start.elapsed().as_nanos() / n as u128,
        f.props.num_data_blocks
    );
}

#[test]
fn describe_lists_blocks_and_properties() {
    let es = model(300, 30, 10);
    let f = build(&es, small_blocks(CompressionType::Zstd));
    let p = place(&f.data);
    let r = open(&p, None, false).expect("open");
    let d = r.describe().expect("describe");
    if std::env::var_os("SHALE_PRINT_DESCRIBE").is_some() {
        println!("{d}");
    }
    assert!(d.contains("num_entries:"));
    assert!(d.contains("data blocks:"));
    let blocks = d
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .count();
    assert_eq!(blocks as u64, f.props.num_data_blocks);
    assert!(d.contains(" zstd "));
}
