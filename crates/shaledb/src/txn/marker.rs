//! Two-phase-commit markers: the first op of a WAL record that prepares,
//! commits or rolls back a prepared transaction (docs/format-wal.md, 2.3).
//!
//! ```text
//! prepare  = 0x10 | xid len varint | xid
//! commit   = 0x11 | xid len varint | xid | prepare_seq u64
//! rollback = 0x12 | xid len varint | xid | prepare_seq u64
//! ```
//!
//! A marker sits between the batch header and the first data op and is not
//! counted in the header's op count. The record's data ops are the
//! transaction's writes in a prepare or a commit record; a rollback record
//! has none. Worked example: T prepares as XID `x1` and is given sequence
//! 40; its prepare record is `header(seq 40, count 2) | 10 02 'x' '1' | put a
//! | put b` and its data is *not* applied. `Db::commit_prepared(b"x1")` later
//! logs `header(seq 57, count 2) | 11 02 'x' '1' 28 00.. | put a | put b`,
//! and `a`, `b` become visible at sequences 57 and 58.
//!
//! Keying on (XID, prepare sequence): a commit names the prepare it resolves
//! by both, so a stale commit of an earlier use of the same XID can never
//! resolve a later prepare (seed 002's XID-reuse hazard).

use crate::util::coding::{put_length_prefixed, Reader};

/// Kind byte of a prepare marker.
pub const KIND_PREPARE: u8 = 0x10;
/// Kind byte of a commit marker.
pub const KIND_COMMIT: u8 = 0x11;
/// Kind byte of a rollback marker.
pub const KIND_ROLLBACK: u8 = 0x12;

/// Longest XID accepted (MySQL's XA XID is at most 64 + 64 bytes plus a
/// format id; this leaves room to encode all three).
pub const MAX_XID_LEN: usize = 255;

/// A decoded two-phase-commit marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnMarker {
    /// The record's ops are a prepared transaction's writes; not applied.
    Prepare {
        /// The external transaction id.
        xid: Vec<u8>,
    },
    /// The record's ops are the writes of the prepared transaction
    /// (`xid`, `prepare_seq`), applied at the record's sequences.
    Commit {
        /// The external transaction id.
        xid: Vec<u8>,
        /// Sequence of the prepare record this commit resolves.
        prepare_seq: u64,
    },
    /// The prepared transaction (`xid`, `prepare_seq`) is discarded.
    Rollback {
        /// The external transaction id.
        xid: Vec<u8>,
        /// Sequence of the prepare record this rollback resolves.
        prepare_seq: u64,
    },
}

impl TxnMarker {
    /// The XID the marker names.
    pub fn xid(&self) -> &[u8] {
        match self {
            TxnMarker::Prepare { xid }
            | TxnMarker::Commit { xid, .. }
            | TxnMarker::Rollback { xid, .. } => xid,
        }
    }

    /// Appends the encoding to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TxnMarker::Prepare { xid } => {
                out.push(KIND_PREPARE);
                put_length_prefixed(out, xid);
            }
            TxnMarker::Commit { xid, prepare_seq } => {
                out.push(KIND_COMMIT);
                put_length_prefixed(out, xid);
                out.extend_from_slice(&prepare_seq.to_le_bytes());
            }
            TxnMarker::Rollback { xid, prepare_seq } => {
                out.push(KIND_ROLLBACK);
                put_length_prefixed(out, xid);
                out.extend_from_slice(&prepare_seq.to_le_bytes());
            }
        }
    }

    /// True if `kind` is a marker's kind byte.
    pub(crate) fn is_marker_kind(kind: u8) -> bool {
        (KIND_PREPARE..=KIND_ROLLBACK).contains(&kind)
    }

    /// Decodes a marker from the front of `r`; `None` if it is truncated,
    /// not a marker, or names an XID longer than [`MAX_XID_LEN`].
    pub(crate) fn decode(r: &mut Reader<'_>) -> Option<TxnMarker> {
        let kind = r.u8()?;
        let xid = r.length_prefixed()?;
        if xid.len() > MAX_XID_LEN {
            return None;
        }
        let xid = xid.to_vec();
        match kind {
            KIND_PREPARE => Some(TxnMarker::Prepare { xid }),
            KIND_COMMIT => Some(TxnMarker::Commit {
                xid,
                prepare_seq: r.u64()?,
            }),
            KIND_ROLLBACK => Some(TxnMarker::Rollback {
                xid,
                prepare_seq: r.u64()?,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_reject_damage() {
        let all = [
            TxnMarker::Prepare {
                xid: b"x1".to_vec(),
            },
            TxnMarker::Commit {
                xid: b"x1".to_vec(),
                prepare_seq: 40,
            },
            TxnMarker::Rollback {
                xid: vec![7; MAX_XID_LEN],
                prepare_seq: u64::MAX,
            },
        ];
        for m in all {
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert!(TxnMarker::is_marker_kind(buf[0]));
            let mut r = Reader::new(&buf);
            assert_eq!(TxnMarker::decode(&mut r), Some(m.clone()));
            assert!(r.is_empty());
            for cut in 0..buf.len() {
                assert_eq!(TxnMarker::decode(&mut Reader::new(&buf[..cut])), None);
            }
        }
        assert_eq!(
            TxnMarker::Prepare {
                xid: b"ab".to_vec()
            }
            .xid(),
            b"ab".as_slice()
        );
        // Unknown kind, and an XID over the limit.
        assert_eq!(TxnMarker::decode(&mut Reader::new(&[0x13, 0])), None);
        let mut long = Vec::new();
        TxnMarker::Prepare {
            xid: vec![1; MAX_XID_LEN + 1],
        }
        .encode(&mut long);
        assert_eq!(TxnMarker::decode(&mut Reader::new(&long)), None);
        assert!(!TxnMarker::is_marker_kind(0x13));
        assert!(!TxnMarker::is_marker_kind(1));
    }
}
