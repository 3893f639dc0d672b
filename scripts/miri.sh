#!/usr/bin/env bash
# Runs the memtable's unit tests (arena, nodes, skiplist, memtable and the
# insert/read stress model) under Miri, which checks every unsafe access for
# undefined behaviour (out-of-bounds, use-after-free, uninitialised reads,
# alignment, Stacked Borrows aliasing) and every shared access for data races.
# Test sizes shrink under cfg(miri). About 15 minutes on 2 cores.
#
# Not part of scripts/test.sh: it needs a nightly toolchain with Miri
# (rustup toolchain install nightly --component miri), which CI may lack.
# Extra arguments go to the test harness, e.g. `scripts/miri.sh arena`.
# Strict provenance is not enabled: parking_lot (the arena's refill lock)
# casts integers to pointers.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "Miri not found: rustup toolchain install nightly --component miri" >&2
  exit 1
fi
cargo +nightly miri setup >/dev/null
cargo +nightly miri test -p shaledb --lib -- memtable:: "$@"
