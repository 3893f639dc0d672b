#!/usr/bin/env bash
# The main job: build ShaleDB and serve SQL over the MySQL protocol on an
# embedded data directory (./shale-data unless SHALE_DATA says otherwise).
#
#   scripts/serve.sh                       # 127.0.0.1, port 3306 or the next free one
#   SHALE_ROOT_PASSWORD=secret scripts/serve.sh --port 3307
#
# A new data directory gets 'root'@'localhost' with the password from
# SHALE_ROOT_PASSWORD, or a generated one printed once on stderr. The server
# prints how to connect (mariadb -h 127.0.0.1 -P PORT -u root -p).
# Ctrl-C or SIGTERM shuts it down cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --quiet -p shale-cli
exec target/release/shale --db "${SHALE_DATA:-shale-data}" serve "$@"
