#!/usr/bin/env python3
"""Space on disk: ShaleDB, MariaDB InnoDB and MyRocks after loading and after updating half the rows.

For each server (started as bench/sysbench.py starts them, same settings): sysbench prepares one
sbtest table of --rows rows; the server is stopped cleanly and the table's files are measured;
it is started again, half the rows get a new `c` (UPDATE ... WHERE id % 2 = 0, in statements of
50,000 ids), it is stopped and measured; then the LSM engines are compacted (ShaleDB: `shale
compact` on the stopped directory; MyRocks: SET GLOBAL rocksdb_compact_cf='default') and
measured a third time (InnoDB has no such step). Bytes are what the file system allocated
(st_blocks x 512, as `du` counts), so holes do not count. What is measured, per engine:

  ShaleDB  every file of the data directory except WAL segments (NNNNNN.log); and at the end the
           bytes of the extents in use (data files keep freed 2 MB extent slots for reuse, as
           holes: punched out when freed)
  InnoDB   the table's tablespace (sbtest/sbtest1.ibd); the shared system tablespace and redo
           logs are left out
  MyRocks  every file of #rocksdb except its WAL (*.log)

  bench/space.py --rows 1000000
  SHALE_ARGS="--cold-compression zstd" bench/space.py --rows 1000000 --servers shale
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time

import importlib.util

spec = importlib.util.spec_from_file_location(
    "sb", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sysbench.py"))
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)


def allocated(path):
    """Bytes the file system allocated to a file (as `du` counts: holes are free)."""
    return os.stat(path).st_blocks * 512


def tree_bytes(root, skip):
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            if not skip(f):
                total += allocated(os.path.join(d, f))
    return total


def shale_live_bytes(server):
    """Bytes of the extents in use (`shale stats`): data files keep freed extent slots for reuse,
    so after a compaction the files can be larger than what they hold."""
    out = subprocess.run([sb.shale_binary(), *sb.SHALE_ARGS, "--db",
                           server.dir, "stats"], check=True, capture_output=True, text=True).stdout
    return sum(int(m) for m in re.findall(r"extents, (\d+) bytes", out))


def measure(server):
    if server.name == "shale":
        return tree_bytes(server.dir, lambda f: re.fullmatch(r"\d+\.log", f) is not None)
    data = os.path.join(server.dir, "data")
    if server.name == "innodb":
        return allocated(os.path.join(data, sb.DBNAME, "sbtest1.ibd"))
    return tree_bytes(os.path.join(data, "#rocksdb"), lambda f: f.endswith(".log"))


def client(server, sql):
    subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(server.port),
                    "-u", sb.USER, f"-p{sb.PASSWORD}", sb.DBNAME, "-e", sql], check=True,
                   capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--servers", default="shale,innodb,myrocks")
    args = ap.parse_args()
    sb.need_packages()
    subprocess.run(["cargo", "build", "--release", "-p", "shale-cli"], cwd=sb.REPO, check=True)
    tmp = tempfile.mkdtemp(prefix="shale-space-")
    names = args.servers.split(",")
    out = {}
    for name in names:
        server = sb.make_server(name, tmp)
        try:
            server.start()
            sb.prepare_table(server, args.rows)
            server.stop()
            loaded = measure(server)
            server.start()
            t0 = time.time()
            for lo in range(1, args.rows + 1, 50_000):
                client(server, f"UPDATE sbtest1 SET c = CONCAT('u', SUBSTRING(c, 2)) "
                               f"WHERE id >= {lo} AND id < {lo + 50_000} AND id % 2 = 0")
            print(f"# {name}: updated half the rows in {time.time() - t0:.1f} s", flush=True)
            server.stop()
            updated = measure(server)
            compacted = None
            if name == "shale":
                subprocess.run([sb.shale_binary(), *sb.SHALE_ARGS,
                                "--db", server.dir, "compact"], check=True, capture_output=True)
                compacted = measure(server)
            elif name == "myrocks":
                server.start()
                client(server, "SET GLOBAL rocksdb_compact_cf='default'")
                server.stop()
                compacted = measure(server)
        finally:
            # A failed step must not leave a server running.
            if getattr(server, "proc", None) is not None and server.proc.poll() is None:
                server.stop()
        live = shale_live_bytes(server) if name == "shale" else None
        shutil.rmtree(server.dir, ignore_errors=True)
        out[name] = (loaded, updated, compacted, live)
        print(f"{name:8} loaded {loaded / 2**20:8.1f} MiB  updated {updated / 2**20:8.1f} MiB  "
              f"compacted {'-' if compacted is None else f'{compacted / 2**20:.1f}'} MiB", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    mib = lambda v: "-" if v is None else f"{v / 2**20:.1f}"
    print(f"\n{args.rows} rows, MiB\n")
    print("| | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for i, label in enumerate(["after load", "after updating half", "after a full compaction",
                               "ShaleDB: extents in use at the end"]):
        print(f"| {label} | " + " | ".join(mib(out[n][i]) for n in names) + " |")


if __name__ == "__main__":
    main()
