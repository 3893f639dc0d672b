//! Damaged files give `Error::Corruption` naming the file and offset (or, for a
//! torn WAL tail, the valid prefix) — never wrong data, never a panic.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::{Db, Error, Options};
use std::path::{Path, PathBuf};

fn opts() -> Options {
    Options {
        write_buffer_size: 4 << 20,
        extent_size: 256 << 10,
        block_size: 4096,
        max_value_size: 64 << 10,
        ..Options::default()
    }
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, offset: u64) {
    let mut data = std::fs::read(path).unwrap();
    data[offset as usize] ^= 0x5a;
    std::fs::write(path, data).unwrap();
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

fn fill(dir: &Path, n: u32, flush: bool) {
    let db = Db::open(dir, opts()).unwrap();
    for i in 0..n {
        db.put(format!("key{i:06}").as_bytes(), &value(i)).unwrap();
    }
    if flush {
        db.flush().unwrap();
    }
    db.close().unwrap();
}

#[test]
fn flipped_extent_bytes_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 20_000, true);
    let data_file = files_with_suffix(dir.path(), ".sdt").remove(0);
    for offset in [100u64, 5000, 20_000, 70_000] {
        flip(&data_file, offset);
        let db = Db::open(dir.path(), opts()).unwrap();
        match db.verify_checksums() {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, data_file),
            other => panic!("expected corruption at {offset}, got {other:?}"),
        }
        for i in (0..20_000).step_by(7) {
            match db.get(format!("key{i:06}").as_bytes()) {
                Ok(Some(v)) => assert_eq!(v, value(i)),
                Ok(None) => panic!("key {i} vanished silently"),
                Err(e) => assert!(e.is_corruption(), "{e}"),
            }
        }
        db.close().unwrap();
        flip(&data_file, offset); // repair
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    assert!(db.verify_checksums().unwrap() > 0);
}

#[test]
fn wal_damage_before_valid_records_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 5000, false);
    let wal = files_with_suffix(dir.path(), ".log").pop().unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    assert!(len > 100_000, "the WAL should hold the unflushed writes");
    flip(&wal, len / 3);
    match Db::open(dir.path(), opts()) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(_) => panic!("damaged WAL opened silently"),
    }
}

#[test]
fn torn_wal_tail_keeps_the_valid_prefix() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 5000, false);
    let wal = files_with_suffix(dir.path(), ".log").pop().unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 37).unwrap();
    drop(f);
    let db = Db::open(dir.path(), opts()).unwrap();
    let mut present = 0;
    for i in 0..5000u32 {
        if let Some(v) = db.get(format!("key{i:06}").as_bytes()).unwrap() {
            assert_eq!(v, value(i));
            assert_eq!(present, i, "not a prefix");
            present += 1;
        }
    }
    assert!((4990..5000).contains(&present), "present = {present}");
}

#[test]
fn damaged_manifest_or_current_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 3000, true);
    let manifest = files_with_suffix(dir.path(), "")
        .into_iter()
        .find(|p| p.to_string_lossy().contains("MANIFEST-"))
        .unwrap();
    let len = std::fs::metadata(&manifest).unwrap().len();
    flip(&manifest, len / 2);
    assert!(Db::open(dir.path(), opts())
        .err()
        .is_some_and(|e| e.is_corruption()));
    flip(&manifest, len / 2);
    std::fs::write(dir.path().join("CURRENT"), b"garbage\n").unwrap();
    assert!(Db::open(dir.path(), opts())
        .err()
        .is_some_and(|e| e.is_corruption()));
}

/// Masked CRC32C, as block trailers store it (docs/format-extent.md).
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// End of the stored block that starts at `start` (contents ++ type u8 ++
/// masked crc u32): the first position whose trailer checksum matches.
fn block_end(data: &[u8], start: usize) -> usize {
    let mut crc = 0;
    for n in start..data.len() - 5 {
        let with_type = crc32c::crc32c_append(crc, &data[n..=n]);
        let stored = u32::from_le_bytes(data[n + 1..n + 5].try_into().unwrap());
        if mask(with_type) == stored {
            return n + 5;
        }
        crc = with_type;
    }
    panic!("no block trailer after {start}");
}

/// Gives the first entry of the second data block of the extent in slot 0 an
/// invalid value kind and then fixes the block's checksum: damage that only
/// the key decoding can find (a checksum collision, or a writer bug).
/// Returns the block's offset in the file.
fn corrupt_key_kind_with_valid_checksum(path: &Path) -> u64 {
    let mut data = std::fs::read(path).unwrap();
    let start = block_end(&data, 0);
    let end = block_end(&data, start);
    // First entry of a block: shared 0, unshared 17 ("key000000" + 8-byte
    // trailer), a one-byte value length, then the key; the trailer's low
    // byte (the kind, Put = 1) follows the 9-byte user key.
    let kind_at = start + 3 + 9;
    assert_eq!(&data[start..start + 2], &[0, 17], "unexpected block layout");
    assert_eq!(data[kind_at], 1, "expected a Put");
    data[kind_at] = 0x7f;
    let crc = mask(crc32c::crc32c(&data[start..end - 4]));
    data[end - 4..end].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, data).unwrap();
    start as u64
}

#[test]
fn bad_keys_found_by_iterators_and_compaction_name_file_and_block() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 20_000, true);
    let data_file = files_with_suffix(dir.path(), ".sdt").remove(0);
    let block = corrupt_key_kind_with_valid_checksum(&data_file);
    assert!(block > 0);
    let named = |e: &Error| {
        let text = e.to_string();
        assert!(e.is_corruption(), "{text}");
        assert!(
            text.contains(&format!("{} at offset {block}:", data_file.display())),
            "error does not name {} at {block}: {text}",
            data_file.display()
        );
    };

    // A forward scan reaches the damaged entry.
    let db = Db::open(dir.path(), opts()).unwrap();
    let mut it = db.iter(&Default::default()).unwrap();
    let mut scan = it.seek_to_first();
    while scan.is_ok() && it.valid() {
        scan = it.next();
    }
    match scan {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (data_file.clone(), block));
        }
        other => panic!("scan over a bad key ended with {other:?}"),
    }
    drop(it);

    // A flush merges new versions into the L1 extent holding it.
    for i in (0..2000).step_by(10) {
        db.put(format!("key{i:06}").as_bytes(), b"new").unwrap();
    }
    match db.flush() {
        Err(e) => named(&e),
        Ok(()) => panic!("a merge over a bad key succeeded"),
    }
}
