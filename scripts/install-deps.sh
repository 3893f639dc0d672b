#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, when missing:
#   build-essential  rustc links with cc; zstd-sys, ring and libmimalloc-sys compile C
#   mariadb-client   the MySQL-protocol tests drive the real `mariadb` client
#   sysbench         a bounded sysbench run against `shale serve` is a test
#   redis-tools      the Redis-endpoint tests drive the real `redis-cli`
#   redis-server     the Redis differential test compares with a real redis-server
#   python3-pymysql  a client-library test drives PyMySQL (Debian's /usr/bin/python3)
# Runs apt-get only as root on a Debian-like system; otherwise it names what
# is missing and fails, so a run never silently skips tests.
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v mariadb >/dev/null 2>&1 || need+=(mariadb-client)
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
{ /usr/bin/python3 -c 'import pymysql' || python3 -c 'import pymysql'; } >/dev/null 2>&1 || need+=(python3-pymysql)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "missing packages: ${need[*]} (install them, e.g. sudo apt-get install ${need[*]})" >&2
  exit 1
fi
