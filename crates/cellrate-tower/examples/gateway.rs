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
//! The program parses its command line, sets up its logs and binds its
//! listeners; the watch of the rules file is `cellrate_tower::RulesWatcher`
//! and the admin endpoint `cellrate_tower::Admin`.
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
//! quota (the cells it has used kept: see `cellrate_tower::Reloader`). No token:
//! 401 with a `WWW-Authenticate` challenge; a wrong one: 403; a body that
//! is not a quota (`"500/min"`, `"10/s, burst 20"`) or an unknown tier: 400
//! with the reason; a DELETE of an override the client does not have: 404.
//! An override set this way outlives reloads of the file while its tier is
//! in the file (over the file's override of that client, if any); the log
//! line of each reload says which were kept and which dropped. With
//! `overrides = "FILE"` in `[admin]` they are also written to FILE after
//! each change and set again at start, so a restart keeps them.
//!
//! The admin endpoint is meant to be reachable by operators only:
//! `--admin ADDR` serves it (and `/metrics`) on an address of its own,
//! e.g. one bound to an internal interface, apart from the traffic
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
    //! file has `[limits.redis]`): the layer, its admin endpoint
    //! (`cellrate_tower::Admin`) and the watch of the file
    //! (`cellrate_tower::RulesWatcher`).

    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use axum::http::HeaderValue;
    use axum::Router;
    use cellrate::StdClock;
    use cellrate_tower::config::LayerConfig;
    use cellrate_tower::{Admin, AdminToken, Reload, Reloader, RulesWatcher};
    use serde::Deserialize;
    use tracing::info;

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
        token: AdminToken,
        /// Where the overrides set through /admin/* are kept across
        /// restarts (`Admin::keep_overrides`), if anywhere.
        #[serde(default)]
        overrides: Option<PathBuf>,
    }

    impl AsRef<LayerConfig> for File {
        fn as_ref(&self) -> &LayerConfig {
            &self.limits
        }
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
        // Without the `redis` feature a `[limits.redis]` table is an error
        // of `read_file`, at its place, and `redis` is always `None`.
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
                    .map_err(|e| format!("--redis {}: {e}", cellrate_tower::redact_url(url)))?;
            }
            if let Some(prefix) = &r.prefix {
                rules.prefix = prefix.clone();
            }
            return Ok(file);
        }
        let _ = redis;
        if file.limits.on_redis() {
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
            .map_err(|e| format!("{}: {}", path.display(), e.within("limits")))?;
        Ok(file)
    }

    /// `--check`: the file at `path` read and its rules built as the
    /// gateway would (nothing connects: a Redis backend connects at its
    /// first check); a one-line summary, or the first error with its place.
    pub fn check(path: &Path) -> Result<String, String> {
        let file = read_file(path)?;
        let limits = &file.limits;
        let failed =
            |e: cellrate_config::ConfigError| format!("{}: {}", path.display(), e.within("limits"));
        // Without the `redis` feature a `[limits.redis]` table is an error
        // of `read_file`, at its place.
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
        Ok(format!("{}: valid: {}", path.display(), limits.summary()))
    }

    /// The API router and the admin router (not limited), from `path`;
    /// on Redis with `redis` (the file must then have `[limits.redis]`).
    pub fn routers(path: PathBuf, redis: Option<Redis>) -> (Router, Router) {
        let file = read(&path, redis.as_ref()).unwrap_or_else(|e| super::exit(e));
        let built = |e: cellrate_config::ConfigError| -> ! {
            super::exit(format!("{}: {}", path.display(), e.within("limits")))
        };
        info!("rules from {}: {}", path.display(), file.limits.summary());
        #[cfg(feature = "redis")]
        if redis.is_some() {
            let layer = file
                .limits
                .build_redis(StdClock::new(), StdClock::HZ)
                .unwrap_or_else(|e| built(e));
            if let Some(rules) = &file.limits.redis {
                probe(&rules.target);
            }
            let reloader = layer.reloader();
            return (super::api(layer), admin(path, file, reloader, redis));
        }
        let layer = file
            .limits
            .build(StdClock::new(), StdClock::HZ)
            .unwrap_or_else(|e| built(e));
        let reloader = layer.reloader();
        (super::api(layer), admin(path, file, reloader, None))
    }

    /// Asks each Redis node for a PING (off the runtime's workers), and
    /// warns about those that do not answer: the gateway serves by its
    /// failure policy until they do.
    #[cfg(feature = "redis")]
    fn probe(target: &cellrate_redis::Target) {
        use cellrate_tower::redact_url;
        use tracing::warn;
        let urls = target.urls().to_vec();
        let ping = |url: &str| -> redis::RedisResult<()> {
            let client = redis::Client::open(url)?;
            let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
            redis::cmd("PING").query::<String>(&mut connection)?;
            Ok(())
        };
        tokio::task::spawn_blocking(move || {
            for url in urls {
                let shown = redact_url(&url);
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

    /// The admin router over `reloader`, and the watch of `path` (which
    /// also takes the file's new admin token on each reload).
    fn admin<B: Reload + Send + Sync + 'static>(
        path: PathBuf,
        file: File,
        reloader: Reloader<StdClock, B>,
        redis: Option<Redis>,
    ) -> Router {
        let mut admin = Admin::new(reloader.clone(), file.admin.token).show_config(
            HeaderValue::from_static("text/plain; charset=utf-8"),
            toml::to_string,
        );
        if let Some(kept) = file.admin.overrides {
            admin = admin
                .keep_overrides(kept, toml::to_string, |text| toml::from_str(text))
                .unwrap_or_else(|e| super::exit(e.to_string()));
        }
        // Every `$CELLRATE_GATEWAY_POLL_MS` ms (0: never), and on SIGHUP.
        let poll_ms: u64 = std::env::var("CELLRATE_GATEWAY_POLL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000);
        let token = admin.clone();
        RulesWatcher::new(path, reloader, move |p| read(p, redis.as_ref()))
            .within("limits")
            .poll_every(Some(Duration::from_millis(poll_ms)))
            .on_reload(move |file: &File, _| token.set_token(file.admin.token.clone()))
            .spawn();
        admin.router()
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
