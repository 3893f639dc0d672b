//! Keys given a TTL before the expiry index existed (a metadata record
//! with expire_at but no `E` entry) are indexed when the store opens, so
//! the active expiry cycle deletes them; the migration runs once.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use shale_redis::store::{
    expiry_key, meta_key, now_ms, Meta, Store, Type, CF_NAME, EXPIRY_INDEXED_KEY,
};
use std::time::{Duration, Instant};

#[test]
fn old_ttls_are_indexed_at_open_and_then_expire() {
    let dir = tempfile::tempdir().unwrap();
    let past = now_ms() - 1000;
    let future = now_ms() + 3_600_000;
    {
        // An old data set: metadata records only, no index, no marker.
        let db = shaledb::Db::open(dir.path(), shale_redis::engine_options()).unwrap();
        let cf = db.create_cf(CF_NAME).unwrap();
        for (db_no, key, at) in [
            (0u8, &b"gone"[..], past),
            (3, b"later", future),
            (0, b"plain", 0),
        ] {
            let mut m = Meta::new(Type::String, 1);
            m.expire_at = at;
            m.value = b"v".to_vec();
            m.size = 1;
            db.put_cf(cf, &meta_key(db_no, key), &m.encode()).unwrap();
        }
        db.close().unwrap();
    }
    let db = shaledb::Db::open(dir.path(), shale_redis::engine_options()).unwrap();
    let st = Store::open(db.clone()).unwrap();
    let cf = st.cf();
    let has = |k: &[u8]| db.get_cf(cf, k).unwrap().is_some();
    assert!(has(&expiry_key(0, past, b"gone")));
    assert!(has(&expiry_key(3, future, b"later")));
    assert!(has(EXPIRY_INDEXED_KEY));
    // The active expiry cycle now finds and deletes the expired key.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| shale_redis::expire::run(&st, &stop));
        let deadline = Instant::now() + Duration::from_secs(10);
        while has(&meta_key(0, b"gone")) {
            assert!(
                Instant::now() < deadline,
                "the old expired key was never deleted"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    assert!(has(&meta_key(3, b"later")) && has(&meta_key(0, b"plain")));
    // Once migrated, an open does not walk again: an unindexed key written
    // now stays unindexed (only older data sets lack entries).
    let mut m = Meta::new(Type::String, 2);
    m.expire_at = future;
    db.put_cf(cf, &meta_key(0, b"new"), &m.encode()).unwrap();
    drop(st);
    let st = Store::open(db.clone()).unwrap();
    assert!(!has(&expiry_key(0, future, b"new")));
    drop(st);
    db.close().unwrap();
}
