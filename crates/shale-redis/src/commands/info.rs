//! INFO: Redis 7.0.15's sections with its field names in its order
//! (what redis-cli and redis_exporter parse). docs/redis.md ("INFO") says
//! which values are measured and which are fixed.

use super::{is_opt, CmdResult, Shared};
use crate::resp::Reply;
use crate::store::DATABASES;
use crate::tx::Tx;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Counters INFO `# Stats` reports (reset by CONFIG RESETSTAT).
#[derive(Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub commands: AtomicU64,
    pub rejected: AtomicU64,
    pub errors: AtomicU64,
}

impl Stats {
    pub fn reset(&self) {
        for c in [
            &self.connections,
            &self.commands,
            &self.rejected,
            &self.errors,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The sections of a plain `INFO` (Redis's "default"), in its order.
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// `all` / `everything` add these (empty here: no per-command figures).
const MORE: &[&str] = &["commandstats", "latencystats"];

type Fields = Vec<(&'static str, String)>;

pub fn info(shared: &Shared, tx: &mut Tx, a: &[Vec<u8>]) -> CmdResult {
    let mut chosen: Vec<&str> = Vec::new();
    let all = a.is_empty() || a.iter().any(|x| is_opt(x, "default"));
    let every = a
        .iter()
        .any(|x| is_opt(x, "all") || is_opt(x, "everything"));
    for name in DEFAULT.iter().chain(MORE) {
        let named = a.iter().any(|x| is_opt(x, name));
        let default = DEFAULT.contains(name) && (all || every);
        if named || default || (every && MORE.contains(name)) {
            chosen.push(name);
        }
    }
    let mut out = String::new();
    for name in chosen {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let (title, fields) = section(shared, tx, name)?;
        out.push_str(&format!("# {title}\r\n"));
        for (k, v) in fields {
            out.push_str(&format!("{k}:{v}\r\n"));
        }
    }
    Ok(Reply::Verbatim(out.into_bytes()))
}

fn section(
    shared: &Shared,
    tx: &mut Tx,
    name: &str,
) -> Result<(&'static str, Fields), super::CmdError> {
    Ok(match name {
        "server" => ("Server", server(shared)),
        "clients" => ("Clients", clients(shared)),
        "memory" => ("Memory", memory()),
        "persistence" => ("Persistence", persistence(shared)),
        "stats" => ("Stats", stats(shared)),
        "replication" => ("Replication", replication(shared)),
        "cpu" => ("CPU", cpu()),
        "modules" => ("Modules", Vec::new()),
        "errorstats" => ("Errorstats", Vec::new()),
        "commandstats" => ("Commandstats", Vec::new()),
        "latencystats" => ("Latencystats", Vec::new()),
        "cluster" => ("Cluster", vec![("cluster_enabled", "0".into())]),
        _ => ("Keyspace", keyspace(tx)?),
    })
}

fn fixed(pairs: &[(&'static str, &str)]) -> Fields {
    pairs.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn server(shared: &Shared) -> Fields {
    let up = shared.started.elapsed().as_secs();
    let secs = now_us() / 1_000_000;
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut f = fixed(&[
        ("redis_version", "7.0.15"),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", "0"),
        ("redis_build_id", "0"),
        ("redis_mode", "standalone"),
    ]);
    f.extend([
        (
            "os",
            format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        ),
        ("arch_bits", (usize::BITS).to_string()),
        ("monotonic_clock", "POSIX clock_gettime".into()),
        ("multiplexing_api", "threads".into()),
        ("atomicvar_api", "rust-atomics".into()),
        ("gcc_version", "0.0.0".into()),
        ("process_id", std::process::id().to_string()),
        ("process_supervised", "no".into()),
        ("run_id", shared.run_id.clone()),
        ("tcp_port", shared.port.to_string()),
        ("server_time_usec", now_us().to_string()),
        ("uptime_in_seconds", up.to_string()),
        ("uptime_in_days", (up / 86_400).to_string()),
        ("hz", "10".into()),
        ("configured_hz", "10".into()),
        // Redis's LRU clock: seconds, 24 bits.
        ("lru_clock", (secs & 0xff_ffff).to_string()),
        ("executable", exe),
        ("config_file", String::new()),
        ("io_threads_active", "0".into()),
    ]);
    f
}

fn clients(shared: &Shared) -> Fields {
    vec![
        ("connected_clients", shared.registry.all().len().to_string()),
        ("cluster_connections", "0".into()),
        ("maxclients", crate::server::MAX_CLIENTS.to_string()),
        ("client_recent_max_input_buffer", "0".into()),
        ("client_recent_max_output_buffer", "0".into()),
        ("blocked_clients", shared.blocking.blocked().to_string()),
        (
            "tracking_clients",
            shared.store.tracking().tracking_clients().to_string(),
        ),
        ("clients_in_timeout_table", "0".into()),
    ]
}

/// Redis's `bytesToHuman`.
fn human(n: u64) -> String {
    let f = n as f64;
    match n {
        0..=1023 => format!("{n}B"),
        1024..=1_048_575 => format!("{:.2}K", f / 1024.0),
        1_048_576..=1_073_741_823 => format!("{:.2}M", f / 1_048_576.0),
        _ => format!("{:.2}G", f / 1_073_741_824.0),
    }
}

/// Resident set size from /proc/self/statm (pages of 4 KiB), 0 elsewhere.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages.saturating_mul(4096))
}

fn total_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb.saturating_mul(1024))
}

fn memory() -> Fields {
    let rss = rss();
    let total = total_memory();
    let mut f: Fields = vec![
        ("used_memory", rss.to_string()),
        ("used_memory_human", human(rss)),
        ("used_memory_rss", rss.to_string()),
        ("used_memory_rss_human", human(rss)),
        ("used_memory_peak", rss.to_string()),
        ("used_memory_peak_human", human(rss)),
        ("used_memory_peak_perc", "100.00%".into()),
    ];
    f.extend(fixed(&[
        ("used_memory_overhead", "0"),
        ("used_memory_startup", "0"),
        ("used_memory_dataset", "0"),
        ("used_memory_dataset_perc", "0.00%"),
        ("allocator_allocated", "0"),
        ("allocator_active", "0"),
        ("allocator_resident", "0"),
    ]));
    f.push(("total_system_memory", total.to_string()));
    f.push(("total_system_memory_human", human(total)));
    f.extend(fixed(&[
        ("used_memory_lua", "0"),
        ("used_memory_vm_eval", "0"),
        ("used_memory_lua_human", "0B"),
        ("used_memory_scripts_eval", "0"),
        ("number_of_cached_scripts", "0"),
        ("number_of_functions", "0"),
        ("number_of_libraries", "0"),
        ("used_memory_vm_functions", "0"),
        ("used_memory_vm_total", "0"),
        ("used_memory_vm_total_human", "0B"),
        ("used_memory_functions", "0"),
        ("used_memory_scripts", "0"),
        ("used_memory_scripts_human", "0B"),
        ("maxmemory", "0"),
        ("maxmemory_human", "0B"),
        ("maxmemory_policy", "noeviction"),
        ("allocator_frag_ratio", "1.00"),
        ("allocator_frag_bytes", "0"),
        ("allocator_rss_ratio", "1.00"),
        ("allocator_rss_bytes", "0"),
        ("rss_overhead_ratio", "1.00"),
        ("rss_overhead_bytes", "0"),
        ("mem_fragmentation_ratio", "1.00"),
        ("mem_fragmentation_bytes", "0"),
        ("mem_not_counted_for_evict", "0"),
        ("mem_replication_backlog", "0"),
        ("mem_total_replication_buffers", "0"),
        ("mem_clients_slaves", "0"),
        ("mem_clients_normal", "0"),
        ("mem_cluster_links", "0"),
        ("mem_aof_buffer", "0"),
        ("mem_allocator", "libc"),
        ("active_defrag_running", "0"),
        ("lazyfree_pending_objects", "0"),
        ("lazyfreed_objects", "0"),
    ]));
    f
}

fn persistence(shared: &Shared) -> Fields {
    let started = (now_us() / 1_000_000)
        .saturating_sub(u128::from(shared.started.elapsed().as_secs()))
        .to_string();
    let mut f = fixed(&[
        ("loading", "0"),
        ("async_loading", "0"),
        ("current_cow_peak", "0"),
        ("current_cow_size", "0"),
        ("current_cow_size_age", "0"),
        ("current_fork_perc", "0.00"),
        ("current_save_keys_processed", "0"),
        ("current_save_keys_total", "0"),
        ("rdb_changes_since_last_save", "0"),
        ("rdb_bgsave_in_progress", "0"),
    ]);
    f.push(("rdb_last_save_time", started));
    f.extend(fixed(&[
        ("rdb_last_bgsave_status", "ok"),
        ("rdb_last_bgsave_time_sec", "-1"),
        ("rdb_current_bgsave_time_sec", "-1"),
        ("rdb_saves", "0"),
        ("rdb_last_cow_size", "0"),
        ("rdb_last_load_keys_expired", "0"),
        ("rdb_last_load_keys_loaded", "0"),
        // Every write goes through the engine's WAL: appendonly yes.
        ("aof_enabled", "1"),
        ("aof_rewrite_in_progress", "0"),
        ("aof_rewrite_scheduled", "0"),
        ("aof_last_rewrite_time_sec", "-1"),
        ("aof_current_rewrite_time_sec", "-1"),
        ("aof_last_bgrewrite_status", "ok"),
        ("aof_rewrites", "0"),
        ("aof_rewrites_consecutive_failures", "0"),
        ("aof_last_write_status", "ok"),
        ("aof_last_cow_size", "0"),
        ("module_fork_in_progress", "0"),
        ("module_fork_last_cow_size", "0"),
    ]));
    f
}

fn stats(shared: &Shared) -> Fields {
    let s = &shared.stats;
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed).to_string();
    let zeros = |names: &[&'static str]| -> Fields {
        names.iter().map(|k| (*k, "0".to_string())).collect()
    };
    let mut f: Fields = vec![
        ("total_connections_received", n(&s.connections)),
        ("total_commands_processed", n(&s.commands)),
    ];
    f.extend(zeros(&[
        "instantaneous_ops_per_sec",
        "total_net_input_bytes",
        "total_net_output_bytes",
        "total_net_repl_input_bytes",
        "total_net_repl_output_bytes",
    ]));
    f.extend(fixed(&[
        ("instantaneous_input_kbps", "0.00"),
        ("instantaneous_output_kbps", "0.00"),
        ("instantaneous_input_repl_kbps", "0.00"),
        ("instantaneous_output_repl_kbps", "0.00"),
    ]));
    f.push(("rejected_connections", n(&s.rejected)));
    f.extend(zeros(&["sync_full", "sync_partial_ok", "sync_partial_err"]));
    f.push(("expired_keys", n(&shared.store.expired_keys)));
    f.push(("expired_stale_perc", "0.00".into()));
    f.extend(zeros(&[
        "expired_time_cap_reached_count",
        "expire_cycle_cpu_milliseconds",
        "evicted_keys",
        "evicted_clients",
        "total_eviction_exceeded_time",
        "current_eviction_exceeded_time",
        "keyspace_hits",
        "keyspace_misses",
    ]));
    f.push((
        "pubsub_channels",
        shared.pubsub.channels(None).len().to_string(),
    ));
    f.push(("pubsub_patterns", shared.pubsub.numpat().to_string()));
    f.extend(zeros(&[
        "pubsubshard_channels",
        "latest_fork_usec",
        "total_forks",
        "migrate_cached_sockets",
        "slave_expires_tracked_keys",
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
        "tracking_total_keys",
        "tracking_total_items",
        "tracking_total_prefixes",
        "unexpected_error_replies",
    ]));
    f.push(("total_error_replies", n(&s.errors)));
    f.extend(zeros(&[
        "dump_payload_sanitizations",
        "total_reads_processed",
        "total_writes_processed",
        "io_threaded_reads_processed",
        "io_threaded_writes_processed",
        "reply_buffer_shrinks",
        "reply_buffer_expands",
    ]));
    f
}

fn replication(shared: &Shared) -> Fields {
    let mut f = fixed(&[
        ("role", "master"),
        ("connected_slaves", "0"),
        ("master_failover_state", "no-failover"),
    ]);
    f.push(("master_replid", shared.run_id.clone()));
    f.extend(fixed(&[
        ("master_replid2", "0000000000000000000000000000000000000000"),
        ("master_repl_offset", "0"),
        ("second_repl_offset", "-1"),
        ("repl_backlog_active", "0"),
        ("repl_backlog_size", "1048576"),
        ("repl_backlog_first_byte_offset", "0"),
        ("repl_backlog_histlen", "0"),
    ]));
    f
}

/// (user, system) CPU seconds from a /proc `stat` file (fields 14 and 15,
/// in clock ticks of 1/100 s, Linux's USER_HZ).
fn cpu_of(path: &str) -> (f64, f64) {
    let Ok(s) = std::fs::read_to_string(path) else {
        return (0.0, 0.0);
    };
    // The command name (field 2) may hold blanks: count after its ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

fn cpu() -> Fields {
    let (user, sys) = cpu_of("/proc/self/stat");
    let (muser, msys) = cpu_of(&format!("/proc/self/task/{}/stat", std::process::id()));
    vec![
        ("used_cpu_sys", format!("{sys:.6}")),
        ("used_cpu_user", format!("{user:.6}")),
        ("used_cpu_sys_children", "0.000000".into()),
        ("used_cpu_user_children", "0.000000".into()),
        ("used_cpu_sys_main_thread", format!("{msys:.6}")),
        ("used_cpu_user_main_thread", format!("{muser:.6}")),
    ]
}

fn keyspace(tx: &mut Tx) -> Result<Fields, super::CmdError> {
    tx.consistent_reads();
    let mut f = Vec::new();
    for db in 0..DATABASES {
        let (mut keys, mut expires) = (0u64, 0u64);
        tx.scan_keys(tx.phys(db), None, |_, m| {
            keys += 1;
            expires += u64::from(m.expire_at != 0);
            true
        })?;
        if keys > 0 {
            f.push((
                DB_NAMES.get(usize::from(db)).copied().unwrap_or("db"),
                format!("keys={keys},expires={expires},avg_ttl=0"),
            ));
        }
    }
    Ok(f)
}

/// `db0` .. `db15` (the field names of `# Keyspace`).
const DB_NAMES: [&str; DATABASES as usize] = [
    "db0", "db1", "db2", "db3", "db4", "db5", "db6", "db7", "db8", "db9", "db10", "db11", "db12",
    "db13", "db14", "db15",
];
