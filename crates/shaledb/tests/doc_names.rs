//! Keeps the prose docs honest: every backticked name in `docs/*.md` that
//! looks like a Rust item, an option, a constant, a property or a source file
//! must exist in the code (`crates/**/*.rs`). A rename that forgets the docs,
//! or a doc that cites a design that was never built (`CompactionJob`,
//! `max_group_bytes`), fails here.
//!
//! What counts as a name (inside one pair of backticks, after stripping a
//! trailing `()`/`(args)`, `{ fields }` or `= value`):
//! - `snake_case` with an underscore (options, functions, tests);
//! - `CamelCase` with at least two humps (types, variants);
//! - `SCREAMING_SNAKE` (constants, environment variables);
//! - `Path::to::item`, each segment checked as above (one-word segments too);
//! - `shale.*` property names, checked verbatim;
//! - `*.rs` paths, which must be the tail of a file under `crates/`.
//!
//! Names that are deliberately external (RocksDB, X-Engine, the standard
//! library, benchmark tools) are in [`EXTERNAL`], each with its owner.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // a panic in a test is a failure

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Names the docs cite on purpose although this code base does not define them.
const EXTERNAL: &[&str] = &[
    // MariaDB/MyRocks server variables and MySQL collation names cited by the SQL docs.
    "rocksdb_flush_log_at_trx_commit",
    "utf8mb4_0900_ai_ci",
    // glibc and Linux functions named in profiles
    "malloc_consolidate",
    "epoll_wait",
    "posix_fadvise",
    "ru_inblock",
    "__schedule",
    "do_syscall_64",
    "__sched_yield",
    "do_sched_yield",
    "__vdso_clock_gettime",
    // RocksDB
    "TransactionDB",
    "OptimisticTransactionDB",
    "InlineSkipList",
    "FindGreaterOrEqual",
    "SetSnapshotOnNextOperation",
    "TryAgain",
    "TimedOut",
    "RandomGenerator",
    "GenerateKeyFromInt",
    "max_total_wal_size",
    "max_background_jobs",
    "perf_context",
    "set_snapshot",
    "set_savepoint",
    "rollback_to_savepoint",
    "DEBUG_LEVEL",
    "REPEATABLE_READ",
    "WriteImpl",
    "memtablerep_bench",
    // The MySQL protocol's command names (mysql/consts.rs spells them `com::QUIT`, ...)
    "COM_QUIT",
    "COM_PING",
    // PolarDB-X XRPC (seed 004), cited for the stage histograms
    "polarx_rpc_enable_perf_hist",
    // X-Engine
    "max_memtable_size",
    "max_journaling_size",
    // fjall
    "PersistMode",
    "SyncData",
    "Buffer",
    // glibc, the C++ standard library
    "__tls_get_addr",
    "mt19937_64",
    // lz4_flex: names the byte format, which extent/compression.rs writes
    // with `compress_into` behind its own length prefix
    "compress_prepend_size",
    // cargo
    "CARGO_TARGET_DIR",
    // kernel and std symbols in the server's profile (docs/benchmarks.md, issue 11 threads)
    "futex_wait",
    "_raw_spin_unlock_irqrestore",
    "lock_contended",
    // bench/txn_suite.py (Python, not scanned)
    "SHALE_LEVELS",
    // Linux kernel functions in perf profiles (docs/benchmarks.md, key-value separation)
    "finish_task_switch",
    "sched_yield",
    "copy_folio_from_iter_atomic",
    "_copy_to_iter",
    // valgrind's control tool (docs/architecture.md, what a scan step costs)
    "callgrind_control",
    // a sysbench script (docs/benchmarks.md, CREATE INDEX under write load)
    "oltp_update_non_index",
    "oltp_write_only",
    // fio's sync_file_range option
    "wait_after",
    // report lines shale-bench formats as `recover_t<N>`
    "recover_t1",
    "recover_t2",
    "recover_t4",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if !p.ends_with("target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with(file!()) {
            // (This file is skipped: it quotes stale names as examples.)
            out.push(p);
        }
    }
}

/// Every identifier-like word of the code (strings and comments included:
/// environment variables and property names live in strings).
fn code_words(files: &[PathBuf]) -> (BTreeSet<String>, String) {
    let mut words = BTreeSet::new();
    let mut all = String::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !w.is_empty() {
                words.insert(w.to_string());
            }
        }
        all.push_str(&text);
    }
    (words, all)
}

/// The backticked spans of a Markdown file, fenced code blocks excluded.
fn backticked(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push(inside.to_string());
        }
    }
    out
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_snake(s: &str) -> bool {
    is_ident(s) && s.contains('_') && !s.chars().any(|c| c.is_ascii_uppercase())
}

fn is_screaming(s: &str) -> bool {
    is_ident(s) && s.contains('_') && !s.chars().any(|c| c.is_ascii_lowercase())
}

fn is_camel(s: &str) -> bool {
    let humps = s.chars().filter(char::is_ascii_uppercase).count();
    is_ident(s)
        && !s.contains('_')
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars().any(|c| c.is_ascii_lowercase())
        && humps >= 2
}

/// The name at the start of a span, without call parentheses, struct-literal
/// braces or an `= value` tail; `None` for an expression such as
/// `begin_user_key ++ trailer(seq)` (a name followed by anything else).
fn strip(span: &str) -> Option<&str> {
    let end = span.find(['(', '{', '=', ' ']).unwrap_or(span.len());
    let (name, rest) = span.split_at(end);
    let rest = rest.trim_start();
    (rest.is_empty() || rest.starts_with(['(', '{', '='])).then_some(name)
}

/// The names a span asks for: `(kind, name)` pairs.
fn names(span: &str) -> Vec<(&'static str, String)> {
    let span = span.trim();
    if span.starts_with("shale.") && !span.contains(' ') {
        return vec![("property", span.to_string())];
    }
    if span.ends_with(".rs") && !span.contains(' ') {
        let path = span.split(':').next().unwrap_or(span);
        return vec![("file", path.to_string())];
    }
    let Some(s) = strip(span) else {
        return Vec::new();
    };
    if s.contains("::") {
        let segs: Vec<&str> = s.split("::").collect();
        if segs.iter().all(|g| is_ident(g)) {
            return segs
                .iter()
                .map(|g| ("path segment", g.to_string()))
                .collect();
        }
        return Vec::new();
    }
    if is_snake(s) || is_camel(s) || is_screaming(s) {
        return vec![("name", s.to_string())];
    }
    Vec::new()
}

#[test]
fn names_cited_in_docs_exist_in_the_code() {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    let (words, text) = code_words(&files);
    let rel: Vec<String> = files
        .iter()
        .map(|f| f.to_string_lossy().replace('\\', "/"))
        .collect();

    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 5, "docs/ not found from {}", root.display());

    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let md = std::fs::read_to_string(doc).unwrap();
        for span in backticked(&md) {
            for (kind, name) in names(&span) {
                if EXTERNAL.contains(&name.as_str()) {
                    continue;
                }
                checked += 1;
                let found = match kind {
                    "file" => rel.iter().any(|r| r.ends_with(&format!("/{name}"))),
                    "property" => text.contains(&format!("\"{name}\"")),
                    _ => words.contains(&name),
                };
                if !found {
                    let doc = doc.file_name().unwrap().to_string_lossy();
                    missing.push(format!("{doc}: {kind} `{name}` (in `{span}`)"));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} names checked: is the extraction broken?"
    );
    assert!(
        missing.is_empty(),
        "names cited in docs/ but absent from crates/**/*.rs (fix the doc, or list a \
         deliberately external name in EXTERNAL):\n{}",
        missing.join("\n")
    );
}

#[test]
fn extraction_classifies_spans() {
    let md = "a `max_group_bytes` b `Db::write` c `CompactionJob` `x` `Db`\n\
              ```\n`not_this_one`\n```\n\
              `shale.compaction.bytes_reused` `db/write.rs` `Error::Corruption { file }` \
              `FOLLOWER_POLL = 2` `commit()` `validate()` `--sync` `a b` `key_len + 8`";
    let got: Vec<(&str, String)> = backticked(md).iter().flat_map(|s| names(s)).collect();
    let want = [
        ("name", "max_group_bytes"),
        ("path segment", "Db"),
        ("path segment", "write"),
        ("name", "CompactionJob"),
        ("property", "shale.compaction.bytes_reused"),
        ("file", "db/write.rs"),
        ("path segment", "Error"),
        ("path segment", "Corruption"),
        ("name", "FOLLOWER_POLL"),
    ];
    let want: Vec<(&str, String)> = want.iter().map(|(k, n)| (*k, n.to_string())).collect();
    assert_eq!(got, want);
}
