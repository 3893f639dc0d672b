// Tests: an out-of-range slice is a test failure, which is what we want.
#![allow(clippy::indexing_slicing)]

use super::*;
use crate::env::{read_to_vec, write_file_atomic};
use proptest::prelude::*;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn setup() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(&p("/db")).expect("mkdir");
    fs
}

fn write_synced(fs: &MemFs, path: &str, data: &[u8]) {
    let mut f = fs.create(&p(path)).expect("create");
    f.append(data).expect("append");
    f.sync().expect("sync");
}

fn read(fs: &MemFs, path: &str) -> Vec<u8> {
    read_to_vec(fs, &p(path)).expect("read")
}

fn io_kind(e: &Error) -> Option<ErrorKind> {
    match e {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

#[test]
fn unsynced_appends_are_lost_synced_kept() {
    let fs = setup();
    let mut f = fs.create(&p("/db/wal")).expect("create");
    f.append(b"abc").expect("append");
    f.sync().expect("sync");
    fs.sync_dir(&p("/db")).expect("sync dir");
    f.append(b"def").expect("append");
    f.flush().expect("flush");
    assert_eq!(read(&fs, "/db/wal"), b"abcdef");
    fs.crash();
    assert_eq!(read(&fs, "/db/wal"), b"abc");
    assert_eq!(fs.file_size(&p("/db/wal")).expect("size"), 3);
}

#[test]
fn never_synced_file_is_empty_after_crash() {
    let fs = setup();
    let mut f = fs.create(&p("/db/a")).expect("create");
    f.append(b"data").expect("append");
    f.flush().expect("flush");
    fs.sync_dir(&p("/db")).expect("sync dir");
    fs.crash();
    assert_eq!(read(&fs, "/db/a"), b"");
}

#[test]
fn file_created_without_dir_sync_disappears() {
    let fs = setup();
    write_synced(&fs, "/db/new", b"x");
    assert!(fs.exists(&p("/db/new")));
    fs.crash();
    assert!(!fs.exists(&p("/db/new")));
    assert_eq!(fs.list_dir(&p("/db")).expect("ls"), Vec::<String>::new());
}

#[test]
fn rename_without_dir_sync_is_reverted() {
    let fs = setup();
    write_synced(&fs, "/db/CURRENT", b"old");
    fs.sync_dir(&p("/db")).expect("sync dir");
    write_synced(&fs, "/db/CURRENT.tmp", b"new");
    fs.rename(&p("/db/CURRENT.tmp"), &p("/db/CURRENT"))
        .expect("rename");
    assert_eq!(read(&fs, "/db/CURRENT"), b"new");
    fs.crash();
    assert_eq!(read(&fs, "/db/CURRENT"), b"old");
    assert!(!fs.exists(&p("/db/CURRENT.tmp")));
}

#[test]
fn rename_with_dir_sync_is_kept() {
    let fs = setup();
    write_file_atomic(&fs, &p("/db"), "CURRENT", b"one").expect("write");
    write_file_atomic(&fs, &p("/db"), "CURRENT", b"two").expect("write");
    fs.crash();
    assert_eq!(read(&fs, "/db/CURRENT"), b"two");
    assert_eq!(fs.list_dir(&p("/db")).expect("ls"), vec!["CURRENT"]);
}

#[test]
fn rename_of_unsynced_file_keeps_name_but_not_bytes() {
    let fs = setup();
    let mut f = fs.create(&p("/db/t")).expect("create");
    f.append(b"zz").expect("append");
    f.flush().expect("flush");
    fs.rename(&p("/db/t"), &p("/db/u")).expect("rename");
    fs.sync_dir(&p("/db")).expect("sync dir");
    fs.crash();
    assert_eq!(read(&fs, "/db/u"), b"");
}

#[test]
fn remove_without_dir_sync_is_reverted() {
    let fs = setup();
    write_synced(&fs, "/db/f", b"keep");
    fs.sync_dir(&p("/db")).expect("sync dir");
    fs.remove_file(&p("/db/f")).expect("rm");
    assert!(!fs.exists(&p("/db/f")));
    fs.crash();
    assert_eq!(read(&fs, "/db/f"), b"keep");
    fs.remove_file(&p("/db/f")).expect("rm");
    fs.sync_dir(&p("/db")).expect("sync dir");
    fs.crash();
    assert!(!fs.exists(&p("/db/f")));
}

#[test]
fn cross_directory_rename_needs_both_dir_syncs() {
    let fs = setup();
    fs.create_dir_all(&p("/db/archive")).expect("mkdir");
    write_synced(&fs, "/db/f", b"1");
    fs.sync_dir(&p("/db")).expect("sync dir");
    fs.rename(&p("/db/f"), &p("/db/archive/f")).expect("rename");
    fs.sync_dir(&p("/db/archive")).expect("sync dir");
    fs.crash();
    // Only the target directory was synced: both names survive, same file.
    assert_eq!(read(&fs, "/db/f"), b"1");
    assert_eq!(read(&fs, "/db/archive/f"), b"1");
}

#[test]
fn appends_are_invisible_until_flushed_and_lost_on_drop() {
    let fs = setup();
    let mut f = fs.create(&p("/db/w")).expect("create");
    f.append(b"12").expect("append");
    assert_eq!(f.len(), 2);
    assert_eq!(read(&fs, "/db/w"), b"");
    f.flush().expect("flush");
    assert_eq!(read(&fs, "/db/w"), b"12");
    f.append(b"34").expect("append");
    drop(f);
    assert_eq!(read(&fs, "/db/w"), b"12");
    let mut g = fs.open_append(&p("/db/w")).expect("reopen");
    assert_eq!(g.len(), 2);
    g.append(b"5").expect("append");
    g.flush().expect("flush");
    assert_eq!(read(&fs, "/db/w"), b"125");
}

#[test]
fn process_crash_keeps_flushed_bytes_and_unsynced_names() {
    let fs = setup();
    let mut f = fs.create(&p("/db/log")).expect("create");
    f.append(b"flushed").expect("append");
    f.flush().expect("flush");
    f.append(b"buffered").expect("append");
    fs.crash_process();
    assert_eq!(read(&fs, "/db/log"), b"flushed");
    assert!(f.flush().is_err(), "handle from before the crash is stale");
    // A power loss afterwards still drops the unsynced bytes and name.
    fs.crash();
    assert!(!fs.exists(&p("/db/log")));
}

#[test]
fn handles_from_before_a_crash_are_stale() {
    let fs = setup();
    write_synced(&fs, "/db/x", b"abc");
    fs.sync_dir(&p("/db")).expect("sync dir");
    let r = fs.open_random(&p("/db/x")).expect("open");
    let e = fs.open_extent_file(&p("/db/x")).expect("open");
    let mut w = fs.open_append(&p("/db/x")).expect("open");
    let mut s = fs.open_sequential(&p("/db/x")).expect("open");
    fs.crash();
    let mut b = [0u8; 1];
    assert!(r.read_exact_at(0, &mut b).is_err());
    assert!(e.write_all_at(0, b"z").is_err());
    assert!(e.sync().is_err());
    assert!(w.append(b"q").is_err());
    assert!(w.sync().is_err());
    assert!(s.read(&mut b).is_err());
    assert_eq!(read(&fs, "/db/x"), b"abc", "stale handles changed nothing");
    let fresh = fs.open_random(&p("/db/x")).expect("open");
    fresh.read_exact_at(2, &mut b).expect("read");
    assert_eq!(&b, b"c");
}

#[test]
fn stale_handle_to_dropped_file_fails_too() {
    let fs = setup();
    let mut w = fs.create(&p("/db/gone")).expect("create");
    fs.crash();
    assert!(w.append(b"x").is_err());
}

#[test]
fn extent_file_writes_at_offsets_and_syncs() {
    let fs = setup();
    let ef = fs.open_extent_file(&p("/db/data")).expect("open");
    fs.sync_dir(&p("/db")).expect("sync dir");
    ef.write_all_at(4, b"xyz").expect("pwrite");
    assert_eq!(ef.len().expect("len"), 7);
    let mut b = [9u8; 7];
    ef.read_exact_at(0, &mut b).expect("pread");
    assert_eq!(&b, b"\0\0\0\0xyz");
    let err = ef.read_exact_at(5, &mut b).expect_err("past end");
    assert_eq!(io_kind(&err), Some(ErrorKind::UnexpectedEof));
    ef.sync().expect("sync");
    ef.write_all_at(0, b"A").expect("pwrite");
    drop(ef);
    fs.crash();
    assert_eq!(read(&fs, "/db/data"), b"\0\0\0\0xyz");
    // Reopening does not truncate.
    let ef = fs.open_extent_file(&p("/db/data")).expect("open");
    assert_eq!(ef.len().expect("len"), 7);
}

#[test]
fn missing_files_are_not_found() {
    let fs = setup();
    for err in [
        fs.open_sequential(&p("/db/none")).err(),
        fs.open_random(&p("/db/none")).err(),
        fs.open_append(&p("/db/none")).err(),
        fs.file_size(&p("/db/none")).err(),
        fs.remove_file(&p("/db/none")).err(),
        fs.rename(&p("/db/none"), &p("/db/x")).err(),
        fs.create(&p("/nodir/x")).err(),
        fs.list_dir(&p("/nodir")).err(),
        fs.sync_dir(&p("/nodir")).err(),
    ] {
        let err = err.expect("must fail");
        assert_eq!(io_kind(&err), Some(ErrorKind::NotFound), "{err}");
    }
}

#[test]
fn directories_list_files_and_subdirs() {
    let fs = MemFs::new();
    fs.create_dir_all(&p("/a/b/c")).expect("mkdir");
    fs.create_dir_all(&p("/a/b/c"))
        .expect("mkdir is idempotent");
    write_synced(&fs, "/a/b/f1", b"");
    write_synced(&fs, "/a/b/./f0", b"");
    assert_eq!(fs.list_dir(&p("/a/b")).expect("ls"), vec!["c", "f0", "f1"]);
    assert!(fs.exists(&p("/a/b/c")));
    assert!(fs.exists(&p("/a/b/f0")));
    assert!(
        fs.create(&p("/a/b/c")).is_err(),
        "a directory is not a file"
    );
    assert!(fs.create_dir_all(&p("/a/b/f1/x")).is_err());
    // Relative paths live under ".".
    fs.create_dir_all(&p("rel")).expect("mkdir");
    write_synced(&fs, "rel/x", b"1");
    assert_eq!(read(&fs, "./rel/x"), b"1");
    // Directories survive a crash (durable at creation).
    fs.crash();
    assert!(fs.exists(&p("/a/b/c")));
    assert_eq!(fs.list_dir(&p("/a/b")).expect("ls"), vec!["c"]);
}

#[test]
fn create_truncates_existing_file_durably_only_after_sync() {
    let fs = setup();
    write_synced(&fs, "/db/f", b"old");
    fs.sync_dir(&p("/db")).expect("sync dir");
    let mut f = fs.create(&p("/db/f")).expect("create");
    assert_eq!(read(&fs, "/db/f"), b"");
    f.append(b"n").expect("append");
    f.flush().expect("flush");
    fs.crash();
    assert_eq!(read(&fs, "/db/f"), b"old");
}

#[test]
fn truncate_is_durable() {
    let fs = setup();
    write_synced(&fs, "/db/w", b"0123456789");
    fs.sync_dir(&p("/db")).expect("sync dir");
    fs.truncate(&p("/db/w"), 4).expect("truncate");
    fs.crash();
    assert_eq!(read(&fs, "/db/w"), b"0123");
}

#[test]
fn lock_is_exclusive_until_dropped_or_crash() {
    let fs = setup();
    let l = fs.lock(&p("/db/LOCK")).expect("lock");
    assert!(matches!(fs.lock(&p("/db/LOCK")), Err(Error::Locked(_))));
    assert!(matches!(fs.lock(&p("/db/./LOCK")), Err(Error::Locked(_))));
    assert!(fs.exists(&p("/db/LOCK")));
    let other = fs.lock(&p("/db/LOCK2")).expect("other file");
    drop(l);
    let l2 = fs.lock(&p("/db/LOCK")).expect("relock");
    fs.crash();
    // The process died: its locks are gone.
    let l3 = fs.lock(&p("/db/LOCK")).expect("lock after crash");
    // Dropping a guard from before the crash does not release the new lock.
    drop(l2);
    drop(other);
    assert!(matches!(fs.lock(&p("/db/LOCK")), Err(Error::Locked(_))));
    drop(l3);
    fs.lock(&p("/db/LOCK")).expect("free again");
}

#[test]
fn torn_tail_crash_keeps_a_prefix_of_unsynced_appends() {
    let mut lengths = HashSet::new();
    for seed in 0..40 {
        let fs = setup();
        let mut f = fs.create(&p("/db/wal")).expect("create");
        f.append(b"synced-").expect("append");
        f.sync().expect("sync");
        fs.sync_dir(&p("/db")).expect("sync dir");
        f.append(b"0123456789").expect("append");
        f.flush().expect("flush");
        fs.crash_keep_unsynced_prefix(seed);
        let got = read(&fs, "/db/wal");
        assert!(b"synced-0123456789".starts_with(&got));
        assert!(got.len() >= 7);
        lengths.insert(got.len());
        // The surviving bytes are now durable.
        fs.crash();
        assert_eq!(read(&fs, "/db/wal"), got);
    }
    assert!(lengths.len() > 3, "tails vary with the seed: {lengths:?}");
}

#[test]
fn open_unlinked_file_stays_readable() {
    let fs = setup();
    write_synced(&fs, "/db/f", b"abc");
    let r = fs.open_random(&p("/db/f")).expect("open");
    fs.remove_file(&p("/db/f")).expect("rm");
    let mut b = [0u8; 3];
    r.read_exact_at(0, &mut b).expect("read");
    assert_eq!(&b, b"abc");
}

#[test]
fn clones_share_files_and_trait_object_works() {
    let fs = setup();
    let dynfs: Arc<dyn FileSystem> = fs.arc();
    write_file_atomic(dynfs.as_ref(), &p("/db"), "OPTIONS", b"o").expect("write");
    assert_eq!(read(&fs.clone(), "/db/OPTIONS"), b"o");
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<u8>),
    Flush,
    Sync,
}

proptest! {
    /// After power loss a file holds exactly the bytes appended before its
    /// last sync; after a process crash, exactly the bytes before its last
    /// flush or sync.
    #[test]
    fn crash_keeps_exactly_the_synced_prefix(
        ops in proptest::collection::vec(prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..5).prop_map(Op::Append),
            Just(Op::Flush),
            Just(Op::Sync),
        ], 0..30),
        power_loss in any::<bool>(),
    ) {
        let fs = setup();
        let mut f = fs.create(&p("/db/f")).expect("create");
        fs.sync_dir(&p("/db")).expect("sync dir");
        let (mut all, mut flushed, mut synced) = (Vec::new(), 0, 0);
        for op in ops {
            match op {
                Op::Append(d) => {
                    f.append(&d).expect("append");
                    all.extend_from_slice(&d);
                }
                Op::Flush => {
                    f.flush().expect("flush");
                    flushed = all.len();
                }
                Op::Sync => {
                    f.sync().expect("sync");
                    flushed = all.len();
                    synced = all.len();
                }
            }
            prop_assert_eq!(read(&fs, "/db/f"), &all[..flushed]);
        }
        if power_loss {
            fs.crash();
            prop_assert_eq!(read(&fs, "/db/f"), &all[..synced]);
        } else {
            fs.crash_process();
            prop_assert_eq!(read(&fs, "/db/f"), &all[..flushed]);
        }
    }
}

#[test]
fn sync_handle_covers_only_bytes_flushed_before_it_began() {
    let fs = setup();
    let f = fs.create(&p("/db/wal")).expect("create");
    fs.sync_dir(&p("/db")).expect("sync dir");
    let h = f.sync_handle().expect("handle").expect("MemFs has one");
    let f = std::sync::Arc::new(parking_lot::Mutex::new(f));
    {
        let mut f = f.lock();
        f.append(b"abc").expect("append");
        f.flush().expect("flush");
    }
    fs.set_sync_latency(std::time::Duration::from_millis(300));
    // Flushed while the sync below is in flight (or after it): not covered.
    let late = {
        let f = std::sync::Arc::clone(&f);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let mut f = f.lock();
            f.append(b"de").expect("append");
            f.flush().expect("flush");
        })
    };
    h.sync_data().expect("sync");
    late.join().expect("join");
    // Unflushed bytes are never covered.
    f.lock().append(b"f").expect("append");
    drop(f);
    fs.crash();
    assert_eq!(read(&fs, "/db/wal"), b"abc");
}

#[test]
fn sync_handle_is_stale_after_a_crash() {
    let fs = setup();
    let f = fs.create(&p("/db/wal")).expect("create");
    let h = f.sync_handle().expect("handle").expect("MemFs has one");
    fs.crash();
    assert!(h.sync_data().is_err());
}
