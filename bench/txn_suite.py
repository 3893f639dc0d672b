"""The `txn` suite of bench/compare (imported by it; see docs/benchmarks.md).

Runs shale-bench's `txnmix` (read-modify-write transactions: --txn_ops keys each get_for_update
+ put of an 8-byte counter + 1, then commit; aborts rolled back and retried; the counters' sum
checked against the committed increments at the end) against ShaleDB at each isolation level in
SHALE_LEVELS and against RocksDB's TransactionDB (pessimistic) and OptimisticTransactionDB
(optimistic) through bench/peers/rocksdb-txn-bench, which runs the very same workload code and
prints the same lines. RocksDB runs with --isolation=si (set_snapshot: first-committer-wins
conflict checks, the closest to ShaleDB's SI).

Points: threads 1/4/16/64 (quick: 1/16), --num=100000 keys, uniform (or zipfian with
--txn-zipf=0.99: hot keys, lock waits, deadlocks), --duration=10 s (quick 3 s), in the
order round -> threads -> configuration, so each thread count's configurations run back to
back. The load average is recorded around every run (the table shows it): the numbers are
only comparable across a row when it is similar.

Builds shale-bench (cargo, release) and rocksdb-txn-bench (a separate cargo workspace linked
against Debian's librocksdb: installs librocksdb-dev and libclang-dev with apt-get if missing,
builds with ROCKSDB_LIB_DIR set).
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROCKS_MANIFEST = os.path.join(REPO, "bench", "peers", "rocksdb-txn-bench", "Cargo.toml")

# ShaleDB isolation levels measured; adding "serializable" here is all the suite needs.
SHALE_LEVELS = ["rc", "si", "serializable"]
ROCKSDB_MODES = ["pessimistic", "optimistic"]
ROCKSDB_ISOLATION = "si"
THREADS = [1, 4, 16, 64]
QUICK_THREADS = [1, 16]
APT_PACKAGES = ["librocksdb-dev", "libclang-dev"]

REPORT_RE = re.compile(
    r"^txnmix\s+:\s+(?P<micros>[\d.]+) micros/op (?P<ops>-?\d+) ops/sec "
    r"(?P<secs>[\d.]+) seconds (?P<n>\d+) operations;"
)
ABORTS_RE = re.compile(
    r"^txnmix aborts: (?P<aborts>\d+) of (?P<attempts>\d+) attempts \((?P<pct>[\d.]+)%\): "
    r"(?P<kinds>.*); retried txns (?P<retried>\d+), max retries (?P<max>\d+)"
)
KIND_RE = re.compile(r"(\w+) (\d+) \(([\d.]+)%\)")
LATENCY_RE = re.compile(
    r"^txnmix latency \(micros\): txn P50: (?P<txn_p50>[\d.]+) P99: (?P<txn_p99>[\d.]+); "
    r"commit P50: (?P<commit_p50>[\d.]+) P99: (?P<commit_p99>[\d.]+)"
)
VERIFY_OK = "txnmix verify: OK"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def configs(engines):
    """(label, binary key, extra flags) per configuration, in run order."""
    out = []
    if "shale" in engines:
        out += [("shale-%s" % lvl, "shale", {"engine": "shale", "isolation": lvl}) for lvl in SHALE_LEVELS]
    if "rocksdb" in engines:
        out += [("rocksdb-%s" % m, "rocksdb", {"mode": m, "isolation": ROCKSDB_ISOLATION}) for m in ROCKSDB_MODES]
    return out


def ensure_packages():
    missing = []
    for p in APT_PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    if not missing:
        return
    sudo = ["sudo"] if os.geteuid() != 0 else []
    apt = sudo + ["apt-get", "install", "-y"] + missing
    log("+ " + " ".join(apt))
    if subprocess.run(apt, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(sudo + ["apt-get", "update"], stdout=subprocess.DEVNULL, check=True)
        subprocess.run(apt, stdout=subprocess.DEVNULL, check=True)


def rocksdb_lib_dir():
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"):
        if os.path.exists(os.path.join(d, "librocksdb.so")):
            return d
    raise SystemExit("librocksdb.so not found: is librocksdb-dev installed?")


def cargo_build(args, env=None):
    cmd = ["cargo", "build", "--release", "--message-format=json-render-diagnostics"] + args
    log("+ " + " ".join(cmd))
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, cwd=REPO, text=True, env=env).stdout
    bins = {}
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            bins[msg["target"]["name"]] = msg["executable"]
    return bins


def build(engines, no_build):
    target = os.environ.get("CARGO_TARGET_DIR")
    bins = {}
    if "shale" in engines:
        if no_build:
            bins["shale"] = os.path.join(target or os.path.join(REPO, "target"), "release", "shale-bench")
        else:
            bins["shale"] = cargo_build(["-p", "shale-bench", "--bin", "shale-bench"])["shale-bench"]
    if "rocksdb" in engines:
        if no_build:
            bins["rocksdb"] = os.path.join(
                target or os.path.join(os.path.dirname(ROCKS_MANIFEST), "target"), "release", "rocksdb-txn-bench")
        else:
            env = dict(os.environ, ROCKSDB_LIB_DIR=rocksdb_lib_dir())
            env.pop("ROCKSDB_STATIC", None)
            bins["rocksdb"] = cargo_build(["--manifest-path", ROCKS_MANIFEST, "--bin", "rocksdb-txn-bench"],
                                          env=env)["rocksdb-txn-bench"]
    return bins


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def parse(text):
    """The txnmix lines of one run as a dict; raises if the lost-update check did not pass."""
    res = {}
    for line in text.splitlines():
        m = REPORT_RE.match(line)
        if m:
            secs = float(m.group("secs"))
            res["txn_per_sec"] = int(m.group("n")) / secs if secs > 0 else None
            res["committed"] = int(m.group("n"))
            res["seconds"] = secs
            continue
        m = ABORTS_RE.match(line)
        if m:
            res["aborts"] = int(m.group("aborts"))
            res["attempts"] = int(m.group("attempts"))
            res["abort_pct"] = float(m.group("pct"))
            res["retried"] = int(m.group("retried"))
            res["max_retries"] = int(m.group("max"))
            res["abort_kinds_pct"] = {k: float(p) for k, _, p in KIND_RE.findall(m.group("kinds"))}
            continue
        m = LATENCY_RE.match(line)
        if m:
            res.update({k: float(v) for k, v in m.groupdict().items()})
    res["verified"] = VERIFY_OK in text
    return res


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=0):
    return "-" if x is None else "{:,.{}f}".format(x, digits)


def print_table(cols, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths))))
    for r in rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def summarize(runs, cfgs, thread_counts):
    summary = []
    for t in thread_counts:
        row = {"threads": t, "configs": {}}
        for label, _, _ in cfgs:
            rs = [r["results"] for r in runs if r["threads"] == t and r["config"] == label]
            if not rs:
                continue
            kinds = sorted({k for r in rs for k in r.get("abort_kinds_pct", {})})
            row["configs"][label] = {
                "rounds": len(rs),
                "txn_per_sec": median([r.get("txn_per_sec") for r in rs]),
                "abort_pct": median([r.get("abort_pct") for r in rs]),
                "abort_kinds_pct": {k: median([r.get("abort_kinds_pct", {}).get(k) for r in rs]) for k in kinds},
                "txn_p50": median([r.get("txn_p50") for r in rs]),
                "txn_p99": median([r.get("txn_p99") for r in rs]),
                "commit_p50": median([r.get("commit_p50") for r in rs]),
                "commit_p99": median([r.get("commit_p99") for r in rs]),
                "max_retries": max(r.get("max_retries", 0) for r in rs),
                "load": median([r.get("load") for r in rs]),
            }
        summary.append(row)
    return summary


def report(summary, cfgs):
    cols = ["threads", "config", "txn/s", "vs rocks-pess", "vs rocks-opt", "abort %",
            "conflict/deadlock/timeout/serial %", "txn p50 us", "txn p99 us", "commit p99 us", "load"]
    rows = []
    for s in summary:
        c = s["configs"]
        pess = (c.get("rocksdb-pessimistic") or {}).get("txn_per_sec")
        opt = (c.get("rocksdb-optimistic") or {}).get("txn_per_sec")
        for label, _, _ in cfgs:
            v = c.get(label)
            if not v:
                continue
            mine = v["txn_per_sec"]
            is_shale = label.startswith("shale")
            k = v["abort_kinds_pct"]
            kinds = "/".join(fmt(k.get(n), 2) for n in ("write_conflict", "deadlock", "lock_timeout", "serialization_failure"))
            rows.append([
                s["threads"], label, fmt(mine),
                "%.2fx" % (mine / pess) if is_shale and mine and pess else "",
                "%.2fx" % (mine / opt) if is_shale and mine and opt else "",
                fmt(v["abort_pct"], 2), kinds, fmt(v["txn_p50"], 1), fmt(v["txn_p99"], 1),
                fmt(v["commit_p99"], 1), fmt(v["load"], 1),
            ])
    print_table(cols, rows)


def run_txn(args, engines, logs_dir):
    """The whole suite; returns the results document (saved by the caller). With --keep-logs
    every run's output goes to `logs_dir`."""
    engines = [e for e in engines if e in ("shale", "rocksdb")]
    if not engines:
        raise SystemExit("the txn suite runs shale and/or rocksdb")
    cfgs = configs(engines)
    thread_counts = [int(t) for t in args.threads.split(",")] if args.threads else (
        QUICK_THREADS if args.quick else THREADS)
    num = args.num or 100_000
    duration = args.duration or (3 if args.quick else 10)
    rounds = args.rounds or 1
    if "rocksdb" in engines and not args.no_build:
        ensure_packages()
    bins = build(engines, args.no_build)
    common = {
        "benchmarks": "txnmix",
        "num": num,
        "txn_ops": args.txn_ops,
        "txn_zipf": args.txn_zipf,
        "duration": duration,
        "key_size": 16,
        "compression_type": "none",
        "seed": args.seed,
        "progress_reports": 0,
    }
    tmp = __import__("tempfile").mkdtemp(prefix="shale-txn-", dir=args.workdir)
    runs = []
    try:
        for rnd in range(1, rounds + 1):
            for t in thread_counts:
                for label, key, extra in cfgs:
                    db = os.path.join(tmp, "r%d-t%d-%s" % (rnd, t, label))
                    flags = dict(common, threads=t, db=db, **extra)
                    cmd = [bins[key]] + ["--%s=%s" % (k, v) for k, v in flags.items()]
                    log("[round %d/%d] threads=%d %s (load %.1f)" % (rnd, rounds, t, label, loadavg() or -1))
                    load_before = loadavg()
                    t0 = time.time()
                    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    wall = time.time() - t0
                    load_after = loadavg()
                    if args.keep_logs:
                        os.makedirs(logs_dir, exist_ok=True)
                        with open(os.path.join(logs_dir, "r%d-t%d-%s.txt" % (rnd, t, label)), "w") as f:
                            f.write(" ".join(cmd) + "\n\n" + p.stdout)
                    if p.returncode != 0:
                        log(p.stdout[-4000:])
                        raise SystemExit("%s failed (exit %d)" % (label, p.returncode))
                    res = parse(p.stdout)
                    if not res["verified"]:
                        log(p.stdout[-4000:])
                        raise SystemExit("%s: txnmix did not verify its counters (lost updates?)" % label)
                    res["load"] = median([load_before, load_after])
                    for line in p.stdout.splitlines():
                        if line.startswith("txnmix"):
                            log("    " + line.strip())
                    runs.append({"round": rnd, "threads": t, "config": label, "command": cmd,
                                 "wall_seconds": round(wall, 2), "results": res})
                    shutil.rmtree(db, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = summarize(runs, cfgs, thread_counts)
    keys = "zipfian keys (theta %g)" % args.txn_zipf if args.txn_zipf > 0 else "uniform keys"
    print("\nSuite txn%s: txnmix, %d keys, %d ops/txn, %s, %d s per point, %d round(s); "
          "RocksDB with --isolation=%s; load = 1-min load average around the run (%d cores)"
          % (" (quick)" if args.quick else "", num, args.txn_ops, keys, duration, rounds, ROCKSDB_ISOLATION,
             os.cpu_count() or 0))
    report(summary, cfgs)
    return {
        "suite": "txn",
        "rounds": rounds,
        "threads": thread_counts,
        "flags": common,
        "shale_levels": SHALE_LEVELS,
        "rocksdb_modes": ROCKSDB_MODES,
        "summary": summary,
        "runs": runs,
    }
