//! Parallel WAL replay (`recovery_threads > 1`) recovers exactly what serial
//! replay does: same contents of every column family, same latest sequence,
//! same errors. Each case writes one deterministic workload into two separate
//! `MemFs` instances, kills the writer (`crash_process`: flushed WAL bytes
//! survive), then reopens one copy serially and one in parallel.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::test_hooks::LogWriter;
use shaledb::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/db";

fn opts(fs: Arc<dyn FileSystem>, write_buffer_size: usize, threads: usize) -> Options {
    Options {
        fs,
        write_buffer_size,
        max_write_buffer_number: 64,
        block_cache_size: 256 << 10,
        extent_size: 256 << 10,
        block_size: 4096,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        background_threads: false,
        recovery_threads: threads,
        ..Options::default()
    }
}

/// Writes a deterministic workload (puts, deletes, range deletes, batches
/// over three column families) with a write buffer big enough that nothing
/// is flushed, then kills the process.
fn write_workload(fs: &MemFs, seed: u64) {
    let db = Db::open(DIR, opts(fs.arc(), 64 << 20, 1)).unwrap();
    let a = db.create_cf("a").unwrap();
    let b = db.create_cf("b").unwrap();
    let cfs = [0, a, b];
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..6000u64 {
        let r = rnd();
        let cf = cfs[(r % 3) as usize];
        let key = format!("k{:05}", (r >> 8) % 3000);
        match i % 50 {
            0 => {
                let end = format!("k{:05}", (r >> 8) % 3000 + 40);
                db.delete_range_cf(cf, key.as_bytes(), end.as_bytes())
                    .unwrap();
            }
            1..=5 => db.delete_cf(cf, key.as_bytes()).unwrap(),
            6..=9 => {
                let mut batch = WriteBatch::new();
                for j in 0..20u64 {
                    let k = format!("k{:05}", (r >> 8).wrapping_add(j * 7) % 3000);
                    batch.put_cf(cfs[(j % 3) as usize], k.as_bytes(), &[b'b'; 150]);
                }
                batch.delete_cf(a, key.as_bytes());
                db.write(&WriteOptions::default(), batch).unwrap();
            }
            _ => {
                let value = format!("v{i}-{}", "x".repeat((r % 300) as usize));
                db.put_cf(cf, key.as_bytes(), value.as_bytes()).unwrap();
            }
        }
    }
    fs.crash_process();
    drop(db);
}

type Contents = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Every column family's full scan, and the latest sequence.
fn contents(db: &Db) -> (Contents, u64) {
    let mut out = Vec::new();
    for name in ["default", "a", "b"] {
        let id = db.cf_id(name).unwrap();
        let mut it = db.iter_cf(&ReadOptions::default(), id).unwrap();
        it.seek_to_first().unwrap();
        let mut rows = Vec::new();
        while it.valid() {
            rows.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        assert!(it.status().is_none());
        out.push((name.to_owned(), rows));
    }
    (out, db.latest_sequence())
}

fn frozen(db: &Db) -> usize {
    db.property("shale.frozen-memtables")
        .unwrap()
        .parse()
        .unwrap()
}

/// Recovers a fresh copy of the workload with `threads`; returns contents
/// and the number of frozen memtables right after open (switches + 1 when
/// nothing was flushed during recovery).
fn recover(seed: u64, wbs: usize, max_wbn: usize, threads: usize) -> ((Contents, u64), usize) {
    let fs = MemFs::new();
    write_workload(&fs, seed);
    let mut o = opts(fs.arc(), wbs, threads);
    o.max_write_buffer_number = max_wbn;
    let db = Db::open(DIR, o).unwrap();
    let n = frozen(&db);
    if max_wbn <= 2 {
        let stats = db.property("shale.stats").unwrap();
        assert!(
            !stats.contains("flushes: 0 "),
            "no flush during replay: {stats}"
        );
    }
    let c = contents(&db);
    db.close().unwrap();
    // And the recovered state itself survives a clean reopen.
    let db = Db::open(DIR, opts(fs.arc(), 64 << 20, 1)).unwrap();
    assert_eq!(contents(&db), c);
    (c, n)
}

#[test]
fn parallel_equals_serial_with_a_big_write_buffer() {
    let (serial, _) = recover(7, 64 << 20, 64, 1);
    let (parallel, _) = recover(7, 64 << 20, 64, 4);
    assert!(serial.0.iter().all(|(_, rows)| !rows.is_empty()));
    assert!(serial.1 > 6000);
    assert_eq!(serial, parallel);
}

#[test]
fn parallel_switches_memtables_at_barriers() {
    // No flush during replay: every generation stays frozen and is counted.
    let (serial, n_serial) = recover(11, 64 << 10, 1000, 1);
    let (parallel, n_parallel) = recover(11, 64 << 10, 1000, 4);
    assert_eq!(serial, parallel);
    // Megabytes of batches into 64 KiB buffers: dozens of switches in both,
    // and parallel replay does not overshoot the buffer much more than serial.
    assert!(n_serial >= 20, "serial switches: {n_serial}");
    assert!(n_parallel >= 20, "parallel switches: {n_parallel}");
    assert!(
        n_parallel * 10 >= n_serial * 8,
        "{n_parallel} vs {n_serial}"
    );
}

#[test]
fn parallel_flushes_during_replay_when_too_many_are_frozen() {
    let (serial, _) = recover(13, 64 << 10, 2, 1);
    for threads in [2, 3, 4] {
        let (parallel, n) = recover(13, 64 << 10, 2, threads);
        assert_eq!(serial, parallel, "threads {threads}");
        // Flushed as they piled up: at most max_write_buffer_number frozen.
        assert!(n <= 2, "frozen after open: {n}");
    }
}

/// Writes the workload, then a crafted extra segment: good batches, one whose
/// ops are malformed (valid record, bad batch), then more good batches.
fn workload_with_bad_batch(fs: &MemFs) -> u64 {
    write_workload(fs, 17);
    let number = 999_999;
    let path = Path::new(DIR).join(format!("{number:06}.log"));
    let mut w = LogWriter::new(fs.arc().create(&path).unwrap(), number).unwrap();
    let mut bad_offset = 0;
    for i in 0..400u64 {
        if i == 250 {
            bad_offset = w.file_size();
            let mut bad = Vec::new();
            bad.extend_from_slice(&(1_000_000 + i).to_le_bytes());
            bad.extend_from_slice(&3u32.to_le_bytes());
            bad.extend_from_slice(&[0xff; 9]);
            w.add_record(&bad).unwrap();
            continue;
        }
        let mut b = WriteBatch::new();
        b.put(format!("z{i:04}").as_bytes(), &[b'z'; 100]);
        b.set_sequence(1_000_000 + i);
        w.add_record(b.data()).unwrap();
    }
    w.sync().unwrap();
    bad_offset
}

#[test]
fn a_malformed_batch_is_the_same_corruption_in_both_modes() {
    let mut errors = Vec::new();
    for threads in [1, 4] {
        let fs = MemFs::new();
        let bad_offset = workload_with_bad_batch(&fs);
        match Db::open(DIR, opts(fs.arc(), 64 << 10, threads)) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert!(file.ends_with("999999.log"), "{file:?}");
                assert_eq!(offset, bad_offset);
                errors.push(format!("{:?}", (file, offset)));
            }
            Err(e) => panic!("threads {threads}: wrong error {e:?}"),
            Ok(_) => panic!("threads {threads}: opened a database with a bad batch"),
        }
    }
    assert_eq!(errors[0], errors[1]);
}

/// Damages the (only) WAL segment: `cut` drops its last bytes (a torn tail,
/// truncated at open), otherwise a byte in its middle is flipped.
fn damaged_result(threads: usize, cut: bool) -> String {
    let fs = MemFs::new();
    write_workload(&fs, 19);
    // The only WAL segment (everything was written before one switch).
    let log = fs
        .arc()
        .list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .unwrap();
    let path = Path::new(DIR).join(&log);
    let mut data = shaledb::env::read_to_vec(fs.arc().as_ref(), &path).unwrap();
    if cut {
        data.truncate(data.len() - 5);
    } else {
        let mid = data.len() / 2;
        data[mid] ^= 0x40;
    }
    let mut f = fs.arc().create(&path).unwrap();
    f.append(&data).unwrap();
    f.sync().unwrap();
    drop(f);
    let r = Db::open(DIR, opts(fs.arc(), 64 << 10, threads)).map(|db| contents(&db));
    format!("{r:?}")
}

#[test]
fn a_flipped_byte_gives_the_same_result_in_both_modes() {
    assert_eq!(damaged_result(1, false), damaged_result(4, false));
}

#[test]
fn a_torn_tail_is_truncated_the_same_way_in_both_modes() {
    let serial = damaged_result(1, true);
    assert!(
        serial.starts_with("Ok("),
        "{}",
        &serial[..200.min(serial.len())]
    );
    assert_eq!(serial, damaged_result(4, true));
}

#[test]
fn too_many_recovery_threads_is_an_invalid_option() {
    let fs = MemFs::new();
    let r = Db::open(DIR, opts(fs.arc(), 64 << 10, 65));
    assert!(matches!(
        r,
        Err(Error::InvalidOption {
            name: "recovery_threads",
            ..
        })
    ));
}

// ---- The recovery memory limit ------------------------------------------

/// Copies every file of `DIR` into a fresh `MemFs` (a recovery changes the
/// directory, so each recovery gets its own copy of the crashed one).
fn copy_of(fs: &MemFs) -> MemFs {
    let copy = MemFs::new();
    let (from, to) = (fs.arc(), copy.arc());
    to.create_dir_all(Path::new(DIR)).unwrap();
    for name in from.list_dir(Path::new(DIR)).unwrap() {
        let path = Path::new(DIR).join(&name);
        let data = shaledb::env::read_to_vec(from.as_ref(), &path).unwrap();
        let mut f = to.create(&path).unwrap();
        f.append(&data).unwrap();
        f.sync().unwrap();
    }
    copy
}

fn wal_bytes(fs: &MemFs) -> usize {
    let fs = fs.arc();
    fs.list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .map(|n| {
            shaledb::env::read_to_vec(fs.as_ref(), &Path::new(DIR).join(n))
                .unwrap()
                .len()
        })
        .sum()
}

/// About `mib` MiB of WAL over the three column families, nothing flushed:
/// mostly new keys in increasing order (values of 200..1800 bytes), some
/// overwrites, deletes, range deletes and multi-put batches.
fn write_big_wal(mib: usize) -> MemFs {
    let fs = MemFs::new();
    let mut o = opts(fs.arc(), 512 << 20, 1);
    o.max_value_size = 4096;
    let db = Db::open(DIR, o).unwrap();
    let cfs = [0, db.create_cf("a").unwrap(), db.create_cf("b").unwrap()];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut next_key, mut written) = (0u64, 0usize);
    while written < mib << 20 {
        let r = rnd();
        let cf = cfs[(r % 3) as usize];
        let old = format!("k{:08}", (r >> 8) % (next_key + 1));
        match r % 100 {
            0 => db
                .delete_range_cf(cf, old.as_bytes(), format!("{old}~").as_bytes())
                .unwrap(),
            1..=3 => db.delete_cf(cf, old.as_bytes()).unwrap(),
            4..=8 => {
                let mut batch = WriteBatch::new();
                for j in 0..8 {
                    let k = format!("k{next_key:08}");
                    next_key += 1;
                    batch.put_cf(cfs[j % 3], k.as_bytes(), &[b'm'; 300]);
                    written += 320;
                }
                db.write(&WriteOptions::default(), batch).unwrap();
            }
            _ => {
                let key = if r % 5 == 0 {
                    old
                } else {
                    next_key += 1;
                    format!("k{next_key:08}")
                };
                let len = 200 + (r >> 20) as usize % 1600;
                let value = format!("{r:x}-{}", "v".repeat(len));
                db.put_cf(cf, key.as_bytes(), value.as_bytes()).unwrap();
                written += key.len() + value.len() + 8;
            }
        }
    }
    fs.crash_process();
    drop(db);
    fs
}

fn property(db: &Db, name: &str) -> u64 {
    db.property(name).unwrap().parse().unwrap()
}

/// Recovers a copy of `crashed` with `limit` (0 = derived) and `threads`;
/// returns contents, peak memtable bytes and flushes during recovery.
fn recover_limited(crashed: &MemFs, limit: usize, threads: usize) -> ((Contents, u64), u64, u64) {
    let fs = copy_of(crashed);
    let mut o = opts(fs.arc(), 64 << 20, threads);
    o.max_write_buffer_number = 4;
    o.max_value_size = 4096;
    o.recovery_memory_limit = limit;
    let db = Db::open(DIR, o).unwrap();
    let peak = property(&db, "shale.recovery-peak-memtable-bytes");
    let stats = db.property("shale.stats").unwrap();
    let flushes = stats
        .lines()
        .find_map(|l| l.strip_prefix("flushes: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    let c = contents(&db);
    db.close().unwrap();
    (c, peak, flushes)
}

#[test]
fn a_wal_eight_times_the_memory_limit_recovers_under_it() {
    const LIMIT: usize = 4 << 20;
    let crashed = write_big_wal(32);
    let wal = wal_bytes(&crashed);
    assert!(wal >= 32 << 20, "WAL of {wal} bytes");
    // Reference: 64 MiB x 4 write buffers, nothing flushed, all in memory.
    let (reference, peak, flushes) = recover_limited(&crashed, 0, 1);
    assert_eq!(flushes, 0);
    assert!(peak as usize > wal, "unlimited peak {peak} vs WAL {wal}");
    assert!(reference.0.iter().all(|(_, rows)| rows.len() > 1000));
    for threads in [1, 2, 4] {
        let (c, peak, flushes) = recover_limited(&crashed, LIMIT, threads);
        eprintln!("threads {threads}: peak {peak} bytes, {flushes} flushes during recovery");
        assert!(peak as usize <= LIMIT, "threads {threads}: peak {peak}");
        // Tighter: the switch size is LIMIT / 2, and a full generation plus
        // the next could not fit, so each one is flushed at its switch and the
        // peak is one generation: the switch size plus at most one arena chunk
        // (1/16 of it) per column family. In parallel replay this holds only
        // because batches handed out but not yet applied are counted.
        let one_generation = LIMIT / 2 + 3 * (LIMIT / 2 / 16);
        assert!(
            peak as usize <= one_generation,
            "threads {threads}: peak {peak} > {one_generation}"
        );
        // It did fill memtables up to the switch size.
        assert!(peak as usize >= LIMIT / 4, "threads {threads}: peak {peak}");
        assert!(flushes >= 8, "threads {threads}: {flushes} flushes");
        assert!(c == reference, "threads {threads}: contents differ");
    }
}

#[test]
fn the_memory_limit_is_validated_and_reported() {
    let fs = MemFs::new();
    let mut o = opts(fs.arc(), 64 << 10, 1);
    o.recovery_memory_limit = (1 << 20) - 1;
    assert!(matches!(
        Db::open(DIR, o.clone()),
        Err(Error::InvalidOption {
            name: "recovery_memory_limit",
            ..
        })
    ));
    o.recovery_memory_limit = 0;
    o.max_write_buffer_number = 3;
    let db = Db::open(DIR, o.clone()).unwrap();
    assert_eq!(property(&db, "shale.recovery-memory-limit"), 3 * (64 << 10));
    // A fresh database replays nothing: the peak is at most the empty generation.
    assert!(property(&db, "shale.recovery-peak-memtable-bytes") <= 64 << 10);
    db.close().unwrap();
    o.recovery_memory_limit = 1 << 20;
    let db = Db::open(DIR, o).unwrap();
    assert_eq!(property(&db, "shale.recovery-memory-limit"), 1 << 20);
}
