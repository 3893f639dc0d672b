#!/usr/bin/env python3
"""DDL on a loaded table: ShaleDB, MariaDB InnoDB and MyRocks (issue 10's DDL table).

For each server (started as bench/sysbench.py starts them): sysbench prepares one sbtest table
of --rows rows; each statement of DDL below runs once through the mariadb client and its wall
time is printed (instant statements take milliseconds whatever the size; a copy grows with
it). Then CREATE INDEX runs again while `sysbench oltp_update_non_index` writes from 2 threads:
printed are the build's time and the writers' transactions per second in the seconds before
and during the build (a build that blocks writers shows ~0 during it).

  bench/ddl.py --rows 1000000
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

spec_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sysbench.py")
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("sb", spec_path)
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)

DDL = [
    ("ADD COLUMN (last)", "ALTER TABLE sbtest1 ADD COLUMN c1 INT"),
    ("ADD COLUMN NOT NULL DEFAULT (middle)",
     "ALTER TABLE sbtest1 ADD COLUMN c2 INT NOT NULL DEFAULT 7 AFTER id"),
    ("DROP COLUMN", "ALTER TABLE sbtest1 DROP COLUMN c1"),
    ("RENAME COLUMN", "ALTER TABLE sbtest1 RENAME COLUMN c2 TO c3"),
    ("SET DEFAULT", "ALTER TABLE sbtest1 ALTER COLUMN c3 SET DEFAULT 9"),
    ("widen INT -> BIGINT", "ALTER TABLE sbtest1 MODIFY c3 BIGINT NOT NULL DEFAULT 9"),
    ("NOT NULL -> NULL", "ALTER TABLE sbtest1 MODIFY c3 BIGINT NULL DEFAULT 9"),
    ("ADD COLUMN VARCHAR(20)", "ALTER TABLE sbtest1 ADD COLUMN v VARCHAR(20)"),
    ("VARCHAR(20) -> VARCHAR(40)", "ALTER TABLE sbtest1 MODIFY v VARCHAR(40)"),
    ("RENAME TABLE", "RENAME TABLE sbtest1 TO sbtest_renamed"),
    ("RENAME TABLE back", "RENAME TABLE sbtest_renamed TO sbtest1"),
    ("CREATE INDEX (c)", "CREATE INDEX ic ON sbtest1 (c)"),
    ("DROP INDEX", "DROP INDEX ic ON sbtest1"),
]


def client(server, sql):
    return subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(server.port),
                           "-u", sb.USER, f"-p{sb.PASSWORD}", sb.DBNAME, "--batch",
                           "--skip-column-names", "-e", sql], capture_output=True, text=True)


def timed(server, sql):
    t = time.time()
    r = client(server, sql)
    el = time.time() - t
    return el, (r.stderr.strip().splitlines() or [""])[-1] if r.returncode else ""


def build_under_load(server, lead=4.0):
    """CREATE INDEX while oltp_update_non_index runs; returns (build s, tps before, tps during)."""
    load = subprocess.Popen(["sysbench", "oltp_update_non_index", "--db-driver=mysql",
                             "--mysql-host=127.0.0.1", f"--mysql-port={server.port}",
                             f"--mysql-user={sb.USER}", f"--mysql-password={sb.PASSWORD}",
                             f"--mysql-db={sb.DBNAME}", "--tables=1", "--threads=2", "--time=600",
                             "--report-interval=1", "--mysql-ignore-errors=all", "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t_start = time.time()
    time.sleep(lead)
    b0 = time.time()
    build, err = timed(server, "CREATE INDEX ic ON sbtest1 (c)")
    b1 = time.time()
    time.sleep(1.5)
    load.terminate()
    out, _ = load.communicate(timeout=30)
    before, during = [], []
    for line in out.splitlines():
        m = re.match(r"\[ (\d+)s \].* tps: ([0-9.]+)", line)
        if not m:
            continue
        at, tps = t_start + int(m.group(1)), float(m.group(2))
        if b0 - lead + 1 < at <= b0:
            before.append(tps)
        elif b0 + 1 <= at <= b1:
            during.append(tps)
    avg = lambda v: sum(v) / len(v) if v else float("nan")
    return build, err, avg(before), avg(during), len(during)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--servers", default="shale,innodb,myrocks")
    args = ap.parse_args()
    sb.need_packages()
    subprocess.run(["cargo", "build", "--release", "-p", "shale-cli"], cwd=sb.REPO, check=True)
    tmp = tempfile.mkdtemp(prefix="shale-ddl-")
    names = args.servers.split(",")
    times, loads = {}, {}
    for name in names:
        server = sb.make_server(name, tmp)
        server.start()
        try:
            t0 = time.time()
            sb.prepare_table(server, args.rows)
            print(f"# {name}: prepared {args.rows} rows in {time.time() - t0:.1f} s", flush=True)
            for label, sql in DDL:
                el, err = timed(server, sql)
                times[(name, label)] = (el, err)
                print(f"{name:8} {el:8.3f} s  {label}  {err}", flush=True)
            loads[name] = build_under_load(server)
            print(f"{name:8} CREATE INDEX under load: {loads[name]}", flush=True)
        finally:
            server.stop()
            # Its data (gigabytes at 10M rows) is not needed by the next server.
            shutil.rmtree(server.dir, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{args.rows} rows; seconds (error text where the statement failed)\n")
    print("| statement | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, _ in DDL:
        cells = [f"{times[(n, label)][0]:.3f}" + (f" ({times[(n, label)][1]})" if times[(n, label)][1] else "")
                 for n in names]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\n| CREATE INDEX while 2 threads run oltp_update_non_index | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    print("| build s | " + " | ".join(f"{loads[n][0]:.2f}" for n in names) + " |")
    print("| writers' tps before | " + " | ".join(f"{loads[n][2]:.0f}" for n in names) + " |")
    print("| writers' tps during (seconds) | " +
          " | ".join(f"{loads[n][3]:.0f} ({loads[n][4]})" for n in names) + " |")


if __name__ == "__main__":
    main()
