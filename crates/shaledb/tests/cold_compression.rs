//! The last level is compressed as configured even when compaction could
//! move hot (uncompressed) extents down by reference.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use shaledb::env::mem::MemFs;
use shaledb::env::FileSystem;
use shaledb::{CompressionType, Db, Options};
use std::path::Path;

#[test]
fn extents_moved_into_a_compressed_last_level_are_compressed() {
    let fs = MemFs::new();
    let opts = Options {
        fs: fs.arc(),
        write_buffer_size: 256 << 10,
        extent_size: 64 << 10,
        block_size: 1024,
        max_key_size: 1024,
        max_value_size: 16 << 10,
        l1_target_size: 256 << 10,
        max_compaction_bytes: 256 << 10,
        extents_per_file: 64,
        background_threads: false,
        compression_per_level: vec![
            CompressionType::None,
            CompressionType::None,
            CompressionType::Zstd,
        ],
        ..Options::default()
    };
    let dir = Path::new("/db");
    let db = Db::open(dir, opts).unwrap();
    // Sequential keys: every flush and compaction could move extents whole.
    let value = "0123456789".repeat(20);
    for i in 0..20_000u32 {
        db.put(format!("k{i:08}").as_bytes(), value.as_bytes())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    let mut l2 = 0;
    for name in fs.list_dir(dir).unwrap() {
        if !name.ends_with(".sdt") {
            continue;
        }
        let text = db.describe_data_file(&name).unwrap();
        // One header line per extent ("extent ID cf=NAME LN ..."), then its
        // properties, "compression:" among them.
        let mut in_l2 = false;
        for line in text.lines() {
            if line.starts_with("extent ") && line.contains(" cf=") {
                in_l2 = line.contains(" L2 ");
                l2 += usize::from(in_l2);
            } else if in_l2 && line.trim_start().starts_with("compression:") {
                assert!(line.ends_with("zstd"), "{line}");
            }
        }
    }
    assert!(l2 > 3, "{l2} extents in L2");
    for i in (0..20_000u32).step_by(997) {
        assert_eq!(
            db.get(format!("k{i:08}").as_bytes()).unwrap().unwrap(),
            value.as_bytes()
        );
    }
}
