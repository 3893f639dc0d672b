#!/usr/bin/env bash
# The test command: everything CI runs. Needs the Rust toolchain pinned in
# rust-toolchain.toml (rustup installs it when missing); scripts/install-deps.sh
# installs the Debian packages (a C compiler, the mariadb client, redis-cli,
# redis-server, python3-pymysql) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
bash scripts/install-deps.sh
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install rustup (https://rustup.rs) first" >&2
  exit 1
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The engine library as users build it (without the `test-hooks` feature that
# its own tests turn on): catches code only the hooks keep alive.
cargo clippy -p shaledb --lib --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
log=$(mktemp "${TMPDIR:-/tmp}/shale-test.XXXXXX")
trap 'rm -f "$log"' EXIT
cargo test --workspace --quiet 2>&1 | tee "$log"
# Fail loudly if the run executed no test at all.
grep -q "test result: ok. [1-9]" "$log"
