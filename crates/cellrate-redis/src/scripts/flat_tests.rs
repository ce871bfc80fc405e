//! The flat paths (`lua/flat_*.lua`) answer as the general code after
//! them: on a server, at server times fixed by a stand-in for `TIME`, every
//! stored state of a grid (each window before, at and after now's, counts
//! up to and over the limit, values the flat path leaves to the general
//! code) is checked once through the one-tier script as the client calls
//! it and once through its general code (`-1` with no base: the same
//! contract, past the flat block); the replies and the values left must be
//! equal. The flat block alone must either give that same reply or none
//! (it left the decision to the general code), and it must decide most
//! cases itself. The replay tests (`tests/redis_algorithms.rs`) check the
//! general code and the flat paths against the in-process windows at the
//! server's own time.

use super::{BUCKETED, FIXED, SLIDING};
use ::redis::{Connection, Value};

/// One algorithm's scripts and parameters.
struct Alg {
    kind: u64,
    letter: char,
    source: &'static str,
    flat: &'static str,
}

const ALGS: [Alg; 3] = [
    Alg {
        kind: 1,
        letter: 'F',
        source: FIXED,
        flat: include_str!("../lua/flat_fixed.lua"),
    },
    Alg {
        kind: 2,
        letter: 'S',
        source: SLIDING,
        flat: include_str!("../lua/flat_sliding.lua"),
    },
    Alg {
        kind: 3,
        letter: 'B',
        source: BUCKETED,
        flat: include_str!("../lua/flat_bucketed.lua"),
    },
];

/// A script that reads the time from the hash `clock` (fields `s`, `us`)
/// instead of `TIME`, then runs `source`. Each write records how it was
/// made in the hash `writes` under its key (`PX <ms>` for a `SET`,
/// `SETRANGE` for an overwrite in place), and a `PX` is lengthened by
/// 600 s so no value expires before it is read.
fn mocked(clock: &str, writes: &str, source: &str) -> String {
    format!(
        "local real = redis\n\
         local redis = {{pcall = real.pcall, error_reply = real.error_reply,\n\
           call = function(c, ...)\n\
             if c == 'TIME' then return real.call('HMGET', '{clock}', 's', 'us') end\n\
             local a = {{...}}\n\
             if c == 'SETRANGE' then real.call('HSET', '{writes}', a[1], c) end\n\
             if c == 'SET' then\n\
               real.call('HSET', '{writes}', a[1], table.concat(a, ' ', 3))\n\
               if a[3] == 'PX' then a[4] = a[4] + 600000 end\n\
             end\n\
             return real.call(c, unpack(a))\n\
           end}}\n{source}"
    )
}

/// The standalone server of `CELLRATE_REDIS_URL`.
fn connect() -> Connection {
    let url = std::env::var("CELLRATE_REDIS_URL").unwrap_or_else(|_| {
        panic!("CELLRATE_REDIS_URL is not set: this test needs a Redis server (run scripts/stages/70-redis.sh)")
    });
    ::redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("CELLRATE_REDIS_URL={url}: {e}"))
}

/// A key's content before a call.
#[derive(Clone, Debug)]
enum Seed {
    Absent,
    List,
    Text(String),
}

/// What a call left: its reply, then per key its value, whether it
/// expires and the expiry argument of its write (none if not written).
type Seen = (
    Result<Value, String>,
    Vec<(Option<String>, bool, Option<String>)>,
);

struct Bench {
    conn: Connection,
    prefix: String,
    clock: String,
    writes: String,
}

impl Bench {
    fn load(&mut self, source: &str) -> String {
        let text = mocked(&self.clock, &self.writes, source);
        ::redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(text)
            .query(&mut self.conn)
            .expect("SCRIPT LOAD")
    }

    fn set_now(&mut self, now: u64) {
        let _: () = ::redis::cmd("HSET")
            .arg(&self.clock)
            .arg("s")
            .arg(now / 1_000_000)
            .arg("us")
            .arg(now % 1_000_000)
            .query(&mut self.conn)
            .unwrap();
    }

    /// Seeds the keys (`seeds[i]` at key `i`), runs `sha` on the keys
    /// `uses` with `head` then `costs` as arguments, and reads what is left.
    fn run(
        &mut self,
        sha: &str,
        seeds: &[Seed],
        uses: &[usize],
        head: &[String],
        costs: &[u64],
    ) -> Seen {
        let keys: Vec<String> = (0..seeds.len())
            .map(|i| format!("{}:{i}", self.prefix))
            .collect();
        for (key, seed) in keys.iter().zip(seeds) {
            let _: () = ::redis::cmd("DEL").arg(key).query(&mut self.conn).unwrap();
            match seed {
                Seed::Absent => {}
                Seed::List => {
                    let _: () = ::redis::cmd("RPUSH")
                        .arg(key)
                        .arg("x")
                        .query(&mut self.conn)
                        .unwrap();
                }
                Seed::Text(v) => {
                    let _: () = ::redis::cmd("SET")
                        .arg(key)
                        .arg(v)
                        .arg("PX")
                        .arg(600_000)
                        .query(&mut self.conn)
                        .unwrap();
                }
            }
        }
        let _: () = ::redis::cmd("DEL")
            .arg(&self.writes)
            .query(&mut self.conn)
            .unwrap();
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(sha).arg(uses.len());
        for &u in uses {
            cmd.arg(&keys[u]);
        }
        cmd.arg(head).arg(costs);
        let reply = cmd
            .query::<Value>(&mut self.conn)
            .map_err(|e| e.to_string());
        let left = keys
            .iter()
            .zip(seeds)
            .map(|(key, seed)| {
                let write: Option<String> = ::redis::cmd("HGET")
                    .arg(&self.writes)
                    .arg(key)
                    .query(&mut self.conn)
                    .unwrap();
                if matches!(seed, Seed::List) {
                    let t: String = ::redis::cmd("TYPE").arg(key).query(&mut self.conn).unwrap();
                    return (Some(t), true, write);
                }
                let v: Option<String> = ::redis::cmd("GET").arg(key).query(&mut self.conn).unwrap();
                let ttl: i64 = ::redis::cmd("PTTL").arg(key).query(&mut self.conn).unwrap();
                (v, ttl > 0, write)
            })
            .collect();
        (reply, left)
    }
}

/// `seen` with each `SETRANGE` write replaced by the general code's `PX`
/// when the key was seeded with a value (and so an expiry) in the window,
/// or at the bucket, that the new value names: the one place the flat
/// path writes differently, keeping an expiry that already covers it (the
/// values themselves are compared as they are).
fn kept(mut seen: Seen, want: &Seen, seeds: &[Seed]) -> Seen {
    for ((got, want), seed) in seen.1.iter_mut().zip(&want.1).zip(seeds) {
        if got.2.as_deref() != Some("SETRANGE") {
            continue;
        }
        let window = |v: &str| {
            let head = v.split(':').next().unwrap_or("");
            head.get(1..).and_then(|n| n.parse::<u64>().ok())
        };
        if let (Seed::Text(old), Some(new)) = (seed, &got.0) {
            if window(old) == window(new) {
                got.2.clone_from(&want.2);
            }
        }
    }
    seen
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
    }
}

/// The states to seed for a tier of `alg` (limit `l`, window or bucket
/// `w`, `nb` buckets) at `now`.
fn states(alg: &Alg, l: u64, w: u64, nb: u64, now: u64, rng: &mut Rng) -> Vec<Seed> {
    let k = now / w;
    let c = alg.letter;
    let counts = [0, 1, l.saturating_sub(1), l, l + 3];
    let mut out = vec![Seed::Absent, Seed::List];
    let text = |s: String| Seed::Text(s);
    let span = if alg.kind == 3 { nb.min(4) + 1 } else { 2 };
    for a in k - span..=k + span {
        match alg.kind {
            1 => out.extend(counts.iter().map(|x| text(format!("F{a}:{x}")))),
            2 => {
                for x in [0, 1, l, l + 2] {
                    out.extend(counts.iter().map(|y| text(format!("S{a}:{x}:{y}"))));
                }
            }
            _ => {
                for _ in 0..6 {
                    let v: Vec<String> = (0..nb)
                        .map(|_| counts[rng.below(5) as usize].to_string())
                        .collect();
                    out.push(text(format!("B{a}:{}", v.join(","))));
                }
            }
        }
    }
    // Values the flat path leaves to the general code, or reads as
    // absent, or reports.
    let body = match alg.kind {
        1 => format!("{k}:2"),
        2 => format!("{k}:1:2"),
        _ => format!("{k}:{}", vec!["1"; nb as usize].join(",")),
    };
    let tag = if alg.kind == 3 {
        format!("~{l}/{w}/{nb}")
    } else {
        format!("~{l}/{w}")
    };
    for v in [
        format!("{c}{body}{tag}"),
        format!(
            "{c}{body}~9/2000000{}",
            if alg.kind == 3 { "/2" } else { "" }
        ),
        format!("{c}{body}~x"),
        format!("{c}{body},"),
        format!("{c}0{body}"),
        format!("{c}99999999999999999999:1"),
        format!("{c}{k}:99999999999999999999:1"),
        format!("{c}{k}:{}", vec!["4503599627370496"; nb as usize].join(",")),
        format!("{c}{k}"),
        "garbage".to_owned(),
        "12".to_owned(),
        format!("{}{body}", if c == 'F' { 'S' } else { 'F' }),
    ] {
        out.push(text(v));
    }
    out
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn the_flat_paths_answer_as_the_general_code() {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("cellrate-flat-test-{}-{t}", std::process::id());
    let mut bench = Bench {
        conn: connect(),
        clock: format!("{prefix}:clock"),
        writes: format!("{prefix}:writes"),
        prefix,
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut cases, mut flat_decided) = (0usize, 0usize);
    // Per algorithm: (limit, window or bucket µs, buckets).
    let tiers: [&[(u64, u64, u64)]; 3] = [
        &[(5, 1_000_000, 0), (3, 7_777_777, 0), (1, 1, 0)],
        &[(5, 1_000_000, 0), (3, 7_777_777, 0), (1, 1, 0)],
        &[
            (7, 1_000, 4),
            (3, 333_333, 3),
            (4, 250_000, 1),
            (9, 1_000, 32),
        ],
    ];
    for (alg, tiers) in ALGS.iter().zip(tiers) {
        let whole = bench.load(alg.source);
        let flat = bench.load(alg.flat);
        for &(l, w, nb) in tiers {
            let params = [l.to_string(), w.to_string(), nb.to_string()];
            let head = |first: &str, based: bool| {
                let mut h = vec![first.to_owned(), alg.kind.to_string()];
                h.extend(params.iter().cloned());
                if based {
                    h.extend(["0", "0", "0"].map(str::to_owned));
                }
                h
            };
            let (client, general) = (head("1", false), head("-1", true));
            let k = 1_700_000_000_000_000 / w;
            for e in [0, 1, w / 2, w - 1] {
                let now = k * w + e;
                bench.set_now(now);
                let seeds = states(alg, l, w, nb.max(1), now, &mut rng);
                // One request per state and cost, then batches over three
                // keys (repeated, with one cost or one each).
                let mut runs: Vec<(Vec<Seed>, Vec<usize>, Vec<u64>)> = Vec::new();
                for s in &seeds {
                    for cost in [0, 1, 2, l] {
                        runs.push((vec![s.clone()], vec![0], vec![cost]));
                    }
                }
                for _ in 0..seeds.len() {
                    let three: Vec<Seed> = (0..3)
                        .map(|_| seeds[rng.below(seeds.len() as u64) as usize].clone())
                        .collect();
                    let uses: Vec<usize> = (0..6).map(|_| rng.below(3) as usize).collect();
                    let costs: Vec<u64> = if rng.below(2) == 0 {
                        vec![rng.below(l + 1)]
                    } else {
                        uses.iter().map(|_| rng.below(l + 1)).collect()
                    };
                    runs.push((three, uses, costs));
                }
                for (seeds, uses, costs) in runs {
                    let want = bench.run(&whole, &seeds, &uses, &general, &costs);
                    let got = bench.run(&whole, &seeds, &uses, &client, &costs);
                    let case = format!(
                        "{seeds:?} keys {uses:?} costs {costs:?} at {now}, tier {params:?}"
                    );
                    assert_eq!(kept(got, &want, &seeds), want, "{case}");
                    let alone = bench.run(&flat, &seeds, &uses, &client, &costs);
                    if alone.0 != Ok(Value::Nil) {
                        assert_eq!(kept(alone, &want, &seeds), want, "flat block alone: {case}");
                        flat_decided += 1;
                    }
                    cases += 1;
                }
            }
        }
    }
    assert!(
        flat_decided * 2 > cases,
        "the flat paths decided {flat_decided} of {cases} cases"
    );
}
