//! `shale load`: `key<TAB>value` lines from stdin, each key echoed on
//! stdout once its write is acknowledged (after fsync with `--sync`).
//!
//! Prompt and fast at once: the lines that have already arrived (complete
//! lines in the input buffer, up to [`MAX_GROUP_LINES`]) are written as one
//! batch, then their keys are printed; stdout is flushed whenever the next
//! read would wait for input. So a client that sends one line and waits
//! gets its acknowledgement at once, and a bulk load pays one write (and
//! one fsync with `--sync`) per buffer of lines, not per line.
//!
//! A bad line (no TAB, bad hex) stops the load with its line number after
//! the good lines before it are written and acknowledged; with
//! `--skip-bad-lines` it is reported on stderr and the load goes on.

use crate::{codec, progress, CliError};
use shaledb::{Db, WriteBatch, WriteOptions};
use std::io::{BufRead, BufReader, Read, Write};

/// Most lines written as one batch.
pub const MAX_GROUP_LINES: usize = 4096;
/// Most bytes of keys and values in one batch.
const MAX_GROUP_BYTES: usize = 4 << 20;

/// What a load did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadSummary {
    pub written: u64,
    pub skipped: u64,
}

/// Loads from `input`, acknowledging on `out`; bad lines go to `errors`.
pub fn load(
    db: &Db,
    sync: bool,
    skip_bad_lines: bool,
    input: impl Read,
    out: &mut impl Write,
    errors: &mut impl Write,
) -> Result<LoadSummary, CliError> {
    let wo = WriteOptions {
        sync,
        disable_wal: false,
    };
    let mut input = BufReader::with_capacity(256 << 10, input);
    let pb = progress(None, "loading");
    let mut summary = LoadSummary::default();
    let mut lineno = 0u64;
    let mut line = String::new();
    let mut batch = WriteBatch::new();
    let mut keys: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut failure: Option<CliError> = None;
    loop {
        // Gather: wait for a line only while nothing is pending; after
        // that take only lines already complete in the buffer.
        let mut eof = false;
        while failure.is_none() && keys.len() < MAX_GROUP_LINES && bytes < MAX_GROUP_BYTES {
            if !keys.is_empty() && !input.buffer().contains(&b'\n') {
                break;
            }
            line.clear();
            if input.read_line(&mut line)? == 0 {
                eof = true;
                break;
            }
            lineno += 1;
            match parse(&line, lineno) {
                Ok(None) => {}
                Ok(Some((k, key, value))) => {
                    bytes += key.len() + value.len();
                    batch.put(&key, &value);
                    keys.push(k.to_owned());
                }
                Err(e) if skip_bad_lines => {
                    writeln!(errors, "skipped {e}")?;
                    summary.skipped += 1;
                }
                Err(e) => failure = Some(e),
            }
        }
        // Write, then acknowledge: a key is printed only after its write
        // returned.
        if !keys.is_empty() {
            db.write(&wo, std::mem::take(&mut batch))?;
            summary.written += keys.len() as u64; // usize -> u64: lossless
            for k in keys.drain(..) {
                writeln!(out, "{k}")?;
            }
            bytes = 0;
            pb.set_position(summary.written);
        }
        // The next read may wait for input: let the reader see every
        // acknowledgement first.
        if eof || failure.is_some() || !input.buffer().contains(&b'\n') {
            out.flush()?;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if eof {
            break;
        }
    }
    pb.finish_and_clear();
    Ok(summary)
}

/// A parsed line: the key as typed (echoed back), the key and the value.
type Entry<'a> = (&'a str, Vec<u8>, Vec<u8>);

/// One input line: `None` for an empty line.
fn parse(line: &str, lineno: u64) -> Result<Option<Entry<'_>>, CliError> {
    let text = line.trim_end_matches(['\n', '\r']);
    if text.is_empty() {
        return Ok(None);
    }
    let at = |e: CliError| CliError::Input(format!("line {lineno}: {e}"));
    let (k, v) = text
        .split_once('\t')
        .ok_or_else(|| CliError::Input(format!("line {lineno}: expected key<TAB>value")))?;
    let key = codec::decode(k).map_err(at)?;
    if key.is_empty() {
        return Err(CliError::Input(format!("line {lineno}: empty key")));
    }
    let value = codec::decode(v).map_err(at)?;
    Ok(Some((k, key, value)))
}
