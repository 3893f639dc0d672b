//! `rocksdb-txn-bench`: the shale-bench harness (db_bench flags, `txnmix` and the other
//! workloads, the same report lines) against RocksDB's transactional databases, as the peer of
//! ShaleDB's transaction benchmark.
//!
//! ```text
//! rocksdb-txn-bench --mode=pessimistic --benchmarks=txnmix --isolation=si --threads=16 \
//!                   --num=100000 --txn_ops=4 --duration=10
//! ```
//!
//! `--mode=pessimistic` (default) opens a `TransactionDB`, `--mode=optimistic` an
//! `OptimisticTransactionDB` (the two are also `--engine=rocksdb-pessimistic` /
//! `--engine=rocksdb-optimistic`). See [`txn`] for how `--isolation` maps to them.
//!
//! A separate cargo workspace linked against the system's librocksdb (Debian bookworm:
//! RocksDB 7.8.3, the version of its `db_bench`) through the `rocksdb` crate 0.20.1:
//! `ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release`.
//!
//! Options from the flags, as for the other peers: `--write_buffer_size`, `--cache_size` (an
//! LRU block cache), `--bloom_bits` (full filters, none if not positive), `--compression_type`
//! (one codec for every level; snappy maps to LZ4 as in shale-bench), `--sync` /
//! `--disable_wal` on every write and commit. Everything else is RocksDB's default.

mod engine;
mod txn;

use engine::{Mode, RocksFactory};
use std::process::ExitCode;

/// Replaces `--mode=X` (or `--mode X`) by `--engine=rocksdb-X`; other arguments pass through.
fn translate(args: Vec<String>) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let body = a.trim_start_matches('-');
        let value = if body == "mode" {
            Some(it.next().ok_or("flag 'mode' is missing its argument")?)
        } else {
            body.strip_prefix("mode=").map(str::to_string)
        };
        match value {
            Some(v) if Mode::parse(&v).is_some() => out.push(format!("--engine=rocksdb-{v}")),
            Some(v) => {
                return Err(format!(
                    "illegal value '{v}' for flag 'mode' (pessimistic, optimistic)"
                ))
            }
            None => out.push(a),
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args = match translate(std::env::args().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ERROR: {e}");
            return ExitCode::FAILURE;
        }
    };
    shale_bench::cli_main_args(
        &args,
        &[
            &RocksFactory(Mode::Pessimistic),
            &RocksFactory(Mode::Optimistic),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn mode_becomes_engine() {
        assert_eq!(
            translate(v(&["prog", "--mode=optimistic", "--num=5"])).unwrap(),
            v(&["prog", "--engine=rocksdb-optimistic", "--num=5"])
        );
        assert_eq!(
            translate(v(&["prog", "-mode", "pessimistic"])).unwrap(),
            v(&["prog", "--engine=rocksdb-pessimistic"])
        );
        assert!(translate(v(&["prog", "--mode=lazy"])).is_err());
        assert!(translate(v(&["prog", "--mode"])).is_err());
    }
}
