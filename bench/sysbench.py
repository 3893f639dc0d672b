#!/usr/bin/env python3
"""sysbench OLTP against ShaleDB (`shale serve`), MariaDB InnoDB and MariaDB MyRocks, one run.

Installs what is missing (mariadb-server, mariadb-plugin-rocksdb, sysbench; apt-get as root),
builds `shale` in release mode, then for each server: starts it on 127.0.0.1 with its data in a
fresh temp directory, creates the sbtest database and user, `prepare`s the tables, runs each
oltp_* script for --time seconds at each --threads value (each run after the server has
settled: under 10% of a core for 5 s, so background work left by the load or the last run is
done), and stops it. The same durability
everywhere by default: a commit reaches the OS but is not fsynced
(innodb_flush_log_at_trx_commit=2, rocksdb_flush_log_at_trx_commit=2, ShaleDB without
--sync-commits); --sync fsyncs every commit on all three.

Prints one row per (script, threads): tps, qps and p95 latency of each server and the ratios
ShaleDB / InnoDB and ShaleDB / MyRocks; writes JSON under bench/results/.

  bench/sysbench.py --quick                      # 1 table x 10k rows, 10 s, 4 threads
  bench/sysbench.py --tables 10 --table-size 100000 --threads 64 --time 60
  bench/sysbench.py --servers shale --scripts oltp_point_select --threads 1,16
  bench/sysbench.py --interleave --rounds 3 --scripts oltp_point_select --threads 64

Python 3 standard library only. See docs/benchmarks.md.
"""

import argparse
import datetime
import json
import os
import shlex
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["oltp_point_select", "oltp_read_only", "oltp_read_write", "oltp_write_only",
           "oltp_insert", "oltp_update_index", "oltp_update_non_index", "oltp_delete",
           "select_random_points", "select_random_ranges"]
USER, PASSWORD, DBNAME = "sbtest", "sbtest", "sbtest"


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def need_packages():
    missing = [p for p, exe in [("mariadb-server", "mariadbd"), ("sysbench", "sysbench"),
                                ("mariadb-client", "mariadb")] if not shutil.which(exe)]
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/mariadb19/plugin/ha_rocksdb.so") and \
            not any(os.path.exists(os.path.join(d, "ha_rocksdb.so"))
                    for d in ["/usr/lib/mysql/plugin", "/usr/lib/mariadb/plugin"]):
        missing.append("mariadb-plugin-rocksdb")
    if missing:
        if os.geteuid() != 0:
            sys.exit(f"missing packages: {' '.join(missing)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq"] + missing, check=True, env=env)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, limit=120):
    until = time.time() + limit
    while time.time() < until:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def mariadb_cli(port, user, password, sql):
    return sh(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-u", user,
               f"-p{password}", "-e", sql])


# Extra top-level `shale` options for every run of the binary, e.g.
# SHALE_ARGS="--cold-compression zstd".
SHALE_ARGS = shlex.split(os.environ.get("SHALE_ARGS", ""))


def shale_binary():
    """The release `shale` that `cargo build --release` just built (CARGO_TARGET_DIR aware)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, "release", "shale")


class Shale:
    def __init__(self, tmp, sync, name="shale", binary=None):
        self.name, self.binary = name, binary or shale_binary()
        self.dir, self.sync = os.path.join(tmp, name), sync

    def start(self):
        self.port = free_port()
        args = [self.binary, *SHALE_ARGS, "--db", self.dir, "serve",
                "--port", str(self.port)]
        if self.sync:
            args.append("--sync-commits")
        self.proc = subprocess.Popen(args, env=dict(os.environ, SHALE_ROOT_PASSWORD="rootpw"),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        mariadb_cli(self.port, "root", "rootpw",
                    f"CREATE DATABASE IF NOT EXISTS {DBNAME}; "
                    f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; "
                    f"GRANT ALL ON *.* TO '{USER}'@'%'")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


class Maria:
    def __init__(self, tmp, sync, engine):
        self.name = "innodb" if engine == "innodb" else "myrocks"
        self.engine, self.sync = engine, sync
        self.dir = os.path.join(tmp, self.name)

    def start(self):
        self.port = free_port()
        data = os.path.join(self.dir, "data")
        fresh = not os.path.exists(os.path.join(data, "mysql"))
        os.makedirs(data, exist_ok=True)
        if fresh:
            sh(["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={data}",
                "--auth-root-authentication-method=normal", "--skip-test-db"])
        flush = "1" if self.sync else "2"
        args = ["mariadbd", "--no-defaults", "--user=root", f"--datadir={data}",
                f"--socket={self.dir}/s.sock", f"--port={self.port}", "--bind-address=127.0.0.1",
                f"--pid-file={self.dir}/pid", f"--log-error={self.dir}/err.log",
                "--innodb-buffer-pool-size=1G", "--max-connections=2000",
                f"--innodb-flush-log-at-trx-commit={flush}"]
        if self.engine == "rocksdb":
            # Tables made without ENGINE= are MyRocks too.
            args += ["--plugin-load-add=ha_rocksdb.so", "--rocksdb-block-cache-size=1G",
                     f"--rocksdb-flush-log-at-trx-commit={flush}",
                     "--default-storage-engine=rocksdb"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        if not fresh:
            return
        sh(["mariadb", "--no-defaults", f"--socket={self.dir}/s.sock", "-uroot", "-e",
            f"CREATE DATABASE {DBNAME}; CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY "
            f"'{PASSWORD}'; GRANT ALL ON *.* TO '{USER}'@'127.0.0.1'"])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)


def make_server(name, tmp, sync=False):
    """A server of the comparison by name: shale, innodb or myrocks (not started)."""
    if name == "shale":
        return Shale(tmp, sync)
    return Maria(tmp, sync, "innodb" if name == "innodb" else "rocksdb")


def prepare_table(server, rows):
    """One sbtest table of `rows` rows (sysbench's prepare), as bench/aggregate.py, ddl.py and
    space.py load it."""
    subprocess.run(["sysbench", "oltp_read_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                    f"--mysql-port={server.port}", f"--mysql-user={USER}",
                    f"--mysql-password={PASSWORD}", f"--mysql-db={DBNAME}", "--tables=1",
                    f"--table-size={rows}"]
                   # sysbench names its engine in CREATE TABLE (InnoDB unless told).
                   + (["--mysql_storage_engine=rocksdb"] if server.name == "myrocks" else [])
                   + ["prepare"], check=True, capture_output=True)


def wait_settled(server, quiet_secs=5, busy_below=0.10, timeout=900):
    """Waits until the server process has used under `busy_below` of one core for
    `quiet_secs` seconds in a row (its compactions, flushes or purge after a load are done),
    at most `timeout` seconds. Returns the seconds waited. Applied to every server alike."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu_secs():
        with open(f"/proc/{server.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    start = time.time()
    quiet = 0
    last = cpu_secs()
    while quiet < quiet_secs and time.time() - start < timeout:
        time.sleep(1)
        now = cpu_secs()
        quiet = quiet + 1 if now - last < busy_below else 0
        last = now
    return time.time() - start


def sysbench(server, script, phase, args, threads=1):
    cmd = ["sysbench", "--db-driver=mysql", "--mysql-host=127.0.0.1",
           f"--mysql-port={server.port}", f"--mysql-user={USER}", f"--mysql-password={PASSWORD}",
           f"--mysql-db={DBNAME}", f"--tables={args.tables}", f"--table-size={args.table_size}",
           f"--threads={threads}", f"--time={args.time}", "--report-interval=0",
           "--percentile=95", "--db-ps-mode=auto"]
    if getattr(server, "engine", None) == "rocksdb":
        cmd.append("--mysql_storage_engine=rocksdb")
    cmd += [script, phase]
    r = subprocess.run(cmd, text=True, capture_output=True, timeout=args.time * 4 + 1800)
    if r.returncode != 0:
        raise RuntimeError(f"{server.name} {script} {phase}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return r.stdout


def cpu_sample(server):
    """CPU seconds so far: the server process (all its threads: utime, stime), the waited-for
    children of this script (sysbench: user, sys) and the whole machine (busy, all)."""
    tick = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{server.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open("/proc/stat") as f:
        jiffies = [int(x) for x in f.readline().split()[1:]]
    idle = jiffies[3] + jiffies[4]
    return {"server_user": int(fields[11]) / tick, "server_sys": int(fields[12]) / tick,
            "client_user": kids.ru_utime, "client_sys": kids.ru_stime,
            "busy": (sum(jiffies) - idle) / tick, "all": sum(jiffies) / tick}


def cpu_per_query(a, b, r, seconds):
    """Microseconds of CPU per query over one run, from two `cpu_sample`s: what the server and
    the client (sysbench, on the same cores) each spend, user and system. The queries are
    sysbench's count (qps x the run's length)."""
    queries = (r.get("qps") or 0) * seconds
    if not queries:
        return {}
    per = lambda k: round((b[k] - a[k]) * 1e6 / queries, 2)
    return {f"{k}_us": per(k) for k in ("server_user", "server_sys", "client_user", "client_sys")} | {
        "machine_busy": round((b["busy"] - a["busy"]) / max(b["all"] - a["all"], 1e-9), 3)}


def parse(out):
    def grab(pat):
        m = re.search(pat, out)
        return float(m.group(1)) if m else None
    return {"tps": grab(r"transactions:\s+\d+\s+\(([\d.]+) per sec"),
            "qps": grab(r"queries:\s+\d+\s+\(([\d.]+) per sec"),
            "p95_ms": grab(r"95th percentile:\s+([\d.]+)"),
            "errors": grab(r"ignored errors:\s+(\d+)")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--servers", default="shale,innodb,myrocks")
    ap.add_argument("--scripts", default=",".join(SCRIPTS))
    ap.add_argument("--threads", default="1,16")
    ap.add_argument("--time", type=int, default=30)
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--table-size", type=int, default=100000)
    ap.add_argument("--sync", action="store_true", help="fsync every commit on all servers")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--interleave", action="store_true",
                    help="start and load every server first, then run each script on them "
                         "in turn (default: one server after the other)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --interleave: run every script this many times, the server "
                         "order rotated each round, over all scripts (each server goes first "
                         "in turn); the table gives each server's median round, the JSON every "
                         "round")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="start each run right after the last (default: wait until the "
                         "server has used under 10%% of a core for 5 s, at most 180 s, "
                         "every server alike)")
    ap.add_argument("--old-shale", metavar="PATH",
                    help="another `shale` binary, run as server `shale-old` (before/after runs)")
    ap.add_argument("--shale-cache-mb", type=int, default=1024,
                    help="ShaleDB's block cache (InnoDB's buffer pool and MyRocks' block cache "
                         "are 1 GiB here)")
    args = ap.parse_args()
    if args.rounds < 1 or (args.rounds > 1 and not args.interleave):
        ap.error("--rounds takes a count of at least 1, and more than 1 needs --interleave")
    global SHALE_ARGS
    if "--cache-mb" not in SHALE_ARGS:
        # The same memory as the peers (`shale serve`'s own default is 64 MiB).
        SHALE_ARGS = ["--cache-mb", str(args.shale_cache_mb), *SHALE_ARGS]
    print(f"# shale args: {' '.join(SHALE_ARGS)}", flush=True)
    if args.quick:
        args.tables, args.table_size, args.time, args.threads = 1, 10000, 10, "4"
    need_packages()
    if "shale" in args.servers.split(","):
        subprocess.run(["cargo", "build", "--release", "-p", "shale-cli"], cwd=REPO, check=True)
    threads = [int(t) for t in args.threads.split(",")]
    scripts = args.scripts.split(",")
    tmp = tempfile.mkdtemp(prefix="shale-sysbench-")
    results = {}
    rounds = {}

    def make(name):
        return {"shale": lambda: Shale(tmp, args.sync),
                "shale-old": lambda: Shale(tmp, args.sync, "shale-old", args.old_shale),
                "innodb": lambda: Maria(tmp, args.sync, "innodb"),
                "myrocks": lambda: Maria(tmp, args.sync, "rocksdb")}[name]()

    def prepare(name, server):
        print(f"# {name}: prepare {args.tables} x {args.table_size}", flush=True)
        t0 = time.time()
        sysbench(server, "oltp_read_write", "prepare", args, threads=min(args.tables, 4))
        results[(name, "prepare", 0)] = {"seconds": time.time() - t0}

    def run(name, server, script, t, rnd=0):
        # Each run starts on a settled server: the load's (or the last run's) flushes,
        # compactions and purge done, so their CPU is not counted against whichever
        # script happens to come next.
        settled = wait_settled(server, timeout=180) if args.settle else 0.0
        before = cpu_sample(server)
        r = parse(sysbench(server, script, "run", args, threads=t))
        r.update(cpu_per_query(before, cpu_sample(server), r, args.time))
        r["settled_s"] = round(settled, 1)
        r["round"] = rnd
        rounds.setdefault((name, script, t), []).append(r)
        print(f"{name:8} {script:24} {t:3} thr  round {rnd}  tps {r['tps']}  qps {r['qps']}  "
              f"p95 {r['p95_ms']} ms  errors {r['errors']}  cpu us/query: "
              f"server {r['server_user_us']}+{r['server_sys_us']} "
              f"client {r['client_user_us']}+{r['client_sys_us']}  "
              f"settled after {r['settled_s']} s", flush=True)

    try:
        if args.interleave:
            # Every server up and loaded at once; each script then runs on one server after
            # the other, so the runs compared are minutes apart, not a whole server's turn.
            servers = []
            try:
                for name in args.servers.split(","):
                    server = make(name)
                    server.start()
                    servers.append((name, server))
                    prepare(name, server)
                turn = 0
                for script in scripts:
                    for t in threads:
                        for rnd in range(args.rounds):
                            # Rotated: the first server of a round runs right after the
                            # last script's last run, a place measured to cost 6-13 %
                            # here (docs/benchmarks.md), so each server takes it in turn,
                            # counted over all rounds of all scripts (a one-round run of
                            # several scripts rotates too).
                            k = turn % len(servers)
                            turn += 1
                            for name, server in servers[k:] + servers[:k]:
                                run(name, server, script, t, rnd)
            finally:
                for _, server in servers:
                    server.stop()
        else:
            for name in args.servers.split(","):
                server = make(name)
                server.start()
                try:
                    prepare(name, server)
                    for script in scripts:
                        for t in threads:
                            run(name, server, script, t)
                finally:
                    server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # Each server's median round by qps (the lower middle one for an even count).
    for key, runs in rounds.items():
        ranked = sorted(runs, key=lambda r: r.get("qps") or 0)
        results[key] = dict(ranked[(len(ranked) - 1) // 2], median_of=len(ranked))
    names = args.servers.split(",")
    print("\n| script | thr | " + " | ".join(f"{n} qps (p95 ms)" for n in names) +
          " | shale/innodb | shale/myrocks | shale-old/innodb | shale/shale-old |")
    print("|---|---|" + "---|" * (len(names) + 4))
    for script in scripts:
        for t in threads:
            cells, qps = [], {}
            for n in names:
                r = results.get((n, script, t), {})
                qps[n] = r.get("qps")
                cells.append(f"{r.get('qps')} ({r.get('p95_ms')})")
            ratio = lambda a, b: f"{qps[a] / qps[b]:.2f}" if qps.get(a) and qps.get(b) else "-"
            print(f"| {script} | {t} | " + " | ".join(cells) +
                  f" | {ratio('shale', 'innodb')} | {ratio('shale', 'myrocks')}"
                  f" | {ratio('shale-old', 'innodb')} | {ratio('shale', 'shale-old')} |")
    os.makedirs(os.path.join(REPO, "bench", "results"), exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = os.path.join(REPO, "bench", "results", f"sysbench-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"args": vars(args), "results": [
            {"server": k[0], "script": k[1], "threads": k[2], **v} for k, v in results.items()],
            "rounds": [{"server": k[0], "script": k[1], "threads": k[2], **r}
                       for k, runs in rounds.items() for r in runs]},
            f, indent=1)
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
