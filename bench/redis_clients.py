#!/usr/bin/env python3
"""Drives shale-redis-server and redis-server 7 with the clients people use
outside Rust -- redis-py and redis-cli -- and diffs the two transcripts.
Not in CI (needs python3-redis; run by hand):

    python3 bench/redis_clients.py [--bin target/release/shale-redis-server]

Installs python3-redis with apt-get when it is missing. Exits 1 on any
difference; prints the transcript lines that differ.
"""
import argparse
import importlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PW = "clients-pw"


def ensure_redis_py():
    """redis-py from Debian (python3-redis); a python3 other than Debian's
    (pyenv) gets Debian's module directory on its path."""
    try:
        import redis  # noqa: F401
        return
    except ImportError:
        pass
    if not os.path.exists("/usr/lib/python3/dist-packages/redis"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "python3-redis"], check=True,
                       stdout=subprocess.DEVNULL)
    sys.path.append("/usr/lib/python3/dist-packages")
    importlib.invalidate_caches()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_redis(tmp):
    port = free_port()
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp,
         "--save", "", "--appendonly", "yes", "--requirepass", PW],
        stdout=subprocess.DEVNULL)
    wait_port(port)
    return p, port


def start_shale(binary, tmp):
    p = subprocess.Popen([binary, "--db", tmp, "--port", "0", "--requirepass", PW],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    port = int(re.search(r":(\d+)$", line.strip()).group(1))
    return p, port


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def py_session(port):
    """redis-py's own API: the calls an application makes."""
    import redis
    out = []
    r = redis.Redis(port=port, password=PW, decode_responses=True)
    r.flushall()
    out.append(r.set("s", "v", ex=100))
    out.append(r.get("s"))
    out.append(90 < r.ttl("s") <= 100)
    out.append(r.incrbyfloat("f", 1.25))
    out.append(r.mset({"a": 1, "b": 2}))
    out.append(r.mget(["a", "nokey", "b"]))
    out.append(r.hset("h", mapping={"x": 1, "y": 2}))
    out.append(r.hmset("h2", {"k": "v"}))
    out.append(sorted(r.hgetall("h").items()))
    out.append(r.rpush("l", *"abcde"))
    out.append(r.lrange("l", 1, -2))
    out.append(r.lpop("l", 2))
    out.append(r.sadd("set", "m", "n"))
    out.append(sorted(r.smembers("set")))
    out.append(r.zadd("z", {"a": 0, "b": 0, "c": 0}))
    out.append(r.zrangebylex("z", "[a", "(c"))
    out.append(r.zrange("z", 0, -1, withscores=True))
    out.append(sorted(r.scan_iter(match="*")))
    with r.pipeline(transaction=True) as p:
        p.incr("n").incr("n").get("n")
        out.append(p.execute())
    with r.pipeline(transaction=False) as p:
        for i in range(100):
            p.set(f"k{i}", i)
        out.append(sum(p.execute()))

    def bump(pipe):
        cur = int(pipe.get("n"))
        pipe.multi()
        pipe.set("n", cur + 10)
    out.append(r.transaction(bump, "n"))
    out.append(r.get("n"))
    ps = r.pubsub()
    ps.subscribe("chan")
    out.append(ps.get_message(timeout=5)["type"])
    out.append(r.publish("chan", "hi"))
    out.append(ps.get_message(timeout=5)["data"])
    ps.close()
    out.append(r.swapdb(0, 1))
    out.append(r.dbsize())
    r1 = redis.Redis(port=port, password=PW, db=1, decode_responses=True)
    out.append(r1.get("s"))
    try:
        r.hget("s", "x")
    except redis.ResponseError as e:
        out.append(str(e))
    try:
        redis.Redis(port=port, password="wrong").ping()
    except (redis.AuthenticationError, redis.ResponseError) as e:
        out.append(str(e))
    return [repr(x) for x in out]


CLI_SCRIPT = """\
SET greeting hello
GET greeting
HSET h f v
HGETALL h
RPUSH q 1 2 3
LRANGE q 0 -1
ZADD z 1 one 2 two
ZRANGE z 0 -1 WITHSCORES
INCR counter
TYPE q
SELECT 3
DBSIZE
"""


def cli_session(port):
    """redis-cli, as a person types it (commands on stdin)."""
    res = subprocess.run(["redis-cli", "-p", str(port), "-a", PW, "--no-auth-warning", "-n", "5"],
                         input=CLI_SCRIPT, capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines()
    res2 = subprocess.run(["redis-cli", "-p", str(port), "-a", PW, "--no-auth-warning", "-n", "5",
                           "--scan", "--pattern", "*"], capture_output=True, text=True, timeout=60)
    return lines + sorted(res2.stdout.splitlines())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/shale-redis-server")
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        subprocess.run(["cargo", "build", "--release", "-p", "shale-redis"], check=True)
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        sys.exit("needs redis-server and redis-cli (scripts/install-deps.sh)")
    ensure_redis_py()
    transcripts = []
    for start in (start_redis, lambda t: start_shale(args.bin, t)):
        with tempfile.TemporaryDirectory() as tmp:
            proc, port = start(tmp)
            try:
                transcripts.append(py_session(port) + cli_session(port))
            finally:
                proc.kill()
                proc.wait()
    want, got = transcripts
    diffs = [(i, w, g) for i, (w, g) in enumerate(zip(want, got)) if w != g]
    for i, w, g in diffs:
        print(f"line {i}: redis-server {w}\n        shale        {g}")
    if diffs or len(want) != len(got):
        sys.exit(f"{len(diffs)} differences ({len(want)} vs {len(got)} lines)")
    print(f"redis-py and redis-cli: {len(want)} replies, identical on redis-server and shale")


if __name__ == "__main__":
    main()
