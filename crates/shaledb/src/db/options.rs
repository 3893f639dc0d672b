//! Options of a database, validated at open.

use crate::env::{posix::PosixFs, FileSystem};
use crate::error::{Error, Result};
pub use crate::extent::CompressionType;
use std::sync::Arc;

/// Database options. Defaults follow X-Engine (seed 000): 2 MiB extents of
/// 16 KiB blocks, three levels (L0 used only under pressure, hot L1, cold L2).
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Fail if the database already exists.
    pub error_if_exists: bool,
    /// The file system (tests pass an in-memory or fault-injecting one).
    pub fs: Arc<dyn FileSystem>,
    /// Bytes of one memtable before it is frozen.
    pub write_buffer_size: usize,
    /// Memtables (active + frozen) per column family before writes stop.
    pub max_write_buffer_number: usize,
    /// Bytes of the shared block cache (0 = no cache).
    pub block_cache_size: usize,
    /// Bloom filter bits per key (0 = no filter).
    pub bloom_bits_per_key: u32,
    /// Keep the index and filter blocks of every extent in memory, outside
    /// the block cache, at every level (as RocksDB does with its default
    /// `cache_index_and_filter_blocks=false`): a point read then costs at
    /// most one data-block read per level it probes, whatever the cache
    /// holds. `false` (the default) pins them for L0 and L1 only; deeper
    /// (cold) levels read them through the block cache, so their memory is
    /// bounded by it. Pinned blocks cost ~1.3 bytes per key for a 10-bit
    /// filter plus one index entry per data block.
    pub pin_index_and_filter_all_levels: bool,
    /// Keep a bloom filter over each memtable's user keys (1/64 of
    /// `write_buffer_size`), so a point get of a key a memtable does not
    /// hold skips its skiplist walk (docs/architecture.md, "The memtable
    /// filter"; RocksDB's `memtable_whole_key_filtering`). Default on.
    pub memtable_filter: bool,
    /// Uncompressed size a data block is cut at.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Size of an extent (and of a slot in a data file).
    pub extent_size: usize,
    /// Slots per data file.
    pub extents_per_file: u32,
    /// Levels including L0 (at least 3: L0, L1, L2).
    pub num_levels: usize,
    /// Target bytes of L1; deeper levels get `level_size_ratio` times more each
    /// (the last level is unbounded).
    pub l1_target_size: u64,
    /// Size ratio between consecutive levels >= 1.
    pub level_size_ratio: u64,
    /// Compression per level (index = level; missing entries use the last one).
    pub compression_per_level: Vec<CompressionType>,
    /// L0 runs at which writes are slowed down.
    pub l0_slowdown_runs: usize,
    /// L0 runs at which writes stop until compaction catches up.
    pub l0_stop_runs: usize,
    /// Commit pipeline: the writers of a group insert its batches into the
    /// memtables in parallel after the leader logged them (`db/write.rs`);
    /// `false` = the leader inserts them all. Off by default: on 2 cores it
    /// measured 10-35% slower (fillrandom, 4 and 16 threads; waking the
    /// followers costs more than the insert it spreads; docs/benchmarks.md).
    pub concurrent_memtable_insert: bool,
    /// Write WAL segments through a shared memory map of preallocated
    /// space (`env/mapped.rs`, Linux, where the file system can
    /// preallocate; else buffered `write(2)`): a record reaches the page
    /// cache, and so survives `kill -9`, without a system call. Durability
    /// with `WriteOptions::sync` is unchanged (`fdatasync`). On by default:
    /// it removed a `write(2)` per group, ~30% of a lone writer's CPU
    /// (docs/benchmarks.md, "Mapped WAL").
    pub wal_mapped_writes: bool,
    /// Unsynced writes without values for the value files log and insert
    /// by themselves instead of queueing for a group leader
    /// (`db/lone_write.rs`): no sleep and wake-up per write when writers
    /// outnumber cores. Synced writes always use group commit, which
    /// shares one fsync among them.
    pub lone_writes: bool,
    /// Largest input (bytes) of one L1+ compaction job.
    pub max_compaction_bytes: u64,
    /// Manifest size that triggers rewriting it from a snapshot.
    pub max_manifest_size: u64,
    /// Largest key accepted.
    pub max_key_size: usize,
    /// Largest value accepted. Without key-value separation, `max_key_size +
    /// max_value_size` must fit 3/4 of an extent; with it (a positive
    /// `min_blob_size`), only values below `min_blob_size` must, so large
    /// values can be accepted (up to 4 GiB).
    pub max_value_size: usize,
    /// Run background flush and compaction (tests may turn it off and drive them by hand).
    pub background_threads: bool,
    /// Threads replaying the WAL at open; 0 or 1 replays serially on the
    /// opening thread (see `db/replay.rs`). At most 64. Default: the number
    /// of cores, clamped to 2..=4 (on 2 cores, 2 replay threads halved the
    /// replay of a 1.26 GiB WAL: 15.9 s against ~30 s serially).
    pub recovery_threads: usize,
    /// Bytes of memtables WAL replay may hold: the active generation, the
    /// frozen ones and the batches handed to replay threads but not yet
    /// applied. Replay switches generations early and flushes frozen ones to
    /// stay under it (see `db/replay_budget.rs`). 0 (the default) derives it:
    /// `write_buffer_size * max_write_buffer_number`. Otherwise at least 1 MiB.
    pub recovery_memory_limit: usize,
    /// Key-value separation (docs/format-blob.md): a put whose value has at
    /// least this many bytes stores the value once in a value file and only
    /// a 28-byte reference in the WAL and the LSM. 0 (the default) = off.
    pub min_blob_size: usize,
    /// Bytes after which a value file is sealed and a new one started.
    pub blob_file_size: u64,
    /// Write value files with `O_DIRECT` (Linux, where the file system
    /// supports it; else buffered): the values bypass the page cache, so
    /// sustained writes run at device speed rather than at the speed of
    /// dirty-page writeback (docs/benchmarks.md, "Key-value separation").
    /// The active file is staged (docs/format-blob.md, section 6): a write
    /// group copies its values to a stage file in the page cache (kill -9
    /// safe) and a writer thread writes them in 1 MiB `O_DIRECT` pieces,
    /// so only `sync=true` groups wait for the device. Off by default.
    pub blob_direct_io: bool,
    /// Read values with `O_DIRECT` (Linux, where supported): point reads
    /// and scans go to the device, so the page cache neither hides it nor
    /// fills with values. Off by default.
    pub blob_direct_reads: bool,
    /// Tests only: write value files in format version 1 (records of key
    /// and value back to back) instead of version 2, to build a database
    /// as the code before version 2 wrote it (docs/format-blob.md section
    /// 7). Reads, GC (whose outputs are version 2) and recovery do not
    /// depend on it.
    #[doc(hidden)]
    pub blob_write_format_v1: bool,
    /// Tests only: the ring size of staged value files (stage format 2,
    /// docs/format-blob.md section 6.1) in bytes; 0 (the default) = 64 MiB.
    /// Tests set a small ring to make it wrap.
    #[doc(hidden)]
    pub blob_stage_ring_size: u64,
    /// Background garbage collection of value files: with a ratio in
    /// (0, 1], a thread runs [`crate::Db::collect_blob_garbage`] with it every
    /// `blob_gc_interval_ms` (files whose live bytes are below that share of
    /// their record bytes are rewritten). 0 (the default) = only when called.
    pub blob_gc_live_ratio: f64,
    /// Milliseconds between background GC passes.
    pub blob_gc_interval_ms: u64,
    /// Pace of background GC: bytes of value files read per second
    /// (0 = unpaced). The explicit call is never paced. 64 MiB/s by default.
    pub blob_gc_bytes_per_sec: u64,
    /// Bytes of a shared LRU cache of values read from value files, by
    /// (file, offset); 0 (the default) = no cache. Threads scanning the
    /// same keys at once (the contest's range phase) then read each value
    /// from the device once (docs/format-blob.md, section 5).
    pub blob_cache_size: usize,
    /// Scan readahead (needs the value cache): a forward scan keeps this
    /// many entries ahead of itself and queues their value records to be
    /// read into the value cache by `blob_readahead_threads` reader
    /// threads, so the device serves several reads at once where a scan
    /// alone waits for one at a time (docs/format-blob.md, section 5).
    /// 0 = off; 64 by default.
    pub blob_readahead: usize,
    /// Reader threads of scan readahead: the most value reads it keeps in
    /// flight (the device's queue depth). 0 = no readahead; 8 by default.
    pub blob_readahead_threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            fs: PosixFs::arc(),
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 4,
            block_cache_size: 64 << 20,
            bloom_bits_per_key: 10,
            pin_index_and_filter_all_levels: false,
            memtable_filter: true,
            block_size: 16 << 10,
            block_restart_interval: 16,
            extent_size: 2 << 20,
            extents_per_file: 512,
            num_levels: 3,
            l1_target_size: 256 << 20,
            level_size_ratio: 10,
            compression_per_level: vec![
                CompressionType::None,
                CompressionType::None,
                CompressionType::Lz4,
            ],
            l0_slowdown_runs: 8,
            l0_stop_runs: 16,
            concurrent_memtable_insert: false,
            wal_mapped_writes: true,
            lone_writes: true,
            max_compaction_bytes: 64 << 20,
            max_manifest_size: 4 << 20,
            max_key_size: 64 << 10,
            max_value_size: 1 << 20,
            background_threads: true,
            recovery_threads: default_recovery_threads(),
            recovery_memory_limit: 0,
            min_blob_size: 0,
            blob_file_size: 256 << 20,
            blob_direct_io: false,
            blob_direct_reads: false,
            blob_write_format_v1: false,
            blob_stage_ring_size: 0,
            blob_gc_live_ratio: 0.0,
            blob_gc_interval_ms: 10_000,
            blob_gc_bytes_per_sec: 64 << 20,
            blob_cache_size: 0,
            blob_readahead: 64,
            blob_readahead_threads: 8,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("write_buffer_size", &self.write_buffer_size)
            .field("block_cache_size", &self.block_cache_size)
            .field(
                "pin_index_and_filter_all_levels",
                &self.pin_index_and_filter_all_levels,
            )
            .field("memtable_filter", &self.memtable_filter)
            .field("num_levels", &self.num_levels)
            .field("wal_mapped_writes", &self.wal_mapped_writes)
            .field("lone_writes", &self.lone_writes)
            .field("recovery_threads", &self.recovery_threads)
            .field("recovery_memory_limit", &self.recovery_memory_limit)
            .field("min_blob_size", &self.min_blob_size)
            .field("blob_file_size", &self.blob_file_size)
            .field("blob_direct_io", &self.blob_direct_io)
            .field("blob_direct_reads", &self.blob_direct_reads)
            .field("blob_gc_live_ratio", &self.blob_gc_live_ratio)
            .field("blob_gc_interval_ms", &self.blob_gc_interval_ms)
            .field("blob_gc_bytes_per_sec", &self.blob_gc_bytes_per_sec)
            .field("blob_cache_size", &self.blob_cache_size)
            .field("blob_readahead", &self.blob_readahead)
            .field("blob_readahead_threads", &self.blob_readahead_threads)
            .finish_non_exhaustive()
    }
}

/// One replay thread per core, at least 2 and at most 4. The reader thread
/// mostly waits on I/O and the channel, so it does not get a core of its own;
/// beyond 4 threads the reader (decoding, one thread) is the bottleneck.
fn default_recovery_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, std::num::NonZeroUsize::get)
        .clamp(2, 4)
}

fn bad(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidOption {
        name,
        reason: reason.into(),
    }
}

impl Options {
    /// Checks every option; the first bad one is reported by name.
    pub fn validate(&self) -> Result<()> {
        if self.write_buffer_size < 64 << 10 {
            return Err(bad("write_buffer_size", "must be at least 64 KiB"));
        }
        if self.max_write_buffer_number < 2 {
            return Err(bad("max_write_buffer_number", "must be at least 2"));
        }
        if !(1024..=1 << 20).contains(&self.block_size) {
            return Err(bad("block_size", "must be between 1 KiB and 1 MiB"));
        }
        if !(0.0..=1.0).contains(&self.blob_gc_live_ratio) {
            return Err(bad("blob_gc_live_ratio", "must be between 0 and 1"));
        }
        if self.blob_gc_live_ratio > 0.0 && self.blob_gc_interval_ms == 0 {
            return Err(bad("blob_gc_interval_ms", "must be at least 1"));
        }
        if self.min_blob_size > 0 && self.blob_file_size < 64 << 10 {
            return Err(bad("blob_file_size", "must be at least 64 KiB"));
        }
        let ring = self.blob_stage_ring_size;
        if ring != 0 && (ring < 2 << 20 || !ring.is_multiple_of(4096)) {
            return Err(bad(
                "blob_stage_ring_size",
                "must be 0 or a multiple of 4 KiB of at least 2 MiB",
            ));
        }
        if self.block_restart_interval == 0 {
            return Err(bad("block_restart_interval", "must be at least 1"));
        }
        if self.extent_size < 4 * self.block_size || self.extent_size > 256 << 20 {
            return Err(bad(
                "extent_size",
                "must be at least 4 blocks and at most 256 MiB",
            ));
        }
        if self.extents_per_file == 0 {
            return Err(bad("extents_per_file", "must be at least 1"));
        }
        if !(3..=7).contains(&self.num_levels) {
            return Err(bad("num_levels", "must be between 3 and 7"));
        }
        if self.level_size_ratio < 2 {
            return Err(bad("level_size_ratio", "must be at least 2"));
        }
        if self.l0_slowdown_runs == 0 || self.l0_stop_runs <= self.l0_slowdown_runs {
            return Err(bad(
                "l0_stop_runs",
                "must exceed l0_slowdown_runs, which must be >= 1",
            ));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(bad("bloom_bits_per_key", "must be at most 64"));
        }
        if self.recovery_threads > 64 {
            return Err(bad("recovery_threads", "must be at most 64"));
        }
        if self.recovery_memory_limit != 0 && self.recovery_memory_limit < 1 << 20 {
            return Err(bad(
                "recovery_memory_limit",
                "must be 0 (derived from the write buffers) or at least 1 MiB",
            ));
        }
        // An entry must fit an extent with room for index, filter and footer.
        // With key-value separation, a value of `min_blob_size` bytes or more
        // never enters an extent (its entry holds a 28-byte BlobIndex), so
        // only smaller values count.
        let entry_room = self.extent_size / 4 * 3;
        let inline_value = if self.min_blob_size > 0 {
            self.max_value_size.min(self.min_blob_size)
        } else {
            self.max_value_size
        };
        if self.max_key_size == 0 || self.max_key_size + inline_value > entry_room {
            return Err(bad(
                "max_value_size",
                format!("max_key_size + max_value_size (values below min_blob_size, if set) must be positive and at most 3/4 of an extent ({entry_room} bytes)"),
            ));
        }
        if self.min_blob_size > 0
            && (self.max_key_size > u32::MAX as usize - 1
                || self.max_value_size > u32::MAX as usize)
        {
            return Err(bad(
                "max_value_size",
                "value files store key and value lengths in 32 bits".to_string(),
            ));
        }
        Ok(())
    }

    /// The memory limit of WAL replay in force: `recovery_memory_limit`, or
    /// `write_buffer_size * max_write_buffer_number` (saturating) when it is 0.
    pub(crate) fn recovery_memory_budget(&self) -> usize {
        match self.recovery_memory_limit {
            0 => self
                .write_buffer_size
                .saturating_mul(self.max_write_buffer_number),
            n => n,
        }
    }

    /// Compression used for extents written to `level`.
    pub(crate) fn compression_for_level(&self, level: usize) -> CompressionType {
        self.compression_per_level
            .get(level)
            .or(self.compression_per_level.last())
            .copied()
            .unwrap_or(CompressionType::None)
    }

    /// Target bytes of level `level >= 1` (the last level has no target).
    pub(crate) fn level_target(&self, level: usize) -> u64 {
        let mut t = self.l1_target_size;
        for _ in 1..level {
            t = t.saturating_mul(self.level_size_ratio);
        }
        t
    }
}

/// Options of one write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// fsync the WAL before acknowledging (survives power loss).
    pub sync: bool,
    /// Skip the WAL (the write is lost on a crash unless flushed).
    pub disable_wal: bool,
}

/// Options of one read or iterator.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Read at this snapshot instead of the latest state.
    pub snapshot: Option<crate::db::Snapshot>,
    /// Iterators: first user key included.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: first user key excluded.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators: how data blocks read on a cache miss enter the block
    /// cache. `Low` for bulk scans, so they do not flush the cache.
    pub cache_priority: crate::cache::CachePriority,
}
