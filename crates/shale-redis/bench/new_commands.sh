#!/usr/bin/env bash
# redis-benchmark of the commands added by the blocking / pub/sub / float
# cut, against redis-server (appendonly yes, appendfsync everysec) and the
# release shale-redis-server, in one run, one server at a time.
# Usage: crates/shale-redis/bench/new_commands.sh [requests (100000)]
# Needs: cargo build --release -p shale-redis (CARGO_TARGET_DIR honoured).
set -euo pipefail
N=${1:-100000}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/shale-redis-server
[ -x "$BIN" ] || { echo "build first: cargo build --release -p shale-redis" >&2; exit 2; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

bench() { # name port: one line per test, "name test rps"
  local name=$1 port=$2
  local rb=(redis-benchmark -p "$port" -a pw -n "$N" -c 50 -q)
  "${rb[@]}" -t lpush,rpop,zadd,zpopmin 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | sed "s/^/$name /"
  # Pushed again: BRPOP below pops what this fills (never blocks).
  "${rb[@]}" -t lpush 2>/dev/null >/dev/null
  redis-cli -p "$port" -a pw --no-auth-warning ZADD rz 1 a 2 b 3 c 4 d 5 e >/dev/null
  for cmd in "BRPOP mylist 0" "INCRBYFLOAT fl 0.1" "HINCRBYFLOAT hf f 0.1" "PUBLISH ch hello" "ZRANDMEMBER rz 3"; do
    # shellcheck disable=SC2086
    "${rb[@]}" $cmd 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | sed "s/^/$name /"
  done
  # PUBLISH to one redis-cli subscriber.
  redis-cli -p "$port" -a pw --no-auth-warning SUBSCRIBE sub >/dev/null &
  local sub=$!
  sleep 0.3
  "${rb[@]}" PUBLISH sub hello 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | sed "s/^/$name 1-subscriber /"
  kill $sub 2>/dev/null || true
  wait $sub 2>/dev/null || true
}

uptime
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync everysec \
  --requirepass pw --dir "$WORK" >/dev/null &
PIDS+=($!)
sleep 0.5
bench redis "$RP"
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true

mkdir "$WORK/shale"
SP=$(free_port)
"$BIN" --db "$WORK/shale" --port "$SP" --requirepass pw >/dev/null &
PIDS+=($!)
sleep 1
bench shale "$SP"
uptime
