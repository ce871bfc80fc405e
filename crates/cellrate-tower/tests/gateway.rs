//! Starts `examples/gateway.rs` (built by `cargo test --features axum,serde`) and
//! drives it with real HTTP requests over TCP: in-process limits from a
//! rules file (reloaded on change and on SIGHUP, with the admin endpoint
//! that changes one client's override), and
//! with `--features axum,serde,redis` against the server in
//! `CELLRATE_REDIS_URL`, from `examples/gateway-redis.toml` (those tests are
//! `#[ignore]`d: scripts/stages/70-redis.sh runs them with
//! `--include-ignored`, and they fail when the variable is absent or the
//! gateway cannot reach the server).
#![cfg(all(feature = "axum", feature = "serde"))]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
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
    body: String,
}

fn get(addr: &str, path: &str, key: Option<&str>) -> Reply {
    let key_line = key
        .map(|k| format!("x-api-key: {k}\r\n"))
        .unwrap_or_default();
    send(addr, "GET", path, &key_line, "")
}

/// One request; `headers` are whole lines (each ending in CRLF).
fn send(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a full HTTP reply");
    let body = body.to_string();
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
    Reply {
        status,
        headers,
        body,
    }
}

fn start(args: &[&str], prefix: Option<&str>) -> (Gateway, String) {
    start_with(args, prefix, &[])
}

fn start_with(args: &[&str], prefix: Option<&str>, env: &[(&str, &str)]) -> (Gateway, String) {
    let mut cmd = Command::new(example_binary());
    cmd.args(args).stdout(Stdio::piped());
    if let Some(prefix) = prefix {
        cmd.env("CELLRATE_GATEWAY_PREFIX", prefix);
    }
    for (k, v) in env {
        cmd.env(k, v);
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

/// A gateway whose log (its stderr) is collected as it runs.
struct Logged {
    guard: Gateway,
    addr: String,
    /// The admin address, with `--admin`.
    admin: Option<String>,
    log: Arc<Mutex<String>>,
}

/// Starts the gateway with `args` (polling off, the default log filter),
/// reading its addresses from stdout and its log from stderr.
fn start_logged(args: &[&str]) -> Logged {
    let mut child = Command::new(example_binary())
        .args(args)
        .env("CELLRATE_GATEWAY_POLL_MS", "0")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let collected = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut log = collected.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let guard = Gateway(child);
    let mut line = |prefix: &str| {
        let mut text = String::new();
        stdout.read_line(&mut text).unwrap();
        text.trim()
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("expected {prefix:?}: {text:?}"))
            .to_string()
    };
    let addr = line("listening on ");
    let admin = args
        .contains(&"--admin")
        .then(|| line("admin listening on "));
    Logged {
        guard,
        addr,
        admin,
        log,
    }
}

impl Logged {
    /// The first log line that has every one of `parts`, waiting for it
    /// at most 5 s.
    fn line_with(&self, parts: &[&str]) -> Option<String> {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let found = self
                .log
                .lock()
                .unwrap()
                .lines()
                .find(|l| parts.iter().all(|p| l.contains(p)))
                .map(String::from);
            if found.is_some() || std::time::Instant::now() > until {
                return found;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One admin request with a raw `Authorization` value.
fn authorized(addr: &str, method: &str, path: &str, authorization: &str, body: &str) -> Reply {
    send(
        addr,
        method,
        path,
        &format!("Authorization: {authorization}\r\n"),
        body,
    )
}

/// The rules `drive` expects (those of the Redis mode): 10/min per key,
/// 3/min per key and endpoint.
const DRIVE_RULES: &str = r#"
[admin]
token = "t0ken"
[limits]
key = { client = { header = "x-api-key" }, endpoint = "route" }
[[limits.tiers]]
name = "key"
quota = "10/min"
capacity = 1000
[[limits.tiers]]
name = "endpoint"
quota = "3/min"
scope = "client_and_endpoint"
capacity = 1000
"#;

/// A rules file of this test's own, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "cellrate-gateway-{}-{name}.toml",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
    fn write(&self, text: &str) {
        std::fs::write(&self.0, text).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn gateway_in_process() {
    let file = TempFile::new("drive", DRIVE_RULES);
    let (_guard, addr) = start(&["--config", file.path(), "127.0.0.1:0"], None);
    drive(&addr);
}

fn admin(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> Reply {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    send(addr, method, path, &auth, body)
}

/// The seed's story on the repository's own `examples/gateway.toml`:
/// acct_123 spends its 100/min, the operator raises it to 500/min through
/// the admin endpoint, and the next request is admitted under the new
/// quota; the admin endpoint refuses a missing or wrong token and a bad
/// body without changing anything.
#[test]
fn gateway_admin_raises_one_client() {
    let (_guard, addr) = start(&["127.0.0.1:0"], None);
    let mut first = None;
    for i in 0..100 {
        let r = get(&addr, "/orders", Some("acct_123"));
        assert_eq!(r.status, 200, "request {i}");
        // The first request was decided before its reply came back.
        first.get_or_insert_with(std::time::Instant::now);
    }
    let first = first.unwrap();
    let r = get(&addr, "/orders", Some("acct_123"));
    assert_eq!(r.status, 429, "100/min spent");
    assert_eq!(r.headers["x-ratelimit-limit"], "100");

    let path = "/admin/overrides/key/acct_123";
    let r = admin(&addr, "PUT", path, None, "500/min");
    assert_eq!(r.status, 401);
    assert_eq!(r.headers["www-authenticate"], r#"Bearer realm="admin""#);
    assert_eq!(
        admin(&addr, "PUT", path, Some("wrong"), "500/min").status,
        403
    );
    assert_eq!(
        admin(&addr, "GET", "/admin/config", Some("change-me-"), "").status,
        403
    );
    for bad in [
        "",
        "lots",
        "500/fortnight",
        "0/min",
        "500/min, burst 0",
        "\u{7f}",
    ] {
        let r = admin(&addr, "PUT", path, Some("change-me"), bad);
        assert_eq!(r.status, 400, "{bad:?}: {}", r.body);
    }
    let r = admin(
        &addr,
        "PUT",
        "/admin/overrides/nope/acct_123",
        Some("change-me"),
        "500/min",
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.body, "tiers: no tier is named \"nope\"\n");
    // Nothing changed: still refused, still 100/min.
    let r = get(&addr, "/orders", Some("acct_123"));
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["x-ratelimit-limit"], "100");

    let r = admin(&addr, "PUT", path, Some("change-me"), "500/min");
    assert_eq!(r.status, 204, "{}", r.body);
    // The 100 cells used stay used: at 500/min (burst 500) 400 more are
    // free at once (at 100/min the next only 600 ms after the first).
    if let Some(rest) = Duration::from_millis(130).checked_sub(first.elapsed()) {
        std::thread::sleep(rest);
    }
    let r = get(&addr, "/orders", Some("acct_123"));
    assert_eq!(r.status, 200, "{:?}", r.headers);
    assert_eq!(r.headers["x-ratelimit-limit"], "500");
    // Another client is untouched.
    assert_eq!(
        get(&addr, "/orders", Some("acct_9")).headers["x-ratelimit-limit"],
        "100"
    );
    let r = admin(&addr, "GET", "/admin/config", Some("change-me"), "");
    assert_eq!(r.status, 200);
    assert!(r.body.contains(r#"acct_123 = "500/min""#), "{}", r.body);
    // Back to the tier's quota, still owing.
    assert_eq!(
        admin(&addr, "DELETE", path, Some("change-me"), "").status,
        204
    );
    let r = get(&addr, "/orders", Some("acct_123"));
    assert_eq!(r.status, 429);
}

/// The `q` the "key" tier announces to `key`.
fn key_q(addr: &str, key: &str) -> String {
    let r = get(addr, "/users", Some(key));
    let policy = &r.headers["ratelimit-policy"];
    let q = policy.strip_prefix(r#""key";q="#).unwrap_or(policy);
    q.split(';').next().unwrap().to_string()
}

/// Waits (at most 5 s) until the "key" tier announces `q`.
fn wait_for_limit(addr: &str, key: &str, q: &str) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        if key_q(addr, key) == q {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The gateway reloads its file on SIGHUP (polling off) and when it
/// changes (polling on), keeping every client's state, and keeps its rules
/// when the new file is bad.
#[test]
fn gateway_reloads_its_file() {
    let seven = DRIVE_RULES.replace("\"10/min\"", "\"7/min\"");
    let nine = DRIVE_RULES.replace("\"10/min\"", "\"9/min\"");

    // SIGHUP, polling off.
    let file = TempFile::new("hup", DRIVE_RULES);
    let (guard, addr) = start_with(
        &["--config", file.path(), "127.0.0.1:0"],
        None,
        &[("CELLRATE_GATEWAY_POLL_MS", "0")],
    );
    for _ in 0..3 {
        assert_eq!(get(&addr, "/orders", Some("dora")).status, 200);
    }
    file.write(&seven);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(key_q(&addr, "dora"), "10");
    let hup = |pid: u32| {
        let ok = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    hup(guard.0.id());
    assert!(wait_for_limit(&addr, "dora", "7"), "no reload on SIGHUP");
    // dora kept her state: the endpoint tier of /orders is still spent.
    assert_eq!(get(&addr, "/orders", Some("dora")).status, 429);
    // A bad file is refused: the rules stay.
    file.write("[limits]\nkey = 1\n");
    hup(guard.0.id());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(key_q(&addr, "erin"), "7");
    drop(guard);

    // A changed file, polling every 50 ms.
    let file = TempFile::new("poll", DRIVE_RULES);
    let (_guard, addr) = start_with(
        &["--config", file.path(), "127.0.0.1:0"],
        None,
        &[("CELLRATE_GATEWAY_POLL_MS", "50")],
    );
    assert_eq!(key_q(&addr, "finn"), "10");
    file.write(&nine);
    assert!(wait_for_limit(&addr, "finn", "9"), "no reload on change");
}

/// An override set through the admin endpoint is announced to its client
/// and outlives a reload of the file (its tier kept); removing one the
/// client does not have is 404.
#[test]
fn gateway_admin_override_outlives_a_reload() {
    let file = TempFile::new("keep", DRIVE_RULES);
    let (guard, addr) = start_with(
        &["--config", file.path(), "127.0.0.1:0"],
        None,
        &[("CELLRATE_GATEWAY_POLL_MS", "0")],
    );
    let path = "/admin/overrides/key/frank";
    let r = admin(&addr, "PUT", path, Some("t0ken"), "100/s");
    assert_eq!(r.status, 204, "{}", r.body);
    let r = get(&addr, "/users", Some("frank"));
    assert_eq!(
        r.headers["ratelimit-policy"],
        r#""key";q=100;w=1, "endpoint";q=3;w=60"#
    );
    assert!(r.headers["ratelimit"].starts_with(r#""key";r=99;t=1, "#));
    file.write(&DRIVE_RULES.replace("\"10/min\"", "\"9/min\""));
    let ok = Command::new("kill")
        .args(["-HUP", &guard.0.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    assert!(wait_for_limit(&addr, "finn", "9"), "no reload on SIGHUP");
    assert_eq!(key_q(&addr, "frank"), "100");
    let r = admin(&addr, "DELETE", path, Some("t0ken"), "");
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(key_q(&addr, "frank"), "9");
    let r = admin(&addr, "DELETE", path, Some("t0ken"), "");
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(
        r.body,
        "tier \"key\" has no override for client \"frank\"\n"
    );
    let r = admin(
        &addr,
        "DELETE",
        "/admin/overrides/nope/frank",
        Some("t0ken"),
        "",
    );
    assert_eq!(r.status, 404, "{}", r.body);
}

/// The server of `CELLRATE_REDIS_URL` and a key prefix no other run uses.
#[cfg(feature = "redis")]
fn redis_url_and_prefix(name: &str) -> (String, String) {
    let url = std::env::var("CELLRATE_REDIS_URL")
        .expect("CELLRATE_REDIS_URL is not set: this test needs a Redis server (run scripts/stages/70-redis.sh)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    (url, format!("{name}-{nanos}"))
}

/// The admin endpoint on Redis: one client's override changes that client
/// alone, with its state on the server kept across the change (lowered
/// to 1/min after one request, alice owes; restored, she does not), and
/// the rules in force show the Redis table.
#[cfg(feature = "redis")]
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn gateway_on_redis_admin_changes_one_client() {
    let (url, prefix) = redis_url_and_prefix("gwadmin");
    let (_guard, addr) = start(&["--redis", url.as_str(), "127.0.0.1:0"], Some(&prefix));
    assert_eq!(get(&addr, "/users", Some("alice")).status, 200);
    let path = "/admin/overrides/key/alice";
    assert_eq!(
        admin(&addr, "PUT", path, Some("wrong"), "1/min").status,
        403
    );
    let r = admin(&addr, "PUT", path, Some("change-me"), "1/min");
    assert_eq!(r.status, 204, "{}", r.body);
    // Her one cell at 10/min put her TAT 6 s ahead: at 1/min (burst 1) she
    // owes, on a route she has not used; bob is untouched.
    let r = get(&addr, "/status", Some("alice"));
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["x-ratelimit-limit"], "1");
    assert_eq!(get(&addr, "/status", Some("bob")).status, 200);
    let r = admin(&addr, "DELETE", path, Some("change-me"), "");
    assert_eq!(r.status, 204, "{}", r.body);
    let r = get(&addr, "/status", Some("alice"));
    assert_eq!(r.status, 200);
    // Two of her ten: the state on the server was kept, not reset.
    assert_eq!(
        r.headers["ratelimit"].split(',').next().unwrap(),
        "\"key\";r=8;t=12"
    );
    let shown = admin(&addr, "GET", "/admin/config", Some("change-me"), "");
    assert_eq!(shown.status, 200);
    assert!(shown.body.contains("[redis]"), "{}", shown.body);
    assert!(shown.body.contains(&prefix), "{}", shown.body);
}

#[cfg(feature = "redis")]
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn gateway_on_redis() {
    let (url, prefix) = redis_url_and_prefix("gwtest");
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

/// `--admin ADDR` serves the admin endpoint on its own address and no
/// longer on the traffic one; the scheme of `Authorization` is read
/// case-insensitively; each change is logged with its tier, client, and
/// the quota before and after.
#[test]
fn gateway_admin_on_its_own_address_logs_each_change() {
    let file = TempFile::new("own", DRIVE_RULES);
    let gw = start_logged(&[
        "--config",
        file.path(),
        "--admin",
        "127.0.0.1:0",
        "127.0.0.1:0",
    ]);
    let admin_addr = gw.admin.clone().unwrap();
    assert_ne!(admin_addr, gw.addr);
    // The rules loaded at start are logged, with their tiers and quotas.
    let loaded = gw.line_with(&["INFO", "rules from", "key 10/min per client"]);
    assert!(loaded.is_some(), "{}", gw.log.lock().unwrap());

    // Not on the traffic address any more, whatever the token.
    let r = admin(&gw.addr, "GET", "/admin/config", Some("t0ken"), "");
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(get(&gw.addr, "/orders", Some("gina")).status, 200);

    let path = "/admin/overrides/key/gina";
    for scheme in ["bearer", "BEARER", "BeArEr"] {
        let r = authorized(
            &admin_addr,
            "GET",
            "/admin/config",
            &format!("{scheme} t0ken"),
            "",
        );
        assert_eq!(r.status, 200, "{scheme}: {}", r.body);
    }
    let r = authorized(&admin_addr, "PUT", path, "bearer t0ken", "100/s");
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(key_q(&gw.addr, "gina"), "100");
    let set = gw
        .line_with(&["admin: override set", "tier=key", "client=gina"])
        .unwrap_or_else(|| panic!("no log line: {}", gw.log.lock().unwrap()));
    assert!(set.contains("INFO"), "{set}");
    assert!(set.contains(r#"old="10/min (tier quota)""#), "{set}");
    assert!(set.contains(r#"new="100/s (override)""#), "{set}");
    assert!(set.contains("peer=127.0.0.1"), "{set}");

    let r = authorized(&admin_addr, "DELETE", path, "Bearer t0ken", "");
    assert_eq!(r.status, 204, "{}", r.body);
    let removed = gw
        .line_with(&["admin: override removed", "client=gina"])
        .unwrap_or_else(|| panic!("no log line: {}", gw.log.lock().unwrap()));
    assert!(removed.contains(r#"old="100/s (override)""#), "{removed}");
    assert!(
        removed.contains(r#"new="10/min (tier quota)""#),
        "{removed}"
    );
    // A scheme that is not Bearer is no bearer token.
    let r = authorized(&admin_addr, "GET", "/admin/config", "Basic t0ken", "");
    assert_eq!(r.status, 401);
    drop(gw.guard);
}

/// Wrong tokens are limited per peer IP: past 5 a minute every admin
/// request from that address is 429 with `Retry-After`, the right token
/// too (the limit is checked before any token is compared); requests
/// without a token and with the right one do not count.
#[test]
fn gateway_admin_limits_wrong_tokens_per_ip() {
    let file = TempFile::new("guess", DRIVE_RULES);
    let gw = start_logged(&["--config", file.path(), "127.0.0.1:0"]);
    for _ in 0..3 {
        assert_eq!(
            admin(&gw.addr, "GET", "/admin/config", None, "").status,
            401
        );
        let r = authorized(&gw.addr, "GET", "/admin/config", "bearer t0ken", "");
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for i in 0..5 {
        let r = admin(
            &gw.addr,
            "GET",
            "/admin/config",
            Some(&format!("guess{i}")),
            "",
        );
        assert_eq!(r.status, 403, "guess {i}");
    }
    let wrong = gw.line_with(&["WARN", "admin: wrong token", "127.0.0.1"]);
    assert!(wrong.is_some(), "{}", gw.log.lock().unwrap());
    for token in [Some("guess5"), Some("t0ken"), None] {
        let r = admin(&gw.addr, "GET", "/admin/config", token, "");
        assert_eq!(r.status, 429, "{token:?}: {}", r.body);
        let retry: u64 = r.headers["retry-after"].parse().unwrap();
        // One wrong token is forgiven every 12 s (5 per minute).
        assert!((1..=12).contains(&retry), "{retry}");
        assert!(!r.body.contains("t0ken"));
    }
    // The API is not the admin endpoint: its clients are not locked out.
    assert_eq!(get(&gw.addr, "/orders", Some("hank")).status, 200);
}

/// `--help` prints the usage and exits 0; `--check` exits 0 with a
/// one-line summary for a valid file, and non-zero naming the place of
/// the first error for an invalid one; Redis URLs in the summary are
/// masked.
#[test]
fn gateway_help_and_check() {
    let run = |args: &[&str]| {
        let out = Command::new(example_binary()).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("usage: gateway"), "{stdout}");
    for option in ["--config FILE", "--admin ADDR", "--check FILE", "--redis"] {
        assert!(stdout.contains(option), "{option}: {stdout}");
    }

    let good = TempFile::new("check-good", DRIVE_RULES);
    let (code, stdout, stderr) = run(&["--check", good.path()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.contains("valid: 2 tiers: key 10/min per client, endpoint 3/min per client and endpoint; in process"),
        "{stdout}"
    );

    for (name, bad, place) in [
        (
            "check-quota",
            DRIVE_RULES.replace("\"3/min\"", "\"3/fortnight\""),
            "limits.tiers[1].quota",
        ),
        (
            "check-capacity",
            DRIVE_RULES.replace("capacity = 1000\n[[", "capacity = 0\n[["),
            "limits.tiers[0].capacity",
        ),
        (
            "check-routes",
            DRIVE_RULES.replace(
                "quota = \"3/min\"\n",
                "quota = \"3/min\"\nroutes = [\"/order\"]\n",
            ),
            "limits.tiers[1].routes[0]",
        ),
        (
            "check-token",
            DRIVE_RULES.replace("\"t0ken\"", "\"\""),
            "admin.token",
        ),
    ] {
        let file = TempFile::new(name, &bad);
        let (code, stdout, stderr) = run(&["--check", file.path()]);
        assert_ne!(code, Some(0), "{name}: {stdout}");
        assert!(
            stderr.starts_with(&format!("{}: {place}: ", file.path())),
            "{name}: {stderr}"
        );
    }
    let (code, _, stderr) = run(&["--check", "/nonexistent/rules.toml"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("/nonexistent/rules.toml"), "{stderr}");

    let redis_rules = include_str!("../examples/gateway-redis.toml").replace(
        "redis://127.0.0.1:6379/",
        "redis://ops:s3cret@127.0.0.1:6379/",
    );
    let file = TempFile::new("check-redis", &redis_rules);
    let (code, stdout, stderr) = run(&["--check", file.path()]);
    #[cfg(feature = "redis")]
    {
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains("on Redis redis://:****@127.0.0.1:6379/"),
            "{stdout}"
        );
    }
    // Without the feature the Redis table is an error at its place.
    #[cfg(not(feature = "redis"))]
    {
        assert_ne!(code, Some(0), "{stdout}");
        assert!(
            stderr.starts_with(&format!("{}: limits.redis: ", file.path()))
                && stderr.contains("`redis` feature"),
            "{stderr}"
        );
    }
    for shown in [&stdout, &stderr] {
        assert!(
            !shown.contains("s3cret") && !shown.contains("ops"),
            "{shown}"
        );
    }
}

/// On Redis, with a server that does not answer: a warning at start, the
/// gateway serves by its failure policy (the file's fallback), logs the
/// backend losing Redis, and `/admin/config` masks the URL's password.
#[cfg(feature = "redis")]
#[test]
fn gateway_on_redis_unreachable_serves_and_hides_the_password() {
    let gw = start_logged(&["--redis", "redis://ops:s3cret@127.0.0.1:1/", "127.0.0.1:0"]);
    let warned = gw.line_with(&[
        "WARN",
        "Redis unreachable at start",
        "redis://:****@127.0.0.1:1/",
    ]);
    assert!(warned.is_some(), "{}", gw.log.lock().unwrap());
    let r = get(&gw.addr, "/orders", Some("ivy"));
    assert_eq!(r.status, 200, "the fallback decides: {:?}", r.headers);
    // Logged by the gateway, or by the crate with its `tracing` feature.
    let lost = gw.line_with(&["WARN", "rate limiter lost Redis"]);
    assert!(lost.is_some(), "{}", gw.log.lock().unwrap());
    let r = admin(&gw.addr, "GET", "/admin/config", Some("change-me"), "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("redis://:****@127.0.0.1:1/"), "{}", r.body);
    assert!(!r.body.contains("s3cret"), "{}", r.body);
    assert!(!gw.log.lock().unwrap().contains("s3cret"));
}
