#!/usr/bin/env bash
# The main job for now: build the `shale` CLI and show what ShaleDB is for:
# a bulk load read back, a transaction and a snapshot, a kill -9 in the
# middle of a load followed by recovery, and compaction reusing extents.
# Usage: scripts/demo.sh [NUM_KEYS] [DB_DIR]   (DB_DIR must not exist yet)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
n=${1:-200000}
db=${2:-$(mktemp -d /tmp/shale-demo.XXXXXX)/db}
cargo build --release --quiet -p shale-cli
shale=target/release/shale
ms() { echo $(( $(date +%s%N) / 1000000 )); }
gen() { # gen FIRST COUNT: key<TAB>value lines
  awk -v a="$1" -v n="$2" 'BEGIN { srand(42 + a); for (i = a; i < a + n; i++) printf "user%010d\tvalue-%d-%08x\n", int(rand() * 1e9), i, int(rand() * 2147483647) }'
}

mkdir -p "$(dirname "$db")"
echo "== create $db"
"$shale" --db "$db" init

echo "== load $n keys"
start=$(ms)
acked=$(gen 0 "$n" | "$shale" --db "$db" load | wc -l)
took=$(( $(ms) - start ))
echo "acknowledged $acked keys in ${took} ms ($(( acked * 1000 / (took > 0 ? took : 1) )) keys/s)"

echo "== read back"
first=$("$shale" --db "$db" scan --limit 1 | cut -f1)
echo "get $first -> $("$shale" --db "$db" get "$first")"
"$shale" --db "$db" get no-such-key || echo "(a missing key exits with status $?)"
"$shale" --db "$db" scan --from user05 --limit 3

echo "== a transaction and a snapshot (shale txn reads commands from stdin)"
"$shale" --db "$db" txn <<'EOF'
put account:alice 100
put account:bob 50
snapshot
begin serializable
get-for-update account:alice
put account:alice 70
put account:bob 80
scan account: account;
commit
get account:alice
snapshot-get account:alice
EOF

echo "== kill -9 in the middle of a load, then recover"
ackfile=$(mktemp)
gen 1000000000 2000000 | "$shale" --db "$db" load > "$ackfile" &
loader=$!
sleep 1.5
kill -9 "$loader" 2>/dev/null || true
wait "$loader" 2>/dev/null || true
# Random keys repeat now and then: count distinct ones.
acked=$(sort -u "$ackfile" | wc -l)
present=0
# Every key acknowledged before the kill must be there after recovery.
if [ "$acked" -gt 0 ]; then
  present=$("$shale" --db "$db" scan | cut -f1 | sort | comm -12 - <(sort -u "$ackfile") | wc -l)
fi
echo "distinct keys acknowledged before the kill: $acked; of those present after recovery: $present"
if [ "$present" -ne "$acked" ]; then
  echo "LOST WRITES: $(( acked - present ))" >&2
  exit 1
fi
rm -f "$ackfile"

echo "== full compaction (extents whose range overlaps nothing are reused, not rewritten)"
"$shale" --db "$db" compact | grep -E "^(compactions|write amplification|  L[0-9])"

echo "== checksum check"
"$shale" --db "$db" check

echo "== stats over the database's life"
"$shale" --db "$db" stats | grep -E "^(writes|flushes|compactions|write amplification|data files)"
echo "the database is in $db"
