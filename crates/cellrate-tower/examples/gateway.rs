//! A small HTTP gateway that limits per API key and per (key, endpoint)
//! with `cellrate::tower`, and tells clients where they stand with the IETF
//! `RateLimit` / `RateLimit-Policy` fields, the legacy `X-RateLimit-*` ones
//! and `Retry-After`.
//!
//! ```text
//! cargo run --example gateway --features axum,serde -- [--config FILE] [LISTEN_ADDR]
//! cargo run --example gateway --features axum,serde,redis -- --redis [REDIS_URL] [LISTEN_ADDR]
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
//! force stay. The admin endpoint changes one client's override:
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
//! With `--redis` the limits live in Redis, so a fleet of gateways shares
//! them: the rules come from `examples/gateway-redis.toml` (unless
//! `--config FILE` names another; its `[limits.redis]` table names the
//! server), 10 requests per minute per key and 3 per key and endpoint,
//! and while Redis is down each gateway falls back to local limits twice
//! as loose (the fields then announce those). The server's URL is the
//! argument, else `$CELLRATE_REDIS_URL`, else the file's; the key prefix is
//! `$CELLRATE_GATEWAY_PREFIX`, else the file's. Reloads and the admin
//! endpoint work as in process, with every client's state on the server.
//!
//! The first line printed is `listening on ADDR` (port 0 picks a free one);
//! the default address is `127.0.0.1:8080`. Logs go to stderr.
//!
//! With the `metrics` feature (`--features axum,serde,metrics`) the gateway
//! also serves `GET /metrics` in Prometheus' text format, unlimited (a real
//! deployment would serve it on an internal address): the layer's
//! `cellrate_*` series (see the crate's `metrics` module), from
//! `metrics-exporter-prometheus` installed before the layer is built.

use axum::routing::get;
use axum::Router;
use tower::Layer;

fn exit(message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(2)
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
        .route("/orders", get(|| async { "orders\n" }))
        .route("/orders/{id}", get(|| async { "one order\n" }))
        .route("/users", get(|| async { "users\n" }))
        .route("/status", get(|| async { "ok\n" }))
        .route_layer(layer)
}

#[cfg(feature = "serde")]
mod from_file {
    //! The gateway from its rules file (in process, or on Redis when the
    //! file has `[limits.redis]`), reloaded live, and the admin endpoint.

    use std::path::{Path, PathBuf};
    use std::sync::{Arc, RwLock};
    use std::time::{Duration, SystemTime};

    use axum::extract::{Path as UrlPath, State};
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, put};
    use axum::Router;
    use cellrate::config::QuotaSpec;
    use cellrate::StdClock;
    use cellrate_tower::config::LayerConfig;
    use cellrate_tower::{OverrideError, Reload, Reloader};
    use serde::Deserialize;

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
    pub struct Redis {
        pub url: Option<String>,
        pub prefix: Option<String>,
    }

    /// The file read and checked (its errors name their place), with the
    /// command line's Redis settings over it.
    fn read(path: &Path, redis: Option<&Redis>) -> Result<File, String> {
        let mut file = read_file(path)?;
        if let Some(r) = redis {
            let Some(rules) = &mut file.limits.redis else {
                return Err(format!(
                    "{}: --redis needs a [limits.redis] table",
                    path.display()
                ));
            };
            if let Some(url) = &r.url {
                rules.target = cellrate_tower::config::RedisTarget::Standalone(url.clone());
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
        if file.admin.token.is_empty() {
            return Err(format!(
                "{}: admin.token: must not be empty",
                path.display()
            ));
        }
        Ok(file)
    }

    struct Admin<B: Reload> {
        reloader: Reloader<StdClock, B>,
        token: RwLock<String>,
        /// The command line's Redis settings, put over every reading.
        redis: Option<Redis>,
    }

    /// The API router and the admin router (not limited), from `path`;
    /// on Redis with `redis` (the file must then have `[limits.redis]`).
    pub fn routers(path: PathBuf, redis: Option<Redis>) -> (Router, Router) {
        let file = read(&path, redis.as_ref()).unwrap_or_else(|e| super::exit(e));
        let built = |e: cellrate_config::ConfigError| -> ! {
            super::exit(format!("{}: limits.{e}", path.display()))
        };
        #[cfg(feature = "redis")]
        if redis.is_some() {
            let layer = file
                .limits
                .build_redis(StdClock::new(), StdClock::HZ)
                .unwrap_or_else(|e| built(e));
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
            Err(e) => return eprintln!("reload ({why}) refused, rules unchanged: {e}"),
        };
        match admin.reloader.apply(&file.limits) {
            Ok(report) => {
                if let Ok(mut t) = admin.token.write() {
                    *t = file.admin.token;
                }
                eprintln!("reloaded {} ({why}); {report}", path.display());
            }
            Err(e) => eprintln!(
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
                Err(e) => return eprintln!("no SIGHUP reload: {e}"),
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

    /// The refusal of a request without the token: 401 without a bearer
    /// token, 403 with the wrong one; `None` for the right one.
    fn refusal<B: Reload>(admin: &Admin<B>, headers: &HeaderMap) -> Option<Response> {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(given) = given else {
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
        // Compared in time that does not depend on where they differ.
        let same = given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        (!same).then(|| (StatusCode::FORBIDDEN, "wrong token\n").into_response())
    }

    fn refused(e: impl std::fmt::Display) -> Response {
        (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
    }

    /// `PUT /admin/overrides/{tier}/{client}` with a quota as the body.
    async fn set_override<B: Reload>(
        State(admin): State<Arc<Admin<B>>>,
        UrlPath((tier, client)): UrlPath<(String, String)>,
        headers: HeaderMap,
        body: String,
    ) -> Response {
        if let Some(r) = refusal(&admin, &headers) {
            return r;
        }
        let quota: QuotaSpec = match body.trim().parse() {
            Ok(q) => q,
            Err(e) => return refused(format_args!("body: {e}")),
        };
        match admin.reloader.set_override(&tier, &client, Some(quota)) {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => refused(e),
        }
    }

    /// `DELETE /admin/overrides/{tier}/{client}`: back to the tier's quota
    /// (404 if there is no such override).
    async fn remove_override<B: Reload>(
        State(admin): State<Arc<Admin<B>>>,
        UrlPath((tier, client)): UrlPath<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        if let Some(r) = refusal(&admin, &headers) {
            return r;
        }
        match admin.reloader.set_override(&tier, &client, None) {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e @ (OverrideError::NoTier(_) | OverrideError::NoOverride { .. })) => {
                (StatusCode::NOT_FOUND, format!("{e}\n")).into_response()
            }
            Err(e) => refused(e),
        }
    }

    /// `GET /admin/config`: the rules in force, as TOML.
    async fn show_config<B: Reload>(
        State(admin): State<Arc<Admin<B>>>,
        headers: HeaderMap,
    ) -> Response {
        if let Some(r) = refusal(&admin, &headers) {
            return r;
        }
        match toml::to_string(&admin.reloader.config()) {
            Ok(text) => text.into_response(),
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
}

/// The gateway from its rules file, on Redis with `redis`.
#[cfg(feature = "serde")]
fn from_rules(config: std::path::PathBuf, redis: Option<from_file::Redis>) -> Router {
    let (api, admin) = from_file::routers(config, redis);
    Router::new().merge(api).merge(admin)
}

#[cfg(not(feature = "serde"))]
fn from_rules(_config: std::path::PathBuf, _redis: Option<()>) -> Router {
    exit("the rules file needs the `serde` feature: cargo run --example gateway --features axum,serde".into())
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

#[tokio::main]
async fn main() {
    // Before any layer is built: a layer registers its series when built.
    let scrape = metrics_endpoint();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = None;
    let mut redis = None;
    loop {
        match args.first().map(String::as_str) {
            Some("--config") => {
                args.remove(0);
                if args.is_empty() {
                    exit("--config needs a file".into());
                }
                config = Some(std::path::PathBuf::from(args.remove(0)));
            }
            Some("--redis") => {
                args.remove(0);
                let url = if args.first().is_some_and(|a| a.starts_with("redis")) {
                    Some(args.remove(0))
                } else {
                    std::env::var("CELLRATE_REDIS_URL").ok()
                };
                redis = Some(redis_settings(url));
            }
            _ => break,
        }
    }
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
    let router = from_rules(config, redis.flatten());
    let router = router.merge(scrape);
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| exit(format!("cannot listen on {addr}: {e}")));
    match listener.local_addr() {
        Ok(a) => println!("listening on {a}"),
        Err(e) => eprintln!("no local address: {e}"),
    }
    if let Err(e) = axum::serve(listener, router).await {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
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
