"""The `contest` and `recover` suites of bench/compare (imported by it; see docs/benchmarks.md).

contest: the phases of the first PolarDB performance contest, scaled (T threads x N writes of
8-byte keys and 4 KiB values). fio first measures the disk (sequential 1 MiB direct writes, 4 KiB
direct random reads at queue depth T, sequential 1 MiB direct reads; files of --fio-size) and the
figures go to a JSON file passed to shale-bench / fjall-bench as --device_limits. shale-bench and
fjall-bench run --benchmarks=contest (crash rounds, then write / read / range, all verified).
RocksDB runs the nearest db_bench equivalents in three processes with the page cache dropped in
between (--contest-rocksdb-fill unique, the default):

  filluniquerandom --num=T*N        (T*N puts of T*N distinct keys in a random order; db_bench
                                      runs it with one thread: it has no multi-threaded fill of
                                      distinct keys)
  readrandom --num=T*N --reads=N    (T threads x N gets of keys drawn from [0, T*N): all found)
  readseq,readseq --num=T*N         (each of T threads scans the whole DB, twice)

or, with --contest-rocksdb-fill random, the old `fillrandom --threads=T --num=T*N --writes=N`
(T writer threads, but random draws: ~63% of the keys are distinct and ~37% of the reads miss).

Engine variants (CONTEST_VARIANTS): `shale`, `rocksdb`, `fjall` with values inline, and
`shale-blob`, `rocksdb-blob`, `fjall-blob` with key-value separation of values >= 1 KiB (direct
I/O where the engine has it); each variant is a base engine plus extra flags.

recover: for each value size (100 and 4096 B) write --recover-bytes with a write buffer larger
than the data (nothing flushed), kill, drop the page cache and time the reopen = WAL replay.
shale-bench / fjall-bench do it with --benchmarks=recover (writer child SIGKILLed). ShaleDB
replays the same WAL once per --recovery-threads entry (default 1,2,4; rows shale-t1 = serial,
shale-t2, shale-t4) via --recover_threads_list: the killed directory is moved aside and each
reopen gets a fresh copy of it, the page cache dropped each time. RocksDB's
db_bench fillrandom exits without flushing (with the WAL on, RocksDB flushes at shutdown only
data that skipped the WAL: DBImpl::CancelAllBackgroundWork checks has_unpersisted_data_), so the
DB it leaves behind is a crashed one as far as replay is concerned; the reopen is
`db_bench --use_existing_db=1 --benchmarks=` and its duration is read from RocksDB's own LOG
(first line of the new LOG to "DB pointer", i.e. DB::Open). Two RocksDB rows: `rocksdb` with
--avoid_flush_during_recovery=1 (replay only, like ShaleDB, which freezes the replayed memtable
and flushes it in the background after open returns) and `rocksdb+flush` with RocksDB's default
(the replayed memtable is written to an L0 file inside DB::Open).
"""

import datetime
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import time

REPORT_RE = re.compile(
    r"^(?P<name>\S+)\s+:\s+(?P<micros>[\d.]+) micros/op (?P<ops>-?\d+) ops/sec "
    r"(?P<secs>[\d.]+) seconds (?P<n>\d+) operations;"
    r"(?:\s+(?P<mbs>[\d.]+) MB/s)?(?P<rest>.*)$"
)
WAL_RE = re.compile(r"\(WAL ([\d.]+) MiB in (\d+) files")
LOG_TS_RE = re.compile(r"^(\d{4}/\d\d/\d\d-\d\d:\d\d:\d\d\.\d{6})")
MIB = 1024 * 1024


def log(msg):
    import sys
    print(msg, file=sys.stderr, flush=True)


def report_lines(text):
    """Every db_bench-format report line as (name, fields), in order (names may repeat)."""
    out = []
    for line in text.splitlines():
        m = REPORT_RE.match(line)
        if m:
            out.append((m.group("name"), {
                "seconds": float(m.group("secs")),
                "operations": int(m.group("n")),
                "mb_per_sec": float(m.group("mbs")) if m.group("mbs") else None,
                "rest": m.group("rest").strip(),
            }))
    return out


def drop_caches():
    """sync; echo 3 > /proc/sys/vm/drop_caches. Returns whether it worked."""
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def run_cmd(cmd, keep_log=None):
    log("+ " + " ".join(cmd))
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    if keep_log:
        os.makedirs(os.path.dirname(keep_log), exist_ok=True)
        with open(keep_log, "a") as f:
            f.write(" ".join(cmd) + "\n\n" + p.stdout + "\n")
    if p.returncode != 0:
        log(p.stdout[-4000:])
        raise SystemExit("%s failed (exit %d)" % (os.path.basename(cmd[0]), p.returncode))
    for line in p.stdout.splitlines():
        if REPORT_RE.match(line) or line.startswith("WARNING: the WAL"):
            log("    " + line.strip())
    return p.stdout, wall


# ---------------------------------------------------------------- fio

def fio_job(workdir, name, args, seconds, size):
    cmd = ["fio", "--name=" + name, "--directory=" + workdir, "--size=" + size, "--runtime=%d" % seconds,
           "--time_based", "--output-format=json", "--unlink=1", "--direct=1"] + args
    log("+ " + " ".join(cmd))
    res = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
    job = res["jobs"][0]
    side = job["read"] if "read" in " ".join(args) else job["write"]
    return {"mib_s": round(side["bw"] / 1024.0, 1), "iops": round(side["iops"], 1)}


def device_limits(workdir, seconds, qd, path, need_write=True, size="1g"):
    """Runs the fio probes (files of `size`) and writes the --device_limits JSON; returns the
    dict."""
    lim = {"tool": "fio", "fio_seconds": seconds, "fio_file_size": size}
    try:
        if need_write:
            lim["seq_write_mib_s"] = fio_job(workdir, "seqwrite", ["--rw=write", "--bs=1m", "--ioengine=psync"], seconds, size)["mib_s"]
        if qd:
            try:
                r = fio_job(workdir, "randread", ["--rw=randread", "--bs=4k", "--ioengine=libaio",
                                                  "--iodepth=%d" % qd], seconds, size)
            except (subprocess.CalledProcessError, ValueError, KeyError):
                # No libaio: QD=T as T synchronous readers.
                r = fio_job(workdir, "randread", ["--rw=randread", "--bs=4k", "--ioengine=psync",
                                                  "--numjobs=%d" % qd, "--group_reporting"], seconds, size)
            lim["rand_read_4k_mib_s"] = r["mib_s"]
            lim["rand_read_4k_iops"] = r["iops"]
            lim["rand_read_qd"] = qd
        lim["seq_read_mib_s"] = fio_job(workdir, "seqread", ["--rw=read", "--bs=1m", "--ioengine=psync"], seconds, size)["mib_s"]
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError, IndexError) as e:
        lim["error"] = str(e)
        log("fio failed: %s (device percentages will be missing)" % e)
    with open(path, "w") as f:
        json.dump(lim, f)
    return lim


def pct(mb, limit):
    return (100.0 * mb / limit) if (mb is not None and limit) else None


def fmt(x, digits=1):
    return "-" if x is None else "{:,.{}f}".format(x, digits)


def print_table(cols, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
    print(line(cols))
    for r in rows:
        print(line(r))


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- contest

PHASES = (("write", "seq_write_mib_s"), ("read", "rand_read_4k_mib_s"), ("range", "seq_read_mib_s"))

# Values of at least this many bytes go to value (blob) files in the -blob variants.
MIN_BLOB_SIZE = 1024

# The value (blob) cache of shale-blob and rocksdb-blob: 256 MiB, 1/32 of the bar's 8 GiB data
# set, so the engines cannot hold the data, but threads scanning together can share what one
# of them read (ShaleDB's single-flight reads and scan readahead, docs/format-blob.md section 5).
BLOB_CACHE_BYTES = 256 * 1024 * 1024

# Contest engine variants: name -> (base engine, extra flags). The base engine picks the binary
# (shale-bench --engine=shale, db_bench, fjall-bench); the flags are added to the shared ones.
CONTEST_VARIANTS = {
    "shale": ("shale", {}),
    # ShaleDB's value files (Options::min_blob_size), written and read with O_DIRECT.
    # With a value cache of BLOB_CACHE_BYTES (scan readahead is on by default with a cache).
    "shale-blob": ("shale", {"enable_blob_files": "true", "min_blob_size": MIN_BLOB_SIZE,
                             "blob_direct_io": "true", "use_direct_reads": "true",
                             "blob_cache_size": BLOB_CACHE_BYTES}),
    "rocksdb": ("rocksdb", {}),
    # Integrated BlobDB. RocksDB has no blob-only direct I/O: use_direct_reads covers SST and
    # blob reads, use_direct_io_for_flush_and_compaction the flush that writes the blob files.
    # A blob cache of BLOB_CACHE_BYTES of its own (not shared with the 8 MiB block cache), blobs
    # uncompressed, GC off (the phases overwrite nothing); blob_file_size stays 256 MiB, db_bench's
    # default.
    "rocksdb-blob": ("rocksdb", {"enable_blob_files": "true", "min_blob_size": MIN_BLOB_SIZE,
                                 "blob_compression_type": "none", "use_direct_reads": "true",
                                 "use_direct_io_for_flush_and_compaction": "true",
                                 "use_blob_cache": "true",
                                 "use_shared_block_and_blob_cache": "false",
                                 "blob_cache_size": BLOB_CACHE_BYTES}),
    "fjall": ("fjall", {}),
    # fjall's KV separation (KvSeparationOptions, threshold 1 KiB); fjall has no direct I/O.
    "fjall-blob": ("fjall", {"enable_blob_files": "true", "min_blob_size": MIN_BLOB_SIZE}),
}


def contest_base(variant):
    """The base engine (binary) of a contest variant."""
    return CONTEST_VARIANTS[variant][0]


def contest_engine_run(engine, binary, flags, limits_path, db, logf):
    """shale-bench / fjall-bench --benchmarks=contest; `engine` is the base engine."""
    cmd = [binary] + ["--%s=%s" % kv for kv in flags.items()] + [
        "--benchmarks=contest", "--device_limits=" + limits_path, "--db=" + db, "--drop_caches=1"]
    if engine == "shale":
        cmd.append("--engine=shale")
    out, _ = run_cmd(cmd, logf)
    res = {}
    for name, r in report_lines(out):
        if name.startswith("contest_"):
            res[name[len("contest_"):]] = r
    if "check" not in res:
        res["check"] = {"skipped": True}
    notes = [l.strip() for l in out.splitlines() if l.startswith("contest_space")]
    if notes:
        res["space_lines"] = notes
    # Each reopen line says whether the page cache was dropped.
    res["page_cache_dropped"] = all("page cache dropped" in (res.get(p) or {}).get("rest", "")
                                    for p in ("read", "range"))
    return res


def contest_rocksdb_run(flags, t, n, db, logf, fill="unique", binary="db_bench"):
    not_passed = ("threads", "num", "contest_kills", "contest_space")
    common = [binary, "--db=" + db, "--num=%d" % (t * n)] + \
        ["--%s=%s" % kv for kv in flags.items() if kv[0] not in not_passed]
    base = common + ["--threads=%d" % t]
    res = {}
    if fill == "unique":
        # One writer thread (db_bench forces it): every key of [0, T*N) once, in random order.
        out, _ = run_cmd(common + ["--threads=1", "--benchmarks=filluniquerandom"], logf)
        res["write"] = dict(report_lines(out)).get("filluniquerandom")
    else:
        out, _ = run_cmd(base + ["--benchmarks=fillrandom", "--writes=%d" % n], logf)
        res["write"] = dict(report_lines(out)).get("fillrandom")
    res["fill"] = fill
    dropped = drop_caches()
    out, _ = run_cmd(base + ["--use_existing_db=1", "--benchmarks=readrandom", "--reads=%d" % n], logf)
    res["read"] = dict(report_lines(out)).get("readrandom")
    m = re.search(r"\((\d+) of (\d+) found\)", (res["read"] or {}).get("rest", ""))
    if m:
        res["read_found"] = [int(m.group(1)), int(m.group(2))]
    dropped = drop_caches() and dropped
    out, _ = run_cmd(base + ["--use_existing_db=1", "--benchmarks=readseq,readseq"], logf)
    scans = [r for name, r in report_lines(out) if name == "readseq"]
    secs = sum(r["seconds"] for r in scans)
    mib = sum((r["mb_per_sec"] or 0) * r["seconds"] for r in scans)
    res["range"] = {"seconds": secs, "operations": sum(r["operations"] for r in scans),
                    "mb_per_sec": mib / secs if secs else None, "rest": "2 x readseq"}
    res["page_cache_dropped"] = dropped
    return res


def contest_shape(args):
    """(threads, writes per thread) of the contest suite: --threads / --num, or --data-gib
    (GiB of values: num = ceil(GiB * 2^30 / (T * 4096))), else 16 x 10,000 (quick 4 x 2,000)."""
    t = int(args.threads.split(",")[0]) if args.threads else (4 if args.quick else 16)
    gib = getattr(args, "data_gib", None)
    if args.num:
        n = args.num
    elif gib:
        n = int(math.ceil(gib * 1024 * MIB / (t * 4096)))
    else:
        n = 2000 if args.quick else 10000
    return t, n


def fio_size_for(args, data_bytes):
    """--fio-size, else 4g for a data set of 4 GiB or more (the bar: not cached anywhere),
    1g otherwise (256m with --quick)."""
    if getattr(args, "fio_size", None):
        return args.fio_size
    if data_bytes >= 4 * 1024 * MIB:
        return "4g"
    return "256m" if args.quick else "1g"


def run_contest(args, engines, bins, tmp, logs_dir):
    """`engines` are CONTEST_VARIANTS names; `bins` maps base engines to binaries."""
    t, n = contest_shape(args)
    rounds = args.rounds or 1
    fill = getattr(args, "contest_rocksdb_fill", "unique")
    flags = {"threads": t, "num": n, "key_size": 8, "value_size": 4096, "compression_type": "none",
             "cache_size": 8 * MIB, "bloom_bits": 10, "write_buffer_size": 64 * MIB,
             "seed": args.seed, "progress_reports": 0, "contest_kills": args.contest_kills}
    data_bytes = t * n * (8 + 4096)
    limits_path = os.path.join(tmp, "device_limits.json")
    fio_size = fio_size_for(args, data_bytes)
    limits = device_limits(tmp, args.fio or (2 if args.quick else 10), t, limits_path, size=fio_size)
    runs = []
    for rnd in range(1, rounds + 1):
        for e in engines:
            base, extra = CONTEST_VARIANTS[e]
            vflags = dict(flags, **extra)
            if base == "shale" and getattr(args, "contest_space", False):
                vflags["contest_space"] = "true"
            db = os.path.join(tmp, "r%d-%s" % (rnd, e))
            logf = os.path.join(logs_dir, "r%d-%s.txt" % (rnd, e)) if args.keep_logs else None
            log("[round %d/%d] contest %s" % (rnd, rounds, e))
            t0 = time.time()
            if base == "rocksdb":
                res = contest_rocksdb_run(vflags, t, n, db, logf, fill, bins.get("rocksdb") or "db_bench")
            else:
                res = contest_engine_run(base, bins[base], vflags, limits_path, db, logf)
            runs.append({"round": rnd, "engine": e, "base": base, "extra_flags": extra,
                         "wall_seconds": round(time.time() - t0, 1), "results": res})
            # Each engine's DB goes before the next one starts (the disk holds one at a time).
            shutil.rmtree(db, ignore_errors=True)

    total_mib = data_bytes / MIB
    print("\nSuite contest: %d threads x %d writes of 8 B keys + 4096 B values (%.0f MiB), %d round(s), "
          "fio files %s" % (t, n, total_mib, rounds, fio_size))
    probes = {"write": "fio seq write 1M", "read": "fio 4K randread QD%d" % t, "range": "fio seq read 1M"}
    summary = []
    for phase, key in PHASES:
        srow = {"phase": phase, "device_mib_s": limits.get(key), "engines": {}}
        for e in engines:
            rs = [r["results"].get(phase) for r in runs if r["engine"] == e]
            rs = [r for r in rs if r]
            secs = median([r["seconds"] for r in rs])
            mb = median([r["mb_per_sec"] for r in rs])
            srow["engines"][e] = {"seconds": secs, "mb_per_sec": mb, "pct_of_device": pct(mb, limits.get(key))}
        summary.append(srow)
    # One row per variant (six variants do not fit side by side), then the device row.
    cols = ["engine"]
    for phase, _ in PHASES:
        cols += ["%s s" % phase, "MB/s", "% dev"]
    rows = []
    for e in engines:
        row = [e]
        for srow in summary:
            v = srow["engines"][e]
            row += [fmt(v["seconds"], 3), fmt(v["mb_per_sec"]), fmt(v["pct_of_device"])]
        rows.append(row)
    dev = ["device (fio)"]
    for srow in summary:
        dev += ["", fmt(srow["device_mib_s"]), ""]
    rows.append(dev)
    print_table(cols, rows)
    print("device probes: " + "; ".join("%s = %s" % (p, probes[p]) for p, _ in PHASES))
    checks = [(r["engine"], r["results"].get("check", {})) for r in runs]
    for e, c in checks:
        if c.get("skipped") or "rest" not in c:
            continue
        print("crash check %s: %s in %.2f s" % (e, c.get("rest", "").strip("()"), c.get("seconds", 0)))
    for r in runs:
        for line in r["results"].get("space_lines", []):
            print("%s: %s" % (r["engine"], line))
    for r in runs:
        if not r["results"].get("page_cache_dropped", True):
            print("WARNING: %s: the page cache was NOT dropped between phases (see its log)" % r["engine"])
    if any(contest_base(e) == "rocksdb" for e in engines):
        if fill == "unique":
            print("rocksdb: db_bench filluniquerandom --threads=1 --num=%d (db_bench fills distinct keys "
                  "with one thread only), then readrandom --threads=%d --reads=%d and readseq x2 with "
                  "--threads=%d (all reads hit; no crash check)" % (t * n, t, n, t))
        else:
            print("rocksdb: db_bench fillrandom/readrandom/readseq x2 with --num=%d --writes/--reads=%d "
                  "(no crash check; random keys repeat, so about 37%% of its reads miss)" % (t * n, n))
        for r in runs:
            found = r["results"].get("read_found")
            if found:
                print("%s read: %d of %d found (thread 0)" % (r["engine"], found[0], found[1]))
    variants = {e: {"base": CONTEST_VARIANTS[e][0], "extra_flags": CONTEST_VARIANTS[e][1]} for e in engines}
    return {"suite": "contest", "flags": flags, "variants": variants, "rocksdb_fill": fill,
            "device_limits": limits, "summary": summary, "runs": runs}


# ---------------------------------------------------------------- recover

def rocksdb_open_seconds(db):
    """DB::Open duration from RocksDB's LOG: first line of the new LOG to 'DB pointer'."""
    with open(os.path.join(db, "LOG")) as f:
        lines = f.read().splitlines()
    stamps = [LOG_TS_RE.match(l) for l in lines]
    first = next((m.group(1) for m in stamps if m), None)
    done = next((LOG_TS_RE.match(l).group(1) for l in lines if "DB pointer" in l and LOG_TS_RE.match(l)), None)
    if not first or not done:
        return None
    p = lambda s: datetime.datetime.strptime(s, "%Y/%m/%d-%H:%M:%S.%f")
    return (p(done) - p(first)).total_seconds()


def wal_mib(db, pattern="*.log"):
    files = glob.glob(os.path.join(db, pattern))
    return sum(os.path.getsize(f) for f in files) / MIB, len(files)


def recover_rocksdb(nbytes, value_size, wbs, seed, db, logf):
    entries = math.ceil(nbytes / (16 + value_size))
    common = ["db_bench", "--db=" + db, "--key_size=16", "--value_size=%d" % value_size,
              "--write_buffer_size=%d" % wbs, "--disable_auto_compactions=1",
              "--compression_type=none", "--seed=%d" % seed, "--progress_reports=0", "--threads=1"]
    run_cmd(common + ["--benchmarks=fillrandom", "--num=%d" % entries], logf)
    mib, files = wal_mib(db)
    ssts = glob.glob(os.path.join(db, "*.sst"))
    rows = {}
    for name, extra in (("rocksdb", ["--avoid_flush_during_recovery=1"]), ("rocksdb+flush", [])):
        dropped = drop_caches()
        _, wall = run_cmd(common + ["--use_existing_db=1", "--benchmarks=", "--num=%d" % entries] + extra, logf)
        secs = rocksdb_open_seconds(db)
        rows[name] = {"seconds": secs, "process_seconds": round(wall, 3), "wal_mib": mib, "wal_files": files,
                      "mb_per_sec": (mib / secs) if secs else None, "entries": entries,
                      "page_cache_dropped": dropped, "sst_files_before_reopen": len(ssts)}
    return rows


def recover_engine(engine, binary, nbytes, value_size, seed, limits_path, db, logf, threads=None):
    """Returns {row name: result}. With `threads` (ShaleDB: a list of recovery thread counts)
    the same WAL is replayed once per count (--recover_threads_list), rows `shale-t<N>`."""
    cmd = [binary, "--db=" + db, "--benchmarks=recover", "--recover_bytes=%d" % nbytes,
           "--key_size=16", "--value_size=%d" % value_size, "--threads=1", "--compression_type=none",
           "--seed=%d" % seed, "--progress_reports=0", "--device_limits=" + limits_path, "--drop_caches=1"]
    if engine == "shale":
        cmd.append("--engine=shale")
        if threads:
            cmd.append("--recover_threads_list=" + ",".join(str(t) for t in threads))
    out, _ = run_cmd(cmd, logf)
    rows = {}
    for name, r in report_lines(out):
        if name == "recover":
            row = engine
        elif name.startswith("recover_t"):
            row = "%s-%s" % (engine, name[len("recover_"):])
        else:
            continue
        m = WAL_RE.search(r["rest"])
        rows[row] = {"seconds": r["seconds"], "mb_per_sec": r["mb_per_sec"], "entries": r["operations"],
                     "wal_mib": float(m.group(1)) if m else None, "wal_files": int(m.group(2)) if m else None,
                     "warning": "WARNING" in out, "rest": r["rest"]}
    if not rows:
        raise SystemExit("%s printed no recover line" % engine)
    return rows


def run_recover(args, engines, bins, tmp, logs_dir):
    nbytes = args.recover_bytes or ((64 if args.quick else 1024) * MIB)
    value_sizes = [int(v) for v in args.value_sizes.split(",")]
    rounds = args.rounds or 1
    wbs = 2 * nbytes + 64 * MIB  # what shale-bench/fjall-bench's recover uses
    limits_path = os.path.join(tmp, "device_limits.json")
    limits = device_limits(tmp, args.fio or (2 if args.quick else 10), 0, limits_path, need_write=False,
                           size="256m" if args.quick else "1g")
    shale_threads = [int(t) for t in args.recovery_threads.split(",") if t.strip()] if args.recovery_threads else []
    runs = []
    for v in value_sizes:
        for rnd in range(1, rounds + 1):
            for e in engines:
                db = os.path.join(tmp, "v%d-r%d-%s" % (v, rnd, e))
                logf = os.path.join(logs_dir, "recover-v%d-r%d-%s.txt" % (v, rnd, e)) if args.keep_logs else None
                log("[value %d B, round %d/%d] recover %s" % (v, rnd, rounds, e))
                if e == "rocksdb":
                    for name, r in recover_rocksdb(nbytes, v, wbs, args.seed, db, logf).items():
                        runs.append({"value_size": v, "round": rnd, "engine": name, "results": r})
                else:
                    rows = recover_engine(e, bins[e], nbytes, v, args.seed, limits_path, db, logf,
                                          shale_threads if e == "shale" else None)
                    for name, r in rows.items():
                        runs.append({"value_size": v, "round": rnd, "engine": name, "results": r})
                shutil.rmtree(db, ignore_errors=True)
    seq = limits.get("seq_read_mib_s")
    print("\nSuite recover: %.0f MiB of 16 B keys + values written, killed, page cache dropped, reopen timed; "
          "%d round(s), medians" % (nbytes / MIB, rounds))
    rows_by_engine = []  # row names in the order they were first run
    for r in runs:
        if r["engine"] not in rows_by_engine:
            rows_by_engine.append(r["engine"])
    summary = []
    for v in value_sizes:
        print("\nvalue %d B" % v)
        rows = []
        for e in rows_by_engine:
            rs = [r["results"] for r in runs if r["engine"] == e and r["value_size"] == v]
            if not rs:
                continue
            secs = median([r["seconds"] for r in rs])
            mb = median([r["mb_per_sec"] for r in rs])
            wal = median([r["wal_mib"] for r in rs])
            summary.append({"value_size": v, "engine": e, "open_seconds": secs, "wal_mib": wal,
                            "mb_per_sec": mb, "pct_of_seq_read": pct(mb, seq)})
            rows.append([e, fmt(secs, 3), fmt(wal), fmt(mb), fmt(pct(mb, seq)), fmt(seq)])
        print_table(["engine", "open s", "WAL MiB", "MB/s", "% seq read", "fio seq read MB/s"], rows)
    if shale_threads:
        print("\nshale-t<N>: the same WAL replayed with recovery_threads N (1 = serial replay on the "
              "opening thread; N >= 2 = a reader thread + N replay threads)")
    if any(r["results"].get("warning") for r in runs):
        print("\nWARNING: an engine flushed during the fill (its WAL is smaller than the data); see the logs.")
    if any(r["results"].get("sst_files_before_reopen") for r in runs):
        print("\nWARNING: db_bench left .sst files: RocksDB flushed during the fill.")
    return {"suite": "recover", "recover_bytes": nbytes, "value_sizes": value_sizes, "write_buffer_size": wbs,
            "shale_recovery_threads": shale_threads,
            "device_limits": limits, "summary": summary, "runs": runs}
