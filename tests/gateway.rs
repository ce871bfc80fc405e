//! Starts `examples/gateway.rs` (built by `cargo test --features redis`)
//! against the server in `CELLRATE_REDIS_URL` and drives it with real HTTP
//! requests over TCP. Skips with a notice when the variable is absent; fails
//! when it is set and the gateway cannot reach the server.
#![cfg(feature = "redis")]

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
        "{} missing: run `cargo test --features redis` (it builds the examples)",
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

#[test]
fn gateway_limits_per_key_and_endpoint_with_headers() {
    let Ok(url) = std::env::var("CELLRATE_REDIS_URL") else {
        eprintln!(
            "NOTICE: CELLRATE_REDIS_URL is not set; skipping (run scripts/stages/70-redis.sh)"
        );
        return;
    };
    let prefix = format!(
        "gwtest-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let mut child = Command::new(example_binary())
        .args([url.as_str(), "127.0.0.1:0"])
        .env("CELLRATE_GATEWAY_PREFIX", &prefix)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _guard = Gateway(child);
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .to_string();

    assert_eq!(get(&addr, "/a", None).status, 401);

    // 3 per minute per endpoint: /a admits 3, then 429 from the endpoint tier.
    for i in 0..3u64 {
        let r = get(&addr, "/a", Some("alice"));
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
    let r = get(&addr, "/a", Some("alice"));
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
    for ep in ["/b", "/b", "/b", "/c", "/c", "/c", "/d"] {
        assert_eq!(get(&addr, ep, Some("alice")).status, 200, "{ep}");
    }
    let r = get(&addr, "/d", Some("alice"));
    assert_eq!(r.status, 429, "the key tier (10/min) is spent");
    assert!(
        r.headers["ratelimit"].starts_with(r#""key";r=0;"#),
        "{:?}",
        r.headers
    );
    let retry: u64 = r.headers["retry-after"].parse().unwrap();
    assert!((1..=6).contains(&retry), "one key cell per 6 s: {retry}");

    // Other keys are not affected.
    assert_eq!(get(&addr, "/a", Some("bob")).status, 200);
}
