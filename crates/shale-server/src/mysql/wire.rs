//! The MySQL protocol's basic data types (docs/mysql-protocol.md, "Basic
//! types"): fixed-width little-endian integers, length-encoded integers and
//! strings, NUL-terminated strings.
//!
//! [`Reader`] decodes a packet payload without ever panicking: every read is
//! bounds-checked and a short payload is [`ProtocolError::Malformed`] naming
//! what was being read. The `put_*` helpers ([`put_lenenc_int`],
//! [`put_lenenc_bytes`], [`put_nul_bytes`]) append to a `Vec<u8>`.
//!
//! Worked example: the length-encoded integer 300 is `fc 2c 01` (0xfc, then
//! two little-endian bytes), and the length-encoded string "ab" is `02 61 62`.

use super::ProtocolError;

/// A bounds-checked cursor over one packet payload.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        // let-else, not `ok_or`: every field of every packet is read here,
        // and `ok_or` built (and dropped) an error value each time.
        let Some(out) = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
        else {
            return Err(ProtocolError::Malformed(what));
        };
        self.pos += out.len();
        Ok(out)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = self.buf.get(self.pos..).unwrap_or_default();
        self.pos = self.buf.len();
        out
    }

    /// One byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, ProtocolError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// A little-endian 3-byte integer.
    pub fn u24(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        let [a, b, c] = self.array(what)?;
        Ok(u32::from_le_bytes([a, b, c, 0]))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ProtocolError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ProtocolError> {
        let b = self.bytes(N, what)?;
        <[u8; N]>::try_from(b).map_err(|_| ProtocolError::Malformed(what))
    }

    /// A length-encoded integer; `None` for the NULL marker `0xfb` (only
    /// meaningful in text result rows).
    pub fn lenenc_int_or_null(&mut self, what: &'static str) -> Result<Option<u64>, ProtocolError> {
        Ok(match self.u8(what)? {
            n @ 0..=0xfa => Some(u64::from(n)),
            0xfb => None,
            0xfc => Some(u64::from(self.u16(what)?)),
            0xfd => Some(u64::from(self.u24(what)?)),
            0xfe => Some(self.u64(what)?),
            0xff => return Err(ProtocolError::Malformed(what)),
        })
    }

    /// A length-encoded integer (NULL is malformed here).
    pub fn lenenc_int(&mut self, what: &'static str) -> Result<u64, ProtocolError> {
        self.lenenc_int_or_null(what)?
            .ok_or(ProtocolError::Malformed(what))
    }

    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let n = self.lenenc_int(what)?;
        let n = usize::try_from(n).map_err(|_| ProtocolError::Malformed(what))?;
        self.bytes(n, what)
    }

    /// A NUL-terminated string (the NUL is consumed, not returned).
    pub fn nul_bytes(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(ProtocolError::Malformed(what))?;
        let out = self.bytes(n, what)?;
        self.pos += 1;
        Ok(out)
    }
}

/// Appends a length-encoded integer.
pub fn put_lenenc_int(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xfa => out.push(n as u8), // fits: checked by the arm
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes()); // fits: arm
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&n.to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc_int(out, b.len() as u64); // usize -> u64 never truncates
    out.extend_from_slice(b);
}

/// Appends a NUL-terminated string. `b` must not contain NUL (callers pass
/// fixed protocol strings and names checked on the way in).
pub fn put_nul_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
    out.push(0);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn lenenc_ints_round_trip_at_every_width_boundary() {
        for n in [
            0u64,
            1,
            250,
            251,
            0xffff,
            0x1_0000,
            0xff_ffff,
            0x100_0000,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_lenenc_int(&mut b, n);
            let mut r = Reader::new(&b);
            assert_eq!(r.lenenc_int("n").unwrap(), n);
            assert!(r.is_empty(), "{n}: {b:?}");
        }
        let mut b = Vec::new();
        put_lenenc_int(&mut b, 300);
        assert_eq!(b, [0xfc, 0x2c, 0x01]);
    }

    #[test]
    fn short_or_bad_input_is_malformed_never_a_panic() {
        for bad in [
            &[0xfcu8][..],
            &[0xfd, 1, 2],
            &[0xfe, 1],
            &[0xff],
            &[5, b'a'],
        ] {
            let mut r = Reader::new(bad);
            assert!(r.lenenc_bytes("s").is_err(), "{bad:?}");
        }
        let mut r = Reader::new(b"abc");
        assert!(matches!(
            r.nul_bytes("name"),
            Err(ProtocolError::Malformed("name"))
        ));
        let mut r = Reader::new(b"ab\0c");
        assert_eq!(r.nul_bytes("name").unwrap(), b"ab");
        assert_eq!(r.rest(), b"c");
        let mut r = Reader::new(&[1, 2]);
        assert!(r.u32("x").is_err());
        assert!(r.bytes(usize::MAX, "huge").is_err());
    }

    #[test]
    fn null_marker_only_where_allowed() {
        let mut r = Reader::new(&[0xfb]);
        assert_eq!(r.lenenc_int_or_null("v").unwrap(), None);
        let mut r = Reader::new(&[0xfb]);
        assert!(r.lenenc_int("v").is_err());
    }
}
