//! Random command sequences over strings and hashes, sent to redis-server
//! and to shale-redis-server: every reply compared byte for byte. Seeded, so
//! a failure names the seed and the step to replay.
// Tests index and unwrap freely: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
use common::{start_redis, start_shale, Raw, PW};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "h0", "h1"];
const FIELDS: &[&str] = &["f0", "f1", "f2", "n"];
const VALUES: &[&str] = &[
    "0",
    "1",
    "-7",
    "42",
    "abc",
    "",
    "9223372036854775807",
    "x y",
    "01",
];

/// One random command (no SCAN, KEYS, HGETALL/HKEYS/HVALS: their order is
/// an implementation detail; no millisecond TTLs).
fn command(r: &mut Rng) -> Vec<String> {
    let k = r.pick(KEYS).to_string();
    let f = r.pick(FIELDS).to_string();
    let v = r.pick(VALUES).to_string();
    let s = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match r.next() % 36 {
        0 => s(&["SET", &k, &v]),
        1 => {
            let opt = r.pick(&["NX", "XX", "GET", "KEEPTTL", "EX", "BAD"]);
            if opt == "EX" {
                s(&["SET", &k, &v, "EX", r.pick(&["1000", "0", "abc"])])
            } else {
                s(&["SET", &k, &v, opt])
            }
        }
        2 | 3 => s(&["GET", &k]),
        4 => s(&["INCR", &k]),
        5 => s(&["INCRBY", &k, &v]),
        6 => s(&["DECRBY", &k, r.pick(&["3", "-9223372036854775808", "x"])]),
        7 => s(&["APPEND", &k, &v]),
        8 => s(&["STRLEN", &k]),
        9 => s(&["GETSET", &k, &v]),
        10 => s(&["GETDEL", &k]),
        11 => s(&["SETNX", &k, &v]),
        12 => s(&["MSET", &k, &v, r.pick(KEYS), r.pick(VALUES)]),
        13 => s(&["MGET", &k, r.pick(KEYS), "nokey"]),
        14 => s(&["DEL", &k, r.pick(KEYS)]),
        15 => s(&["EXISTS", &k, r.pick(KEYS), &k]),
        16 => s(&["TYPE", &k]),
        17..=19 => s(&["HSET", &k, &f, &v, r.pick(FIELDS), r.pick(VALUES)]),
        20 => s(&["HGET", &k, &f]),
        21 => s(&["HDEL", &k, &f, r.pick(FIELDS)]),
        22 => s(&["HLEN", &k]),
        23 => s(&["HEXISTS", &k, &f]),
        24 => s(&[
            "HINCRBY",
            &k,
            &f,
            r.pick(&["1", "-5", "x", "9223372036854775807"]),
        ]),
        25 => s(&["HMGET", &k, &f, r.pick(FIELDS)]),
        26 => s(&[
            "EXPIRE",
            &k,
            r.pick(&["1000", "-1", "x"]),
            r.pick(&["NX", "XX", "GT", "LT"]),
        ]),
        27 => s(&["TTL", &k]),
        28 => s(&["PERSIST", &k]),
        29 => s(&["DBSIZE"]),
        30 => s(&["SETEX", &k, r.pick(&["1000", "0", "x"]), &v]),
        31 => s(&["MSETNX", &k, &v, r.pick(KEYS), r.pick(VALUES)]),
        32 => s(&["HSETNX", &k, &f, &v]),
        33 => s(&["HSTRLEN", &k, &f]),
        34 => s(&["UNLINK", &k]),
        _ => s(&["PEXPIREAT", &k, r.pick(&["1", "x"])]),
    }
}

#[test]
fn random_sequences_match_redis_server() {
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let shale = start_shale(dir.path());
    let (mut a, mut b) = (Raw::connect(redis.port), Raw::connect(shale.port));
    assert_eq!(a.call(&["AUTH", PW]), "+OK\r\n");
    assert_eq!(b.call(&["AUTH", PW]), "+OK\r\n");
    for seed in 1..=6u64 {
        assert_eq!(a.call(&["FLUSHDB"]), "+OK\r\n");
        assert_eq!(b.call(&["FLUSHDB"]), "+OK\r\n");
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for step in 0..400 {
            let cmd = command(&mut r);
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let (want, got) = (a.call(&args), b.call(&args));
            assert_eq!(got, want, "seed {seed} step {step}: {args:?}");
        }
    }
}
