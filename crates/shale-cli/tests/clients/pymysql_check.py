"""PyMySQL against `shale serve` (run by tests/clients.rs with PORT PASSWORD).

Connects, creates a table, inserts with parameters (PyMySQL quotes them
client-side), reads the rows back as Python values, checks the column
types in cursor.description, and the error codes of a duplicate key and
a wrong password. Prints "pymysql ok" last when every check held.
"""
import datetime
import decimal
import sys

import pymysql
from pymysql.constants import FIELD_TYPE

port, password = int(sys.argv[1]), sys.argv[2]


def connect(pw):
    return pymysql.connect(host="127.0.0.1", port=port, user="root",
                           password=pw, autocommit=True)


conn = connect(password)
cur = conn.cursor()
cur.execute("CREATE DATABASE py")
cur.execute("USE py")
cur.execute("CREATE TABLE t (id INT PRIMARY KEY, u BIGINT UNSIGNED, d DOUBLE, "
            "amount DECIMAL(10,2), s VARCHAR(40), b BLOB, dt DATE, "
            "ts DATETIME, n INT)")
rows = [
    (1, 2**64 - 1, 0.25, decimal.Decimal("-12.50"), "naïve 'quoted' \\ ✓",
     b"\x00\xff'\\", datetime.date(2024, 2, 29),
     datetime.datetime(2026, 11, 25, 17, 45, 1), None),
    (2, 0, -1e-300, decimal.Decimal("99999999.99"), "", b"",
     datetime.date(1000, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59), -7),
]
n = cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows)
assert n == 2, n
cur.execute("SELECT * FROM t WHERE id = %s", (1,))
got = cur.fetchone()
assert got == rows[0], got
cur.execute("SELECT * FROM t WHERE s = %s AND b = %s", (rows[1][4], rows[1][5]))
got = cur.fetchall()
assert got == (rows[1],), got
types = [d[1] for d in cur.description]
expected = [FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG, FIELD_TYPE.DOUBLE,
            FIELD_TYPE.NEWDECIMAL, FIELD_TYPE.VAR_STRING, FIELD_TYPE.BLOB,
            FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.LONG]
assert types == expected, (types, expected)
names = [d[0] for d in cur.description]
assert names == ["id", "u", "d", "amount", "s", "b", "dt", "ts", "n"], names

# A transaction through the connection's own calls.
conn.autocommit(False)
cur.execute("UPDATE t SET n = %s WHERE id = %s", (5, 2))
conn.rollback()
cur.execute("SELECT n FROM t WHERE id = 2")
assert cur.fetchone() == (-7,)
cur.execute("UPDATE t SET n = %s WHERE id = %s", (5, 2))
conn.commit()
conn.autocommit(True)
cur.execute("SELECT n FROM t WHERE id = 2")
assert cur.fetchone() == (5,)

try:
    cur.execute("INSERT INTO t (id) VALUES (%s)", (1,))
    raise AssertionError("duplicate key accepted")
except pymysql.err.IntegrityError as e:
    assert e.args[0] == 1062, e.args
try:
    connect("wrong")
    raise AssertionError("wrong password accepted")
except pymysql.err.OperationalError as e:
    assert e.args[0] == 1045, e.args
conn.close()
print("pymysql ok")
