#!/usr/bin/env python3
"""Issue 14's redis-benchmark table: ShaleDB's Redis endpoint against redis-server.

Usage:
    python3 bench/redis_bench.py [--requests 1000000] [--clients 50]
        [--pipelines 1,16] [--rounds 2] [--random-keys N] [--shale PATH]
        [--tests set,get,...] [--appendfsync everysec] [--out FILE.json]
    python3 bench/redis_bench.py --large N [--value-size 1000]

Starts, each on a fresh directory on a free loopback port with a password:
  * `shale serve --redis-port P` (release binary; default target/release/shale,
    built with `cargo build --release -p shale-cli`), the MySQL endpoint on
    another free port, `--redis-appendfsync` as given (default everysec);
  * Debian's redis-server 7 with `appendonly yes`, the same appendfsync,
    no RDB snapshots.
Then, per round and per pipeline depth, runs for each server in turn (the
order alternates between rounds so neither always goes first):
    redis-benchmark -p P -a pw -c C -n N -P DEPTH --csv -t TESTS [-r R]
and parses requests/s and p50/p95/p99 latency per test. Prints one table per
pipeline depth with the per-test medians over the rounds and the ratio
ShaleDB / redis-server, and writes everything to --out (default
bench/results/redis-<time>.json). Bounded: N requests per test, both servers
stopped at the end.

--large N: instead of the table, the issue's "data set larger than memory"
run on ShaleDB alone: the server starts with a small memory budget
(`--cache-mb 64 --write-buffer-mb 16`: a 64 MiB block cache and at most
4 x 16 MiB memtables, 128 MiB), SET loads N keys of --value-size bytes
(`redis-benchmark -t set -r N -n 3N -P 16 -d SIZE`, which leaves ~95% of the
N names set), the page cache is dropped (`echo 3 > /proc/sys/vm/drop_caches`,
root only), then GET runs over the same N names at -P 1 and -P 16; printed:
requests/s, p50/p99, and bytes the server read from the disk per GET
(/proc/PID/io read_bytes), and the server's RSS.

Without --random-keys every SET/GET/INCR hits one key and LPUSH/RPOP/SADD/...
one collection, as redis-benchmark does by default (the issue's command line);
--random-keys N passes -r N (keys spread over N names).
"""
import argparse
import csv
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = "set,get,incr,lpush,rpop,sadd,hset,zadd,mset,lrange_100"
PASSWORD = "benchpw"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, what, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not listen on {port} within {timeout} s")


SERVE_ARGS = []  # --serve-args: more `shale serve` flags
# --large: values of 512 B and more go to value files read with O_DIRECT,
# so a GET that misses the engine's caches reads the device, not the page
# cache (which on this 24 GiB machine would hold the whole data set).
LARGE_ENGINE_ARGS = ("--min-blob-size", "512", "--blob-direct-reads")


def start_shale(binary, root, appendfsync, engine_args=()):
    port, mysql_port = free_port(), free_port()
    log = open(os.path.join(root, "shale.log"), "w")
    proc = subprocess.Popen(
        [binary, "--db", os.path.join(root, "shale"), *engine_args, "serve",
         "--port", str(mysql_port),
         "--root-password", PASSWORD, "--redis-port", str(port),
         "--redis-appendfsync", appendfsync, *SERVE_ARGS],
        stdout=log, stderr=subprocess.STDOUT)
    wait_for_port(port, proc, "shale serve")
    return proc, port


def start_redis(root, appendfsync):
    port = free_port()
    d = os.path.join(root, "redis")
    os.makedirs(d)
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "yes", "--appendfsync", appendfsync,
         "--requirepass", PASSWORD, "--dir", d, "--logfile", os.path.join(root, "redis.log")])
    wait_for_port(port, proc, "redis-server")
    return proc, port


def run_benchmark(port, args, depth):
    cmd = ["redis-benchmark", "-p", str(port), "-a", PASSWORD, "-c", str(args.clients),
           "-n", str(args.requests), "-P", str(depth), "--csv", "-t", args.tests]
    if args.random_keys:
        cmd += ["-r", str(args.random_keys)]
    # Bounded: a stuck server must not hang the run.
    out = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=max(600, args.requests // 500), check=True).stdout
    rows = {}
    for rec in csv.DictReader(io.StringIO(out)):
        name = rec["test"].split(" ")[0]
        if name == "LPUSH" and "LRANGE" in rec["test"]:
            continue  # the fill before LRANGE_*, not a test of its own
        rows[name] = {k: float(rec[v]) for k, v in
                      (("rps", "rps"), ("p50", "p50_latency_ms"),
                       ("p95", "p95_latency_ms"), ("p99", "p99_latency_ms"))}
    return cmd, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--random-keys", type=int, default=0)
    ap.add_argument("--tests", default=TESTS)
    ap.add_argument("--appendfsync", default="everysec", choices=["always", "everysec", "no"])
    ap.add_argument("--shale", default=os.path.join(REPO, "target", "release", "shale"))
    ap.add_argument("--out")
    ap.add_argument("--large", type=int, default=0)
    ap.add_argument("--serve-args", default="", help="more `shale serve` flags, e.g. '--redis-io-threads 0'")
    ap.add_argument("--value-size", type=int, default=1000)
    args = ap.parse_args()
    SERVE_ARGS.extend(args.serve_args.split())
    if args.large:
        return large(args)
    depths = [int(d) for d in args.pipelines.split(",")]
    root = tempfile.mkdtemp(prefix="redis-bench-", dir=os.environ.get("BENCH_DIR", "/tmp"))
    print(f"data in {root}", flush=True)
    procs = []
    results = {"shale": {}, "redis": {}}
    try:
        shale, shale_port = start_shale(args.shale, root, args.appendfsync)
        procs.append(shale)
        redis, redis_port = start_redis(root, args.appendfsync)
        procs.append(redis)
        servers = [("redis", redis_port), ("shale", shale_port)]
        commands = []
        for rnd in range(args.rounds):
            for depth in depths:
                order = servers if rnd % 2 == 0 else servers[::-1]
                for name, port in order:
                    t0 = time.time()
                    cmd, rows = run_benchmark(port, args, depth)
                    commands.append(" ".join(cmd))
                    results[name].setdefault(str(depth), []).append(rows)
                    print(f"round {rnd + 1} -P {depth} {name}: {time.time() - t0:.0f} s, load "
                          f"{os.getloadavg()[0]:.1f}: " +
                          ", ".join(f"{t} {r['rps']:,.0f}" for t, r in rows.items()),
                          flush=True)
        report = {"requests": args.requests, "clients": args.clients, "rounds": args.rounds,
                  "random_keys": args.random_keys, "appendfsync": args.appendfsync,
                  "commands": commands, "results": results,
                  "shale_rss_kib": rss_kib(shale.pid), "redis_rss_kib": rss_kib(redis.pid)}
        for depth in depths:
            print(f"\n-P {depth}: medians over {args.rounds} rounds (requests/s, p99 ms)")
            print("| test | redis-server | p99 | ShaleDB | p99 | ShaleDB / redis |")
            print("|---|---|---|---|---|---|")
            for test in results["redis"][str(depth)][0]:
                med = {}
                for name in ("redis", "shale"):
                    runs = [r[test] for r in results[name][str(depth)] if test in r]
                    med[name] = (statistics.median(r["rps"] for r in runs),
                                 statistics.median(r["p99"] for r in runs))
                print(f"| {test} | {med['redis'][0]:,.0f} | {med['redis'][1]:.3f} | "
                      f"{med['shale'][0]:,.0f} | {med['shale'][1]:.3f} | "
                      f"{med['shale'][0] / med['redis'][0]:.2f} |")
        out = args.out or os.path.join(
            REPO, "bench", "results", time.strftime("redis-%Y%m%d-%H%M%S.json"))
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"\nwritten to {out}")
    finally:
        stop(procs, root)


def read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def large(args):
    root = tempfile.mkdtemp(prefix="redis-large-", dir=os.environ.get("BENCH_DIR", "/tmp"))
    print(f"data in {root}", flush=True)
    proc = None
    try:
        proc, port = start_shale(args.shale, root, args.appendfsync,
                                 ("--cache-mb", "64", "--write-buffer-mb", "16", *LARGE_ENGINE_ARGS))
        n = args.large
        base = ["redis-benchmark", "-p", str(port), "-a", PASSWORD, "-c", str(args.clients),
                "--csv", "-r", str(n)]
        t0 = time.time()
        subprocess.run(base + ["-t", "set", "-n", str(3 * n), "-P", "16", "-d", str(args.value_size)],
                       capture_output=True, text=True, check=True, timeout=3600)
        load_s = time.time() - t0
        time.sleep(10)  # let the last flushes finish
        du = subprocess.run(["du", "-sb", os.path.join(root, "shale")], capture_output=True,
                            text=True).stdout.split()[0]
        print(f"loaded {3 * n:,} SETs over {n:,} names of {args.value_size} B in {load_s:.0f} s; "
              f"data directory {int(du) / 2**20:,.0f} MiB; RSS {rss_kib(proc.pid) / 1024:,.0f} MiB",
              flush=True)
        report = {"names": n, "value_size": args.value_size, "load_s": load_s,
                  "dir_bytes": int(du), "runs": []}
        for depth, requests in ((1, 200_000), (16, 1_000_000)):
            subprocess.run(["sync"], check=True)
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            r0 = read_bytes(proc.pid)
            cmd = base + ["-t", "get", "-n", str(requests), "-P", str(depth)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                 timeout=3600).stdout
            rec = next(csv.DictReader(io.StringIO(out)))
            per_get = (read_bytes(proc.pid) - r0) / requests
            run = {"command": " ".join(cmd), "rps": float(rec["rps"]),
                   "p50_ms": float(rec["p50_latency_ms"]), "p99_ms": float(rec["p99_latency_ms"]),
                   "disk_bytes_per_get": per_get, "rss_kib": rss_kib(proc.pid)}
            report["runs"].append(run)
            print(f"GET -P {depth}: {run['rps']:,.0f} requests/s, p50 {run['p50_ms']} ms, "
                  f"p99 {run['p99_ms']} ms, {per_get:,.0f} bytes read from disk per GET, "
                  f"RSS {run['rss_kib'] / 1024:,.0f} MiB", flush=True)
        out = args.out or os.path.join(
            REPO, "bench", "results", time.strftime("redis-large-%Y%m%d-%H%M%S.json"))
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"written to {out}")
    finally:
        stop([proc] if proc else [], root)


def stop(procs, root):
    """SIGTERM every server, wait (kill after 120 s), remove the data unless KEEP is set."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
    if not os.environ.get("KEEP"):
        shutil.rmtree(root, ignore_errors=True)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


if __name__ == "__main__":
    main()
