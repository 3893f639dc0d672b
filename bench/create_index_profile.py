#!/usr/bin/env python3
"""Profiles ShaleDB's CREATE INDEX: starts `shale serve` (release build, as bench/sysbench.py
starts it) on DIR, loads --rows sysbench rows unless DIR already holds them, waits --settle
seconds for background compaction, then records `perf record -e task-clock -g` of the server
while it builds and drops an index on `c` (CHAR(120)) and one on `k` (INT), printing each
statement's wall time. Read the profile with
`perf report -i DIR/perf.data --no-children --sort comm,symbol`.

  bench/create_index_profile.py --dir /tmp/ci-prof --rows 1000000 --settle 10
"""
import argparse
import importlib.util
import os
import subprocess
import time

spec = importlib.util.spec_from_file_location(
    "sb", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sysbench.py"))
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)

STATEMENTS = ["CREATE INDEX ic ON sbtest1 (c)", "DROP INDEX ic ON sbtest1",
              "CREATE INDEX ik2 ON sbtest1 (k)", "DROP INDEX ik2 ON sbtest1"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--settle", type=float, default=10.0)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    loaded = os.path.exists(os.path.join(args.dir, "shale", "CURRENT"))
    server = sb.make_server("shale", args.dir)
    server.start()
    try:
        if not loaded:
            sb.prepare_table(server, args.rows)
        time.sleep(args.settle)
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "task-clock", "-g", "-o",
                                 os.path.join(args.dir, "perf.data"), "-p", str(server.proc.pid)])
        time.sleep(1)
        for sql in STATEMENTS:
            t = time.time()
            r = subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P",
                                str(server.port), "-u", sb.USER, f"-p{sb.PASSWORD}", sb.DBNAME,
                                "-e", sql], capture_output=True, text=True)
            print(f"{time.time() - t:7.3f} s  {sql}  {r.stderr.strip()}", flush=True)
        perf.send_signal(2)
        perf.wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
