//! Starts `examples/gateway.rs` (built by `cargo test --features axum`) and
//! drives it with real HTTP requests over TCP: in-process limits always, and
//! with `--features axum,redis` against the server in `CELLRATE_REDIS_URL`
//! (that test is `#[ignore]`d: scripts/stages/70-redis.sh runs it with
//! `--include-ignored`, and it fails when the variable is absent or the
//! gateway cannot reach the server).
#![cfg(feature = "axum")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn example_binary() -> PathBuf {
    // target/<profile>/deps/gateway-<hash> → target/<profile>/examples/gateway
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("examples").join("gateway");
    assert!(
        bin.exists(),
        "{} missing: run `cargo test --features axum` (it builds the examples)",
        bin.display()
    );
    bin
}

struct Reply {
    status: u16,
    headers: HashMap<String, String>,
}

fn get(addr: &str, path: &str, key: Option<&str>) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let key_line = key
        .map(|k| format!("x-api-key: {k}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{key_line}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, _body) = text.split_once("\r\n\r\n").expect("a full HTTP reply");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    Reply { status, headers }
}

fn start(args: &[&str], prefix: Option<&str>) -> (Gateway, String) {
    let mut cmd = Command::new(example_binary());
    cmd.args(args).stdout(Stdio::piped());
    if let Some(prefix) = prefix {
        cmd.env("CELLRATE_GATEWAY_PREFIX", prefix);
    }
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let guard = Gateway(child);
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .to_string();
    (guard, addr)
}

#[test]
fn gateway_in_process() {
    let (_guard, addr) = start(&["127.0.0.1:0"], None);
    drive(&addr);
}

#[cfg(feature = "redis")]
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn gateway_on_redis() {
    let url = std::env::var("CELLRATE_REDIS_URL")
        .expect("CELLRATE_REDIS_URL is not set: this test needs a Redis server (run scripts/stages/70-redis.sh)");
    let prefix = format!(
        "gwtest-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let (_guard, addr) = start(&["--redis", url.as_str(), "127.0.0.1:0"], Some(&prefix));
    drive(&addr);
}

fn drive(addr: &str) {
    let addr = addr.to_string();
    assert_eq!(get(&addr, "/orders", None).status, 400);

    // 3 per minute per endpoint: /a admits 3, then 429 from the endpoint tier.
    for i in 0..3u64 {
        let r = get(&addr, "/orders", Some("alice"));
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["x-ratelimit-remaining"], (2 - i).to_string());
        assert_eq!(r.headers["x-ratelimit-limit"], "3");
        assert_eq!(
            r.headers["ratelimit-policy"],
            r#""key";q=10;w=60, "endpoint";q=3;w=60"#
        );
        // key tier: 10 − (i+1) left, full after (i+1)·6 s; endpoint: 20 s each.
        assert_eq!(
            r.headers["ratelimit"],
            format!(
                r#""key";r={};t={}, "endpoint";r={};t={}"#,
                9 - i,
                6 * (i + 1),
                2 - i,
                20 * (i + 1)
            )
        );
        assert!(!r.headers.contains_key("retry-after"));
    }
    let r = get(&addr, "/orders", Some("alice"));
    assert_eq!(r.status, 429);
    let retry: u64 = r.headers["retry-after"].parse().unwrap();
    assert!((19..=20).contains(&retry), "next /a cell in ~20 s: {retry}");
    assert_eq!(r.headers["x-ratelimit-remaining"], "0");
    // The denial consumed from neither tier: the key tier still has 7.
    assert!(
        r.headers["ratelimit"].starts_with(r#""key";r=7;"#),
        "{:?}",
        r.headers
    );

    // Another endpoint has its own budget, but the key tier is shared: 7 left.
    // `/orders/1` and `/orders/2` are one endpoint (`/orders/{id}`).
    for ep in [
        "/users",
        "/users",
        "/users",
        "/orders/1",
        "/orders/2",
        "/orders/%33",
        "/status",
    ] {
        assert_eq!(get(&addr, ep, Some("alice")).status, 200, "{ep}");
    }
    let r = get(&addr, "/status", Some("alice"));
    assert_eq!(r.status, 429, "the key tier (10/min) is spent");
    assert!(
        r.headers["ratelimit"].starts_with(r#""key";r=0;"#),
        "{:?}",
        r.headers
    );
    let retry: u64 = r.headers["retry-after"].parse().unwrap();
    assert!((1..=6).contains(&retry), "one key cell per 6 s: {retry}");

    // Spellings of a path that match no route never reach the limiter.
    for path in ["/orders/", "//orders", "/%6frders"] {
        assert_eq!(get(&addr, path, Some("carol")).status, 404, "{path}");
    }
    // An empty key is invalid, not missing, and no internal text is echoed.
    assert_eq!(get(&addr, "/orders", Some("")).status, 400);

    // Other keys are not affected.
    assert_eq!(get(&addr, "/orders", Some("bob")).status, 200);
}
