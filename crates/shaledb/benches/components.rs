//! Criterion micro-benchmarks of ShaleDB's hot components (project issue 3,
//! item 6): memtable, data block seek, extent point get, WAL append, bloom
//! filter probe, block cache lookup, and `Db` put/get end to end, also
//! through a memtable and four L0 runs.
//!
//! Run with `cargo bench -p shaledb --bench components` (about two minutes;
//! each benchmark measures for 2 s after a 0.5 s warm-up). Keys are 16 bytes
//! and values 100 bytes (db_bench's defaults), drawn from a fixed-seed
//! splitmix64 generator so runs are comparable.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use shaledb::env::posix::PosixFs;
use shaledb::env::FileSystem;
use shaledb::test_hooks::filter::{self, FilterView};
use shaledb::test_hooks::{
    make_internal_key, BlockBuilder, BlockCache, CacheKey, InternalIterator, LogWriter, MemTable,
    ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE,
};
use shaledb::test_hooks::{Block, BlockIter, ExtentBuilder, ExtentBuilderOptions, ExtentReader};
use shaledb::{Db, Options, WriteBatch, WriteOptions};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const KEY_LEN: usize = 16;
const VALUE_LEN: usize = 100;
const VALUE: [u8; VALUE_LEN] = [b'v'; VALUE_LEN];

/// splitmix64: a tiny deterministic generator (fixed seed per benchmark).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn key(&mut self) -> [u8; KEY_LEN] {
        let mut k = [0u8; KEY_LEN];
        k[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        k[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        k
    }

    fn keys(&mut self, n: usize) -> Vec<[u8; KEY_LEN]> {
        (0..n).map(|_| self.key()).collect()
    }
}

/// Sorted, distinct keys.
fn sorted_keys(seed: u64, n: usize) -> Vec<[u8; KEY_LEN]> {
    let mut keys = Rng(seed).keys(n);
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Lookup order: the keys in a fixed pseudo-random order.
fn shuffled(keys: &[[u8; KEY_LEN]], seed: u64) -> Vec<[u8; KEY_LEN]> {
    let mut out = keys.to_vec();
    let mut rng = Rng(seed);
    for i in (1..out.len()).rev() {
        let j = usize::try_from(rng.next_u64() % (i as u64 + 1)).expect("fits");
        out.swap(i, j);
    }
    out
}

fn memtable(c: &mut Criterion) {
    const N: usize = 1_000_000;
    let keys = Rng(1).keys(N);
    let mem = MemTable::new(1);
    for (seq, k) in (1u64..).zip(&keys) {
        mem.add(seq, ValueKind::Put, k, &VALUE);
    }
    let lookups = shuffled(&keys, 2);

    let mut g = c.benchmark_group("memtable");
    let mut it = lookups.iter().cycle();
    g.bench_function("get_hit_1M", |b| {
        b.iter(|| {
            let k = it.next().expect("cycle");
            black_box(mem.get(k, MAX_SEQUENCE).is_some())
        })
    });
    // Keys the memtable does not hold: the whole walk, unless a filter
    // (`MemTable::with_filter`, on in `Db` by default) answers first.
    let misses = Rng(4).keys(N);
    let mut it = misses.iter().cycle();
    g.bench_function("get_miss_1M", |b| {
        b.iter(|| {
            let k = it.next().expect("cycle");
            black_box(mem.get(k, MAX_SEQUENCE).is_some())
        })
    });
    let filtered = MemTable::new(1).with_filter(64 << 20);
    for (seq, k) in (1u64..).zip(&keys) {
        filtered.add(seq, ValueKind::Put, k, &VALUE);
    }
    let mut it = misses.iter().cycle();
    g.bench_function("get_miss_1M_filtered", |b| {
        b.iter(|| {
            let k = it.next().expect("cycle");
            black_box(filtered.get(k, MAX_SEQUENCE).is_some())
        })
    });
    let mut it = lookups.iter().cycle();
    g.bench_function("get_hit_1M_filtered", |b| {
        b.iter(|| {
            let k = it.next().expect("cycle");
            black_box(filtered.get(k, MAX_SEQUENCE).is_some())
        })
    });
    drop(filtered);
    // Fresh keys into the same (now >= 1M-entry) memtable.
    let mut rng = Rng(3);
    let mut seq = N as u64 + 1;
    g.bench_function("insert_into_1M", |b| {
        b.iter(|| {
            let k = rng.key();
            seq += 1;
            mem.add(seq, ValueKind::Put, &k, &VALUE);
        })
    });
    g.finish();
}

fn block_seek(c: &mut Criterion) {
    let keys = sorted_keys(10, 1000);
    let mut bb = BlockBuilder::new(16);
    let mut in_block = Vec::new();
    for k in &keys {
        if bb.current_size_estimate() >= 16 * 1024 {
            break;
        }
        bb.add(&make_internal_key(k, 1, ValueKind::Put), &VALUE)
            .expect("add");
        in_block.push(*k);
    }
    let block = Block::new(bb.finish().to_vec()).expect("valid block");
    let path = Path::new("bench-block");
    let targets: Vec<Vec<u8>> = shuffled(&in_block, 11)
        .iter()
        .map(|k| make_internal_key(k, MAX_SEQUENCE, KIND_FOR_SEEK))
        .collect();
    let mut iter = BlockIter::new(&block, path, 0);
    let mut t = targets.iter().cycle();
    c.bench_function("block/seek_16KiB", |b| {
        b.iter(|| {
            iter.seek(t.next().expect("cycle")).expect("seek");
            black_box(iter.valid())
        })
    });
}

/// A 2 MiB extent of sorted keys written to a temp file and opened with a
/// warm cache; returns the reader and the user keys it holds.
fn build_extent(dir: &Path) -> (Arc<ExtentReader>, Vec<[u8; KEY_LEN]>) {
    let keys = sorted_keys(20, 40_000);
    let mut eb = ExtentBuilder::new(ExtentBuilderOptions::default());
    let mut added = Vec::new();
    for k in &keys {
        let ikey = make_internal_key(k, 1, ValueKind::Put);
        if eb.would_overflow(ikey.len(), VALUE_LEN) {
            break;
        }
        eb.add(&ikey, &VALUE).expect("add");
        added.push(*k);
    }
    let data = eb.finish().expect("finish").data;
    let fs = PosixFs;
    let path = dir.join("bench.ext");
    let mut f = fs.create(&path).expect("create");
    f.append(&data).expect("append");
    f.sync().expect("sync");
    drop(f);
    let file = fs.open_random(&path).expect("open");
    let cache = BlockCache::new(64 << 20);
    let reader = ExtentReader::open(file, path, 0, data.len() as u64, 1, Some(cache), true)
        .expect("open extent");
    for k in &added {
        reader.get(k, MAX_SEQUENCE).expect("warm get");
    }
    (reader, added)
}

fn extent_and_filter(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (reader, keys) = build_extent(dir.path());
    let hits = shuffled(&keys, 21);
    let misses = Rng(22).keys(10_000);

    let mut g = c.benchmark_group("extent");
    let mut h = hits.iter().cycle();
    g.bench_function("get_hit_warm_cache", |b| {
        b.iter(|| black_box(reader.get(h.next().expect("cycle"), MAX_SEQUENCE)))
    });
    let mut m = misses.iter().cycle();
    g.bench_function("get_miss_filter", |b| {
        b.iter(|| black_box(reader.get(m.next().expect("cycle"), MAX_SEQUENCE)))
    });
    g.finish();

    // The filter module is public: probe a filter over the same keys directly.
    let hashes: Vec<u64> = keys.iter().map(|k| filter::filter_hash(k)).collect();
    let bytes = filter::build(&hashes, 10).expect("filter");
    let view = FilterView::parse(&bytes).expect("parse");
    let mut g = c.benchmark_group("filter");
    g.bench_function("probe_hit", |b| {
        b.iter(|| black_box(view.may_contain(h.next().expect("cycle"))))
    });
    g.bench_function("probe_miss", |b| {
        b.iter(|| black_box(view.may_contain(m.next().expect("cycle"))))
    });
    g.finish();
}

fn wal_append(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = PosixFs
        .create(&dir.path().join("000001.log"))
        .expect("create");
    let mut w = LogWriter::new(file, 1).expect("writer");
    let mut batch = WriteBatch::new();
    batch.put(&Rng(30).key(), &VALUE);
    let payload = batch.data().to_vec();
    c.bench_function(&format!("wal/append_{}B_flush", payload.len()), |b| {
        b.iter(|| {
            w.add_record(&payload).expect("add");
            w.flush().expect("flush");
        })
    });
}

fn cache_lookup(c: &mut Criterion) {
    let cache = BlockCache::new(64 << 20);
    let keys: Vec<CacheKey> = (0..1000u64)
        .map(|i| CacheKey {
            extent_id: i / 128,
            offset: (i % 128) * 16 * 1024,
        })
        .collect();
    for k in &keys {
        cache.insert(*k, Arc::new(Block::raw(vec![0u8; 4096])));
    }
    let mut it = keys.iter().cycle();
    c.bench_function("cache/get_hit", |b| {
        b.iter(|| black_box(cache.get(*it.next().expect("cycle")).is_some()))
    });
}

fn db_end_to_end(c: &mut Criterion) {
    const N: usize = 100_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let keys = Rng(40).keys(N);
    let wo = WriteOptions {
        sync: false,
        disable_wal: false,
    };
    for k in &keys {
        db.put_opt(&wo, k, &VALUE).expect("put");
    }
    let lookups = shuffled(&keys, 41);

    let mut g = c.benchmark_group("db");
    let mut it = lookups.iter().cycle();
    g.bench_function("get_hit_100k", |b| {
        b.iter(|| black_box(db.get(it.next().expect("cycle")).expect("get")))
    });
    let mut rng = Rng(42);
    g.bench_function("put_nosync", |b| {
        b.iter_batched(
            || rng.key(),
            |k| db.put_opt(&wo, &k, &VALUE).expect("put"),
            BatchSize::SmallInput,
        )
    });
    g.finish();
    db.close().expect("close");
}

/// Point gets through a memtable and four L0 runs (background work off,
/// so nothing compacts them): a get probes the memtable's filter and each
/// run's extent filter until one holds the key, newest first.
fn db_layers(c: &mut Criterion) {
    const PER_LAYER: usize = 20_000;
    const RUNS: usize = 4;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        background_threads: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let wo = WriteOptions {
        sync: false,
        disable_wal: false,
    };
    let mut rng = Rng(50);
    let layers: Vec<Vec<[u8; KEY_LEN]>> = (0..=RUNS).map(|_| rng.keys(PER_LAYER)).collect();
    for (i, layer) in layers.iter().enumerate() {
        for k in layer {
            db.put_opt(&wo, k, &VALUE).expect("put");
        }
        // The last layer stays in the memtable.
        if i < RUNS {
            db.flush().expect("flush");
        }
    }
    // Warm the block cache: the figures are of probes, not of disk reads.
    for k in layers.iter().flatten() {
        db.get(k).expect("warm get");
    }
    let oldest = shuffled(layers.first().expect("layers"), 51);
    let misses = Rng(52).keys(PER_LAYER);

    let mut g = c.benchmark_group("db_layers");
    let mut it = oldest.iter().cycle();
    g.bench_function("get_hit_oldest_of_4_runs", |b| {
        b.iter(|| black_box(db.get(it.next().expect("cycle")).expect("get")))
    });
    let mut it = misses.iter().cycle();
    g.bench_function("get_miss_4_runs", |b| {
        b.iter(|| black_box(db.get(it.next().expect("cycle")).expect("get")))
    });
    g.finish();
    db.close().expect("close");
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
}

criterion_group! {
    name = benches;
    config = config();
    targets = memtable, block_seek, extent_and_filter, wal_append, cache_lookup, db_end_to_end,
        db_layers
}
criterion_main!(benches);
