//! Options shared by the engine's integration tests.

use shaledb::env::mem::MemFs;
use shaledb::Options;

/// A small database on an in-memory file system: 64 KiB memtables and
/// extents, 1 KiB blocks, 4 extents per data file, no background threads
/// (flushes and compactions run when a test calls them), so a few thousand
/// keys span several levels and files.
pub fn small_mem_opts(fs: &MemFs) -> Options {
    Options {
        fs: fs.arc(),
        write_buffer_size: 64 << 10,
        block_cache_size: 256 << 10,
        extent_size: 64 << 10,
        block_size: 1024,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        l1_target_size: 256 << 10,
        max_compaction_bytes: 256 << 10,
        extents_per_file: 4,
        background_threads: false,
        ..Options::default()
    }
}
