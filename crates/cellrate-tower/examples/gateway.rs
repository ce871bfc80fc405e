//! A small HTTP gateway that limits per API key and per (key, endpoint)
//! with `cellrate::tower`, and tells clients where they stand with the IETF
//! `RateLimit` / `RateLimit-Policy` fields, the legacy `X-RateLimit-*` ones
//! and `Retry-After`.
//!
//! ```text
//! cargo run --example gateway --features axum,serde -- [--config FILE] [--admin ADDR] [LISTEN_ADDR]
//! cargo run --example gateway --features axum,serde,redis -- --redis [REDIS_URL] [LISTEN_ADDR]
//! cargo run --example gateway --features axum,serde -- --check FILE
//! cargo run --example gateway --features axum,serde -- --help
//! curl -i -H 'x-api-key: alice' http://127.0.0.1:8080/orders
//! ```
//!
//! In process (the default), the rules come from a file:
//! `examples/gateway.toml` unless `--config FILE` names another (a
//! `[limits]` table, a `cellrate_tower::config::LayerConfig`, and an
//! `[admin]` table with the admin token). The gateway reloads the file when
//! its modification time changes (checked every second;
//! `$CELLRATE_GATEWAY_POLL_MS` sets the interval, 0 turns it off) and on
//! SIGHUP, keeping every client's state; a file that does not parse or
//! check is refused, its error logged with its place, and the rules in
//! force stay. `--check FILE` reads and checks a file the same way and
//! exits: 0 with a one-line summary when it is valid, 1 with the place of
//! the first error when not. The admin endpoint changes one client's
//! override:
//!
//! ```text
//! curl -X PUT -H 'authorization: Bearer change-me' --data '500/min' \
//!      http://127.0.0.1:8080/admin/overrides/key/acct_123     # 204
//! curl -X DELETE -H 'authorization: Bearer change-me' \
//!      http://127.0.0.1:8080/admin/overrides/key/acct_123     # back to the tier's quota
//! curl -H 'authorization: Bearer change-me' http://127.0.0.1:8080/admin/config
//! ```
//!
//! The next request of that client is decided, and announced, by the new
//! quota (its debt kept as time: see `cellrate_tower::Reloader`). No token:
//! 401 with a `WWW-Authenticate` challenge; a wrong one: 403; a body that
//! is not a quota (`"500/min"`, `"10/s, burst 20"`) or an unknown tier: 400
//! with the reason; a DELETE of an override the client does not have: 404.
//! An override set this way outlives reloads of the file while its tier is
//! in the file (over the file's override of that client, if any); the log
//! line of each reload says which were kept and which dropped.
//!
//! The admin endpoint is meant to be reachable by operators only:
//! `--admin ADDR` serves it (and `/metrics`) on an address of its own,
//! e.g. one bound to an internal interface, and no longer on the traffic
//! address. The scheme of `Authorization` is read case-insensitively
//! (`bearer` works), the token is compared in time that does not depend on
//! where it differs, and each peer IP gets 5 wrong tokens per minute (a
//! cellrate keyed table): past them every admin request from that IP is
//! answered 429 with `Retry-After`, before any token is compared.
//! `/admin/config` shows the rules in force with the user and password of
//! every Redis URL masked (`redis://:****@host:6379/`). Every change is
//! logged with its tier, client, and the quota before and after.
//!
//! With `--redis` the limits live in Redis, so a fleet of gateways shares
//! them: the rules come from `examples/gateway-redis.toml` (unless
//! `--config FILE` names another; its `[limits.redis]` table names the
//! server), 10 requests per minute per key and 3 per key and endpoint,
//! and while Redis is down each gateway falls back to local limits twice
//! as loose (the fields then announce those). The server's URL is the
//! argument, else `$CELLRATE_REDIS_URL`, else the file's; the key prefix is
//! `$CELLRATE_GATEWAY_PREFIX`, else the file's. Reloads and the admin
//! endpoint work as in process, with every client's state on the server.
//! A server that does not answer at start is a warning: the gateway serves
//! by the file's failure policy until it does. Each time the backend loses
//! Redis or reaches it again is logged.
//!
//! The first line printed is `listening on ADDR` (port 0 picks a free one),
//! then `admin listening on ADDR` with `--admin`; the default address is
//! `127.0.0.1:8080`. Logs go to stderr through `tracing-subscriber`, with
//! their level and time: the rules loaded at start, each reload (the
//! run-time overrides it kept and dropped), each admin change and refused
//! token, Redis lost and found. `$RUST_LOG` filters them (default `info`).
//!
//! With the `metrics` feature (`--features axum,serde,metrics`) the gateway
//! also serves `GET /metrics` in Prometheus' text format, unlimited, on the
//! admin address if there is one, else on the traffic address: the layer's
//! `cellrate_*` series (see the crate's `metrics` module), from
//! `metrics-exporter-prometheus` installed before the layer is built.

use std::io::Write;
use std::net::SocketAddr;

use axum::routing::get;
use axum::Router;
use tower::Layer;
use tracing::info;

const USAGE: &str = "\
usage: gateway [--config FILE] [--redis [REDIS_URL]] [--admin ADDR] [LISTEN_ADDR]
       gateway --check FILE
       gateway --help

  --config FILE   the rules file (default: examples/gateway.toml, or
                  examples/gateway-redis.toml with --redis)
  --redis [URL]   limits on Redis (feature `redis`): URL, else
                  $CELLRATE_REDIS_URL, else the file's [limits.redis]
  --admin ADDR    serve /admin/* (and /metrics) on ADDR only, not on the
                  traffic address
  --check FILE    check a rules file and exit: 0 when valid, 1 with the
                  place of the first error
  --help          print this and exit
  LISTEN_ADDR     the traffic address (default 127.0.0.1:8080; port 0
                  picks a free one)

environment: RUST_LOG (log filter, default info), CELLRATE_GATEWAY_POLL_MS
(how often the file is checked for changes, 0: only on SIGHUP),
CELLRATE_REDIS_URL, CELLRATE_GATEWAY_PREFIX
";

fn exit(message: String) -> ! {
    tracing::error!("{message}");
    std::process::exit(2)
}

/// Logs to stderr with level and time; `$RUST_LOG` filters (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing_subscriber::filter::LevelFilter::INFO.into())
        .from_env_lossy();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// `url` with its user information (user and password) masked, and the
/// user and password query parameters of a Unix-socket URL too:
/// `redis://:****@host:6379/`.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rfind('@') {
        Some(at) => format!(":****@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        None => tail.to_string(),
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, format!("#{f}")),
                None => (query, String::new()),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((name, _))
                        if ["pass", "password", "user", "username"]
                            .iter()
                            .any(|secret| name.eq_ignore_ascii_case(secret)) =>
                    {
                        format!("{name}=****")
                    }
                    _ => param.to_string(),
                })
                .collect();
            format!("{path}?{}{fragment}", params.join("&"))
        }
    };
    format!("{scheme}://{authority}{tail}")
}

/// The API: every route limited by `layer`.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
fn api<L>(layer: L) -> Router
where
    L: Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
    L::Service: tower::Service<axum::extract::Request, Error = std::convert::Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower::Service<axum::extract::Request>>::Response:
        axum::response::IntoResponse + 'static,
    <L::Service as tower::Service<axum::extract::Request>>::Future: Send + 'static,
{
    Router::new()
        .route(ROUTES[0], get(|| async { "orders\n" }))
        .route(ROUTES[1], get(|| async { "one order\n" }))
        .route(ROUTES[2], get(|| async { "users\n" }))
        .route(ROUTES[3], get(|| async { "ok\n" }))
        .route_layer(layer)
}

/// The API's routes: a tier's `routes` must name some of them
/// (`LayerConfig::check_routes`).
const ROUTES: [&str; 4] = ["/orders", "/orders/{id}", "/users", "/status"];

#[cfg(feature = "serde")]
mod from_file {
    //! The gateway from its rules file (in process, or on Redis when the
    //! file has `[limits.redis]`), reloaded live, and the admin endpoint.

    use std::net::{IpAddr, SocketAddr};
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex, RwLock};
    use std::time::{Duration, SystemTime};

    use axum::extract::{ConnectInfo, Path as UrlPath, State};
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, put};
    use axum::Router;
    use cellrate::compose::Revocable;
    use cellrate::config::QuotaSpec;
    use cellrate::keyed::{Hashed, KeyedBox, Seed, WhenFull};
    use cellrate::{Clock, Quota, StdClock};
    use cellrate_tower::config::{LayerConfig, TierScope};
    use cellrate_tower::{OverrideError, Reload, Reloader};
    use serde::Deserialize;
    use tracing::{info, warn};

    /// Wrong admin tokens allowed per peer IP: 5 per minute, 5 at once.
    const FAILURES: Quota = Quota::per_minute(5).at_hz(StdClock::HZ);
    /// Peer IPs tracked; past them every untracked IP shares one budget.
    const FAILURE_TABLE: usize = 4096;

    /// What the file holds.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        admin: AdminRules,
        limits: LayerConfig,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct AdminRules {
        /// `Authorization: Bearer <token>` for /admin/*.
        token: String,
    }

    /// What the command line puts over the file's `[limits.redis]`: the
    /// server's URL and the key prefix.
    #[derive(Clone, Default)]
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub struct Redis {
        pub url: Option<String>,
        pub prefix: Option<String>,
    }

    /// The file read and checked (its errors name their place), with the
    /// command line's Redis settings over it.
    fn read(path: &Path, redis: Option<&Redis>) -> Result<File, String> {
        #[allow(unused_mut)]
        let mut file = read_file(path)?;
        #[cfg(not(feature = "redis"))]
        let _ = redis;
        #[cfg(feature = "redis")]
        if let Some(r) = redis {
            let Some(rules) = &mut file.limits.redis else {
                return Err(format!(
                    "{}: --redis needs a [limits.redis] table",
                    path.display()
                ));
            };
            if let Some(url) = &r.url {
                rules.target = cellrate_redis::Target::standalone(url)
                    .map_err(|e| format!("--redis {}: {e}", super::redact(url)))?;
            }
            if let Some(prefix) = &r.prefix {
                rules.prefix = prefix.clone();
            }
        } else if file.limits.redis.is_some() {
            return Err(format!(
                "{}: limits.redis: run the gateway with --redis to use it",
                path.display()
            ));
        }
        Ok(file)
    }

    fn read_file(path: &Path) -> Result<File, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let toml = toml::Deserializer::parse(&text)
            .map_err(|e| format!("{}: not TOML: {e}", path.display()))?;
        let file: File = cellrate_config::from_deserializer(toml)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // A tier's route that is no route of the API would decide nothing.
        file.limits
            .check_routes(super::ROUTES)
            .map_err(|e| format!("{}: limits.{e}", path.display()))?;
        if file.admin.token.is_empty() {
            return Err(format!(
                "{}: admin.token: must not be empty",
                path.display()
            ));
        }
        Ok(file)
    }

    /// `--check`: the file at `path` read and its rules built as the
    /// gateway would (nothing connects: a Redis backend connects at its
    /// first check); a one-line summary, or the first error with its place.
    pub fn check(path: &Path) -> Result<String, String> {
        let file = read_file(path)?;
        let limits = &file.limits;
        let failed = |e: cellrate_config::ConfigError| format!("{}: limits.{e}", path.display());
        // Without the `redis` feature a `[limits.redis]` table is an
        // error of `read_file`, at its place.
        if !limits.on_redis() {
            limits
                .build(StdClock::new(), StdClock::HZ)
                .map_err(failed)?;
        }
        #[cfg(feature = "redis")]
        if limits.on_redis() {
            limits
                .build_redis(StdClock::new(), StdClock::HZ)
                .map_err(failed)?;
        }
        Ok(format!("{}: valid: {}", path.display(), summary(limits)))
    }

    /// The rules in one line: each tier's name, quota, scope and number of
    /// overrides, and where the state lives (Redis URLs masked).
    fn summary(limits: &LayerConfig) -> String {
        let tiers: Vec<String> = limits
            .tiers
            .iter()
            .map(|t| {
                let scope = match t.scope {
                    TierScope::Client => "per client",
                    TierScope::ClientAndEndpoint => "per client and endpoint",
                };
                let overrides = match t.overrides.len() {
                    0 => String::new(),
                    1 => " (1 override)".into(),
                    n => format!(" ({n} overrides)"),
                };
                format!("{} {} {scope}{overrides}", t.name, t.quota)
            })
            .collect();
        #[cfg(feature = "redis")]
        let place = match &limits.redis {
            None => "in process".to_string(),
            Some(rules) => format!(
                "on Redis {} (prefix {:?})",
                rules
                    .target
                    .urls()
                    .iter()
                    .map(|u| super::redact(u))
                    .collect::<Vec<_>>()
                    .join(", "),
                rules.prefix
            ),
        };
        #[cfg(not(feature = "redis"))]
        let place = "in process";
        let s = if tiers.len() == 1 { "" } else { "s" };
        format!("{} tier{s}: {}; {place}", tiers.len(), tiers.join(", "))
    }

    /// The rules as `/admin/config` shows them: every Redis URL
    /// (`redis.target.standalone`, each of `redis.target.cluster`) masked.
    fn redacted(limits: &LayerConfig) -> Result<toml::Table, toml::ser::Error> {
        let mut table = toml::Table::try_from(limits)?;
        let target = table
            .get_mut("redis")
            .and_then(|r| r.get_mut("target"))
            .and_then(|t| t.as_table_mut());
        let mask = |v: &mut toml::Value| {
            if let toml::Value::String(url) = v {
                *url = super::redact(url);
            }
        };
        if let Some(target) = target {
            for (_, urls) in target.iter_mut() {
                match urls {
                    toml::Value::Array(nodes) => nodes.iter_mut().for_each(mask),
                    one => mask(one),
                }
            }
        }
        Ok(table)
    }

    struct Admin<B: Reload> {
        reloader: Reloader<StdClock, B>,
        token: RwLock<String>,
        /// The command line's Redis settings, put over every reading.
        redis: Option<Redis>,
        /// Wrong tokens per peer IP ([`FAILURES`]).
        failures: KeyedBox<Quota>,
        clock: StdClock,
        /// Held by each change, so the quota it logs as the old one is the
        /// one it replaced.
        changes: Mutex<()>,
    }

    /// The API router and the admin router (not limited), from `path`;
    /// on Redis with `redis` (the file must then have `[limits.redis]`).
    pub fn routers(path: PathBuf, redis: Option<Redis>) -> (Router, Router) {
        let file = read(&path, redis.as_ref()).unwrap_or_else(|e| super::exit(e));
        let built = |e: cellrate_config::ConfigError| -> ! {
            super::exit(format!("{}: limits.{e}", path.display()))
        };
        info!("rules from {}: {}", path.display(), summary(&file.limits));
        #[cfg(feature = "redis")]
        if redis.is_some() {
            let layer = file
                .limits
                .build_redis(StdClock::new(), StdClock::HZ)
                .unwrap_or_else(|e| built(e));
            if let Some(rules) = &file.limits.redis {
                probe(rules.target.urls().to_vec());
            }
            #[cfg(not(feature = "tracing"))]
            watch_redis(layer.backend().counters());
            let reloader = layer.reloader();
            return (super::api(layer), admin(path, file, reloader, redis));
        }
        {
            let layer = file
                .limits
                .build(StdClock::new(), StdClock::HZ)
                .unwrap_or_else(|e| built(e));
            let reloader = layer.reloader();
            (super::api(layer), admin(path, file, reloader, None))
        }
    }

    /// Asks each Redis node for a PING (off the runtime's workers), and
    /// warns about those that do not answer: the gateway serves by its
    /// failure policy until they do.
    #[cfg(feature = "redis")]
    fn probe(urls: Vec<String>) {
        let ping = |url: &str| -> redis::RedisResult<()> {
            let client = redis::Client::open(url)?;
            let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
            redis::cmd("PING").query::<String>(&mut connection)?;
            Ok(())
        };
        tokio::task::spawn_blocking(move || {
            for url in urls {
                let shown = super::redact(&url);
                match ping(&url) {
                    Ok(()) => info!(redis = %shown, "Redis answers"),
                    Err(e) => warn!(
                        redis = %shown,
                        error = %e,
                        "Redis unreachable at start: deciding by the failure policy until it answers"
                    ),
                }
            }
        });
    }

    /// Logs each time the Redis backend loses Redis or reaches it again,
    /// from its failure-mode counters (with the `tracing` feature the
    /// backend logs these itself).
    #[cfg(all(feature = "redis", not(feature = "tracing")))]
    fn watch_redis(counters: Arc<cellrate_tower::FallbackCounters>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            let mut seen = counters.stats();
            loop {
                tick.tick().await;
                let now = counters.stats();
                let lost = now.entered > seen.entered;
                let found = now.left > seen.left;
                let log_lost = || {
                    warn!(
                        times = now.entered,
                        "rate limiter lost Redis: deciding by its failure policy"
                    )
                };
                let log_found = || {
                    info!(
                        degraded_verdicts = now.degraded_verdicts,
                        "rate limiter reached Redis again"
                    )
                };
                // Both within one tick: the last one is the mode now.
                if now.degraded {
                    if found {
                        log_found();
                    }
                    if lost {
                        log_lost();
                    }
                } else {
                    if lost {
                        log_lost();
                    }
                    if found {
                        log_found();
                    }
                }
                seen = now;
            }
        });
    }

    /// The admin router over `reloader`, and the watch of `path`.
    fn admin<B: Reload>(
        path: PathBuf,
        file: File,
        reloader: Reloader<StdClock, B>,
        redis: Option<Redis>,
    ) -> Router {
        let admin = Arc::new(Admin {
            reloader,
            token: RwLock::new(file.admin.token),
            redis,
            failures: KeyedBox::with_capacity(
                FAILURE_TABLE,
                FAILURES,
                WhenFull::Shared,
                Seed::random(),
            ),
            clock: StdClock::new(),
            changes: Mutex::new(()),
        });
        watch(path, Arc::clone(&admin));
        Router::new()
            .route(
                "/admin/overrides/{tier}/{client}",
                put(set_override::<B>).delete(remove_override::<B>),
            )
            .route("/admin/config", get(show_config::<B>))
            .with_state(admin)
    }

    /// Reloads `path` into the layer (and the token), or logs why not.
    fn reload<B: Reload>(path: &Path, admin: &Admin<B>, why: &str) {
        let file = match read(path, admin.redis.as_ref()) {
            Ok(f) => f,
            Err(e) => return warn!("reload ({why}) refused, rules unchanged: {e}"),
        };
        match admin.reloader.apply(&file.limits) {
            Ok(report) => {
                if let Ok(mut t) = admin.token.write() {
                    *t = file.admin.token;
                }
                info!(
                    "reloaded {} ({why}): {}; {report}",
                    path.display(),
                    summary(&file.limits)
                );
            }
            Err(e) => warn!(
                "reload ({why}) refused, rules unchanged: {}: limits.{e}",
                path.display()
            ),
        }
    }

    fn modified(path: &Path) -> Option<SystemTime> {
        std::fs::metadata(path).and_then(|m| m.modified()).ok()
    }

    /// Reloads on SIGHUP and when the file's modification time changes.
    fn watch<B: Reload>(path: PathBuf, admin: Arc<Admin<B>>) {
        let poll_ms: u64 = std::env::var("CELLRATE_GATEWAY_POLL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000);
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let mut hup = match signal(SignalKind::hangup()) {
                Ok(s) => s,
                Err(e) => return warn!("no SIGHUP reload: {e}"),
            };
            // Polling off: a tick that never comes.
            let mut tick = tokio::time::interval(Duration::from_millis(poll_ms.max(1)));
            let mut seen = modified(&path);
            loop {
                tokio::select! {
                    _ = hup.recv() => reload(&path, &admin, "SIGHUP"),
                    _ = tick.tick(), if poll_ms > 0 => {
                        let now = modified(&path);
                        if now != seen {
                            seen = now;
                            reload(&path, &admin, "file changed");
                        }
                    }
                }
            }
        });
    }

    /// The token of a `Bearer` credential; the scheme is read
    /// case-insensitively (RFC 9110 §11.1).
    fn bearer(headers: &HeaderMap) -> Option<&str> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        let token = token.trim_start_matches(' ');
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    }

    /// Whether `given` equals `token`, in time that depends on their
    /// lengths only: every byte position up to the longer length is
    /// compared and folded into one difference, with no early return.
    fn same(given: &[u8], token: &[u8]) -> bool {
        let mut diff = given.len() ^ token.len();
        for i in 0..given.len().max(token.len()) {
            let a = given.get(i).copied().unwrap_or(0);
            let b = token.get(i).copied().unwrap_or(0);
            diff |= usize::from(a ^ b);
        }
        std::hint::black_box(diff) == 0
    }

    /// The refusal of an admin request, or `None` to serve it. A peer IP
    /// past its wrong tokens gets 429 with `Retry-After` before any token
    /// is compared; then 401 without a bearer token, 403 with the wrong
    /// one (which counts against the IP).
    fn refusal<B: Reload>(admin: &Admin<B>, peer: IpAddr, headers: &HeaderMap) -> Option<Response> {
        let ip = Hashed(peer);
        let failures = admin.failures.entry(&ip);
        // One failure is charged before comparing and given back unless
        // the token is wrong: concurrent guesses cannot exceed the budget.
        let charged = match failures.admit_n(admin.clock.now(), 1) {
            Ok((_, charged)) => charged,
            Err(denied) => {
                // One cell always fits the budget: the wait is finite.
                let seconds = denied
                    .retry_after()
                    .map_or(60, |ticks| ticks.div_ceil(StdClock::HZ).max(1));
                warn!(%peer, "admin: too many wrong tokens from this address; refused for {seconds} s");
                return Some(
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [(header::RETRY_AFTER, seconds.to_string())],
                        "too many wrong tokens\n",
                    )
                        .into_response(),
                );
            }
        };
        let Some(given) = bearer(headers) else {
            failures.revoke(charged);
            return Some(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer realm=\"admin\"")],
                    "a bearer token is required\n",
                )
                    .into_response(),
            );
        };
        let token = admin.token.read().map(|t| t.clone()).unwrap_or_default();
        if same(given.as_bytes(), token.as_bytes()) {
            failures.revoke(charged);
            return None;
        }
        warn!(%peer, "admin: wrong token");
        Some((StatusCode::FORBIDDEN, "wrong token\n").into_response())
    }

    fn refused(e: impl std::fmt::Display) -> Response {
        (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
    }

    /// The quota that decides `client` in `tier` under `config`, and
    /// whether it is the client's override or the tier's own.
    fn deciding(config: &LayerConfig, tier: &str, client: &str) -> String {
        match config.tiers.iter().find(|t| t.name == tier) {
            None => "none (no such tier)".into(),
            Some(t) => match t.overrides.get(client) {
                Some(q) => format!("{q} (override)"),
                None => format!("{} (tier quota)", t.quota),
            },
        }
    }

    /// `PUT /admin/overrides/{tier}/{client}` with a quota as the body.
    async fn set_override<B: Reload>(
        State(admin): State<Arc<Admin<B>>>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
        UrlPath((tier, client)): UrlPath<(String, String)>,
        headers: HeaderMap,
        body: String,
    ) -> Response {
        if let Some(r) = refusal(&admin, peer.ip(), &headers) {
            return r;
        }
        let quota: QuotaSpec = match body.trim().parse() {
            Ok(q) => q,
            Err(e) => return refused(format_args!("body: {e}")),
        };
        let _change = admin.changes.lock().unwrap_or_else(|p| p.into_inner());
        let old = deciding(&admin.reloader.config(), &tier, &client);
        match admin.reloader.set_override(&tier, &client, Some(quota)) {
            Ok(()) => {
                let new = format!("{quota} (override)");
                info!(%tier, %client, ?old, ?new, peer = %peer.ip(), "admin: override set");
                StatusCode::NO_CONTENT.into_response()
            }
            Err(e) => refused(e),
        }
    }

    /// `DELETE /admin/overrides/{tier}/{client}`: back to the tier's quota
    /// (404 if there is no such override).
    async fn remove_override<B: Reload>(
        State(admin): State<Arc<Admin<B>>>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
        UrlPath((tier, client)): UrlPath<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        if let Some(r) = refusal(&admin, peer.ip(), &headers) {
            return r;
        }
        let _change = admin.changes.lock().unwrap_or_else(|p| p.into_inner());
        let old = deciding(&admin.reloader.config(), &tier, &client);
        match admin.reloader.set_override(&tier, &client, None) {
            Ok(()) => {
                let new = deciding(&admin.reloader.config(), &tier, &client);
                info!(%tier, %client, ?old, ?new, peer = %peer.ip(), "admin: override removed");
                StatusCode::NO_CONTENT.into_response()
            }
            Err(e @ (OverrideError::NoTier(_) | OverrideError::NoOverride { .. })) => {
                (StatusCode::NOT_FOUND, format!("{e}\n")).into_response()
            }
            Err(e) => refused(e),
        }
    }

    /// `GET /admin/config`: the rules in force, as TOML, Redis URLs masked.
    async fn show_config<B: Reload>(
        State(admin): State<Arc<Admin<B>>>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
        headers: HeaderMap,
    ) -> Response {
        if let Some(r) = refusal(&admin, peer.ip(), &headers) {
            return r;
        }
        match redacted(&admin.reloader.config()).and_then(|t| toml::to_string(&t)) {
            Ok(text) => text.into_response(),
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
}

/// The gateway's API and admin routers from its rules file, on Redis with
/// `redis`.
#[cfg(feature = "serde")]
fn from_rules(config: std::path::PathBuf, redis: Option<from_file::Redis>) -> (Router, Router) {
    from_file::routers(config, redis)
}

#[cfg(not(feature = "serde"))]
fn from_rules(_config: std::path::PathBuf, _redis: Option<()>) -> (Router, Router) {
    exit("the rules file needs the `serde` feature: cargo run --example gateway --features axum,serde".into())
}

/// `--check FILE`: exits 0 with a summary when the file is valid, 1 with
/// the place of its first error when not.
fn check(file: &str) -> ! {
    #[cfg(feature = "serde")]
    match from_file::check(std::path::Path::new(file)) {
        Ok(summary) => {
            println!("{summary}");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
    #[cfg(not(feature = "serde"))]
    {
        eprintln!("{file}: --check needs the `serde` feature: cargo run --example gateway --features axum,serde");
        std::process::exit(2)
    }
}

/// The command line's Redis settings, with the feature.
#[cfg(all(feature = "serde", feature = "redis"))]
fn redis_settings(url: Option<String>) -> Option<from_file::Redis> {
    Some(from_file::Redis {
        url,
        prefix: std::env::var("CELLRATE_GATEWAY_PREFIX").ok(),
    })
}

#[cfg(all(feature = "serde", not(feature = "redis")))]
fn redis_settings(_url: Option<String>) -> Option<from_file::Redis> {
    exit("--redis needs the `redis` feature: cargo run --example gateway --features axum,serde,redis".into())
}

#[cfg(not(feature = "serde"))]
fn redis_settings(_url: Option<String>) -> Option<()> {
    exit("--redis needs the `serde` and `redis` features: cargo run --example gateway --features axum,serde,redis".into())
}

/// A wrong command line: the reason and the usage on stderr, exit 2.
fn usage_error(message: &str) -> ! {
    eprintln!("{message}\n\n{USAGE}");
    std::process::exit(2)
}

/// One line on stdout, where the tests read the addresses (a closed
/// stdout is not an error: the lines are for whoever reads them).
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn bind(addr: &str) -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| exit(format!("cannot listen on {addr}: {e}")));
    let local = listener
        .local_addr()
        .map_or_else(|_| addr.to_string(), |a| a.to_string());
    (listener, local)
}

/// Serves `router` on `listener` (each request knows its peer's address)
/// until an error, which ends the process.
async fn serve(listener: tokio::net::TcpListener, router: Router, what: &str) {
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(e) = axum::serve(listener, service).await {
        tracing::error!("{what} server error: {e}");
        std::process::exit(1);
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let mut config = None;
    let mut redis = None;
    let mut admin_addr = None;
    let mut listen = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--help" | "-h" => {
                print!("{USAGE}");
                return;
            }
            "--check" => {
                let file = args
                    .next()
                    .unwrap_or_else(|| usage_error("--check needs a file"));
                check(&file)
            }
            "--config" => {
                let file = args
                    .next()
                    .unwrap_or_else(|| usage_error("--config needs a file"));
                config = Some(std::path::PathBuf::from(file));
            }
            "--admin" => {
                let addr = args
                    .next()
                    .unwrap_or_else(|| usage_error("--admin needs an address"));
                admin_addr = Some(addr);
            }
            "--redis" => {
                let url = match args.next_if(|a| a.starts_with("redis")) {
                    Some(url) => Some(url),
                    None => std::env::var("CELLRATE_REDIS_URL").ok(),
                };
                redis = Some(url);
            }
            option if option.starts_with('-') => usage_error(&format!("unknown option {option}")),
            _ if listen.is_some() => usage_error(&format!("one LISTEN_ADDR, not also {arg}")),
            _ => listen = Some(arg),
        }
    }
    init_logging();
    let redis = redis.map(redis_settings);
    // Before any layer is built: a layer registers its series when built.
    let scrape = metrics_endpoint();
    let default = if redis.is_some() {
        "gateway-redis.toml"
    } else {
        "gateway.toml"
    };
    let config = config.unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(default)
    });
    let (api, admin) = from_rules(config, redis.flatten());
    let (listener, local) = bind(listen.as_deref().unwrap_or("127.0.0.1:8080")).await;
    let Some(admin_addr) = admin_addr else {
        say(format!("listening on {local}"));
        info!("listening on {local} (traffic, admin and metrics)");
        return serve(listener, api.merge(admin).merge(scrape), "traffic").await;
    };
    let (admin_listener, admin_local) = bind(&admin_addr).await;
    say(format!("listening on {local}"));
    say(format!("admin listening on {admin_local}"));
    info!("listening on {local} (traffic), admin and metrics on {admin_local}");
    tokio::spawn(serve(admin_listener, admin.merge(scrape), "admin"));
    serve(listener, api, "traffic").await
}
/// `GET /metrics` in Prometheus' text format (feature `metrics`): installs
/// the Prometheus recorder as the global `metrics` recorder, so it must run
/// before the layer is built. The Redis check latency gets buckets (without
/// them the exporter writes a summary).
#[cfg(feature = "metrics")]
fn metrics_endpoint() -> Router {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let buckets = [
        0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(cellrate_metrics::REDIS_CHECK_SECONDS.into()),
            &buckets,
        )
        .and_then(PrometheusBuilder::install_recorder)
        .unwrap_or_else(|e| exit(format!("cannot install the metrics recorder: {e}")));
    Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move {
                handle.run_upkeep();
                handle.render()
            }
        }),
    )
}

/// No `/metrics` without the `metrics` feature.
#[cfg(not(feature = "metrics"))]
fn metrics_endpoint() -> Router {
    Router::new()
}
