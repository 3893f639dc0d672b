//! Command-line flags with db_bench's names, defaults and gflags syntax.
//!
//! Accepted forms, as gflags: `--num=1000`, `-num=1000`, `--num 1000`, `--histogram` (a bare
//! bool is true), `--nohistogram`, and bool values `1/0/true/false/yes/no/t/f/y/n`. Unknown flags
//! are an error, as in db_bench. Example:
//!
//! ```text
//! shale-bench --benchmarks=fillrandom,readrandom --num=200000 --compression_type=none \
//!             --bloom_bits=10 --histogram=1 --seed=42
//! ```

use crate::error::{Error, FlagProblem, Result};
use crate::txn::TxnIsolation;
use crate::Compression;
use std::path::PathBuf;

/// Benchmarks the harness implements (a subset of db_bench's, same names and semantics).
pub const KNOWN_BENCHMARKS: &[&str] = &[
    "fillseq",
    "fillbatch",
    "fillrandom",
    "overwrite",
    "fillsync",
    "readseq",
    "readreverse",
    "readrandom",
    "readmissing",
    "seekrandom",
    "seekrandomwhilewriting",
    "readwhilewriting",
    "deleteseq",
    "deleterandom",
    "flush",
    "stats",
    "contest",
    "recover",
    "txnmix",
];

/// The parsed flags. Field names are db_bench's flag names.
#[derive(Clone, Debug, PartialEq)]
pub struct Flags {
    /// `--benchmarks`: comma-separated list run in order.
    pub benchmarks: Vec<String>,
    /// `--num`: number of keys (and of operations per thread for writes).
    pub num: i64,
    /// `--reads`: read operations per thread; negative means `num`.
    pub reads: i64,
    /// `--writes`: write operations per thread; negative means `num`.
    pub writes: i64,
    /// `--deletes`: delete operations per thread; negative means `num`.
    pub deletes: i64,
    /// `--threads`: concurrent threads per benchmark.
    pub threads: usize,
    /// `--duration`: seconds for the random benchmarks; 0 means run by count.
    pub duration: u64,
    /// `--key_size`.
    pub key_size: usize,
    /// `--value_size`.
    pub value_size: usize,
    /// `--batch_size`: entries per write batch.
    pub batch_size: i64,
    /// `--compression_type` after mapping (snappy becomes LZ4).
    pub compression: Compression,
    /// `--compression_type` as given.
    pub compression_type: String,
    /// `--compression_ratio`: how compressible generated values are.
    pub compression_ratio: f64,
    /// `--sync`: fsync every write.
    pub sync: bool,
    /// `--disable_wal`.
    pub disable_wal: bool,
    /// `--write_buffer_size` in bytes (memtable size).
    pub write_buffer_size: u64,
    /// `--cache_size` in bytes (block cache); negative means none.
    pub cache_size: i64,
    /// `--bloom_bits` per key; negative means db_bench's default (no filter), 0 none.
    pub bloom_bits: i32,
    /// `--block_size`: uncompressed bytes of a data block (db_bench's default 4096, which is
    /// also RocksDB's and fjall's).
    pub block_size: u64,
    /// `--use_existing_db`: do not destroy the DB; skip the `fill*` benchmarks.
    pub use_existing_db: bool,
    /// `--db`: the DB directory; empty means a directory under the system temp dir.
    pub db: String,
    /// `--seed`: base of the per-thread seeds; 0 means derived from the clock.
    pub seed: i64,
    /// `--histogram`: print per-op latency histograms.
    pub histogram: bool,
    /// `--statistics`: print the engine's statistics at the end.
    pub statistics: bool,
    /// `--seek_nexts`: `Next()` calls after each seek in `seekrandom`.
    pub seek_nexts: i64,
    /// `--progress_reports`: print `... finished N ops` to stderr.
    pub progress_reports: bool,
    /// `--engine`: which backend of this binary to run (not a db_bench flag).
    pub engine: Option<String>,
    /// `--contest_kills`: crash rounds of the `contest` correctness phase (0 skips it).
    pub contest_kills: u32,
    /// `--contest_check_num`: writes per thread in each crash round; negative means
    /// `max(1, num / 10)`.
    pub contest_check_num: i64,
    /// `--contest_space`: after the range phase, overwrite half the keys and report the DB's
    /// space amplification before and after the engine's value-file GC.
    pub contest_space: bool,
    /// `--recover_bytes`: bytes of keys + values the `recover` benchmark writes before the kill.
    pub recover_bytes: u64,
    /// `--device_limits`: JSON file of fio figures (written by bench/compare) to relate MB/s to.
    pub device_limits: String,
    /// `--allow_concurrent_memtable_write` (db_bench's name): parallel memtable insert.
    pub allow_concurrent_memtable_write: bool,
    /// `--wal_mapped_writes` (ShaleDB only): WAL segments written through a memory map.
    pub wal_mapped_writes: bool,
    /// `--lone_writes` (ShaleDB only): unsynced writes without group commit.
    pub lone_writes: bool,
    /// `--enable_blob_files` (db_bench's name): key-value separation with `--min_blob_size`.
    pub enable_blob_files: bool,
    /// `--min_blob_size`: values of at least this many bytes go to value files.
    pub min_blob_size: u64,
    /// `--blob_direct_io`: write value files with O_DIRECT (ShaleDB).
    pub blob_direct_io: bool,
    /// `--use_direct_reads` (db_bench's name): read values with O_DIRECT (ShaleDB: value files).
    pub use_direct_reads: bool,
    /// `--blob_cache_size`: bytes of ShaleDB's value cache (0 = none).
    pub blob_cache_size: u64,
    /// `--blob_readahead`: entries a ShaleDB scan reads ahead (Options::blob_readahead).
    pub blob_readahead: usize,
    /// `--blob_readahead_threads`: ShaleDB's readahead reader threads.
    pub blob_readahead_threads: usize,
    /// `--cache_index_and_filter_blocks` (db_bench's name): index and filter blocks go
    /// through the block cache (`true`) or stay in memory beside it (`false`). Passed to the
    /// engine only when given (see [`crate::EngineOptions::cache_index_and_filter_blocks`]).
    pub cache_index_and_filter_blocks: bool,
    /// `--drop_caches`: drop the OS page cache between phases of `contest` and before the
    /// reopen of `recover` (when permitted).
    pub drop_caches: bool,
    /// `--recovery_threads`: WAL replay threads at open (negative = the engine's default).
    pub recovery_threads: i64,
    /// `--isolation`: isolation level of the `txnmix` transactions.
    pub isolation: TxnIsolation,
    /// `--txn_ops`: keys read-modify-written per `txnmix` transaction (at least 1).
    pub txn_ops: usize,
    /// `--txn_read_pct`: percent (0..=100) of `txnmix` transactions that only read.
    pub txn_read_pct: u64,
    /// `--txn_zipf`: zipfian theta of the `txnmix` keys in `[0, 1)`; 0 = uniform.
    pub txn_zipf: f64,
    /// `--transaction_lock_timeout` (db_bench's name): milliseconds a row-lock request waits.
    pub transaction_lock_timeout: u64,
    /// `--recover_threads_list`: `recover` replays the same WAL once per entry with that many
    /// recovery threads (empty = one reopen with `--recovery_threads`).
    pub recover_threads_list: Vec<usize>,
    /// Hidden `--crash_child=DOMAIN`: run as the writer child of `contest` / `recover` (set by
    /// the parent process; `-1` = not a child).
    pub crash_child: i64,
    /// Names of the flags given on the command line (for per-benchmark defaults).
    pub given: Vec<String>,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            benchmarks: "fillseq,fillsync,fillrandom,overwrite,readrandom,seekrandom,\
                         seekrandomwhilewriting,readseq,readreverse,readwhilewriting"
                .split(',')
                .map(str::to_string)
                .collect(),
            num: 1_000_000,
            reads: -1,
            writes: -1,
            deletes: -1,
            threads: 1,
            duration: 0,
            key_size: 16,
            value_size: 100,
            batch_size: 1,
            compression: Compression::Lz4,
            compression_type: "snappy".into(),
            compression_ratio: 0.5,
            sync: false,
            disable_wal: false,
            write_buffer_size: 64 << 20,
            cache_size: 8 << 20,
            bloom_bits: -1,
            block_size: 4096,
            use_existing_db: false,
            db: String::new(),
            seed: 0,
            histogram: false,
            statistics: false,
            seek_nexts: 0,
            progress_reports: true,
            engine: None,
            contest_kills: 3,
            contest_check_num: -1,
            contest_space: false,
            recover_bytes: 1 << 30,
            device_limits: String::new(),
            drop_caches: true,
            allow_concurrent_memtable_write: false,
            wal_mapped_writes: true,
            lone_writes: true,
            enable_blob_files: false,
            min_blob_size: 0,
            blob_direct_io: false,
            use_direct_reads: false,
            blob_cache_size: 0,
            blob_readahead: 64,
            blob_readahead_threads: 8,
            cache_index_and_filter_blocks: false,
            recovery_threads: -1,
            isolation: TxnIsolation::Snapshot,
            txn_ops: 4,
            txn_read_pct: 0,
            txn_zipf: 0.0,
            transaction_lock_timeout: 1000,
            recover_threads_list: Vec::new(),
            crash_child: -1,
            given: Vec::new(),
        }
    }
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Run the benchmarks.
    Run(Box<Flags>),
    /// Print the help text.
    Help,
}

/// (name, default as shown, help) for `--help`.
const HELP: &[(&str, &str, &str)] = &[
    ("benchmarks", "fillseq,fillsync,fillrandom,overwrite,readrandom,seekrandom,seekrandomwhilewriting,readseq,readreverse,readwhilewriting",
     "Comma-separated list of benchmarks to run in order. Supported: fillseq, fillbatch, fillrandom, overwrite, fillsync (num/1000 keys, sync writes), readseq, readreverse, readrandom, readmissing, seekrandom, seekrandomwhilewriting, readwhilewriting (threads readers + 1 writer), deleteseq, deleterandom, flush, stats, and (not in db_bench) txnmix (fresh DB of num 8-byte counters; transactions of txn_ops read-modify-writes, aborts retried, for duration seconds or writes committed txns per thread; checks the counters' sum), contest (PolarDB-contest phases: crash check, random write, random read, ordered range; defaults --threads=16 --num=10000 --key_size=8 --value_size=4096 unless given) and recover (write --recover_bytes, SIGKILL, time the reopen; default --threads=1)"),
    ("num", "1000000", "Number of key/values to place in database"),
    ("reads", "-1", "Number of read operations to do. If negative, do FLAGS_num reads."),
    ("writes", "-1", "Number of write operations to do. If negative, do FLAGS_num writes."),
    ("deletes", "-1", "Number of delete operations to do. If negative, do FLAGS_num deletions."),
    ("threads", "1", "Number of concurrent threads to run."),
    ("duration", "0", "Time in seconds for the random-ops tests to run. When 0 then num & reads determine the test duration"),
    ("key_size", "16", "size of each key"),
    ("value_size", "100", "Size of each value"),
    ("batch_size", "1", "Batch size (entries per write batch)"),
    ("compression_type", "snappy", "Algorithm to use to compress the database: none, lz4, zstd. NOTE: db_bench's default 'snappy' is mapped to lz4 here (ShaleDB has no snappy); pass --compression_type explicitly when comparing."),
    ("compression_ratio", "0.5", "Arrange to generate values that shrink to this fraction of their original size after compression"),
    ("sync", "false", "Sync all writes to disk"),
    ("disable_wal", "false", "If true, do not write WAL for write."),
    ("write_buffer_size", "67108864", "Number of bytes to buffer in memtable before compacting"),
    ("cache_size", "8388608", "Number of bytes to use as a cache of uncompressed data"),
    ("bloom_bits", "-1", "Bloom filter bits per key. Negative means use default (no filter). Zero disables."),
    ("block_size", "4096", "Number of bytes in a block."),
    ("use_existing_db", "false", "If true, do not destroy the existing database. If you set this flag and also specify a benchmark that wants a fresh database, that benchmark will fail."),
    ("db", "\"\"", "Use the db with the following name (default: <tmp>/shalebenchtest-<user>/dbbench)."),
    ("seed", "0", "Seed base for random number generators. When 0 it is derived from the current time."),
    ("histogram", "false", "Print histogram of operation timings"),
    ("statistics", "false", "Database statistics (prints the engine's statistics string at the end)"),
    ("seek_nexts", "0", "How many times to call Next() after Seek() in seekrandom and seekrandomwhilewriting"),
    ("progress_reports", "true", "If true, db_bench will report number of finished operations."),
    ("engine", "(first backend of this binary)", "Backend to benchmark (not a db_bench flag)."),
    ("contest_kills", "3", "contest: crash rounds of the correctness phase; each starts a writer child process and SIGKILLs it at a random point, then reopens and verifies (0 = skip; skipped for non-persistent engines)"),
    ("contest_check_num", "-1", "contest: writes per thread in each crash round. If negative, max(1, num/10)."),
    ("contest_space", "false", "contest: after the range phase, every thread overwrites every second key it wrote (contest_overwrite), then the DB directory's bytes are reported against the live data before and after the engine's value-file GC (contest_space; ShaleDB: flush, then collect_blob_garbage(0.75)), and one scan verifies every key and value"),
    ("recover_bytes", "1073741824", "recover: bytes of keys + values written (unflushed) before the writer is killed"),
    ("device_limits", "\"\"", "contest, recover: JSON file of device limits written by bench/compare (seq_write_mib_s, rand_read_4k_mib_s, seq_read_mib_s); phase MB/s are also printed as a percentage of them"),
    ("recovery_threads", "-1", "Threads replaying the write-ahead log when the DB is opened (ShaleDB: 0 or 1 = serial replay); negative = the engine's default"),
    ("isolation", "si", "txnmix: isolation level of the transactions: rc (read committed), si (snapshot isolation; also rr), serializable. Engines without the level refuse it."),
    ("txn_ops", "4", "txnmix: keys read-modify-written per transaction (get_for_update, then put of the 8-byte counter + 1)"),
    ("txn_read_pct", "0", "txnmix: percent of transactions that only read their keys (plain get)"),
    ("txn_zipf", "0", "txnmix: zipfian theta of the key choice in [0, 1) (YCSB uses 0.99; key 0 hottest); 0 = uniform"),
    ("transaction_lock_timeout", "1000", "txnmix: milliseconds a row-lock request waits before a lock timeout (db_bench's default is 100; ShaleDB's and RocksDB TransactionDB's 1000)"),
    ("recover_threads_list", "\"\"", "recover: comma-separated recovery thread counts; the same WAL is replayed once per entry (from a copy of the killed DB), each reported as recover_t<N> (ShaleDB: 0 or 1 = serial). Empty: one reopen with --recovery_threads"),
    ("allow_concurrent_memtable_write", "false", "Writers of a commit group insert their batches into the memtable in parallel (ShaleDB's commit pipeline); false = the group leader inserts all"),
    ("wal_mapped_writes", "true", "ShaleDB: write WAL segments through a shared memory map of preallocated space (Options::wal_mapped_writes); false = buffered write(2). RocksDB's --mmap_write does not apply to its WAL"),
    ("lone_writes", "true", "ShaleDB: an unsynced write logs and inserts by itself instead of queueing for a group-commit leader (Options::lone_writes); false = every write goes through group commit"),
    ("enable_blob_files", "false", "Key-value separation: values of at least --min_blob_size bytes go to value files (RocksDB BlobDB's and db_bench's name; ShaleDB: Options::min_blob_size)"),
    ("min_blob_size", "0", "With --enable_blob_files: smallest value stored in a value file"),
    ("blob_direct_io", "false", "ShaleDB: write value files with O_DIRECT (Options::blob_direct_io)"),
    ("use_direct_reads", "false", "ShaleDB: read values from value files with O_DIRECT (Options::blob_direct_reads)"),
    ("cache_index_and_filter_blocks", "false", "Index and filter blocks through the block cache (true) or held in memory beside it at every level (false; RocksDB's default). When not given each engine keeps its own default (ShaleDB and fjall: L0/L1 pinned, deeper levels cached). ShaleDB supports only false (Options::pin_index_and_filter_all_levels); fjall maps it to its pinning policies"),
    ("blob_cache_size", "0", "ShaleDB: bytes of the value cache shared by readers (Options::blob_cache_size; 0 = none)"),
    ("blob_readahead", "64", "ShaleDB: entries a forward scan reads ahead into the value cache (Options::blob_readahead; 0 = off; needs --blob_cache_size)"),
    ("blob_readahead_threads", "8", "ShaleDB: reader threads of scan readahead, the value reads in flight (Options::blob_readahead_threads)"),
    ("drop_caches", "true", "contest, recover: drop the OS page cache (sync; echo 3 > /proc/sys/vm/drop_caches) before read phases and before the timed reopen, when permitted"),
];

/// Flags the binaries pass to their own child processes; accepted but not listed in `--help`.
const HIDDEN: &[&str] = &["crash_child"];

fn known(name: &str) -> bool {
    HIDDEN.contains(&name) || HELP.iter().any(|(n, _, _)| *n == name)
}

/// The `--help` text; `engines` lists the backends compiled into the binary.
pub fn help_text(program: &str, engines: &[&str]) -> String {
    let mut s = format!(
        "{program}: db_bench (RocksDB 7.8.3) compatible benchmark.\n\
         Backends in this binary: {}\n\
         Same flag names, defaults and output lines as db_bench; keys, values and random \
         sequences are generated exactly as db_bench does, so the same flags give the same key \
         space and found counts. Pass --seed to make runs repeatable.\n\nFlags:\n",
        engines.join(", ")
    );
    for (name, default, help) in HELP {
        s.push_str(&format!(
            "    -{name} ({help}) type: {} default: {default}\n",
            kind(name)
        ));
    }
    s
}

fn kind(name: &str) -> &'static str {
    match name {
        "sync"
        | "disable_wal"
        | "use_existing_db"
        | "histogram"
        | "statistics"
        | "progress_reports"
        | "drop_caches"
        | "contest_space"
        | "enable_blob_files"
        | "blob_direct_io"
        | "use_direct_reads"
        | "cache_index_and_filter_blocks"
        | "allow_concurrent_memtable_write"
        | "wal_mapped_writes"
        | "lone_writes" => "bool",
        "benchmarks"
        | "compression_type"
        | "db"
        | "engine"
        | "device_limits"
        | "isolation"
        | "recover_threads_list" => "string",
        "compression_ratio" | "txn_zipf" => "double",
        _ => "int",
    }
}

fn bad(name: &str, value: &str) -> Error {
    Error::Flag {
        name: name.to_string(),
        problem: FlagProblem::BadValue(value.to_string()),
    }
}

fn parse_bool(name: &str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(bad(name, v)),
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
    v.trim().parse::<T>().map_err(|_| bad(name, v))
}

/// Maps a `--compression_type` value to what the engines support.
pub fn parse_compression(v: &str) -> Option<Compression> {
    match v.to_ascii_lowercase().as_str() {
        "none" => Some(Compression::None),
        // ShaleDB (and fjall) have no snappy: db_bench's default maps to the closest fast codec.
        "snappy" | "lz4" | "lz4hc" => Some(Compression::Lz4),
        "zstd" => Some(Compression::Zstd),
        _ => None,
    }
}

impl Flags {
    /// Sets one flag from its textual value.
    fn set(&mut self, name: &str, v: &str) -> Result<()> {
        match name {
            "benchmarks" => {
                let list: Vec<String> = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(b) = list
                    .iter()
                    .find(|b| !KNOWN_BENCHMARKS.contains(&b.as_str()))
                {
                    return Err(Error::Flag {
                        name: name.into(),
                        problem: FlagProblem::UnknownBenchmark(b.clone()),
                    });
                }
                self.benchmarks = list;
            }
            "num" => self.num = parse_num(name, v)?,
            "reads" => self.reads = parse_num(name, v)?,
            "writes" => self.writes = parse_num(name, v)?,
            "deletes" => self.deletes = parse_num(name, v)?,
            "threads" => {
                self.threads = parse_num(name, v)?;
                if self.threads == 0 {
                    return Err(bad(name, v));
                }
            }
            "duration" => self.duration = parse_num(name, v)?,
            "key_size" => self.key_size = parse_num(name, v)?,
            "value_size" => self.value_size = parse_num(name, v)?,
            "batch_size" => {
                self.batch_size = parse_num(name, v)?;
                if self.batch_size < 1 {
                    return Err(bad(name, v));
                }
            }
            "compression_type" => {
                self.compression = parse_compression(v).ok_or_else(|| bad(name, v))?;
                self.compression_type = v.to_string();
            }
            "compression_ratio" => self.compression_ratio = parse_num(name, v)?,
            "sync" => self.sync = parse_bool(name, v)?,
            "disable_wal" => self.disable_wal = parse_bool(name, v)?,
            "write_buffer_size" => self.write_buffer_size = parse_num(name, v)?,
            "cache_size" => self.cache_size = parse_num(name, v)?,
            "bloom_bits" => self.bloom_bits = parse_num(name, v)?,
            "block_size" => self.block_size = parse_num(name, v)?,
            "use_existing_db" => self.use_existing_db = parse_bool(name, v)?,
            "db" => self.db = v.to_string(),
            "seed" => self.seed = parse_num(name, v)?,
            "histogram" => self.histogram = parse_bool(name, v)?,
            "statistics" => self.statistics = parse_bool(name, v)?,
            "seek_nexts" => self.seek_nexts = parse_num(name, v)?,
            "progress_reports" => self.progress_reports = parse_bool(name, v)?,
            "engine" => self.engine = Some(v.to_string()),
            "contest_kills" => self.contest_kills = parse_num(name, v)?,
            "contest_check_num" => self.contest_check_num = parse_num(name, v)?,
            "contest_space" => self.contest_space = parse_bool(name, v)?,
            "recover_bytes" => self.recover_bytes = parse_num(name, v)?,
            "device_limits" => self.device_limits = v.to_string(),
            "drop_caches" => self.drop_caches = parse_bool(name, v)?,
            "enable_blob_files" => self.enable_blob_files = parse_bool(name, v)?,
            "min_blob_size" => self.min_blob_size = parse_num(name, v)?,
            "blob_direct_io" => self.blob_direct_io = parse_bool(name, v)?,
            "use_direct_reads" => self.use_direct_reads = parse_bool(name, v)?,
            "cache_index_and_filter_blocks" => {
                self.cache_index_and_filter_blocks = parse_bool(name, v)?
            }
            "blob_cache_size" => self.blob_cache_size = parse_num(name, v)?,
            "blob_readahead" => self.blob_readahead = parse_num(name, v)?,
            "blob_readahead_threads" => self.blob_readahead_threads = parse_num(name, v)?,
            "allow_concurrent_memtable_write" => {
                self.allow_concurrent_memtable_write = parse_bool(name, v)?
            }
            "wal_mapped_writes" => self.wal_mapped_writes = parse_bool(name, v)?,
            "lone_writes" => self.lone_writes = parse_bool(name, v)?,
            "recovery_threads" => self.recovery_threads = parse_num(name, v)?,
            "isolation" => self.isolation = TxnIsolation::parse(v).ok_or_else(|| bad(name, v))?,
            "txn_ops" => {
                self.txn_ops = parse_num(name, v)?;
                if self.txn_ops == 0 {
                    return Err(bad(name, v));
                }
            }
            "txn_read_pct" => {
                self.txn_read_pct = parse_num(name, v)?;
                if self.txn_read_pct > 100 {
                    return Err(bad(name, v));
                }
            }
            "txn_zipf" => {
                self.txn_zipf = parse_num(name, v)?;
                if !(0.0..1.0).contains(&self.txn_zipf) {
                    return Err(bad(name, v));
                }
            }
            "transaction_lock_timeout" => self.transaction_lock_timeout = parse_num(name, v)?,
            "recover_threads_list" => {
                self.recover_threads_list = v
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| parse_num(name, s))
                    .collect::<Result<_>>()?;
            }
            "crash_child" => self.crash_child = parse_num(name, v)?,
            _ => {
                return Err(Error::Flag {
                    name: name.to_string(),
                    problem: FlagProblem::Unknown,
                })
            }
        }
        if !self.given.iter().any(|g| g == name) {
            self.given.push(name.to_string());
        }
        Ok(())
    }

    /// Whether `--name` was given on the command line (not just defaulted).
    pub fn is_given(&self, name: &str) -> bool {
        self.given.iter().any(|g| g == name)
    }

    /// Parses arguments (without the program name).
    pub fn parse<I, S>(args: I) -> Result<Command>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut flags = Flags::default();
        let args: Vec<String> = args.into_iter().map(|s| s.as_ref().to_string()).collect();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let body = arg
                .strip_prefix("--")
                .or_else(|| arg.strip_prefix('-'))
                .ok_or_else(|| Error::Flag {
                    name: arg.clone(),
                    problem: FlagProblem::Unknown,
                })?;
            if matches!(body, "help" | "h" | "helpfull") {
                return Ok(Command::Help);
            }
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            };
            let is_bool = kind(&name) == "bool" && known(&name);
            match value {
                Some(v) => flags.set(&name, &v)?,
                None if is_bool => flags.set(&name, "true")?,
                None => {
                    // `--noFLAG` for bools, else the value is the next argument.
                    if let Some(neg) = name.strip_prefix("no") {
                        if kind(neg) == "bool" && known(neg) {
                            flags.set(neg, "false")?;
                            continue;
                        }
                    }
                    if !known(&name) {
                        return Err(Error::Flag {
                            name,
                            problem: FlagProblem::Unknown,
                        });
                    }
                    let v = it.next().ok_or_else(|| Error::Flag {
                        name: name.clone(),
                        problem: FlagProblem::MissingValue,
                    })?;
                    flags.set(&name, &v)?;
                }
            }
        }
        Ok(Command::Run(Box::new(flags)))
    }

    /// `--reads` resolved (`-1` means `num`).
    pub fn reads_resolved(&self) -> i64 {
        if self.reads < 0 {
            self.num
        } else {
            self.reads
        }
    }

    /// The DB directory: `--db`, or `<tmp>/shalebenchtest-<user>/dbbench` like db_bench's
    /// `/tmp/rocksdbtest-<uid>/dbbench`.
    pub fn db_path(&self) -> PathBuf {
        if self.db.is_empty() {
            let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
            std::env::temp_dir()
                .join(format!("shalebenchtest-{user}"))
                .join("dbbench")
        } else {
            PathBuf::from(&self.db)
        }
    }

    /// Bloom bits per key for the engine: `None` when db_bench would build no filter.
    pub fn bloom_bits_per_key(&self) -> Option<u32> {
        u32::try_from(self.bloom_bits).ok().filter(|&b| b > 0)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Flags {
        match Flags::parse(args).unwrap() {
            Command::Run(f) => *f,
            Command::Help => panic!("help"),
        }
    }

    #[test]
    fn defaults_are_db_bench_defaults() {
        let f = run(&[]);
        assert_eq!(f.num, 1_000_000);
        assert_eq!(f.reads_resolved(), 1_000_000);
        assert_eq!((f.key_size, f.value_size, f.threads), (16, 100, 1));
        assert_eq!(f.cache_size, 8_388_608);
        assert_eq!(f.write_buffer_size, 67_108_864);
        assert_eq!(f.bloom_bits_per_key(), None);
        assert_eq!(f.block_size, 4096);
        assert_eq!(run(&["--block_size=16384"]).block_size, 16384);
        assert_eq!(f.compression, Compression::Lz4); // snappy mapped
        assert_eq!(f.compression_type, "snappy");
        assert!(f.progress_reports && !f.histogram && !f.sync);
    }

    #[test]
    fn gflags_syntax() {
        let f = run(&[
            "--num=1000",
            "-reads",
            "50",
            "--histogram",
            "--nosync",
            "--statistics=1",
            "--bloom_bits=10",
            "--compression_type=zstd",
            "--benchmarks=fillrandom,readrandom",
            "--disable_wal=true",
        ]);
        assert_eq!((f.num, f.reads), (1000, 50));
        assert!(f.histogram && f.statistics && !f.sync && f.disable_wal);
        assert_eq!(f.bloom_bits_per_key(), Some(10));
        assert_eq!(f.compression, Compression::Zstd);
        assert_eq!(f.benchmarks, vec!["fillrandom", "readrandom"]);
        assert_eq!(run(&["--bloom_bits=0"]).bloom_bits_per_key(), None);
    }

    #[test]
    fn errors() {
        let e = Flags::parse(["--nosuchflag=1"]).unwrap_err();
        assert!(matches!(
            e,
            Error::Flag {
                problem: FlagProblem::Unknown,
                ..
            }
        ));
        let e = Flags::parse(["--num=abc"]).unwrap_err();
        assert!(matches!(
            e,
            Error::Flag {
                problem: FlagProblem::BadValue(_),
                ..
            }
        ));
        let e = Flags::parse(["--num"]).unwrap_err();
        assert!(matches!(
            e,
            Error::Flag {
                problem: FlagProblem::MissingValue,
                ..
            }
        ));
        let e = Flags::parse(["--benchmarks=fillrandom,mixgraph"]).unwrap_err();
        assert!(matches!(
            e,
            Error::Flag {
                problem: FlagProblem::UnknownBenchmark(_),
                ..
            }
        ));
        assert!(Flags::parse(["--compression_type=zlib"]).is_err());
        assert!(Flags::parse(["--threads=0"]).is_err());
        assert!(Flags::parse(["positional"]).is_err());
        assert_eq!(Flags::parse(["--help"]).unwrap(), Command::Help);
    }

    #[test]
    fn txn_flags() {
        let f = run(&[]);
        assert_eq!(f.isolation, TxnIsolation::Snapshot);
        assert_eq!(
            (f.txn_ops, f.txn_read_pct, f.transaction_lock_timeout),
            (4, 0, 1000)
        );
        let f = run(&[
            "--benchmarks=txnmix",
            "--isolation=rc",
            "--txn_ops=2",
            "--txn_read_pct=25",
            "--txn_zipf=0.99",
            "--transaction_lock_timeout=50",
        ]);
        assert_eq!(f.isolation, TxnIsolation::ReadCommitted);
        assert_eq!(
            (f.txn_ops, f.txn_read_pct, f.transaction_lock_timeout),
            (2, 25, 50)
        );
        assert_eq!(f.txn_zipf, 0.99);
        assert_eq!(
            run(&["--isolation=serializable"]).isolation,
            TxnIsolation::Serializable
        );
        for bad in [
            "--isolation=chaos",
            "--txn_ops=0",
            "--txn_read_pct=101",
            "--txn_zipf=1",
            "--txn_zipf=-0.5",
        ] {
            assert!(Flags::parse([bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn recover_threads_list() {
        assert!(run(&[]).recover_threads_list.is_empty());
        let f = run(&["--recover_threads_list=1,2,4"]);
        assert_eq!(f.recover_threads_list, vec![1, 2, 4]);
        assert!(run(&["--recover_threads_list="])
            .recover_threads_list
            .is_empty());
        assert!(Flags::parse(["--recover_threads_list=1,x"]).is_err());
        assert!(Flags::parse(["--recover_threads_list=-1"]).is_err());
    }

    #[test]
    fn help_mentions_snappy_mapping() {
        let h = help_text("shale-bench", &["memory"]);
        assert!(h.contains("'snappy' is mapped to lz4"));
        assert!(h.contains("-bloom_bits"));
    }
}
