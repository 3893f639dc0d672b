//! Fixtures shared by the key-value separation tests (blob.rs,
//! blob_cache.rs, blob_gc_counted.rs, blob_readahead.rs).

use shaledb::env::mem::MemFs;
use shaledb::{Db, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Value files on an in-memory file system: values of 100 bytes or more
/// separated, 64 KiB value files, 128 KiB memtables, no background threads.
pub fn small_blob_opts(fs: &Arc<MemFs>) -> Options {
    Options {
        fs: fs.clone(),
        min_blob_size: 100,
        blob_file_size: 64 << 10,
        write_buffer_size: 128 << 10,
        background_threads: false,
        ..Options::default()
    }
}

/// The path of the (first listed) value file in `dir`, on the real file
/// system.
// Each test binary compiles this module; only the damage tests use this.
#[allow(dead_code)]
pub fn blob_file_in(dir: &Path) -> PathBuf {
    let name = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".blob"))
        .unwrap();
    dir.join(name)
}

/// A value of 1,000-3,999 bytes (over the tests' `min_blob_size`) that
/// names its key number and generation.
pub fn big(i: u64, gen: u64) -> Vec<u8> {
    let mut v = format!("big-{i}-{gen}-").into_bytes();
    v.resize(1000 + (i as usize * 37) % 3000, b'a' + (gen % 26) as u8);
    v
}

/// Key number `i`; keys sort by number.
pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A numeric property.
pub fn prop(db: &Db, name: &str) -> u64 {
    db.property(name).unwrap().parse().unwrap()
}
