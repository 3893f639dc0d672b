//! A fixed range of a file mapped shared for positioned stores (Linux):
//! the staged value file's ring (`blob/staged.rs`, docs/format-blob.md
//! section 6.1) is rewritten in place through it.
//!
//! Why: the ring's buffered `pwrite` of each value was ~14 % of a contest
//! put's CPU (ext4's buffered-write path: `mark_buffer_dirty`, the copy,
//! the page-cache lookup, the inode lock; docs/benchmarks.md, "The ring
//! written through a shared mapping"). After the first lap every ring page
//! is in the page cache and mapped, so a store is a `memcpy`.
//!
//! Crash behaviour is that of `pwrite`: a store lands in the file's page
//! cache page itself, so it survives `kill -9` of the process at once, and
//! reaches the device only by writeback or `fsync` (the ring is never
//! fsynced; its crash argument does not need it).
//!
//! The range is allocated with `fallocate` before it is mapped (as in
//! `mapped.rs`): a store never needs a block the file system cannot give,
//! so a full disk is an error at `map`, not `SIGBUS` at a store. The file is
//! never truncated below the range while the mapping lives (the stage file
//! is truncated only before it is mapped, and removed after).
//!
//! Worked example: a ring of 64 MiB behind a 4 KiB header is
//! `map(path, 4096, 64 MiB)`; a value for ring offset 10 MiB is
//! `write_at(4096 + 10 MiB, value)`, a copy to byte 10 MiB of the mapping.

use super::mapped::{allocate_if_supported, map_shared};
use crate::error::{Error, Result};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// `[base, base + len)` of a file, mapped shared for writing.
pub struct MappedRegion {
    ptr: NonNull<u8>,
    base: u64,
    len: usize,
    path: PathBuf,
}

// SAFETY: the mapping is plain memory owned by this value (unmapped only in
// `Drop`); moving it to another thread is as safe as moving a `Vec<u8>`.
unsafe impl Send for MappedRegion {}
// SAFETY: `&MappedRegion` only allows `write_at`, which copies through a raw
// pointer into the mapping without creating references to it; callers store
// to disjoint ranges (the ring's leader is the only writer, under the blob
// store's `active` lock), and concurrent readers of the file read the page
// cache through the kernel, outside Rust's memory model, as with `pwrite`.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Allocates and maps `[base, base + len)` of the existing file `path`.
    /// `None` where the file system cannot preallocate, or `base` is not a
    /// multiple of the page size: the caller then writes with `pwrite`.
    pub fn map(path: &Path, base: u64, len: u64) -> Result<Option<MappedRegion>> {
        // SAFETY: sysconf has no memory arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let aligned = u64::try_from(page).is_ok_and(|p| p > 0 && base.is_multiple_of(p));
        let (Ok(n), Ok(off)) = (usize::try_from(len), libc::off_t::try_from(base)) else {
            return Ok(None);
        };
        if !aligned || n == 0 {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        if !allocate_if_supported(&file, path, base, len)? {
            return Ok(None);
        }
        // A page-aligned offset (checked above), a range `fallocate` just
        // allocated inside the file.
        let ptr = map_shared(&file, path, off, n)?;
        Ok(Some(MappedRegion {
            ptr,
            base,
            len: n,
            path: path.to_owned(),
        }))
    }

    /// Copies `data` to file offset `offset`, which with `data` must lie in
    /// the mapped range (else `Error::InvalidArgument`, nothing copied).
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let at = offset
            .checked_sub(self.base)
            .and_then(|a| usize::try_from(a).ok())
            .filter(|a| a.checked_add(data.len()).is_some_and(|end| end <= self.len))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "store of {} bytes at {offset} outside the mapped range of {}",
                    data.len(),
                    self.path.display()
                ))
            })?;
        // SAFETY: `at + data.len() <= self.len` (checked above), so the
        // destination lies in the live mapping of `self.len` bytes at
        // `self.ptr`; `data` is a Rust slice and cannot overlap a mapping
        // this value owns exclusively (see the `Sync` comment).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(at), data.len());
        }
        Ok(())
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr` is the start of a live mapping of `len` bytes made by
        // `map`, unmapped only here; no pointer into it is kept elsewhere.
        // Unmapping keeps the dirty pages in the page cache.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn stores_reach_the_file_and_outlive_the_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ring");
        std::fs::write(&p, vec![7u8; 4096]).unwrap();
        let r = MappedRegion::map(&p, 4096, 1 << 20).unwrap().unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 4096 + (1 << 20));
        r.write_at(4096, b"first").unwrap();
        r.write_at(4096 + (1 << 20) - 4, b"last").unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let mut b = [0u8; 5];
        f.read_exact_at(&mut b, 4096).unwrap();
        assert_eq!(&b, b"first", "a store is visible to pread at once");
        drop(r);
        let mut e = [0u8; 4];
        f.read_exact_at(&mut e, 4096 + (1 << 20) - 4).unwrap();
        assert_eq!(&e, b"last");
        f.read_exact_at(&mut e, 0).unwrap();
        assert_eq!(e, [7; 4], "bytes before the range are untouched");
    }

    #[test]
    fn stores_outside_the_range_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ring");
        std::fs::write(&p, []).unwrap();
        let r = MappedRegion::map(&p, 4096, 8192).unwrap().unwrap();
        for (at, len) in [
            (0u64, 1usize),
            (4095, 1),
            (4096 + 8192, 1),
            (4096 + 8191, 2),
            (u64::MAX, 1),
        ] {
            let err = r.write_at(at, &vec![1u8; len]).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{at}: {err}");
        }
        r.write_at(4096 + 8191, &[1]).unwrap();
        r.write_at(4096, &[]).unwrap();
    }

    #[test]
    fn an_unaligned_base_is_not_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ring");
        std::fs::write(&p, []).unwrap();
        assert!(MappedRegion::map(&p, 100, 8192).unwrap().is_none());
        assert!(MappedRegion::map(&p, 4096, 0).unwrap().is_none());
    }
}
