//! The tower layer over loopback HTTP: an axum server with the layer, driven
//! by hyper's client, at a frozen (manual) clock, so every client's 200/429
//! counts are exactly what its quotas allow; every response's fields are
//! parsed and checked against a reference model.
#![cfg(feature = "axum")]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use cellrate::{ManualClock, Quota};
use cellrate_tower::{
    Fields, HeaderKey, KeyedTiers, Keyless, PeerIp, RateLimitLayer, Route, Shaper,
};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

const HZ: u64 = 1_000; // the manual clock counts milliseconds

/// A running server; dropped, it stops.
struct Server {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(router: Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    Server { addr, task }
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

/// One GET over a fresh connection with hyper's HTTP/1 client.
async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &[u8])]) -> Reply {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::get(path).header("host", addr.to_string());
    for (name, value) in headers {
        req = req.header(*name, http::HeaderValue::from_bytes(value).unwrap());
    }
    let res = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

async fn get_key(addr: SocketAddr, path: &str, key: &str) -> Reply {
    get_with(addr, path, &[("x-api-key", key.as_bytes())]).await
}

/// A parsed RFC 9651 list of `"name";k=v;k=v` items, checked strictly:
/// quoted names, integer parameters, `, ` between items.
fn parse_list(value: &str) -> Vec<(String, HashMap<String, u64>)> {
    let mut out = Vec::new();
    for item in value.split(", ") {
        let mut pieces = item.split(';');
        let name = pieces.next().unwrap();
        assert!(
            name.len() >= 2 && name.starts_with('"') && name.ends_with('"'),
            "not an sf-string: {name:?} in {value:?}"
        );
        let mut params = HashMap::new();
        for p in pieces {
            let (k, v) = p.split_once('=').expect("key=value");
            assert!(k.chars().all(|c| c.is_ascii_lowercase()), "bad key {k:?}");
            assert!(
                v.chars().all(|c| c.is_ascii_digit()),
                "not an integer: {v:?}"
            );
            params.insert(k.to_string(), v.parse().unwrap());
        }
        out.push((name[1..name.len() - 1].to_string(), params));
    }
    out
}

fn header_u64(h: &HeaderMap, name: &str) -> Option<u64> {
    h.get(name).map(|v| v.to_str().unwrap().parse().unwrap())
}

/// The reference: two tiers of plain counters (the clock is frozen, so a
/// GCRA of burst b admits exactly b requests per key, and a request refused
/// by either tier is charged to neither).
#[derive(Default)]
struct Model {
    per_key: HashMap<String, u64>,
    per_endpoint: HashMap<(String, String), u64>,
}

const KEY_LIMIT: u64 = 10;
const ENDPOINT_LIMIT: u64 = 3;

impl Model {
    /// `Ok((key remaining, endpoint remaining))` or `Err(refusing tier)`.
    fn check(&mut self, key: &str, route: &str) -> Result<(u64, u64), usize> {
        let k = self.per_key.entry(key.into()).or_default();
        let e = self
            .per_endpoint
            .entry((key.into(), route.into()))
            .or_default();
        if *k >= KEY_LIMIT {
            return Err(0);
        }
        if *e >= ENDPOINT_LIMIT {
            return Err(1);
        }
        *k += 1;
        *e += 1;
        Ok((KEY_LIMIT - *k, ENDPOINT_LIMIT - *e))
    }
}

fn two_tiers(
    clock: &'static ManualClock,
) -> RateLimitLayer<(HeaderKey, Route), KeyedTiers, &'static ManualClock> {
    RateLimitLayer::builder(
        (HeaderKey::new("x-api-key"), Route),
        KeyedTiers::new()
            .per_client("key", Quota::per_minute(KEY_LIMIT).at_hz(HZ), 1_024)
            .unwrap()
            .per_client_and_endpoint(
                "endpoint",
                Quota::per_minute(ENDPOINT_LIMIT).at_hz(HZ),
                1_024,
            )
            .unwrap(),
        clock,
    )
    .build()
    .unwrap()
}

fn app(layer: RateLimitLayer<(HeaderKey, Route), KeyedTiers, &'static ManualClock>) -> Router {
    Router::new()
        .route("/orders", get(|| async { "orders\n" }))
        .route("/orders/{id}", get(|| async { "order\n" }))
        .route("/users", get(|| async { "users\n" }))
        .route_layer(layer)
}

/// Every response's fields against the model's expectation.
fn check_reply(r: &Reply, expect: Result<(u64, u64), usize>) {
    let policy = parse_list(r.headers["ratelimit-policy"].to_str().unwrap());
    assert_eq!(policy.len(), 2);
    assert_eq!(policy[0].0, "key");
    assert_eq!((policy[0].1["q"], policy[0].1["w"]), (KEY_LIMIT, 60));
    assert_eq!(policy[1].0, "endpoint");
    assert_eq!((policy[1].1["q"], policy[1].1["w"]), (ENDPOINT_LIMIT, 60));
    let state = parse_list(r.headers["ratelimit"].to_str().unwrap());
    assert_eq!(state.len(), 2);
    for ((name, s), (pname, p)) in state.iter().zip(&policy) {
        assert_eq!(name, pname);
        assert!(s["r"] <= p["q"], "r > q in {state:?}");
        assert!(s["t"] <= p["w"], "t > w in {state:?}");
    }
    let (xl, xr) = (
        header_u64(&r.headers, "x-ratelimit-limit").unwrap(),
        header_u64(&r.headers, "x-ratelimit-remaining").unwrap(),
    );
    match expect {
        Ok((key_left, ep_left)) => {
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            assert_eq!((state[0].1["r"], state[1].1["r"]), (key_left, ep_left));
            assert!(r.headers.get("retry-after").is_none());
            // The legacy fields describe the tighter tier.
            assert_eq!(xr, key_left.min(ep_left));
            let tight = if ep_left < key_left {
                ENDPOINT_LIMIT
            } else {
                KEY_LIMIT
            };
            assert_eq!(xl, tight);
        }
        Err(tier) => {
            assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(r.body, "rate limited\n");
            let retry = header_u64(&r.headers, "retry-after").unwrap();
            let limit = [KEY_LIMIT, ENDPOINT_LIMIT][tier];
            // At a frozen clock the refusing tier waits one emission interval.
            assert_eq!(retry, 60 / limit);
            assert_eq!(state[tier].1["r"], 0);
            assert!(retry <= state[tier].1["t"]);
            assert_eq!((xl, xr), (limit, 0));
            assert_eq!(
                header_u64(&r.headers, "x-ratelimit-reset").unwrap(),
                state[tier].1["t"]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_exactly_their_quota() {
    static CLOCK: ManualClock = ManualClock::new(1_000_000);
    let server = serve(app(two_tiers(&CLOCK))).await;
    let addr = server.addr;
    // Eight clients at once; each walks its own sequence of routes, so the
    // model can predict every answer (requests of different clients never
    // share a limiter).
    let routes = ["/orders", "/orders/1", "/orders/2", "/users", "/orders"];
    let tasks: Vec<_> = (0..8)
        .map(|c| {
            tokio::spawn(async move {
                let key = format!("client-{c}");
                let mut model = Model::default();
                let (mut ok, mut limited) = (0, 0);
                for i in 0..(6 + 2 * c) {
                    let path = routes[(i + c) % routes.len()];
                    let route = if path.starts_with("/orders/") {
                        "/orders/{id}"
                    } else {
                        path
                    };
                    let expect = model.check(&key, route);
                    let r = get_key(addr, path, &key).await;
                    check_reply(&r, expect);
                    if r.status == StatusCode::OK {
                        ok += 1
                    } else {
                        limited += 1
                    }
                }
                (ok, limited, 6 + 2 * c)
            })
        })
        .collect();
    for t in tasks {
        let (ok, limited, sent) = t.await.unwrap();
        assert_eq!(ok + limited, sent);
        assert!(ok <= KEY_LIMIT as usize);
    }
    // Time moves: after 20 s one endpoint cell is back, after 6 s one key cell.
    let key = "late";
    for _ in 0..3 {
        assert_eq!(get_key(addr, "/users", key).await.status, StatusCode::OK);
    }
    assert_eq!(
        get_key(addr, "/users", key).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    CLOCK.advance(19_999);
    assert_eq!(
        get_key(addr, "/users", key).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    CLOCK.advance(1);
    assert_eq!(get_key(addr, "/users", key).await.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_in_parallel_gets_exactly_its_burst() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let layer = RateLimitLayer::builder(
        HeaderKey::new("x-api-key"),
        KeyedTiers::new()
            .per_client("key", Quota::per_hour(25).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .fields(Fields::Legacy)
    .build()
    .unwrap();
    let server = serve(
        Router::new()
            .route("/", get(|| async { "hi\n" }))
            .layer(layer),
    )
    .await;
    let addr = server.addr;
    let replies: Vec<_> = (0..60)
        .map(|_| tokio::spawn(async move { get_key(addr, "/", "hot").await }))
        .collect();
    let mut ok = 0;
    let mut remaining_seen = Vec::new();
    for r in replies {
        let r = r.await.unwrap();
        assert!(
            r.headers.get("ratelimit").is_none(),
            "IETF fields were switched off"
        );
        if r.status == StatusCode::OK {
            ok += 1;
            remaining_seen.push(header_u64(&r.headers, "x-ratelimit-remaining").unwrap());
        } else {
            assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(header_u64(&r.headers, "retry-after"), Some(3600 / 25));
        }
    }
    assert_eq!(ok, 25);
    // Each admission saw a distinct count left: 24, 23, …, 0.
    remaining_seen.sort_unstable();
    assert_eq!(remaining_seen, (0..25).collect::<Vec<u64>>());
}

#[tokio::test]
async fn keys_are_routes_never_raw_paths() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let server = serve(app(two_tiers(&CLOCK))).await;
    let addr = server.addr;
    // Four spellings of one endpoint: only the router's match counts. Those
    // that match no route never reach the limiter (404), so they cannot
    // open a fresh per-endpoint budget.
    let mut ok = 0;
    for path in [
        "/orders/1",
        "/orders/2",
        "/orders/%31",
        "/orders/3",
        "/orders/4",
    ] {
        let r = get_key(addr, path, "k").await;
        ok += (r.status == StatusCode::OK) as u32;
    }
    assert_eq!(ok, 3);
    for path in ["/orders/", "//orders", "/%6frders"] {
        assert_eq!(get_key(addr, path, "k").await.status, StatusCode::NOT_FOUND);
    }
    let r = get_key(addr, "/orders", "k").await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn keyless_and_malformed_requests() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let server = serve(app(two_tiers(&CLOCK))).await;
    let addr = server.addr;
    // No key: 400 by default (a 401 would need a challenge, RFC 9110 §15.5.2).
    let r = get_with(addr, "/orders", &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body, "missing rate-limit key\n");
    assert!(r.headers.get("www-authenticate").is_none());
    assert!(r.headers.get("ratelimit").is_none());
    let long = vec![b'a'; 300];
    let cases: [&[(&str, &[u8])]; 6] = [
        &[("x-api-key", b"")],
        &[("x-api-key", b"\xff\xfe")],
        &[("x-api-key", "clé".as_bytes())],
        &[("x-api-key", b"two words")],
        &[("x-api-key", b"a"), ("x-api-key", b"b")],
        &[("x-api-key", &long)],
    ];
    for headers in cases {
        let r = get_with(addr, "/orders", headers).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{headers:?}");
        assert_eq!(r.body, "invalid rate-limit key\n");
        assert!(r.headers.get("ratelimit").is_none());
    }
    // Nothing above was charged to anyone: a real key has its full budget.
    let r = get_key(addr, "/orders", "a").await;
    check_reply(&r, Ok((KEY_LIMIT - 1, ENDPOINT_LIMIT - 1)));
}

#[tokio::test]
async fn keyless_requests_can_share_one_limiter() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let layer = RateLimitLayer::builder(
        (HeaderKey::new("x-api-key"), Route),
        KeyedTiers::new()
            .per_client_and_endpoint("endpoint", Quota::per_minute(2).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .keyless(Keyless::Shared)
    .fields(Fields::Ietf)
    .build()
    .unwrap();
    let server = serve(
        Router::new()
            .route("/a", get(|| async { "a" }))
            .route("/b", get(|| async { "b" }))
            .route_layer(layer),
    )
    .await;
    let addr = server.addr;
    let statuses = |rs: Vec<Reply>| rs.iter().map(|r| r.status.as_u16()).collect::<Vec<_>>();
    let mut rs = Vec::new();
    for path in ["/a", "/a", "/a", "/b", "/b", "/b"] {
        rs.push(get_with(addr, path, &[]).await);
    }
    assert_eq!(statuses(rs), [200, 200, 429, 200, 200, 429]);
    // A keyed client is not the keyless one.
    assert_eq!(get_key(addr, "/a", "k").await.status, StatusCode::OK);
}

#[tokio::test]
async fn peer_address_keys_and_weights() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let layer = RateLimitLayer::builder(
        PeerIp,
        KeyedTiers::new()
            .per_client("ip", Quota::per_minute(10).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .weight(|req| if req.uri.path() == "/heavy" { 4 } else { 1 })
    .build()
    .unwrap();
    let server = serve(
        Router::new()
            .route("/light", get(|| async { "l" }))
            .route("/heavy", get(|| async { "h" }))
            .layer(layer),
    )
    .await;
    let addr = server.addr;
    let r = get_with(addr, "/heavy", &[]).await;
    assert_eq!(header_u64(&r.headers, "x-ratelimit-remaining"), Some(6));
    get_with(addr, "/heavy", &[]).await;
    let r = get_with(addr, "/heavy", &[]).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    // 2 cells left, 4 needed: wait for 2 more cells (12 s).
    assert_eq!(header_u64(&r.headers, "retry-after"), Some(12));
    let r = get_with(addr, "/light", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(header_u64(&r.headers, "x-ratelimit-remaining"), Some(1));
}

#[tokio::test]
async fn a_weight_above_the_burst_is_413_without_retry_after() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let layer = RateLimitLayer::builder(
        HeaderKey::new("x-api-key"),
        KeyedTiers::new()
            .per_client("key", Quota::per_minute(5).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .weight(|_| 6)
    .build()
    .unwrap();
    let server = serve(Router::new().route("/", get(|| async { "x" })).layer(layer)).await;
    let r = get_key(server.addr, "/", "k").await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.headers.get("retry-after").is_none());
}

/// The delaying mode, driven through tower directly at tokio's paused time:
/// requests over the rate are held and released on the shaped schedule,
/// in order; past `max_wait` they get 429, past `max_queued` 503.
#[tokio::test(start_paused = true)]
async fn the_delaying_mode_releases_requests_at_the_shaped_rate() {
    use cellrate_tower::TokioClock;
    use tower::{Service, ServiceBuilder, ServiceExt};
    let clock = TokioClock::new();
    let quota = Quota::per_second(10).with_burst(1).at_hz(TokioClock::HZ);
    let layer = RateLimitLayer::builder(Route, Shaper::new("upstream", quota).unwrap(), clock)
        .delay(TokioClock::HZ / 2, 3) // at most 0.5 s, at most 3 held
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service_fn(move |_req: Request<()>| async move {
            Ok::<_, std::convert::Infallible>(http::Response::new(format!(
                "{}",
                start.elapsed().as_millis()
            )))
        });
    let mut futures = Vec::new();
    for _ in 0..6 {
        let mut svc = svc.clone();
        let ready = svc.ready().await.unwrap();
        futures.push(tokio::spawn(ready.call(Request::new(()))));
    }
    let mut got = Vec::new();
    for f in futures {
        let r = f.await.unwrap().unwrap();
        got.push((r.status().as_u16(), r.into_body()));
    }
    // First at once; the next three held 100, 200, 300 ms; the fifth finds
    // three held (503); the sixth is booked at 400 ms, within 0.5 s, but the
    // queue is full too.
    assert_eq!(got[0], (200, "0".to_string()));
    assert_eq!(got[1], (200, "100".to_string()));
    assert_eq!(got[2], (200, "200".to_string()));
    assert_eq!(got[3], (200, "300".to_string()));
    assert_eq!(got[4].0, 503);
    assert_eq!(got[5].0, 503);
    // Past max_wait: five booked at once would wait 0.4 s for the last; with
    // an empty queue and a long backlog, the answer is 429.
    let layer = RateLimitLayer::builder(
        Route,
        Shaper::new("upstream", quota).unwrap(),
        TokioClock::new(),
    )
    .delay(TokioClock::HZ / 10, 100)
    .build()
    .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(layer)
        .service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
        });
    let mut statuses = Vec::new();
    let mut pending = Vec::new();
    for _ in 0..4 {
        let fut = svc.ready().await.unwrap().call(Request::new(()));
        pending.push(tokio::spawn(fut));
    }
    for p in pending {
        let r = p.await.unwrap().unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(r.headers().get("retry-after").is_some());
        }
    }
    assert_eq!(statuses, [200, 200, 429, 429]);
}

/// A response the inner service builds keeps its own headers; the layer
/// adds its fields beside them.
#[tokio::test]
async fn admitted_responses_keep_the_handlers_headers() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let layer = two_tiers(&CLOCK);
    let server = serve(
        Router::new()
            .route(
                "/orders",
                get(|| async { ([("x-handler", "yes")], "with header") }),
            )
            .route_layer(layer),
    )
    .await;
    let r = get_key(server.addr, "/orders", "k").await;
    assert_eq!(r.headers["x-handler"], "yes");
    check_reply(&r, Ok((9, 2)));
    let _ = Arc::new(());
}

/// The layer on a Unix-time clock (nanoseconds since 1970, at 1 GHz): the
/// same requests get the same statuses and the same rate-limit fields as on
/// a clock from 0, with a quota whose scale (7 sub-ticks per ns) used to
/// push Unix time past the limiter's horizon, where every request was
/// refused.
#[tokio::test]
async fn the_layer_runs_on_unix_time() {
    static ZERO: ManualClock = ManualClock::new(0);
    static UNIX: ManualClock = ManualClock::new(1_796_169_600 * 1_000_000_000);
    let layer = |clock: &'static ManualClock| {
        RateLimitLayer::builder(
            HeaderKey::new("x-api-key"),
            KeyedTiers::new()
                .per_client("key", Quota::per_minute(7).at_hz(1_000_000_000), 64)
                .unwrap(),
            clock,
        )
        .build()
        .unwrap()
    };
    let mut runs = Vec::new();
    for clock in [&ZERO, &UNIX] {
        let server = serve(
            Router::new()
                .route("/", get(|| async { "hi\n" }))
                .layer(layer(clock)),
        )
        .await;
        let mut seen = Vec::new();
        for i in 0..12 {
            if i == 9 {
                clock.advance(9_000_000_000); // 9 s: one cell back
            }
            let r = get_key(server.addr, "/", "client").await;
            let field = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
            seen.push((r.status, field("ratelimit"), field("retry-after")));
        }
        runs.push(seen);
    }
    let ok = runs[0]
        .iter()
        .filter(|(s, ..)| *s == StatusCode::OK)
        .count();
    assert_eq!(ok, 8, "{:?}", runs[0]); // the burst of 7, then one more after 9 s
    assert_eq!(runs[0][7].2.as_deref(), Some("9")); // ⌈60/7⌉ s
    assert_eq!(runs[1], runs[0]);
}

/// A keyless 401 carries the configured challenge (RFC 9110 §15.5.2); a
/// 401 without one, or a status that is not a client error, is refused
/// when the layer is built.
#[tokio::test]
async fn a_keyless_401_carries_its_challenge() {
    use cellrate_tower::BuildError;
    static CLOCK: ManualClock = ManualClock::new(0);
    let tiers = || {
        KeyedTiers::new()
            .per_client("key", Quota::per_minute(5).at_hz(HZ), 64)
            .unwrap()
    };
    let build = |keyless: Keyless, challenge: Option<(&str, &str)>| {
        let mut b =
            RateLimitLayer::builder(HeaderKey::new("x-api-key"), tiers(), &CLOCK).keyless(keyless);
        if let Some((scheme, realm)) = challenge {
            b = b.challenge(scheme, realm);
        }
        b.build()
    };
    let unauthorized = Keyless::Reject(StatusCode::UNAUTHORIZED);
    assert_eq!(build(unauthorized, None).unwrap_err(), BuildError::Keyless);
    for status in [200, 302, 407, 500, 503] {
        let keyless = Keyless::Reject(StatusCode::from_u16(status).unwrap());
        assert_eq!(
            build(keyless, None).unwrap_err(),
            BuildError::Keyless,
            "{status}"
        );
    }
    for (scheme, realm) in [
        ("", "r"),
        ("two words", "r"),
        ("Bearer", "a\"b"),
        ("Bearer", "a\\b"),
        ("Bearer", "é"),
    ] {
        assert_eq!(
            build(unauthorized, Some((scheme, realm))).unwrap_err(),
            BuildError::Challenge,
            "{scheme:?} {realm:?}"
        );
    }
    let layer = build(unauthorized, Some(("ApiKey", "orders api"))).unwrap();
    let server = serve(Router::new().route("/", get(|| async { "x" })).layer(layer)).await;
    let r = get_with(server.addr, "/", &[]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        r.headers["www-authenticate"],
        r#"ApiKey realm="orders api""#
    );
    assert_eq!(r.body, "missing rate-limit key\n");
    // A keyed request is not challenged.
    let r = get_key(server.addr, "/", "k").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.headers.get("www-authenticate").is_none());
    // Another 4xx needs no challenge.
    let layer = build(Keyless::Reject(StatusCode::FORBIDDEN), None).unwrap();
    let server = serve(Router::new().route("/", get(|| async { "x" })).layer(layer)).await;
    let r = get_with(server.addr, "/", &[]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.headers.get("www-authenticate").is_none());
}

/// Error events whose message names `into_make_service_with_connect_info`,
/// counted by a subscriber installed on the test's (only) thread.
#[cfg(feature = "tracing")]
mod log_count {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    pub struct Count(pub Arc<AtomicUsize>);

    struct Names(bool);
    impl Visit for Names {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 |= format!("{value:?}").contains("into_make_service_with_connect_info");
            }
        }
    }

    impl Subscriber for Count {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut names = Names(false);
            event.record(&mut names);
            if *event.metadata().level() == Level::ERROR && names.0 {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

/// `PeerIp` under a server that records no peer address (plain
/// `axum::serve`, no connect info) is the server's misconfiguration: 500,
/// never a 4xx that blames the client, and (with `tracing`) one error
/// event naming the fix, however many requests arrive.
#[tokio::test]
async fn peer_ip_without_connect_info_is_a_server_error_logged_once() {
    static CLOCK: ManualClock = ManualClock::new(0);
    #[cfg(feature = "tracing")]
    let (count, _guard) = {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let guard = tracing::subscriber::set_default(log_count::Count(Arc::clone(&count)));
        (count, guard)
    };
    let layer = RateLimitLayer::builder(
        PeerIp,
        KeyedTiers::new()
            .per_client("ip", Quota::per_minute(10).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .build()
    .unwrap();
    let router = Router::new().route("/", get(|| async { "x" })).layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let server = Server { addr, task };
    for _ in 0..3 {
        let r = get_with(server.addr, "/", &[]).await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(r.body, "internal error\n");
        assert!(r.headers.get("ratelimit").is_none());
    }
    #[cfg(feature = "tracing")]
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Delaying mode over loopback at the real clock: `Shaper` at 50/s, burst
/// 1, requests held up to 1 s, 80 at once. Held requests get 200 and the
/// rest 429, and every answer's fields describe the decision made: `t` at
/// most its policy's `w` (a held request's state when it is released, a
/// refusal's seen from the end of the queue), `Retry-After` within `t`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_and_refused_answers_keep_t_within_w() {
    use cellrate::StdClock;
    let quota = Quota::per_second(50).with_burst(1).at_hz(StdClock::HZ);
    let layer = RateLimitLayer::builder(
        Route,
        Shaper::new("upstream", quota).unwrap(),
        StdClock::new(),
    )
    .delay(StdClock::HZ, 100) // at most 1 s, at most 100 held
    .build()
    .unwrap();
    let server = serve(Router::new().route("/", get(|| async { "x" })).layer(layer)).await;
    let addr = server.addr;
    let replies: Vec<_> = (0..80)
        .map(|_| tokio::spawn(async move { get_with(addr, "/", &[]).await }))
        .collect();
    let (mut ok, mut limited) = (0, 0);
    for r in replies {
        let r = r.await.unwrap();
        let policy = parse_list(r.headers["ratelimit-policy"].to_str().unwrap());
        let state = parse_list(r.headers["ratelimit"].to_str().unwrap());
        assert_eq!(policy.len(), state.len());
        let mut longest_w = 0;
        for ((pname, p), (sname, s)) in policy.iter().zip(&state) {
            assert_eq!(pname, sname);
            assert!(s["r"] <= p["q"], "r > q: {policy:?} {state:?}");
            assert!(
                s["t"] <= p["w"],
                "t > w: {policy:?} {state:?} ({})",
                r.status
            );
            longest_w = longest_w.max(p["w"]);
        }
        let reset = header_u64(&r.headers, "x-ratelimit-reset").unwrap();
        assert!(reset <= longest_w, "X-RateLimit-Reset {reset} > w");
        match r.status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                limited += 1;
                let retry = header_u64(&r.headers, "retry-after").unwrap();
                assert!(retry >= 1);
                assert!(
                    state.iter().any(|(_, s)| retry <= s["t"].max(1)),
                    "{retry} {state:?}"
                );
            }
            s => panic!("unexpected {s}"),
        }
    }
    // About 51 fit in 1 s of queue at 50/s; the rest are refused.
    assert!(
        ok >= 40 && limited >= 10,
        "{ok} admitted, {limited} refused"
    );
}

/// A request body of `chunks` frames of `size` bytes, with no declared
/// length: hyper's client sends it chunked.
struct Chunked {
    chunks: usize,
    size: usize,
}

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.chunks == 0 {
            return std::task::Poll::Ready(None);
        }
        self.chunks -= 1;
        let frame = http_body::Frame::data(Bytes::from(vec![b'x'; self.size]));
        std::task::Poll::Ready(Some(Ok(frame)))
    }
}

/// One POST over a fresh connection; `None` if the connection failed
/// before a response (the server may close while the client still sends).
async fn post<B>(addr: SocketAddr, key: &str, body: B, length: Option<usize>) -> Option<Reply>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::post("/upload")
        .header("host", addr.to_string())
        .header("x-api-key", key);
    if let Some(n) = length {
        req = req.header("content-length", n);
    }
    let res = sender.send_request(req.body(body).unwrap()).await.ok()?;
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.ok()?.to_bytes();
    Some(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// A byte limiter of 10 KB/s (burst 10 KB) weighing by `Content-Length`
/// and charging the body as it streams: a sized 8 000-byte POST is
/// admitted and the next refused before the handler runs; chunked 100 KB
/// POSTs (no `Content-Length`) get 429 once over, and the handler never
/// reads more than the quota. Without `charge_body`, as on main, all five
/// chunked POSTs reached the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_limit_cannot_be_bypassed_by_chunked_bodies() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CLOCK: ManualClock = ManualClock::new(0);
    static READ: AtomicU64 = AtomicU64::new(0);
    let layer = RateLimitLayer::builder(
        HeaderKey::new("x-api-key"),
        KeyedTiers::new()
            .per_client("bytes", Quota::per_second(10_000).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .weight(|req| {
        req.headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0)
    })
    .charge_body()
    .build()
    .unwrap();
    let handler = |body: axum::body::Body| async move {
        // Counts what really reached the handler, frame by frame.
        let mut body = body;
        let mut n = 0;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => {
                    let len = f.data_ref().map_or(0, |d| d.len()) as u64;
                    READ.fetch_add(len, Ordering::SeqCst);
                    n += len;
                }
                Err(_) => return (StatusCode::BAD_REQUEST, "body error\n".to_string()),
            }
        }
        (StatusCode::OK, format!("{n}\n"))
    };
    let server = serve(
        Router::new()
            .route("/upload", axum::routing::post(handler))
            .layer(layer),
    )
    .await;
    let addr = server.addr;
    let sized = || Chunked {
        chunks: 1,
        size: 8_000,
    };
    let r = post(addr, "sized", sized(), Some(8_000)).await.unwrap();
    assert_eq!((r.status, r.body.as_str()), (StatusCode::OK, "8000\n"));
    let r = post(addr, "sized", sized(), Some(8_000)).await.unwrap();
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(READ.load(Ordering::SeqCst), 8_000);

    READ.store(0, Ordering::SeqCst);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        // 100 KB in 25 frames of 4 000 bytes.
        let body = Chunked {
            chunks: 25,
            size: 4_000,
        };
        if let Some(r) = post(addr, "chunked", body, None).await {
            if r.status == StatusCode::TOO_MANY_REQUESTS {
                assert!(header_u64(&r.headers, "retry-after").unwrap() >= 1);
                assert_eq!(r.body, "rate limited\n");
            }
            statuses.push(r.status.as_u16());
        }
    }
    // The quota is 10 000 bytes at a frozen clock: two frames, then a refusal.
    assert_eq!(READ.load(Ordering::SeqCst), 8_000, "{statuses:?}");
    // Every answer that arrives is 429; an HTTP/1 client still sending its
    // body may instead see the connection closed once the server answered.
    assert!(statuses.iter().all(|&s| s == 429), "{statuses:?}");
    // Bodies within what is left are still admitted whole: another client.
    let small = Chunked {
        chunks: 2,
        size: 1_000,
    };
    let r = post(addr, "other", small, None).await.unwrap();
    assert_eq!((r.status, r.body.as_str()), (StatusCode::OK, "2000\n"));
}

/// 50/s with bursts of 10 is announced as the burst and the real rate,
/// not `q=10;w=1` alone (a fifth of the rate); a tier whose burst refills
/// in whole seconds keeps its one policy.
#[tokio::test]
async fn a_rate_faster_than_its_burst_is_announced_as_both() {
    static CLOCK: ManualClock = ManualClock::new(0);
    let layer = RateLimitLayer::builder(
        HeaderKey::new("x-api-key"),
        KeyedTiers::new()
            .per_client("api", Quota::per_second(50).with_burst(10).at_hz(HZ), 64)
            .unwrap()
            .per_client("day", Quota::per_day(1_000).at_hz(HZ), 64)
            .unwrap(),
        &CLOCK,
    )
    .build()
    .unwrap();
    let server = serve(Router::new().route("/", get(|| async { "x" })).layer(layer)).await;
    let r = get_key(server.addr, "/", "k").await;
    assert_eq!(
        r.headers["ratelimit-policy"],
        r#""api";q=10;w=1, "api/rate";q=50;w=1, "day";q=1000;w=86400"#
    );
    assert_eq!(
        r.headers["ratelimit"],
        r#""api";r=9;t=1, "api/rate";r=49;t=1, "day";r=999;t=87"#
    );
    assert_eq!(header_u64(&r.headers, "x-ratelimit-limit"), Some(10));
}
