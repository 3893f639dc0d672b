"""The `outofcache` suite of bench/compare (imported by it; see docs/benchmarks.md).

Point reads of a data set about ten times the block cache, with the data files out of the OS
page cache, so that a lookup which misses the block cache reads its data block from the device.
Per round and engine (engines alternate within a round):

  1. fill:  <bench> --benchmarks=fillseq,flush --threads=1 --num=N   (a settled tree: sequential
            keys give non-overlapping tables, the flush leaves nothing to replay at reopen)
  2. per thread count T:
            sync; echo 3 > /proc/sys/vm/drop_caches
            <bench> --use_existing_db=1 --benchmarks=readrandom --threads=T --reads=R

Every run of every engine gets the same db_bench flags, including
--cache_index_and_filter_blocks=false: RocksDB's default, passed explicitly, under which every
open table reader holds its index and filter beside the block cache (db_bench's --open_files=-1
default keeps all readers open); shale-bench maps it to ShaleDB's
Options::pin_index_and_filter_all_levels and fjall-bench to fjall's pinning policies on every
level. So a lookup costs one data-block read plus filter false positives, on each engine.

The page cache is dropped before each read run, and while it runs the DB's files are evicted
from the page cache every --evict-ms milliseconds (posix_fadvise DONTNEED on every file under
the DB directory; 0 = only the initial drop): without that, the ~N * 116 B of data would be back
in the page cache after a few hundred thousand lookups, and the "device" reads would be memory
copies. Read I/O per lookup is the reading process's block input (getrusage of the child,
ru_inblock * 512 B) minus that of the same command with --reads=0 (what opening the DB reads:
RocksDB loads every table's index and filter at open, fjall replays its journal; ShaleDB opens
extent readers on first use, so its indexes and filters are read during the lookups and counted
in them), divided by the T * R lookups; CPU per lookup likewise from the child's user + system
time (getrusage), so wall time per lookup minus CPU per lookup is time spent waiting on the
device.
"""

import os
import resource
import shutil
import statistics
import subprocess
import threading
import time

SUITE = {
    "num": 5_500_000,
    "reads": 100_000,
    "threads": [1, 2],
    "compression_type": "none",
    "cache_size": 64 * 1024 * 1024,
    "bloom_bits": 10,
    "write_buffer_size": 64 * 1024 * 1024,
    "key_size": 16,
    "value_size": 100,
    "cache_index_and_filter_blocks": "false",
}


def log(msg):
    import sys
    print(msg, file=sys.stderr, flush=True)


def drop_caches():
    """sync; echo 3 > /proc/sys/vm/drop_caches (needs root; refuses to measure without it)."""
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        raise SystemExit("outofcache: cannot drop the page cache (%s); run as root" % e)


def evict_dir(path):
    """posix_fadvise(DONTNEED) on every file under `path`: clean pages leave the page cache."""
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                continue  # deleted meanwhile (a compaction's input)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def run_child(cmd, db, evict_ms):
    """Runs `cmd`, evicting `db`'s files every evict_ms while it runs. Returns (returncode,
    output, seconds, bytes read from the device by the child, its user + system CPU seconds)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop = threading.Event()

    def evictor():
        while not stop.wait(evict_ms / 1000.0):
            evict_dir(db)

    t = threading.Thread(target=evictor, daemon=True) if evict_ms > 0 else None
    t0 = time.time()
    if t:
        t.start()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        stop.set()
        if t:
            t.join()
    wall = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return p.returncode, p.stdout, wall, (ru1.ru_inblock - ru0.ru_inblock) * 512, cpu


def run_outofcache(args, engines, bins, tmp, logs_dir, engine_cmd, parse_output):
    num = args.num or SUITE["num"]
    reads = args.reads or SUITE["reads"]
    threads = [int(t) for t in args.threads.split(",")] if args.threads else SUITE["threads"]
    rounds = args.rounds or 1
    common = {k: v for k, v in SUITE.items() if k not in ("num", "reads", "threads")}
    common.update({"num": num, "histogram": 1, "seed": args.seed, "progress_reports": 0})
    runs = []

    def one(engine, rnd, tag, flags, evict_ms):
        cmd = engine_cmd(engine, bins[engine], flags)
        log("[round %d/%d] %s %s (load %.2f)" % (rnd, rounds, engine, tag, os.getloadavg()[0]))
        code, out, wall, read_bytes, cpu = run_child(cmd, flags["db"], evict_ms)
        if args.keep_logs:
            os.makedirs(logs_dir, exist_ok=True)
            with open(os.path.join(logs_dir, "r%d-%s-%s.txt" % (rnd, engine, tag)), "w") as f:
                f.write(" ".join(cmd) + "\n\n" + out)
        if code != 0:
            log(out[-4000:])
            raise SystemExit("%s %s failed (exit %d)" % (engine, tag, code))
        for line in out.splitlines():
            if " ops/sec " in line:
                log("    " + line.strip())
        return cmd, parse_output(out), wall, read_bytes, cpu

    for rnd in range(1, rounds + 1):
        for e in engines:
            db = os.path.join(tmp, "r%d-%s" % (rnd, e))
            fill = dict(common, benchmarks="fillseq,flush", threads=1, db=db)
            one(e, rnd, "fill", fill, 0)
            db_bytes = dir_bytes(db)
            log("    DB on disk: %.1f MiB (%.1fx the block cache)"
                % (db_bytes / 2**20, db_bytes / float(common["cache_size"])))
            # What opening the DB reads (footers, pinned indexes and filters, a journal): the
            # same command with no lookups, from a cold page cache.
            drop_caches()
            flags = dict(common, benchmarks="readrandom", use_existing_db=1, threads=1, reads=0,
                         db=db)
            _, _, _, open_bytes, open_cpu = one(e, rnd, "open", flags, args.evict_ms)
            log("    open read %.1f MiB" % (open_bytes / 2**20))
            for t in threads:
                drop_caches()
                flags = dict(common, benchmarks="readrandom", use_existing_db=1, threads=t,
                             reads=reads, db=db)
                load_before = os.getloadavg()[0]
                cmd, res, wall, read_bytes, cpu = one(e, rnd, "t%d" % t, flags, args.evict_ms)
                lookups = t * reads
                read_bytes = max(0, read_bytes - open_bytes)
                cpu = max(0.0, cpu - open_cpu)
                runs.append({
                    "round": rnd, "engine": e, "threads": t, "command": cmd,
                    "wall_seconds": round(wall, 2), "db_bytes": db_bytes,
                    "load_before": load_before, "load_after": os.getloadavg()[0],
                    "read_bytes": read_bytes, "open_read_bytes": open_bytes,
                    "read_bytes_per_lookup": read_bytes / float(lookups),
                    "cpu_seconds": cpu, "open_cpu_seconds": open_cpu,
                    "cpu_us_per_lookup": cpu * 1e6 / lookups,
                    "results": res,
                })
                log("    read %.1f MiB: %.0f B per lookup; CPU %.2f s: %.1f us per lookup"
                    % (read_bytes / 2**20, read_bytes / float(lookups), cpu, cpu * 1e6 / lookups))
            shutil.rmtree(db, ignore_errors=True)

    summary = []
    for t in threads:
        row = {"threads": t, "engines": {}}
        for e in engines:
            rs = [r for r in runs if r["engine"] == e and r["threads"] == t]
            rr = [r["results"].get("readrandom") for r in rs if r["results"].get("readrandom")]
            if not rr:
                continue
            row["engines"][e] = {
                "rounds": len(rr),
                "ops_per_sec": statistics.median(x["ops_per_sec"] for x in rr),
                "p50_us": statistics.median(x.get("p50", 0) for x in rr),
                "p99_us": statistics.median(x.get("p99", 0) for x in rr),
                "read_bytes_per_lookup": statistics.median(r["read_bytes_per_lookup"] for r in rs),
                "cpu_us_per_lookup": statistics.median(r["cpu_us_per_lookup"] for r in rs),
                "db_mib": statistics.median(r["db_bytes"] for r in rs) / 2**20,
                "found": rr[0]["found"],
            }
        ops = {e: v["ops_per_sec"] for e, v in row["engines"].items()}
        for other in ("rocksdb", "fjall"):
            if ops.get("shale") and ops.get(other):
                row["shale_vs_" + other] = ops["shale"] / ops[other]
        summary.append(row)

    print("\nSuite outofcache: num=%d, reads=%d per thread, cache %d B, evict every %d ms, %d round(s)"
          % (num, reads, common["cache_size"], args.evict_ms, rounds))
    for row in summary:
        print("\nthreads=%d (medians over rounds)" % row["threads"])
        print("%-8s %12s %9s %9s %14s %15s %9s %s" % ("engine", "ops/s", "p50 us", "p99 us", "B read/lookup",
                                                      "CPU us/lookup", "DB MiB", "found"))
        for e, v in row["engines"].items():
            print("%-8s %12.0f %9.1f %9.1f %14.0f %15.1f %9.1f %s" % (
                e, v["ops_per_sec"], v["p50_us"], v["p99_us"], v["read_bytes_per_lookup"],
                v["cpu_us_per_lookup"], v["db_mib"], v["found"]))
        for other in ("rocksdb", "fjall"):
            if "shale_vs_" + other in row:
                print("shale/%s: %.2fx" % (other, row["shale_vs_" + other]))
    return {"suite": "outofcache", "rounds": rounds, "threads": threads, "flags": common,
            "reads": reads, "evict_ms": args.evict_ms, "summary": summary, "runs": runs}
