//! Fixtures shared by the key-value separation tests (blob.rs,
//! blob_cache.rs, blob_gc_counted.rs, blob_readahead.rs).

use shaledb::Db;

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
