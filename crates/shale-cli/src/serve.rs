//! `shale serve`: the MySQL-protocol server on a data directory.
//!
//! Start-up: open (or create) the database, open the account store and, on
//! a new data directory, create `'root'@'localhost'` with the password from
//! `--root-password` / `SHALE_ROOT_PASSWORD` or a generated one printed
//! once; load or generate the TLS certificate; bind 127.0.0.1 on the port
//! asked for (by default 3306, or the next free one up to 3326); print how
//! to connect. SIGTERM or SIGINT shuts down: stop accepting, disconnect
//! clients (their open transactions roll back), flush the memtables,
//! close the database. kill -9 loses nothing committed (the WAL).

use crate::CliError;
use shale_server::accounts::AccountStore;
use shale_server::mysql::conn::ConnConfig;
use shale_server::server::{Server, ServerConfig, ThreadHandling};
use shale_server::sql_backend::SqlBackend;
use shaledb::Db;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first port tried when none is given, and how many after it.
const DEFAULT_PORT: u16 = 3306;
const PORTS_TRIED: u16 = 21;

/// `shale serve` options.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on. The default, 127.0.0.1, accepts local
    /// clients only.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port (default: 3306, or the next free one up to 3326).
    #[arg(long)]
    port: Option<u16>,
    /// The root password of a new data directory (else
    /// $SHALE_ROOT_PASSWORD, else generated and printed once). Ignored
    /// once accounts exist.
    #[arg(long, env = "SHALE_ROOT_PASSWORD", hide_env_values = true)]
    root_password: Option<String>,
    /// Write the generated root password to this file (mode 0600) as well.
    #[arg(long)]
    root_password_file: Option<PathBuf>,
    /// Refuse clients that do not use TLS (error 3159).
    #[arg(long)]
    require_secure_transport: bool,
    /// PEM certificate chain for TLS (default: a self-signed one generated
    /// in the data directory).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Connections served at once; more get error 1040.
    #[arg(long, default_value_t = 151)]
    max_connections: usize,
    /// one-thread-per-connection (default: each connection on its own
    /// thread, the fastest on few cores) or pool-of-threads (event-driven
    /// I/O threads hand commands to executor threads: an idle connection
    /// costs ~10 KiB instead of a thread), as MariaDB's thread_handling.
    #[arg(long, value_enum, default_value_t = ThreadHandlingArg::OneThreadPerConnection)]
    thread_handling: ThreadHandlingArg,
    /// pool-of-threads: threads doing network I/O (default: one per core,
    /// at most 4).
    #[arg(long)]
    io_threads: Option<usize>,
    /// Most threads running statements at once (default: --max-connections;
    /// fewer can make lock holders queue behind lock waiters).
    #[arg(long)]
    executor_threads: Option<usize>,
    /// Largest packet accepted from a client, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_allowed_packet: usize,
    /// fsync every commit (power-loss safe); without it a commit reaches
    /// the OS (kill -9 safe), as innodb_flush_log_at_trx_commit=2.
    #[arg(long)]
    sync_commits: bool,
    /// Keep per-stage latency histograms (SHOW STATUS LIKE 'Stage_%').
    #[arg(long)]
    perf_hist: bool,
    /// Append statements that run at least --long-query-time seconds to
    /// this file, in MySQL's slow-query log format (SET GLOBAL
    /// slow_query_log = OFF|ON and SET GLOBAL long_query_time change it
    /// while running).
    #[arg(long, value_name = "FILE")]
    slow_query_log: Option<PathBuf>,
    /// The slow-query log's threshold in seconds (fractions allowed; 0 logs
    /// every statement).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    long_query_time: f64,
    /// Also serve the Redis protocol on this port (0: any free port), on
    /// the same address and database (its own `redis` column family).
    #[arg(long)]
    pub redis_port: Option<u16>,
    /// The Redis endpoint's password (`AUTH`); default: --root-password.
    /// It never runs without one.
    #[arg(long, env = "SHALE_REDIS_PASSWORD", hide_env_values = true)]
    redis_password: Option<String>,
    /// The Redis endpoint's appendfsync: `always` (fsync before each
    /// reply, via group commit), `everysec` or `no` (CONFIG SET changes it).
    #[arg(long, default_value = "everysec", value_parser = ["always", "everysec", "no"])]
    redis_appendfsync: String,
    /// The Redis endpoint's event-loop threads (default: one per two cores,
    /// at least 1, at most 8); 0 serves each Redis connection on a thread
    /// of its own.
    #[arg(long, requires = "redis_port")]
    redis_io_threads: Option<usize>,
    /// Also serve the Redis protocol over TLS on this port (Redis's
    /// tls-port), relayed to --redis-port.
    #[arg(long, requires = "redis_port")]
    redis_tls_port: Option<u16>,
    /// The Redis TLS port's certificate chain and key (PEM); default: the
    /// MySQL endpoint's (--tls-cert/--tls-key, or the data directory's
    /// generated pair).
    #[arg(long, value_name = "FILE")]
    redis_tls_cert: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    redis_tls_key: Option<PathBuf>,
    /// Require Redis TLS clients to present a certificate signed by this CA.
    #[arg(long, value_name = "FILE")]
    redis_tls_ca: Option<PathBuf>,
}

/// Runs the server until SIGTERM/SIGINT, then closes `db`.
pub fn serve(db: Db, dir: &Path, args: ServeArgs) -> Result<(), CliError> {
    let accounts = AccountStore::open(&db).map_err(|e| CliError::Input(e.to_string()))?;
    let generated = args.root_password.is_none();
    if let Some(pw) = accounts
        .bootstrap_root(args.root_password.as_deref())
        .map_err(|e| CliError::Input(e.to_string()))?
    {
        if generated {
            eprintln!("created 'root'@'localhost' with the generated password: {pw}");
            eprintln!(
                "(printed once; change it with ALTER USER root@localhost IDENTIFIED BY '...')"
            );
            if let Some(path) = &args.root_password_file {
                write_secret(path, &pw)?;
            }
        } else {
            eprintln!("created 'root'@'localhost' with the given password");
        }
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => shale_server::tls::from_pem_files(c, k),
        _ => shale_server::tls::load_or_create(dir),
    }
    .map_err(|e| CliError::Input(format!("TLS: {e}")))?;
    let backend = Arc::new(
        SqlBackend::open(db.clone(), accounts, args.sync_commits)
            .map_err(|e| CliError::Input(e.to_string()))?,
    );
    let cfg = ServerConfig {
        conn: ConnConfig {
            max_allowed_packet: args.max_allowed_packet,
            tls: Some(tls),
            require_tls: args.require_secure_transport,
            ..ConnConfig::default()
        },
        max_connections: args.max_connections,
        io_threads: args
            .io_threads
            .unwrap_or_else(shale_server::server::default_io_threads),
        executor_threads: args.executor_threads,
        thread_handling: match args.thread_handling {
            ThreadHandlingArg::OneThreadPerConnection => ThreadHandling::OneThreadPerConnection,
            ThreadHandlingArg::PoolOfThreads => ThreadHandling::PoolOfThreads,
        },
    };
    let server = bind(args.bind, args.port, backend, cfg)?;
    if args.perf_hist {
        server
            .shared()
            .stats
            .perf_hist
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let slow_log = &server.shared().slow_log;
    slow_log
        .set_long_query_time(args.long_query_time)
        .map_err(|e| CliError::Input(format!("--long-query-time: {}", e.message)))?;
    if let Some(path) = &args.slow_query_log {
        let header = format!(
            "shale serve, Version: {}",
            ConnConfig::default().server_version
        );
        slow_log
            .open(path, &header)
            .map_err(|e| CliError::Input(format!("--slow-query-log {}: {e}", path.display())))?;
    }
    let addr = server.local_addr()?;
    let stop = server.shutdown_handle()?;
    // The Redis endpoint, if asked for: same address, its own thread,
    // stopped with the MySQL server.
    let redis_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let redis = match args.redis_port {
        None => None,
        Some(port) => {
            let password = args.redis_password.clone().or_else(|| args.root_password.clone()).ok_or_else(|| {
                CliError::Input("--redis-port needs a password: --redis-password (or SHALE_REDIS_PASSWORD, or --root-password)".into())
            })?;
            let listener =
                std::net::TcpListener::bind(SocketAddr::new(args.bind, port)).map_err(|e| {
                    CliError::Input(format!("cannot listen on {}:{port}: {e}", args.bind))
                })?;
            let raddr = listener.local_addr()?;
            let mysql_stop = stop.clone();
            let (db, stop) = (db.clone(), redis_stop.clone());
            let tls = match args.redis_tls_port {
                None => None,
                Some(tport) => {
                    let cert = args
                        .redis_tls_cert
                        .clone()
                        .or_else(|| args.tls_cert.clone());
                    let key = args.redis_tls_key.clone().or_else(|| args.tls_key.clone());
                    let cert = cert.unwrap_or_else(|| dir.join(shale_server::tls::CERT_FILE));
                    let key = key.unwrap_or_else(|| dir.join(shale_server::tls::KEY_FILE));
                    let config =
                        shale_redis::tls::server_config(&cert, &key, args.redis_tls_ca.as_deref())
                            .map_err(|e| CliError::Input(format!("Redis TLS: {e}")))?;
                    let listener = std::net::TcpListener::bind(SocketAddr::new(args.bind, tport))
                        .map_err(|e| {
                        CliError::Input(format!("cannot listen on {}:{tport}: {e}", args.bind))
                    })?;
                    println!("redis tls: 127.0.0.1:{}", listener.local_addr()?.port());
                    Some(shale_redis::server::TlsListener { listener, config })
                }
            };
            let cfg = shale_redis::server::ServerConfig {
                tls,
                password: Some(password),
                appendfsync: shale_redis::durability::Appendfsync::parse(
                    args.redis_appendfsync.as_bytes(),
                )
                .unwrap_or_default(),
                io_threads: args.redis_io_threads,
            };
            let handle = std::thread::spawn(move || {
                let served = shale_redis::server::serve_with(db, listener, cfg, stop);
                // A Redis client's SHUTDOWN stops the whole server, as it
                // stops redis-server (a no-op when the MySQL side stopped
                // first).
                mysql_stop.shutdown();
                served
            });
            Some((raddr, handle))
        }
    };
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])?;
    let signal_thread = std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("signal {sig}: shutting down");
            stop.shutdown();
        }
    });
    let host = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_owned(),
        ip => ip.to_string(),
    };
    println!(
        "ShaleDB {} serving {} on {addr} (MySQL protocol)",
        env!("CARGO_PKG_VERSION"),
        dir.display()
    );
    println!("connect: mariadb -h {host} -P {} -u root -p", addr.port());
    if let Some((raddr, _)) = &redis {
        println!("ShaleDB Redis endpoint on {raddr}");
        println!("connect: redis-cli -h {host} -p {} --askpass", raddr.port());
    }
    std::io::stdout().flush()?;
    let served = server.run();
    redis_stop.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some((_, handle)) = redis {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("redis endpoint: {e}"),
            Err(_) => eprintln!("redis endpoint: its thread panicked"),
        }
    }
    served?;
    drop(signal_thread); // it ends with the process
    db.flush()?;
    db.close()?;
    eprintln!("shut down cleanly");
    Ok(())
}

/// Binds the asked port, or the first free one from 3306.
fn bind(
    ip: IpAddr,
    port: Option<u16>,
    backend: Arc<SqlBackend>,
    cfg: ServerConfig,
) -> Result<Server<SqlBackend>, CliError> {
    if let Some(p) = port {
        return Server::bind(SocketAddr::new(ip, p), backend, cfg)
            .map_err(|e| CliError::Input(format!("cannot listen on {ip}:{p}: {e}")));
    }
    let mut last = None;
    for p in DEFAULT_PORT..DEFAULT_PORT + PORTS_TRIED {
        match Server::bind(SocketAddr::new(ip, p), backend.clone(), cfg.clone()) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(CliError::Input(format!("cannot listen on {ip}:{p}: {e}"))),
        }
    }
    Err(CliError::Input(format!(
        "ports {DEFAULT_PORT}..{} are all in use ({}); pick one with --port",
        DEFAULT_PORT + PORTS_TRIED - 1,
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

/// Writes `secret` to a new file only its owner can read.
fn write_secret(path: &Path, secret: &str) -> Result<(), CliError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    writeln!(f, "{secret}")?;
    f.sync_all()?;
    Ok(())
}

/// `--thread-handling` (MariaDB's names).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ThreadHandlingArg {
    OneThreadPerConnection,
    PoolOfThreads,
}
