#!/usr/bin/env python3
"""Runs the SQL layer's sqllogictest scripts (crates/shale-sql/tests/slt/*.slt) against MariaDB.

Starts a throwaway mariadbd (Debian's mariadb-server) in a temp directory with
character_set_server=utf8mb4, collation_server=utf8mb4_bin (ShaleDB compares strings bytewise)
and sql_mode STRICT_TRANS_TABLES, sends every file's statements through one `mariadb` client
session (so USE, transactions and session state carry; a marker query between records splits
the output, the client's "at line N" attributes errors), and compares: `statement ok` must
succeed, `statement error N` must fail with error N, `query` results must equal the expected
rows (rowsort honoured, values rendered as the slt runner renders them). `reopen` is skipped.

Prints each disagreement and a summary: how many records MariaDB answers as the scripts expect.
Not part of CI (it needs mariadb-server). Python 3 standard library only.

  bench/slt_mariadb.py                 # all scripts
  bench/slt_mariadb.py basic.slt       # some
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLT = os.path.join(REPO, "crates", "shale-sql", "tests", "slt")


def parse(text):
    recs, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        l = lines[i].rstrip()
        if not l or l.startswith("#"):
            i += 1
            continue
        kind, line = l, i + 1
        i += 1
        if kind == "reopen":
            recs.append((line, kind, "", []))
            continue
        sql = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            sql.append(lines[i])
            i += 1
        exp = []
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            while i < len(lines) and lines[i].strip():
                exp.append(lines[i].rstrip())
                i += 1
        recs.append((line, kind, "\n".join(sql), exp))
    return recs


def render(v):
    if v == "NULL":
        return "NULL"
    return "(empty)" if v == "" else v


def run_file(sock, records):
    """Runs every record's statement in ONE client session (so transactions and USE carry),
    each preceded by a marker query; returns per record (error code or None, output)."""
    script, starts = [], []
    line = 1
    for i, (_, kind, sql, _) in enumerate(records):
        script.append(f"SELECT '@@MARK {i}@@';")
        line += 1
        starts.append(line)
        script.append(sql.replace("\n", " ") + ";")
        line += 1
    p = subprocess.run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "--batch",
                        "--skip-column-names", "--raw", "--force"],
                       input="\n".join(script) + "\n", text=True, capture_output=True)
    outs = {}
    for part in p.stdout.split("@@MARK ")[1:]:
        idx, _, rest = part.partition("@@\n")
        outs[int(idx)] = rest
    errs = {int(ln): code for code, ln in re.findall(r"ERROR (\d+) \(\w+\) at line (\d+)", p.stderr)}
    return [(errs.get(starts[i]), outs.get(i, "")) for i in range(len(records))]


def main():
    files = sys.argv[1:] or sorted(f for f in os.listdir(SLT) if f.endswith(".slt"))
    tmp = tempfile.mkdtemp(prefix="slt-mariadb-")
    data, sock = os.path.join(tmp, "data"), os.path.join(tmp, "s.sock")
    subprocess.run(["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={data}",
                    "--auth-root-authentication-method=socket", "--skip-test-db"],
                   check=True, capture_output=True)
    proc = subprocess.Popen(["mariadbd", "--no-defaults", "--user=root", f"--datadir={data}",
                             f"--socket={sock}", "--skip-networking",
                             "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin",
                             "--sql-mode=STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION",
                             "--skip-character-set-client-handshake",
                             f"--log-error={tmp}/err.log"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(300):
        if os.path.exists(sock):
            break
        time.sleep(0.1)
    total = agree = 0
    try:
        for f in files:
            records = [r for r in parse(open(os.path.join(SLT, f)).read()) if r[1] != "reopen"]
            for (line, kind, sql, exp), (code, out) in zip(records, run_file(sock, records)):
                total += 1
                words = kind.split()
                ok = True
                why = ""
                if words[:2] == ["statement", "ok"]:
                    ok, why = code is None, f"error {code}"
                elif words[:2] == ["statement", "error"]:
                    ok, why = code == words[2], f"got {code or 'success'}"
                else:
                    rows = [" ".join(render(v) for v in r.split("\t")) for r in out.rstrip("\n").split("\n")] if out.strip() else []
                    want = list(exp)
                    if "rowsort" in words:
                        rows.sort()
                        want.sort()
                    ok = code is None and rows == want
                    why = f"error {code}" if code else f"got {rows}"
                if ok:
                    agree += 1
                else:
                    print(f"{f}:{line}: {sql.splitlines()[0][:90]}\n    expected {exp or kind}; MariaDB {why}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{agree} of {total} records agree with MariaDB "
          f"({subprocess.run(['mariadbd', '--version'], text=True, capture_output=True).stdout.strip()})")


if __name__ == "__main__":
    main()
