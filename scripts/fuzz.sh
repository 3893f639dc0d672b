#!/usr/bin/env bash
# Fuzzes the MySQL-protocol decoders with cargo-fuzz (libFuzzer); not in CI.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 600)
# Targets (crates/shale-server/fuzz/fuzz_targets): client_hello, stmt_execute,
# packet_stream, statement_split. Needs the nightly toolchain; installs
# cargo-fuzz if missing. A crash leaves its input under fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../crates/shale-server/fuzz"
secs=${1:-600}
command -v cargo-fuzz >/dev/null || cargo +nightly install cargo-fuzz --locked
for t in client_hello stmt_execute packet_stream statement_split; do
  echo "== $t: $secs s"
  cargo +nightly fuzz run -O "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1
done
