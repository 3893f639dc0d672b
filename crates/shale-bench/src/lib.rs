//! `shale-bench`: a db_bench-compatible benchmark harness.
//!
//! It runs RocksDB `db_bench`'s workloads (same flag names and defaults, same key and value
//! generation, same random sequences per `--seed`, same report lines) against any engine that
//! implements [`KvEngine`], so that ShaleDB, RocksDB's own `db_bench` and peers such as fjall
//! can be compared line by line:
//!
//! ```text
//! $ shale-bench --engine=memory --benchmarks=fillrandom,readrandom --num=1000 --seed=42
//! ...
//! fillrandom   :       1.283 micros/op 779423 ops/sec 0.001 seconds 1000 operations;   89.2 MB/s
//! DB path: [/tmp/shalebenchtest-root/dbbench]
//! readrandom   :       0.311 micros/op 3215434 ops/sec 0.000 seconds 1000 operations;  ... (664 of 1000 found)
//! ```
//!
//! (`db_bench --num=1000 --seed=42 --benchmarks=fillrandom,readrandom` reports the same
//! `(664 of 1000 found)`.)
//!
//! Layout: [`flags`] parses the command line, [`runner`] sequences benchmarks and threads,
//! `workloads` holds the per-thread bodies, [`stats`] and [`histogram`] format the output,
//! [`keys`] and [`random`] reproduce db_bench's data, [`engine`] is the backend interface with
//! the [`memory`] and [`logfile`] backends for self-tests (and `shale`, behind the `shale`
//! feature, on by default). [`contest`] and `recover` are this harness's own benchmarks
//! (not db_bench's): crash checks with a SIGKILLed writer child, the PolarDB contest phases,
//! and WAL replay speed; [`device`] relates their MB/s to the disk's fio figures. [`txn`] is
//! `txnmix`, contended read-modify-write transactions checked for lost updates, for engines
//! that implement [`txn::TxnEngine`].
//! A binary is `fn main() -> ExitCode { shale_bench::cli_main(&[&MyFactory]) }`.

pub mod contest;
pub mod device;
pub mod engine;
pub mod error;
pub mod flags;
pub mod histogram;
pub mod keys;
pub mod logfile;
pub mod memory;
pub mod random;
mod recover;
pub mod runner;
#[cfg(feature = "shale")]
pub mod shale;
#[cfg(feature = "shale")]
mod shale_txn;
pub mod stats;
pub mod txn;
mod workloads;

#[cfg(test)]
mod selftest;

pub use engine::{
    BatchOp, Compression, CursorStart, EngineFactory, EngineOptions, KvCursor, KvEngine, WalFiles,
    WriteOpts,
};
pub use error::{EngineError, Error, Result, UnsupportedFlag};
pub use flags::{Command, Flags};
pub use runner::{run, BenchResult};
pub use stats::Summary;

use std::process::ExitCode;

/// Picks the backend named by `--engine` (default: the first of `factories`).
pub fn select_engine<'a>(
    flags: &Flags,
    factories: &[&'a dyn EngineFactory],
) -> Result<&'a dyn EngineFactory> {
    match &flags.engine {
        None => factories
            .first()
            .copied()
            .ok_or_else(|| Error::UnknownEngine(String::new())),
        Some(name) => factories
            .iter()
            .copied()
            .find(|f| f.name() == name)
            .ok_or_else(|| Error::UnknownEngine(name.clone())),
    }
}

/// The whole command-line program: parse `std::env::args`, run, print errors db_bench-style.
pub fn cli_main(factories: &[&dyn EngineFactory]) -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    cli_main_args(&args, factories)
}

/// [`cli_main`] with the arguments given (program name first), for binaries that rewrite
/// their own flags first (rocksdb-txn-bench's `--mode`).
pub fn cli_main_args(args: &[String], factories: &[&dyn EngineFactory]) -> ExitCode {
    let program = args.first().map_or("shale-bench", String::as_str);
    let names: Vec<&str> = factories.iter().map(|f| f.name()).collect();
    let flags = match Flags::parse(args.iter().skip(1)) {
        Ok(Command::Help) => {
            print!("{}", flags::help_text(program, &names));
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(f)) => *f,
        Err(e) => {
            eprintln!("ERROR: {e}");
            return ExitCode::FAILURE;
        }
    };
    let factory = match select_engine(&flags, factories) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ERROR: {e} (available: {})", names.join(", "));
            return ExitCode::FAILURE;
        }
    };
    if flags.crash_child >= 0 {
        // Started by `contest` / `recover` in the parent process: write, report, be killed.
        return contest::child::child_main(&flags, factory);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run(&flags, factory, &mut out) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ERROR: {e}");
            ExitCode::FAILURE
        }
    }
}
