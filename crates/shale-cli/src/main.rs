//! `shale`: the command-line tool of ShaleDB.
//!
//! ```text
//! shale --db DIR init               # create a database (other commands open existing ones)
//! shale --db DIR put KEY VALUE
//! shale --db DIR get KEY            # prints the value; "not found" on stderr, exit 1
//! shale --db DIR delete KEY
//! shale --db DIR scan [--from K] [--to K] [--limit N]
//! shale --db DIR load [--sync] [--skip-bad-lines] < key<TAB>value lines   # echoes each key once acknowledged
//! shale --db DIR txn                # transactions, snapshots, 2PC: commands on stdin
//! shale --db DIR stats | compact | check | dump FILE
//! shale [--db DIR] serve [--port P] [--redis-port R]  # MySQL (and Redis) protocol server (default DIR: ./shale-data)
//! shale --db DIR sql [-e "SQL"] [--batch]       # SQL on the embedded database
//! shale --db DIR --min-blob-size 4096 load < ...   # large values to value files
//! ```
//! Keys and values are UTF-8 text, or `0x`-prefixed hex. Every command but
//! `init` opens an existing database; `--create` lets it create one.
//! Opening replays the WAL: `--recovery-threads N` (1 = serial; default: the
//! engine's) and `--recovery-memory-mb N` (0 = the write buffers) tune that
//! replay.

/// mimalloc instead of glibc's malloc: the server allocates per statement
/// (plans, rows, packets) from many threads (crates/shale-cli/Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod allocator;
mod codec;
mod load;
mod open;
mod serve;
mod sql_shell;
mod txn_shell;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shaledb::{Options, ReadOptions};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "shale", version, about = "ShaleDB command-line tool")]
struct Cli {
    /// Database directory (required, except by `serve`, which defaults
    /// to ./shale-data).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Create the database if the directory is missing or empty (`init`
    /// always creates; other commands otherwise open an existing one).
    #[arg(long)]
    create: bool,
    /// Block cache size in MiB [default: 64; `serve`: 128, MySQL's default
    /// buffer pool].
    #[arg(long)]
    cache_mb: Option<usize>,
    /// Memtable size in MiB.
    #[arg(long, default_value_t = 64)]
    write_buffer_mb: usize,
    /// Entries between restart points in new data blocks [default: 16;
    /// `serve`: 4, so a point read decodes fewer entries of a block: see
    /// docs/benchmarks.md, "Data-block restart interval"]. Any interval reads back.
    #[arg(long)]
    block_restart_interval: Option<usize>,
    /// Threads replaying the WAL at open (1 = serial; default: the engine's,
    /// the number of cores clamped to 2..=4).
    #[arg(long)]
    recovery_threads: Option<usize>,
    /// Memtable memory WAL replay may use, in MiB (0 = write buffer x 4).
    #[arg(long, default_value_t = 0)]
    recovery_memory_mb: usize,
    /// Key-value separation: values of at least this many bytes go to value
    /// files (0 = off). Existing value files are read either way.
    #[arg(long, default_value_t = 0)]
    min_blob_size: usize,
    /// Write WAL segments with write(2) instead of through a memory map of
    /// preallocated space (the default on Linux; Options::wal_mapped_writes).
    #[arg(long)]
    buffered_wal: bool,
    /// Write value files with O_DIRECT.
    #[arg(long)]
    blob_direct_io: bool,
    /// Read values with O_DIRECT.
    #[arg(long)]
    blob_direct_reads: bool,
    /// Background value-file GC: rewrite files whose live share is below
    /// this ratio (0 = off).
    #[arg(long, default_value_t = 0.0)]
    blob_gc_live_ratio: f64,
    /// Block compression of the last (cold) level: none, lz4 or zstd. Hot
    /// levels are not compressed (docs/architecture.md, "Shape of the tree").
    #[arg(long, default_value = "lz4", value_parser = ["none", "lz4", "zstd"])]
    cold_compression: String,
    /// Pace of background value-file GC, bytes read per second (0 = unpaced).
    #[arg(long, default_value_t = 64 << 20)]
    blob_gc_bytes_per_sec: u64,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a new database in DIR (missing or empty).
    Init,
    /// Write KEY = VALUE.
    Put { key: String, value: String },
    /// Print the value of KEY.
    Get { key: String },
    /// Delete KEY.
    Delete { key: String },
    /// Print tab-separated key and value lines in key order.
    Scan {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// At most this many lines.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Load tab-separated key and value lines from stdin; print each key once its write is acknowledged.
    Load {
        /// fsync before acknowledging (one fsync per group of lines).
        #[arg(long)]
        sync: bool,
        /// Report bad lines on stderr and go on instead of stopping.
        #[arg(long)]
        skip_bad_lines: bool,
    },
    /// Transactions, snapshots and two-phase commit: commands on stdin
    /// (`help` lists them).
    Txn,
    /// Print statistics.
    Stats,
    /// Full compaction.
    Compact,
    /// Verify every checksum.
    Check,
    /// Describe the extents of a data file (e.g. 000012.sdt).
    Dump { file: String },
    /// Serve SQL over the MySQL protocol (creates the database if missing).
    Serve(Box<serve::ServeArgs>),
    /// Run SQL statements (from -e or stdin) on the database, printing
    /// results as the mysql client does.
    Sql {
        /// The statements to run (else read from stdin).
        #[arg(short = 'e', long = "execute")]
        execute: Option<String>,
        /// Tab-separated output without boxes or summaries.
        #[arg(long)]
        batch: bool,
    },
}

/// Where `serve` keeps its data without `--db`.
const SERVE_DEFAULT_DIR: &str = "shale-data";

/// What can stop a command.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Db(#[from] shaledb::Error),
    #[error("{0}")]
    Input(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

fn main() -> ExitCode {
    allocator::configure();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let msg = e.to_string();
            if matches!(&e, CliError::Db(d) if d.is_corruption()) && !msg.contains("corruption") {
                eprintln!("corruption: {msg}");
            } else {
                eprintln!("error: {msg}");
            }
            ExitCode::from(2)
        }
    }
}

fn progress(len: Option<u64>, what: &str) -> ProgressBar {
    let pb = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    if std::io::stderr().is_terminal() {
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} {pos} [{elapsed_precise}] {per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.set_message(what.to_owned());
    } else {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb
}

/// Value files (key-value separation): live bytes and space amplification
/// (these scan every key, so only `stats` prints them, and only when the
/// database has value files).
fn print_blob_stats(db: &shaledb::Db) {
    let p = |n: &str| db.property(n).unwrap_or_default();
    if p("shale.blob-file-count") == "0" {
        return;
    }
    println!(
        "value files live: {} of {} bytes (live ratio {})",
        p("shale.blob-live-bytes"),
        p("shale.blob-bytes"),
        p("shale.blob-live-ratio")
    );
    println!(
        "value files counted dead by compaction: {} bytes (space amplification {})",
        p("shale.blob-dead-bytes"),
        p("shale.blob-space-amp")
    );
    print!(
        "value files (number bytes dead live-ratio):\n{}",
        p("shale.blob-files")
    );
}

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    let serving = matches!(cli.cmd, Cmd::Serve(_));
    let cache_mb = cli.cache_mb.unwrap_or(if serving { 128 } else { 64 });
    let mut opts = Options {
        block_cache_size: cache_mb << 20,
        write_buffer_size: cli.write_buffer_mb << 20,
        block_restart_interval: cli.block_restart_interval.unwrap_or(if serving {
            4
        } else {
            Options::default().block_restart_interval
        }),
        recovery_memory_limit: cli.recovery_memory_mb << 20,
        min_blob_size: cli.min_blob_size,
        blob_direct_io: cli.blob_direct_io,
        wal_mapped_writes: !cli.buffered_wal,
        blob_direct_reads: cli.blob_direct_reads,
        blob_gc_live_ratio: cli.blob_gc_live_ratio,
        blob_gc_bytes_per_sec: cli.blob_gc_bytes_per_sec,
        ..Options::default()
    };
    if let Some(n) = cli.recovery_threads {
        opts.recovery_threads = n;
    }
    if let Some(last) = opts.compression_per_level.last_mut() {
        *last = match cli.cold_compression.as_str() {
            "none" => shaledb::CompressionType::None,
            "zstd" => shaledb::CompressionType::Zstd,
            _ => shaledb::CompressionType::Lz4,
        };
    }
    if let Cmd::Serve(args) = &cli.cmd {
        if args.redis_port.is_some() {
            // Redis values may be up to 512 MB: the engine must accept them
            // (large ones go to value files unless --min-blob-size says otherwise).
            let redis = shale_redis::engine_options();
            opts.max_value_size = opts.max_value_size.max(redis.max_value_size);
            if opts.min_blob_size == 0 {
                opts.min_blob_size = redis.min_blob_size;
            }
        }
    }
    let mode = match (&cli.cmd, cli.create) {
        (Cmd::Init, _) => open::Mode::New,
        (Cmd::Serve(_), _) | (_, true) => open::Mode::CreateIfMissing,
        (_, false) => open::Mode::Existing,
    };
    let dir = match (cli.db, &cli.cmd) {
        (Some(d), _) => d,
        (None, Cmd::Serve(_)) => PathBuf::from(SERVE_DEFAULT_DIR),
        (None, _) => {
            return Err(CliError::Input(
                "the database directory is required: --db DIR".into(),
            ))
        }
    };
    let db = open::open(&dir, opts, mode)?;
    let code = match cli.cmd {
        Cmd::Init => {
            println!("created a database in {}", dir.display());
            ExitCode::SUCCESS
        }
        Cmd::Put { key, value } => {
            db.put(&codec::decode(&key)?, &codec::decode(&value)?)?;
            ExitCode::SUCCESS
        }
        Cmd::Get { key } => match db.get(&codec::decode(&key)?)? {
            Some(v) => {
                println!("{}", codec::encode(&v));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("not found");
                ExitCode::from(1)
            }
        },
        Cmd::Delete { key } => {
            db.delete(&codec::decode(&key)?)?;
            ExitCode::SUCCESS
        }
        Cmd::Scan { from, to, limit } => {
            let ro = ReadOptions {
                lower_bound: from.as_deref().map(codec::decode).transpose()?,
                upper_bound: to.as_deref().map(codec::decode).transpose()?,
                ..Default::default()
            };
            let mut it = db.iter(&ro)?;
            it.seek_to_first()?;
            let out = std::io::stdout();
            let mut out = std::io::BufWriter::new(out.lock());
            let mut n = 0u64;
            while it.valid() && limit.is_none_or(|l| n < l) {
                writeln!(
                    out,
                    "{}\t{}",
                    codec::encode(it.key()),
                    codec::encode(it.value())
                )?;
                n += 1;
                it.next()?;
            }
            out.flush()?;
            ExitCode::SUCCESS
        }
        Cmd::Load {
            sync,
            skip_bad_lines,
        } => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let summary = load::load(
                &db,
                sync,
                skip_bad_lines,
                std::io::stdin(),
                &mut out,
                &mut std::io::stderr(),
            )?;
            if summary.skipped > 0 {
                eprintln!("{} lines skipped", summary.skipped);
            }
            ExitCode::SUCCESS
        }
        Cmd::Sql { execute, batch } => {
            // run closes the database after the SQL layer lets it go.
            let ok = sql_shell::run(db, execute, batch)?;
            return Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        Cmd::Txn => {
            let stdin = std::io::stdin();
            let prompt = stdin.is_terminal();
            let stdout = std::io::stdout();
            txn_shell::run(&db, &mut stdin.lock(), &mut stdout.lock(), prompt)?;
            ExitCode::SUCCESS
        }
        Cmd::Stats => {
            print!("{}", db.property("shale.stats").unwrap_or_default());
            print_blob_stats(&db);
            ExitCode::SUCCESS
        }
        Cmd::Compact => {
            let pb = progress(None, "compacting");
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            db.compact_range(None, None)?;
            pb.finish_and_clear();
            print!("{}", db.property("shale.stats").unwrap_or_default());
            ExitCode::SUCCESS
        }
        Cmd::Check => {
            let pb = progress(None, "verifying");
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            let r = db.verify_checksums();
            pb.finish_and_clear();
            match r {
                Ok(n) => {
                    println!("ok: {n} extents verified");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    println!("corruption: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Dump { file } => {
            print!("{}", db.describe_data_file(&file)?);
            ExitCode::SUCCESS
        }
        Cmd::Serve(args) => {
            // serve closes the database itself, after the last session.
            serve::serve(db, &dir, *args)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    db.close()?;
    Ok(code)
}
