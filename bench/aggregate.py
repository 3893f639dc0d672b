#!/usr/bin/env python3
"""Filtered aggregate scans (seed 003's SUM pushdown) on ShaleDB, MariaDB InnoDB and MyRocks.

For each server (started as bench/sysbench.py starts them, same durability settings): sysbench
prepares one sbtest table of --rows rows, then each query below runs --repeat times through the
mariadb client and the best wall time is kept. Between the load and the queries each server
is left to finish its background work (compactions, flushes, purge: until it uses under 10% of
a core for 5 s, `wait_settled` in bench/sysbench.py), so the queries do not race it. ShaleDB
runs them in autocommit, where its aggregate scan is split into one partition per core
(crates/shale-sql/src/parallel.rs).

  bench/aggregate.py --rows 1000000

Memory: InnoDB gets a 1 GiB buffer pool and MyRocks a 1 GiB block cache (bench/sysbench.py), so
ShaleDB gets a 1 GiB block cache too (`--shale-cache-mb`, 1024 by default; `shale serve`'s own
default is 128 MiB, under which a 1M-row table's ~200 MB of blocks are re-read with `pread` and
re-checksummed on every scan).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("sb", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sysbench.py"))
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)

QUERIES = [
    "SELECT SUM(k), COUNT(*) FROM sbtest1 WHERE c LIKE '1%'",
    "SELECT COUNT(*) FROM sbtest1 WHERE k > 500000",
    "SELECT AVG(k), MAX(pad) FROM sbtest1 WHERE id % 3 = 0",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--servers", default="shale,innodb,myrocks")
    ap.add_argument("--no-settle", action="store_true",
                    help="query right after the load, while compactions / purge may still run")
    ap.add_argument("--shale-cache-mb", type=int, default=1024,
                    help="ShaleDB's block cache (the peers' buffer pool / block cache is 1 GiB)")
    args = ap.parse_args()
    if "--cache-mb" not in sb.SHALE_ARGS:
        sb.SHALE_ARGS = ["--cache-mb", str(args.shale_cache_mb), *sb.SHALE_ARGS]
    print(f"# shale args: {' '.join(sb.SHALE_ARGS)}", flush=True)
    sb.need_packages()
    subprocess.run(["cargo", "build", "--release", "-p", "shale-cli"], cwd=sb.REPO, check=True)
    # The machine may be shared: the load around each server's turn goes with its figures.
    print("# load average %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    tmp = tempfile.mkdtemp(prefix="shale-agg-")
    results = {}
    for name in args.servers.split(","):
        server = sb.make_server(name, tmp)
        server.start()
        try:
            t0 = time.time()
            sb.prepare_table(server, args.rows)
            print(f"# {name}: prepared {args.rows} rows in {time.time() - t0:.1f} s", flush=True)
            if not args.no_settle:
                waited = sb.wait_settled(server)
                print(f"# {name}: settled (background work after the load done) in {waited:.0f} s",
                      flush=True)
            for q in QUERIES:
                best, answer = None, None
                for _ in range(args.repeat):
                    t = time.time()
                    r = subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(server.port),
                                        "-u", sb.USER, f"-p{sb.PASSWORD}", sb.DBNAME, "--batch",
                                        "--skip-column-names", "-e", q], check=True, capture_output=True, text=True)
                    el = time.time() - t
                    best = el if best is None else min(best, el)
                    answer = r.stdout.strip()
                results[(name, q)] = (best, answer)
                print(f"{name:8} {best:7.3f} s  {q}  -> {answer}", flush=True)
        finally:
            server.stop()
            # Its data (gigabytes at 10M rows) is not needed by the next server.
            shutil.rmtree(server.dir, ignore_errors=True)
            print(f"# {name} done, load average %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    names = args.servers.split(",")
    print("\n| query | " + " | ".join(f"{n} s" for n in names) + " | innodb/shale | myrocks/shale |")
    print("|---|" + "---|" * (len(names) + 2))
    for q in QUERIES:
        cells = [f"{results[(n, q)][0]:.3f}" for n in names]
        sp = lambda o: f"{results[(o, q)][0] / results[('shale', q)][0]:.2f}" if ("shale", q) in results and (o, q) in results else "-"
        print(f"| `{q}` | " + " | ".join(cells) + f" | {sp('innodb')} | {sp('myrocks')} |")


if __name__ == "__main__":
    main()
