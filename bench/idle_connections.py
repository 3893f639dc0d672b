#!/usr/bin/env python3
"""Idle connections: how much memory a server holds per open, idle client.

Usage (Debian's python3, which has python3-pymysql):
    /usr/bin/python3 bench/idle_connections.py [--connections 1000] [--shale PATH]
        [--no-mariadb] [--shale-args "..."]

For `shale serve` (release binary; default $CARGO_TARGET_DIR or target/, built
beforehand with `cargo build --release -p shale-cli`) and, unless
--no-mariadb, MariaDB (mariadbd, thread per connection, default settings),
each on a fresh data directory on 127.0.0.1:
  1. start the server with max_connections above N, open one connection,
     run a query, read /proc/PID/status (VmRSS, VmSize, Threads);
  2. open N more connections, each logged in with a password and having run
     `SELECT 1`, then sleep 2 s and read /proc/PID/status again;
  3. check a fresh connection still gets an answer, and that every held
     connection still answers `SELECT 1`;
  4. close them all; read /proc/PID/status once more.
Prints one line per server (per round with --rounds) with the RSS growth per
connection; repeated rounds show whether memory left after closing grows. Bounded: at
most N connections, one pass, servers stopped at the end.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pymysql

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmSize", "Threads"):
                out[k] = int(v.split()[0])  # kB, or a count for Threads
    return out


def stack_rss(pid, stack_kib):
    """(count, total Rss kB) of the mappings the size of a thread stack."""
    n, rss, size = 0, 0, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if line.startswith("Size:"):
                size = int(line.split()[1])
            elif line.startswith("Rss:") and size is not None and \
                    stack_kib <= size <= stack_kib + 64:
                n += 1
                rss += int(line.split()[1])
    return n, rss


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, limit=120):
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("server did not start")


def connect(port, password):
    return pymysql.connect(host="127.0.0.1", port=port, user="root", password=password,
                           connect_timeout=30)


def query1(c):
    with c.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)


def measure(name, pid, port, password, n, stack_kib):
    first = connect(port, password)
    query1(first)
    time.sleep(1)
    before = status(pid)
    held = []
    t0 = time.time()
    for _ in range(n):
        c = connect(port, password)
        query1(c)
        held.append(c)
    opened = time.time() - t0
    time.sleep(2)
    during = status(pid)
    stacks, stack_kb = stack_rss(pid, stack_kib)
    fresh = connect(port, password)
    query1(fresh)
    fresh.close()
    for c in held:
        query1(c)
    for c in held:
        c.close()
    first.close()
    time.sleep(2)
    after = status(pid)
    per = (during["VmRSS"] - before["VmRSS"]) / n
    print(f"{name}: {n} idle connections opened in {opened:.1f} s; "
          f"VmRSS {before['VmRSS'] / 1024:.1f} -> {during['VmRSS'] / 1024:.1f} MiB "
          f"({per:.1f} KiB per connection), after closing {after['VmRSS'] / 1024:.1f} MiB; "
          f"VmSize {before['VmSize'] / 1024:.0f} -> {during['VmSize'] / 1024:.0f} MiB; "
          f"threads {before['Threads']} -> {during['Threads']} -> {after['Threads']}; "
          f"{stacks} mappings of a {stack_kib} KiB stack hold {stack_kb / 1024:.1f} MiB RSS "
          f"({stack_kb / max(stacks, 1):.1f} KiB each); "
          f"all {n} held connections and a new one answered", flush=True)


def run_shale(binary, n, tmp, extra, stack_kib, rounds):
    port = free_port()
    data = os.path.join(tmp, "shale")
    args = [binary, "--db", data, "serve", "--port", str(port),
            "--max-connections", str(n + 10)] + extra
    env = dict(os.environ, SHALE_ROOT_PASSWORD="pw")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        for _ in range(rounds):
            measure("shale serve " + " ".join(extra), proc.pid, port, "pw", n, stack_kib)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


def run_mariadb(n, tmp):
    d = os.path.join(tmp, "mariadb")
    os.makedirs(d)
    data = os.path.join(d, "data")
    subprocess.run(["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={data}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = free_port()
    sock = os.path.join(d, "s.sock")
    proc = subprocess.Popen(["mariadbd", "--no-defaults", "--user=root", f"--datadir={data}",
                             f"--socket={sock}", f"--port={port}", "--bind-address=127.0.0.1",
                             f"--max-connections={n + 10}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        subprocess.run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "-e",
                        "ALTER USER root@localhost IDENTIFIED BY 'pw'; "
                        "CREATE USER root@'127.0.0.1' IDENTIFIED BY 'pw'; "
                        "GRANT ALL ON *.* TO root@'127.0.0.1'"], check=True)
        # MariaDB's thread_stack default: 292 KiB.
        measure("mariadbd (thread per connection)", proc.pid, port, "pw", n, 292)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=1000)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    ap.add_argument("--shale", default=os.path.join(target, "release", "shale"))
    ap.add_argument("--no-mariadb", action="store_true")
    ap.add_argument("--shale-args", default="", help="more `shale serve` arguments")
    ap.add_argument("--rounds", type=int, default=1,
                    help="open and close the N connections this many times (shale)")
    ap.add_argument("--stack-kib", type=int, default=2048,
                    help="the connection threads' stack size, to find their mappings")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="idle-conns-")
    try:
        run_shale(a.shale, a.connections, tmp, a.shale_args.split(), a.stack_kib, a.rounds)
        if not a.no_mariadb and shutil.which("mariadbd"):
            run_mariadb(a.connections, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
