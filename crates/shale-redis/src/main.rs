//! `shale-redis-server --db DIR --port P --requirepass PW
//! [--appendfsync always|everysec|no]`: the Redis endpoint on its own,
//! bound to 127.0.0.1.

use shale_redis::durability::Appendfsync;
use shale_redis::server::{serve_with, ServerConfig, TlsListener};
use std::net::TcpListener;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const USAGE: &str = "usage: shale-redis-server --db DIR [--port P (6379; 0 = any free port)] \
                     (--requirepass PW | --no-password-i-know) \
                     [--appendfsync always|everysec|no (everysec)] \
                     [--io-threads N (event loops; default one per two cores, 1 to 8; 0 = a thread per connection)] \
                     [--blob-direct-reads (value files read with O_DIRECT)] \
                     [--tls-port P --tls-cert-file F --tls-key-file F [--tls-ca-cert-file F]]";

struct Args {
    db: String,
    port: u16,
    password: Option<String>,
    appendfsync: Appendfsync,
    io_threads: Option<usize>,
    /// Values in value files (64 KiB and more) are read with O_DIRECT.
    blob_direct_reads: bool,
    tls_port: Option<u16>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    tls_ca: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut db, mut port, mut password, mut no_pw) = (None, 6379u16, None, false);
    let mut appendfsync = Appendfsync::default();
    let mut io_threads = None;
    let mut blob_direct_reads = false;
    let (mut tls_port, mut tls_cert, mut tls_key, mut tls_ca) = (None, None, None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--db" => db = it.next(),
            "--port" => {
                let v = it.next().ok_or("--port needs a value")?;
                port = v.parse().map_err(|_| format!("bad port {v:?}"))?;
            }
            "--requirepass" => password = Some(it.next().ok_or("--requirepass needs a value")?),
            "--no-password-i-know" => no_pw = true,
            "--appendfsync" => {
                let v = it.next().ok_or("--appendfsync needs a value")?;
                appendfsync = Appendfsync::parse(v.as_bytes())
                    .ok_or_else(|| format!("--appendfsync: {v:?} is not always, everysec or no"))?;
            }
            "--io-threads" => {
                let v = it.next().ok_or("--io-threads needs a value")?;
                io_threads = Some(v.parse().map_err(|_| format!("bad --io-threads {v:?}"))?);
            }
            "--tls-port" => {
                let v = it.next().ok_or("--tls-port needs a value")?;
                tls_port = Some(v.parse().map_err(|_| format!("bad port {v:?}"))?);
            }
            "--blob-direct-reads" => blob_direct_reads = true,
            "--tls-cert-file" => tls_cert = it.next(),
            "--tls-key-file" => tls_key = it.next(),
            "--tls-ca-cert-file" => tls_ca = it.next(),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let db = db.ok_or_else(|| format!("--db is required\n{USAGE}"))?;
    if password.as_deref().is_some_and(str::is_empty) {
        return Err("--requirepass must not be empty".into());
    }
    if password.is_none() && !no_pw {
        return Err(format!(
            "refusing to start without a password: pass --requirepass PW \
             (or --no-password-i-know)\n{USAGE}"
        ));
    }
    if tls_port.is_some() && (tls_cert.is_none() || tls_key.is_none()) {
        return Err("--tls-port needs --tls-cert-file and --tls-key-file".into());
    }
    Ok(Args {
        db,
        port,
        password,
        appendfsync,
        io_threads,
        blob_direct_reads,
        tls_port,
        tls_cert,
        tls_key,
        tls_ca,
    })
}

/// The TLS port's listener and configuration, when `--tls-port` is given.
fn tls_listener(args: &Args) -> Result<Option<TlsListener>, String> {
    let (Some(port), Some(cert), Some(key)) = (args.tls_port, &args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let config = shale_redis::tls::server_config(
        Path::new(cert),
        Path::new(key),
        args.tls_ca.as_deref().map(Path::new),
    )
    .map_err(|e| format!("TLS: {e}"))?;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .map_err(|e| format!("cannot bind 127.0.0.1:{port}: {e}"))?;
    Ok(Some(TlsListener { listener, config }))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let options = shaledb::Options {
        blob_direct_reads: args.blob_direct_reads,
        ..shale_redis::engine_options()
    };
    let db = match shaledb::Db::open(&args.db, options) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("cannot open {}: {e}", args.db);
            return ExitCode::FAILURE;
        }
    };
    let listener = match TcpListener::bind(("127.0.0.1", args.port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind 127.0.0.1:{}: {e}", args.port);
            return ExitCode::FAILURE;
        }
    };
    let port = listener.local_addr().map_or(args.port, |a| a.port());
    let stop = Arc::new(AtomicBool::new(false));
    match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ]) {
        Ok(mut signals) => {
            let stop = stop.clone();
            std::thread::spawn(move || {
                if signals.forever().next().is_some() {
                    stop.store(true, Ordering::SeqCst);
                }
            });
        }
        Err(e) => eprintln!("no signal handler: {e}"),
    }
    println!("ShaleDB Redis endpoint on 127.0.0.1:{port}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let tls = match tls_listener(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(t) = &tls {
        let p = t.listener.local_addr().map_or(0, |a| a.port());
        println!("ShaleDB Redis TLS endpoint on 127.0.0.1:{p}");
        let _ = std::io::stdout().flush();
    }
    let cfg = ServerConfig {
        password: args.password,
        appendfsync: args.appendfsync,
        tls,
        io_threads: args.io_threads,
    };
    let served = serve_with(db.clone(), listener, cfg, stop);
    let closed = db.close();
    match (served, closed) {
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Err(e), _) => {
            eprintln!("server: {e}");
            ExitCode::FAILURE
        }
        (_, Err(e)) => {
            eprintln!("close: {e}");
            ExitCode::FAILURE
        }
    }
}
