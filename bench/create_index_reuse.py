#!/usr/bin/env python3
"""Times CREATE INDEX on a sysbench table loaded once and reused: starts SERVER (shale: the
release `shale` of CARGO_TARGET_DIR, as bench/sysbench.py starts it; innodb: mariadbd as
bench/ddl.py starts it) on DIR, loads --rows rows with sysbench's prepare unless DIR already
holds them (printing the prepare time), waits --settle seconds, then runs each statement
--repeat times through the mariadb client, printing its wall time and `uptime` beside it.
With --perf, `perf record -e task-clock -g` of the server covers the statements (DIR/perf.data).

  bench/create_index_reuse.py --server shale --dir /work/cidx-tmp/d10m --rows 10000000
  bench/create_index_reuse.py --server innodb --dir /work/cidx-tmp/d10m --rows 10000000
  bench/create_index_reuse.py --server shale --dir DIR --binary /tmp/shale-before --perf
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

STATEMENTS = ["CREATE INDEX ic ON sbtest1 (c)", "DROP INDEX ic ON sbtest1"]


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=["shale", "innodb"], required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--perf", action="store_true")
    ap.add_argument("--load-only", action="store_true")
    ap.add_argument("--binary", help="the shale binary (default: CARGO_TARGET_DIR's release)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    server = (sb.Shale(args.dir, False, binary=args.binary) if args.server == "shale"
              else sb.make_server(args.server, args.dir))
    marker = os.path.join(server.dir, "loaded")
    server.start()
    try:
        if not os.path.exists(marker):
            t = time.time()
            sb.prepare_table(server, args.rows)
            print(f"prepare {args.rows} rows: {time.time() - t:.1f} s  [{uptime()}]", flush=True)
            with open(marker, "w") as f:
                f.write(str(args.rows))
        if args.load_only:
            return
        time.sleep(args.settle)
        perf = None
        if args.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-e", "task-clock", "-g", "-o",
                                     os.path.join(args.dir, "perf.data"), "-p",
                                     str(server.proc.pid)])
            time.sleep(1)
        for _ in range(args.repeat):
            for sql in STATEMENTS:
                before = uptime()
                t = time.time()
                r = subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P",
                                    str(server.port), "-u", sb.USER, f"-p{sb.PASSWORD}",
                                    sb.DBNAME, "-e", sql], capture_output=True, text=True)
                print(f"{args.server} {time.time() - t:8.3f} s  {sql}  {r.stderr.strip()}"
                      f"  [before: {before}]", flush=True)
        if perf:
            perf.send_signal(2)
            perf.wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
