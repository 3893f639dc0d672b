//! Opening the database named by `--db`: an existing one only, unless the
//! command is `init` or `--create` was given, so a typo in the path is an
//! error instead of a new, empty database that answers "not found".

use crate::CliError;
use shaledb::{Db, Options};
use std::path::Path;

/// The file every ShaleDB directory has (it names the current manifest).
const MARKER: &str = "CURRENT";

/// How to treat a missing database.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Open an existing database; anything else is an error.
    Existing,
    /// Open it, or create it if the directory is missing or empty.
    CreateIfMissing,
    /// Create it; an existing database is an error (`shale init`).
    New,
}

/// Opens `dir` under `mode`, with errors that say what the path is.
pub fn open(dir: &Path, mut opts: Options, mode: Mode) -> Result<Db, CliError> {
    let shown = dir.display();
    let is_db = dir.join(MARKER).is_file();
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::Input(format!(
            "{shown} is a file, not a database directory"
        )));
    }
    match mode {
        Mode::Existing if !dir.exists() => {
            return Err(CliError::Input(match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() && !p.exists() => {
                    format!("no such directory: {} (parent of {shown})", p.display())
                }
                _ => format!("no database at {shown}; create one with `shale --db {shown} init`"),
            }))
        }
        Mode::Existing if !is_db => {
            return Err(CliError::Input(format!(
                "{shown} is not a ShaleDB database (it has no {MARKER} file); \
                 create one with `shale --db {shown} init` in an empty directory"
            )))
        }
        Mode::CreateIfMissing | Mode::New if !is_db && !is_empty_or_missing(dir)? => {
            return Err(CliError::Input(format!(
                "{shown} is not empty and not a ShaleDB database; refusing to create one there"
            )))
        }
        Mode::New if is_db => {
            return Err(CliError::Input(format!(
                "a database already exists at {shown}"
            )))
        }
        _ => {}
    }
    if mode != Mode::Existing {
        if let Some(p) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !p.exists() {
                return Err(CliError::Input(format!(
                    "no such directory: {} (parent of {shown})",
                    p.display()
                )));
            }
        }
    }
    opts.create_if_missing = mode != Mode::Existing;
    opts.error_if_exists = mode == Mode::New;
    Ok(Db::open(dir, opts)?)
}

fn is_empty_or_missing(dir: &Path) -> Result<bool, CliError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e.into()),
    }
}
