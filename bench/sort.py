#!/usr/bin/env python3
"""ORDER BY an unindexed column over a sysbench table: peak memory and time (issue 10).

One sbtest table of --rows rows is loaded (sysbench prepare) into ShaleDB and into MariaDB
InnoDB (servers started as bench/sysbench.py starts them). Then `SELECT * FROM sbtest1 ORDER
BY c` (c is CHAR(120), not indexed) runs --repeat times through the mariadb client (--quick,
output thrown away), best wall time kept. For ShaleDB it runs against each binary given with
--binary (e.g. the build before the memory-bounded sort and the one after) on the same data
directory, and the server's peak RSS during the query is read from /proc/PID/status (VmHWM,
reset through /proc/PID/clear_refs before the query, so the load does not count). Last,
`shale sql --batch -e` runs the same query embedded, its peak RSS taken by wait4.

  bench/sort.py --rows 2000000 --binary before=/tmp/shale-before --binary after=target/release/shale
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

spec = importlib.util.spec_from_file_location(
    "sb", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sysbench.py"))
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)

QUERY = "SELECT * FROM sbtest1 ORDER BY c"


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def reset_hwm(pid):
    # Linux: writing 5 resets the peak resident set size to the current one.
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def run_query(port, user, password, db):
    t = time.time()
    with open(os.devnull, "w") as null:
        subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-u", user,
                        f"-p{password}", db, "--batch", "--quick", "-e", QUERY],
                       check=True, stdout=null)
    return time.time() - t


def embedded_rss(binary, data_dir):
    """Wall time and peak RSS (MiB) of `shale sql --batch -e QUERY` on data_dir."""
    with open(os.devnull, "w") as null:
        t = time.time()
        p = subprocess.Popen([binary, "--db", data_dir, "sql", "--batch", "-e",
                              f"USE {sb.DBNAME}; {QUERY}"], stdout=null)
        _, status, usage = os.wait4(p.pid, 0)
        el = time.time() - t
    if status != 0:
        raise RuntimeError(f"{binary} sql exited with {status}")
    return el, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--binary", action="append", default=[],
                    help="name=path of a shale binary (default: after=<release build>)")
    ap.add_argument("--skip-innodb", action="store_true")
    args = ap.parse_args()
    binaries = [b.split("=", 1) for b in args.binary] or [["after", sb.shale_binary()]]
    print("# load average %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    tmp = tempfile.mkdtemp(prefix="shale-sort-")
    results = []
    try:
        data_dir = None
        for i, (name, path) in enumerate(binaries):
            server = sb.make_server("shale", tmp)
            server_binary = sb.shale_binary
            sb.shale_binary = lambda p=path: p
            try:
                server.start()
                if i == 0:
                    t0 = time.time()
                    sb.prepare_table(server, args.rows)
                    print(f"# shale: prepared {args.rows} rows in {time.time() - t0:.1f} s",
                          flush=True)
                best, hwm = None, 0
                for _ in range(args.repeat):
                    reset_hwm(server.proc.pid)
                    el = run_query(server.port, sb.USER, sb.PASSWORD, sb.DBNAME)
                    hwm = max(hwm, vm_hwm_kib(server.proc.pid) or 0)
                    best = el if best is None else min(best, el)
                results.append((f"shale {name} (serve)", best, hwm / 1024))
                print(f"shale {name:8} serve {best:7.2f} s  peak RSS {hwm / 1024:7.0f} MiB  "
                      "load %.2f" % os.getloadavg()[0], flush=True)
            finally:
                server.stop()
                sb.shale_binary = server_binary
            data_dir = server.dir
        for name, path in binaries:
            el, rss = embedded_rss(path, data_dir)
            results.append((f"shale {name} (sql --batch)", el, rss))
            print(f"shale {name:8} sql   {el:7.2f} s  peak RSS {rss:7.0f} MiB  "
                  "load %.2f" % os.getloadavg()[0], flush=True)
        shutil.rmtree(data_dir, ignore_errors=True)
        if not args.skip_innodb:
            server = sb.make_server("innodb", tmp)
            server.start()
            try:
                t0 = time.time()
                sb.prepare_table(server, args.rows)
                print(f"# innodb: prepared {args.rows} rows in {time.time() - t0:.1f} s",
                      flush=True)
                best = None
                for _ in range(args.repeat):
                    el = run_query(server.port, sb.USER, sb.PASSWORD, sb.DBNAME)
                    best = el if best is None else min(best, el)
                # Its RSS is mostly the 1 GiB buffer pool filled by the load: not shown.
                results.append(("innodb (mariadbd)", best, None))
                print(f"innodb          {best:7.2f} s  load %.2f" % os.getloadavg()[0], flush=True)
            finally:
                server.stop()
                shutil.rmtree(server.dir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| run | best time s | peak RSS MiB |\n|---|---|---|")
    for name, el, rss in results:
        print(f"| {name} | {el:.2f} | {'-' if rss is None else f'{rss:.0f}'} |")


if __name__ == "__main__":
    main()
