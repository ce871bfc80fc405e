//! The admin endpoint (`cellrate_tower::Admin`, features `axum`, `serde`)
//! driven as a router, each request from a peer address of the test's
//! choosing: the override routes change the layer's answers for one
//! client; the token is required (401 with a challenge, 403, the scheme
//! read case-insensitively, a new token taking over); wrong tokens are
//! limited per peer IP (429 with `Retry-After`, forgiven as time passes);
//! `/admin/config` shows the rules in force with secrets masked; every
//! change is logged with what it changed.
#![cfg(all(feature = "axum", feature = "serde"))]

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use cellrate::StdClock;
use cellrate_tower::config::LayerConfig;
use cellrate_tower::{Admin, AdminToken, Reloader};
use http_body_util::BodyExt;
use tower::ServiceExt;

#[path = "support/logs.rs"]
mod logs;
use logs::Logs;

const RULES: &str = r#"
key = { client = { header = "x-api-key" }, endpoint = "route" }
[[tiers]]
name = "key"
quota = "10/min"
capacity = 1000
overrides = { acct_1 = "20/min" }
[[tiers]]
name = "endpoint"
quota = "3/min"
scope = "client_and_endpoint"
capacity = 1000
"#;

const TOKEN: &str = "t0ken";

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

/// The API (`/orders`, limited by the layer) and the admin router.
fn gateway() -> (Router, Router, Reloader<StdClock>) {
    let layer = toml::from_str::<LayerConfig>(RULES)
        .unwrap()
        .build(StdClock::new(), StdClock::HZ)
        .unwrap();
    let reloader = layer.reloader();
    let admin = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap()).show_config(
        HeaderValue::from_static("text/plain; charset=utf-8"),
        toml::to_string,
    );
    let api = Router::new()
        .route("/orders", get(|| async { "orders\n" }))
        .route_layer(layer);
    (api, admin.router(), reloader)
}

/// One request to `router` from `peer` (none: no peer recorded).
async fn send(
    router: &Router,
    peer: Option<[u8; 4]>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut req = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let mut req = req.body(Body::from(body.to_string())).unwrap();
    if let Some(ip) = peer {
        req.extensions_mut().insert(SocketAddr::from((ip, 40_000)));
    }
    let res = router.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

const LOCAL: Option<[u8; 4]> = Some([127, 0, 0, 1]);

/// An admin request from 127.0.0.1 with `Authorization: Bearer {token}`.
async fn admin(
    router: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    send(router, LOCAL, method, path, &headers, body).await
}

/// The limit the API announces to `key` on `/orders`'s "key" tier.
async fn key_limit(api: &Router, key: &str) -> String {
    let r = send(api, LOCAL, "GET", "/orders", &[("x-api-key", key)], "").await;
    let policy = r.headers["ratelimit-policy"].to_str().unwrap().to_string();
    let q = policy.strip_prefix(r#""key";q="#).unwrap_or(&policy);
    q.split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "current_thread")]
async fn overrides_are_set_and_removed_for_one_client() {
    let (api, router, reloader) = gateway();
    let (logs, _guard) = Logs::capture();
    let path = "/admin/overrides/key/gina";
    assert_eq!(key_limit(&api, "gina").await, "10");

    let r = admin(&router, "PUT", path, Some(TOKEN), "100/s").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(key_limit(&api, "gina").await, "100");
    assert_eq!(
        key_limit(&api, "hank").await,
        "10",
        "another client is untouched"
    );
    assert_eq!(
        reloader.config().tiers[0].overrides["gina"].to_string(),
        "100/s"
    );
    let set = logs.lines_with(&["admin: override set", "tier=key", "client=gina"]);
    assert_eq!(set.len(), 1, "{}", logs.text());
    assert!(set[0].contains("INFO"), "{}", set[0]);
    assert!(
        set[0].contains(r#"old="10/min (tier quota)""#),
        "{}",
        set[0]
    );
    assert!(set[0].contains(r#"new="100/s (override)""#), "{}", set[0]);
    assert!(set[0].contains("peer=127.0.0.1"), "{}", set[0]);

    // Over the configuration's own override: the old one is logged.
    let r = admin(
        &router,
        "PUT",
        "/admin/overrides/key/acct_1",
        Some(TOKEN),
        "30/min",
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let set = logs.lines_with(&["admin: override set", "client=acct_1"]);
    assert!(set[0].contains(r#"old="20/min (override)""#), "{}", set[0]);

    let r = admin(&router, "DELETE", path, Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(key_limit(&api, "gina").await, "10");
    let removed = logs.lines_with(&["admin: override removed", "client=gina"]);
    assert_eq!(removed.len(), 1, "{}", logs.text());
    assert!(
        removed[0].contains(r#"old="100/s (override)""#),
        "{}",
        removed[0]
    );
    assert!(
        removed[0].contains(r#"new="10/min (tier quota)""#),
        "{}",
        removed[0]
    );

    // Removing what is not there: 404 with the reason, nothing logged.
    let r = admin(&router, "DELETE", path, Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body, "tier \"key\" has no override for client \"gina\"\n");
    let r = admin(
        &router,
        "DELETE",
        "/admin/overrides/nope/gina",
        Some(TOKEN),
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.body, "tiers: no tier is named \"nope\"\n");
    assert_eq!(logs.lines_with(&["admin: override removed"]).len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_bad_change_is_400_and_changes_nothing() {
    let (api, router, reloader) = gateway();
    let before = reloader.config();
    let path = "/admin/overrides/key/gina";
    for bad in [
        "",
        "lots",
        "500/fortnight",
        "0/min",
        "500/min, burst 0",
        "\u{7f}",
    ] {
        let r = admin(&router, "PUT", path, Some(TOKEN), bad).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad:?}: {}", r.body);
        assert!(r.body.starts_with("body: "), "{bad:?}: {}", r.body);
    }
    let r = admin(
        &router,
        "PUT",
        "/admin/overrides/nope/gina",
        Some(TOKEN),
        "5/min",
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body, "tiers: no tier is named \"nope\"\n");
    assert_eq!(reloader.config(), before);
    assert_eq!(key_limit(&api, "gina").await, "10");
}

#[tokio::test(flavor = "current_thread")]
async fn the_token_is_required_and_can_change() {
    let layer = toml::from_str::<LayerConfig>(RULES)
        .unwrap()
        .build(StdClock::new(), StdClock::HZ)
        .unwrap();
    let admin_endpoint = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap())
        .show_config(HeaderValue::from_static("text/plain"), toml::to_string);
    let router = admin_endpoint.router();
    let config = "/admin/config";

    let r = admin(&router, "GET", config, None, "").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers["www-authenticate"], r#"Bearer realm="admin""#);
    for (authorization, status) in [
        ("bearer t0ken", StatusCode::OK),
        ("BEARER t0ken", StatusCode::OK),
        ("BeArEr t0ken", StatusCode::OK),
        ("Bearer  t0ken", StatusCode::OK),
        ("Basic t0ken", StatusCode::UNAUTHORIZED),
        ("Bearer", StatusCode::UNAUTHORIZED),
        ("Bearer t0ke", StatusCode::FORBIDDEN),
        ("Bearer t0ken-", StatusCode::FORBIDDEN),
    ] {
        // From an address of its own, so the wrong ones stay under budget.
        let r = send(
            &router,
            Some([10, 0, 0, 1]),
            "GET",
            config,
            &[("authorization", authorization)],
            "",
        )
        .await;
        assert_eq!(r.status, status, "{authorization:?}: {}", r.body);
    }
    let r = admin(&router, "GET", config, Some(TOKEN), "").await;
    assert_eq!(r.headers["content-type"], "text/plain");

    admin_endpoint.set_token(AdminToken::new("n3w").unwrap());
    assert_eq!(
        admin(&router, "GET", config, Some(TOKEN), "").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        admin(&router, "GET", config, Some("n3w"), "").await.status,
        StatusCode::OK
    );
    // A router made by a clone shares the token.
    let again = admin_endpoint.clone().router();
    assert_eq!(
        admin(&again, "GET", config, Some("n3w"), "").await.status,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn wrong_tokens_are_limited_per_peer_ip() {
    let (api, router, _) = gateway();
    let (logs, _guard) = Logs::capture();
    let config = "/admin/config";
    // Requests without a token and with the right one do not count.
    for _ in 0..3 {
        assert_eq!(
            admin(&router, "GET", config, None, "").await.status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            admin(&router, "GET", config, Some(TOKEN), "").await.status,
            StatusCode::OK
        );
    }
    for i in 0..5 {
        let r = admin(&router, "GET", config, Some(&format!("guess{i}")), "").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "guess {i}");
    }
    assert_eq!(
        logs.lines_with(&["WARN", "admin: wrong token", "127.0.0.1"])
            .len(),
        5
    );
    for token in [Some("guess5"), Some(TOKEN), None] {
        let r = admin(&router, "GET", config, token, "").await;
        assert_eq!(
            r.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{token:?}: {}",
            r.body
        );
        let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        // One wrong token is forgiven every 12 s (5 per minute).
        assert!((1..=12).contains(&retry), "{retry}");
        assert!(!r.body.contains(TOKEN));
    }
    let r = admin(
        &router,
        "PUT",
        "/admin/overrides/key/gina",
        Some(TOKEN),
        "100/s",
    )
    .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "every admin route");
    // Another address has its own budget; the API is not the admin endpoint.
    let r = send(
        &router,
        Some([10, 0, 0, 2]),
        "GET",
        config,
        &[("authorization", "Bearer t0ken")],
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(key_limit(&api, "hank").await, "10");
    // 12 s later one wrong token is forgiven: the right one is served.
    tokio::time::advance(Duration::from_secs(12)).await;
    assert_eq!(
        admin(&router, "GET", config, Some(TOKEN), "").await.status,
        StatusCode::OK
    );
    assert_eq!(
        admin(&router, "GET", config, Some("guess6"), "")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        admin(&router, "GET", config, Some(TOKEN), "").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test(flavor = "current_thread")]
async fn config_shows_the_rules_in_force() {
    let (_api, router, _) = gateway();
    let r = admin(
        &router,
        "PUT",
        "/admin/overrides/key/gina",
        Some(TOKEN),
        "100/s",
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = admin(&router, "GET", "/admin/config", Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
    let shown: LayerConfig = toml::from_str(&r.body).unwrap();
    assert_eq!(shown.tiers[0].overrides["gina"].to_string(), "100/s");
    assert_eq!(shown.tiers[0].overrides["acct_1"].to_string(), "20/min");
    assert_eq!(shown.tiers[1].quota.to_string(), "3/min");
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_renderer_or_a_peer() {
    let layer = toml::from_str::<LayerConfig>(RULES)
        .unwrap()
        .build(StdClock::new(), StdClock::HZ)
        .unwrap();
    let router = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap()).router();
    let r = admin(&router, "GET", "/admin/config", Some(TOKEN), "").await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "no show_config: nothing to show"
    );
    // Still behind the token.
    let r = admin(&router, "GET", "/admin/config", None, "").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = send(
        &router,
        None,
        "PUT",
        "/admin/overrides/key/gina",
        &[("authorization", "Bearer t0ken")],
        "5/min",
    )
    .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!layer.reloader().config().tiers[0]
        .overrides
        .contains_key("gina"));

    // A renderer that fails: 500, nothing of the rules in the body.
    let router = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap())
        .show_config(HeaderValue::from_static("text/plain"), |_: &LayerConfig| {
            Err::<String, _>("no format")
        })
        .router();
    let r = admin(&router, "GET", "/admin/config", Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.body.is_empty(), "{}", r.body);
}

#[test]
fn a_token_is_checked_where_it_is_read() {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Admin {
        token: AdminToken,
    }
    let read = |text: &str| {
        cellrate_config::from_deserializer::<Admin, _>(toml::Deserializer::parse(text).unwrap())
            .map_err(|e| e.to_string())
    };
    assert!(read("token = \"s3cret\"").is_ok());
    // The place, then the format's own pointer, then the reason.
    let empty = read("token = \"\"").unwrap_err();
    assert!(empty.starts_with("token: "), "{empty}");
    assert!(empty.ends_with("must not be empty"), "{empty}");
    let spaced = read("token = \"a b\"").unwrap_err();
    assert!(spaced.starts_with("token: "), "{spaced}");
    assert!(spaced.contains("must be visible ASCII"), "{spaced}");
    // Never shown by Debug.
    assert!(!format!("{:?}", read("token = \"s3cret\"").unwrap()).contains("s3cret"));
}

/// On Redis (never reached: the layer connects at its first check), the
/// URL's user and password are masked in `/admin/config`.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "current_thread")]
async fn config_masks_redis_passwords() {
    let rules = format!(
        "{RULES}\n[redis]\ntarget = {{ standalone = \"redis://ops:s3cret@127.0.0.1:1/\" }}\nfailure = \"open\"\n"
    );
    let layer = toml::from_str::<LayerConfig>(&rules.replace("endpoint = \"route\"", "")).unwrap();
    let mut layer = layer;
    layer.tiers.truncate(1);
    let layer = layer.build_redis(StdClock::new(), StdClock::HZ).unwrap();
    let router = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap())
        .show_config(HeaderValue::from_static("text/plain"), toml::to_string)
        .router();
    let r = admin(&router, "GET", "/admin/config", Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(r.body.contains("redis://:****@127.0.0.1:1/"), "{}", r.body);
    assert!(
        !r.body.contains("s3cret") && !r.body.contains("ops"),
        "{}",
        r.body
    );
}

/// An override on a window tier in process is set (204), read back in
/// the rules, and removed (204, then 404: it is gone), as on a GCRA tier.
#[tokio::test(flavor = "current_thread")]
async fn an_override_of_a_window_tier_is_set_and_removed() {
    let layer = toml::from_str::<LayerConfig>(
        r#"
        key = { client = { header = "x-api-key" } }
        [[tiers]]
        name = "window"
        quota = "10/min"
        algorithm = "fixed_window"
        capacity = 64
        "#,
    )
    .unwrap()
    .build(StdClock::new(), StdClock::HZ)
    .unwrap();
    let reloader = layer.reloader();
    let router = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap()).router();
    let path = "/admin/overrides/window/gina";
    let r = admin(&router, "PUT", path, Some(TOKEN), "20/min").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert_eq!(
        reloader.config().tiers[0].overrides["gina"].to_string(),
        "20/min"
    );
    let r = admin(&router, "DELETE", path, Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    assert!(reloader.config().tiers[0].overrides.is_empty());
    let r = admin(&router, "DELETE", path, Some(TOKEN), "").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}

/// The API and an admin router keeping its overrides in `file`: a layer
/// started afresh, as after a restart.
fn kept_gateway(file: &std::path::Path) -> Result<(Router, Router), cellrate_tower::KeepError> {
    let layer = toml::from_str::<LayerConfig>(RULES)
        .unwrap()
        .build(StdClock::new(), StdClock::HZ)
        .unwrap();
    let admin = Admin::new(layer.reloader(), AdminToken::new(TOKEN).unwrap()).keep_overrides(
        file,
        toml::to_string,
        |text| toml::from_str(text),
    )?;
    let api = Router::new()
        .route("/orders", get(|| async { "orders\n" }))
        .route_layer(layer);
    Ok((api, admin.router()))
}

#[tokio::test(flavor = "current_thread")]
async fn kept_overrides_outlive_a_restart() {
    let dir = std::env::temp_dir().join(format!("cellrate-keep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("overrides.toml");
    let _ = std::fs::remove_file(&file);
    let (logs, _capture) = Logs::capture();

    // No file yet: nothing to restore.
    let (api, router) = kept_gateway(&file).unwrap();
    assert_eq!(key_limit(&api, "gina").await, "10");
    for (client, quota) in [("gina", "100/s"), ("hank", "40/min"), ("ivy", "7/min")] {
        let path = format!("/admin/overrides/key/{client}");
        let r = admin(&router, "PUT", &path, Some(TOKEN), quota).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    }
    let r = admin(
        &router,
        "DELETE",
        "/admin/overrides/key/ivy",
        Some(TOKEN),
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let kept: toml::Table = toml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        kept.to_string(),
        "[key]\ngina = \"100/s\"\nhank = \"40/min\"\n"
    );

    // A restart: the overrides in force are set again; the rules' own
    // override of acct_1 is the file's business only if changed here.
    let (api, router) = kept_gateway(&file).unwrap();
    assert_eq!(key_limit(&api, "gina").await, "100");
    assert_eq!(key_limit(&api, "hank").await, "40");
    assert_eq!(key_limit(&api, "ivy").await, "10");
    assert_eq!(key_limit(&api, "acct_1").await, "20");
    let r = admin(
        &router,
        "DELETE",
        "/admin/overrides/key/gina",
        Some(TOKEN),
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let (api, _router) = kept_gateway(&file).unwrap();
    assert_eq!(key_limit(&api, "gina").await, "10");
    assert_eq!(key_limit(&api, "hank").await, "40");

    // An override of a tier the rules no longer have is logged and left
    // out; the file then holds what is in force.
    std::fs::write(&file, "[gone]\nzed = \"5/min\"\n[key]\nhank = \"40/min\"\n").unwrap();
    let (api, _router) = kept_gateway(&file).unwrap();
    assert_eq!(key_limit(&api, "hank").await, "40");
    let skipped = logs.lines_with(&["a kept override is not restored", "tier=gone", "client=zed"]);
    assert_eq!(skipped.len(), 1, "{}", logs.text());
    assert!(skipped[0].contains("WARN"), "{}", skipped[0]);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[key]\nhank = \"40/min\"\n"
    );

    // A file that does not parse is an error naming it; nothing is set.
    std::fs::write(&file, "[key]\nhank = \"forty\"\n").unwrap();
    let Err(e) = kept_gateway(&file) else {
        panic!("a bad file is an error")
    };
    assert_eq!(e.path(), file.as_path());
    assert!(e.to_string().contains("overrides.toml"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
