//! The HTTP layer built from its configuration (features `tower` and
//! `serde`): the rules read from TOML decide requests as the same layer
//! written in code would; every valid layer config round-trips; bad ones
//! fail at their place.
#![cfg(feature = "serde")]

use std::convert::Infallible;

use cellrate::compose::AlgorithmKind;
use cellrate::config::QuotaSpec;
use cellrate::keyed::WhenFull;
use cellrate::{Clock, ManualClock};
use cellrate_config as config;
#[cfg(feature = "redis")]
use cellrate_redis::{FailurePolicy, Target};
#[cfg(feature = "redis")]
use cellrate_tower::config::RedisRules;
use cellrate_tower::config::{Challenge, KeyConfig, KeySource, LayerConfig, LayerTier, TierScope};
use cellrate_tower::{Fields, Keyless, RouteName};
use http::{Request, Response, StatusCode};
use proptest::prelude::*;
use std::sync::Arc;
use tower::{Layer, Service, ServiceExt};

const GATEWAY: &str = r#"
key = { client = { header = "x-api-key" }, endpoint = "route" }
fields = "legacy"

[[tiers]]
name = "key"
quota = "3/min"
capacity = 64

[[tiers]]
name = "endpoint"
quota = { rate = 1, per = "min" }
scope = "client_and_endpoint"
capacity = 64
"#;

/// A clock the test moves while the layer holds it.
struct TestClock(Arc<ManualClock>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
}

fn read(text: &str) -> Result<LayerConfig, config::ConfigError> {
    config::from_deserializer(toml::Deserializer::parse(text).unwrap())
}

async fn call<S>(svc: &mut S, key: Option<&str>, route: &'static str) -> Response<String>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let mut req = Request::builder();
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    let mut req = req.body(String::new()).unwrap();
    req.extensions_mut().insert(RouteName(route));
    svc.ready().await.unwrap().call(req).await.unwrap()
}

#[tokio::test]
async fn a_configured_layer_decides_as_configured() {
    let clock = Arc::new(ManualClock::new(0));
    let layer = read(GATEWAY)
        .unwrap()
        .build(TestClock(clock.clone()), 1_000)
        .unwrap();
    let inner = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    });
    let mut svc = layer.layer(inner);
    // The endpoint tier: one per (client, route) per minute.
    assert_eq!(
        call(&mut svc, Some("alice"), "/a").await.status(),
        StatusCode::OK
    );
    let refused = call(&mut svc, Some("alice"), "/a").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // fields = "legacy": no IETF fields.
    assert!(refused.headers().contains_key("x-ratelimit-limit"));
    assert!(!refused.headers().contains_key("ratelimit-policy"));
    // The key tier: three per client per minute over every route.
    assert_eq!(
        call(&mut svc, Some("alice"), "/b").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        call(&mut svc, Some("alice"), "/c").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        call(&mut svc, Some("alice"), "/d").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        call(&mut svc, Some("bob"), "/a").await.status(),
        StatusCode::OK
    );
    // keyless: the default rejection, 400 (a 401 needs a challenge).
    assert_eq!(
        call(&mut svc, None, "/a").await.status(),
        StatusCode::BAD_REQUEST
    );
    // A minute later alice has her endpoint again.
    clock.advance(60_000);
    assert_eq!(
        call(&mut svc, Some("alice"), "/a").await.status(),
        StatusCode::OK
    );
}

#[test]
fn golden_layer_errors() {
    let err = |text: &str| -> String {
        match read(text) {
            Err(e) => format!("{}: {}", e.path(), e.message().lines().last().unwrap_or("")),
            Ok(c) => c
                .build(ManualClock::new(0), 1_000)
                .err()
                .unwrap()
                .to_string(),
        }
    };
    let tier = "[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = 1\n";
    let cases: &[(String, &str)] = &[
        (
            format!("key = {{ client = \"cookie\" }}\n{tier}"),
            "key.client: unknown variant `cookie`, expected one of `header`, `peer_ip`, `route`",
        ),
        (
            format!("key = {{ client = {{ header = \"x key\" }} }}\n{tier}"),
            "key.client.header: not a valid header name",
        ),
        (
            format!("key = {{ client = \"peer_ip\" }}\nkeyless = {{ reject = 200 }}\n{tier}"),
            "keyless.reject: a keyless request is rejected with a 4xx status other than 407, \
             and 401 needs a challenge",
        ),
        (
            format!("key = {{ client = \"peer_ip\" }}\nkeyless = {{ reject = 99 }}\n{tier}"),
            "keyless.reject: not an HTTP status code",
        ),
        (
            format!("key = {{ client = \"peer_ip\" }}\nfields = \"all\"\n{tier}"),
            "fields: unknown variant `all`, expected one of `ietf`, `legacy`, `both`, `neither`",
        ),
        (
            "key = { client = \"peer_ip\" }\ntiers = []".into(),
            "tiers: the backend has no tiers",
        ),
        (
            format!("key = {{ client = \"peer_ip\" }}\n{tier}{tier}"),
            "tiers[1].name: tier name \"t\" is used twice",
        ),
        (
            "key = { client = \"peer_ip\" }\n[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = 0".into(),
            "tiers[0].capacity: a keyed table needs a capacity of at least 1",
        ),
        (
            "key = { client = \"peer_ip\" }\n[[tiers]]\nname = \"t\"\nquota = \"1/s, hz 10\"\ncapacity = 1".into(),
            "tiers[0].quota: a tier must count ticks at the clock's frequency",
        ),
        (
            "key = { client = \"peer_ip\" }\n[[tiers]]\nname = \"t\"\nquota = \"1/s, burst 0\"\ncapacity = 1".into(),
            "tiers[0].quota: quota: the burst is zero",
        ),
        (
            "key = { client = \"peer_ip\" }\n[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = 1\nscope = \"route\"".into(),
            "tiers[0].scope: unknown variant `route`, expected `client` or `client_and_endpoint`",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(&err(text), expected, "{text}");
    }
}

fn source() -> impl Strategy<Value = KeySource> {
    prop_oneof![
        "[a-z-]{1,12}".prop_map(KeySource::Header),
        Just(KeySource::PeerIp),
        Just(KeySource::Route),
    ]
}

#[cfg(feature = "redis")]
fn redis_rules() -> impl Strategy<Value = RedisRules> {
    (
        prop_oneof![
            "redis://[a-z][a-z0-9]{0,11}:[1-9][0-9]{0,3}/"
                .prop_map(|url| Target::standalone(&url).unwrap()),
            prop::collection::vec("redis://[a-z][a-z0-9]{0,11}/", 1..4)
                .prop_map(|nodes| Target::cluster(nodes).unwrap()),
        ],
        "[a-z]{1,8}",
        prop_oneof![
            Just(FailurePolicy::Open),
            Just(FailurePolicy::Closed),
            prop::collection::vec(
                // Rates whose interval is a whole number of ticks: the
                // core's structured form reads an inexact quota back with
                // the same interval but not always the same `is_exact`.
                (
                    prop::sample::select(vec![1u64, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 500]),
                    1u64..100,
                    prop::sample::select(vec![1_000u64, 1_000_000, 1_000_000_000])
                )
                    .prop_map(|(r, burst, hz)| {
                        cellrate::Quota::per_second(r).with_burst(burst).at_hz(hz)
                    }),
                0..4
            )
            .prop_map(FailurePolicy::Fallback),
        ],
        prop::option::of(0u64..10_000),
        prop::option::of(0u64..10_000),
        prop::option::of(1usize..1 << 20),
    )
        .prop_map(
            |(target, prefix, failure, timeout_ms, reconnect_ms, fallback_capacity)| RedisRules {
                target,
                prefix,
                failure,
                timeout_ms,
                reconnect_ms,
                fallback_capacity,
            },
        )
}

#[cfg(feature = "redis")]
fn maybe_redis() -> impl Strategy<Value = Option<RedisRules>> {
    prop::option::of(redis_rules())
}

#[cfg(not(feature = "redis"))]
fn maybe_redis() -> impl Strategy<Value = ()> {
    Just(())
}

fn layer_config() -> impl Strategy<Value = LayerConfig> {
    let tier = (
        "[ -~]{1,32}",
        (1u64..=1 << 40, 1u64..=1 << 40, any::<bool>()),
        prop::sample::select(vec![TierScope::Client, TierScope::ClientAndEndpoint]),
        1usize..1 << 20,
        prop::option::of(prop::collection::vec("/[ -~]{0,12}", 0..3)),
        prop::option::of(prop::sample::select(AlgorithmKind::ALL.to_vec())),
        prop::option::of(1u32..100),
    )
        .prop_map(
            |(name, (rate, burst, has_burst), scope, capacity, routes, algorithm, buckets)| {
                let mut quota = QuotaSpec::new(rate, "min".parse().unwrap());
                if has_burst {
                    quota = quota.with_burst(burst);
                }
                LayerTier {
                    name,
                    quota,
                    scope,
                    capacity,
                    overrides: Default::default(),
                    max_overrides: None,
                    routes,
                    algorithm,
                    buckets,
                }
            },
        );
    (
        source(),
        prop::option::of(source()),
        prop::collection::vec(tier, 0..4),
        prop::sample::select(vec![
            Fields::Ietf,
            Fields::Legacy,
            Fields::Both,
            Fields::Neither,
        ]),
        prop_oneof![
            Just(Keyless::Shared),
            (100u16..1000).prop_map(|c| Keyless::Reject(StatusCode::from_u16(c).unwrap()))
        ],
        prop::option::of(("[A-Za-z]{1,8}", "[ -~]{0,12}"))
            .prop_map(|c| c.map(|(scheme, realm)| Challenge { scheme, realm })),
        prop::sample::select(vec![WhenFull::Deny, WhenFull::Admit, WhenFull::Shared]),
        maybe_redis(),
        prop::option::of("[a-z_]{1,12}"),
    )
        .prop_map(
            |(
                client,
                endpoint,
                tiers,
                fields,
                keyless,
                challenge,
                when_full,
                redis,
                metrics_name,
            )| {
                let mut key = KeyConfig::new(client);
                key.endpoint = endpoint;
                let mut c = LayerConfig::new(key, tiers);
                (c.fields, c.keyless, c.challenge) = (fields, keyless, challenge);
                (c.when_full, c.metrics_name) = (when_full, metrics_name);
                #[cfg(feature = "redis")]
                {
                    c.redis = redis;
                }
                #[cfg(not(feature = "redis"))]
                let () = redis;
                c
            },
        )
}

proptest! {
    #[test]
    fn layer_config_round_trips(c in layer_config()) {
        let json = serde_json::to_string(&c).unwrap();
        prop_assert_eq!(&serde_json::from_str::<LayerConfig>(&json).unwrap(), &c);
        let toml = toml::to_string(&c).unwrap();
        prop_assert_eq!(&toml::from_str::<LayerConfig>(&toml).unwrap(), &c);
    }
}

/// No server needed: a fail-closed layer whose Redis refuses connections
/// answers 503, never 200 or a 4xx.
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_configured_redis_layer_applies_its_failure_policy() {
    let text = r#"
        key = { client = { header = "x-api-key" } }
        tiers = [{ name = "key", quota = "10/min", capacity = 1 }]
        [redis]
        target = { standalone = "redis://127.0.0.1:1/" }
        failure = "closed"
        timeout_ms = 500
    "#;
    let layer = read(text)
        .unwrap()
        .build_redis(TestClock(Arc::new(ManualClock::new(0))), 1_000)
        .unwrap();
    let inner = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    });
    let mut svc = layer.layer(inner);
    let res = call(&mut svc, Some("alice"), "/a").await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
}

#[cfg(feature = "redis")]
#[test]
fn golden_redis_layer_errors() {
    let err = |redis: &str, tiers: &str| -> String {
        let text = format!("key = {{ client = \"peer_ip\" }}\n{tiers}\n[redis]\n{redis}");
        match read(&text) {
            Err(e) => format!("{}: {}", e.path(), e.message().lines().last().unwrap_or("")),
            Ok(c) => match c.build_redis(TestClock(Arc::new(ManualClock::new(0))), 1_000) {
                Err(e) => e.to_string(),
                Ok(_) => "built".into(),
            },
        }
    };
    let one = "tiers = [{ name = \"t\", quota = \"1/s\", capacity = 1 }]";
    let two = "tiers = [{ name = \"t\", quota = \"1/s\", capacity = 1 }, { name = \"u\", quota = \"1/min\", capacity = 1 }]";
    let target = "target = { standalone = \"redis://127.0.0.1:1/\" }";
    assert_eq!(
        err(
            &format!("{target}\nfailure = {{ fallback = [\"5/s\"] }}"),
            two
        ),
        "redis.failure.fallback: one quota per tier: 2 tiers, 1 quota"
    );
    assert_eq!(
        err(
            &format!("{target}\nfailure = {{ fallback = [\"5/s\", \"0/s\"] }}"),
            two
        ),
        "redis.failure.fallback[1]: quota: the rate has zero cells per period"
    );
    // A fallback quota at any frequency: the client re-expresses it on
    // its µs clock.
    assert_eq!(
        err(
            &format!("{target}\nfailure = {{ fallback = [\"5/s, hz 10\"] }}"),
            one
        ),
        "built"
    );
    assert_eq!(
        err(
            &format!("{target}\nfailure = \"open\""),
            "tiers = [{ name = \"t\", quota = \"1/s\", capacity = 1 }, \
             { name = \"u\", quota = \"1/min\", capacity = 1, routes = [\"/a\"] }]"
        ),
        "tiers[1].routes: on Redis every tier decides every route: give each group of routes \
         a layer of its own (an axum route_layer); tiers of one name under one prefix share \
         their clients' state on the server"
    );
    assert_eq!(
        err(&format!("{target}\nfailure = \"maybe\""), one),
        "redis.failure: unknown variant `maybe`, expected one of `open`, `closed`, `fallback`"
    );
    assert!(err(
        "target = { standalone = \"http://x/\" }\nfailure = \"open\"",
        one
    )
    .starts_with("redis.target.standalone: "));
    assert!(err(
        "target = { cluster = [\"redis://127.0.0.1:7000/\", \"http://x/\"] }\nfailure = \"open\"",
        one
    )
    .starts_with("redis.target.cluster: "));
    assert_eq!(
        err(
            "target = { sentinel = \"redis://x/\" }\nfailure = \"open\"",
            one
        ),
        "redis.target: unknown variant `sentinel`, expected `standalone` or `cluster`"
    );
    assert_eq!(err(&format!("{target}\nfailure = \"open\""), one), "built");
}

/// A capacity no allocator can grant (a typo of a few digits) is an error
/// at its place, never an abort of the process: a tier's table is
/// allocated when the layer is built, the Redis fallback's tables when
/// Redis first fails, long after the file was read.
#[test]
fn capacities_past_memory_are_errors() {
    let slots = "1_099_511_627_776"; // 16 TiB of slots
    let expected =
        "a keyed table of 1099511627776 slots (17592186044416 bytes) cannot be allocated";
    let text = format!(
        "key = {{ client = \"peer_ip\" }}\n[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = {slots}"
    );
    let err = read(&text)
        .unwrap()
        .build(ManualClock::new(0), 1_000)
        .err()
        .unwrap();
    assert_eq!(err.to_string(), format!("tiers[0].capacity: {expected}"));
    #[cfg(feature = "redis")]
    {
        let text = format!(
            "key = {{ client = \"peer_ip\" }}\n[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = 1\n\
             [redis]\ntarget = {{ standalone = \"redis://127.0.0.1:6379/\" }}\nfailure = \"open\"\n\
             fallback_capacity = {slots}"
        );
        let err = read(&text)
            .unwrap()
            .build_redis(ManualClock::new(0), 1_000)
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            format!("redis.fallback_capacity: {expected}")
        );
    }
}

/// A keyless 401 is built only with its challenge (RFC 9110 §15.5.2), which
/// the response then carries; without one the file is refused at
/// `keyless.reject`, a bad challenge at `challenge`.
#[tokio::test]
async fn a_keyless_401_carries_its_challenge() {
    let tier = "[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = 4\n";
    let build = |extra: &str| {
        read(&format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\nkeyless = {{ reject = 401 }}\n{extra}{tier}"
        ))
        .unwrap()
        .build(ManualClock::new(0), 1_000)
    };
    assert_eq!(
        build("").err().unwrap().to_string(),
        "keyless.reject: a keyless request is rejected with a 4xx status other than 407, \
         and 401 needs a challenge"
    );
    assert_eq!(
        build("challenge = { scheme = \"Bearer token\", realm = \"api\" }\n")
            .err()
            .unwrap()
            .path(),
        "challenge"
    );
    let layer = build("challenge = { scheme = \"Bearer\", realm = \"api\" }\n").unwrap();
    let inner = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    });
    let mut svc = layer.layer(inner);
    let refused = call(&mut svc, None, "/a").await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        refused.headers()["www-authenticate"],
        "Bearer realm=\"api\""
    );
}

/// `tiers[i].routes`: each request is decided, all or nothing, by the tiers
/// of its route (those naming it and those naming none), and announces
/// those only; a reload moves a route to other tiers keeping every
/// client's state; bad route lists are refused with their place.
#[tokio::test]
async fn routes_pick_the_tiers_of_each_request() {
    let rules = |search_routes: &str| {
        read(&format!(
            r#"
            key = {{ client = {{ header = "x-api-key" }}, endpoint = "route" }}
            [[tiers]]
            name = "key"
            quota = "10/min"
            capacity = 16
            [[tiers]]
            name = "search"
            quota = "2/min"
            capacity = 16
            routes = {search_routes}
            [[tiers]]
            name = "write"
            quota = "1/min"
            capacity = 16
            routes = ["/orders"]
            "#
        ))
        .unwrap()
    };
    let clock = Arc::new(ManualClock::new(0));
    let layer = rules(r#"["/search"]"#)
        .build(TestClock(clock.clone()), 1_000)
        .unwrap();
    let reloader = layer.reloader();
    let inner = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    });
    let mut svc = layer.layer(inner);
    let policy =
        |r: &Response<String>| r.headers()["ratelimit-policy"].to_str().unwrap().to_owned();
    let status = |r: &Response<String>| r.status();

    let r = call(&mut svc, Some("alice"), "/orders").await;
    assert_eq!(status(&r), StatusCode::OK);
    assert_eq!(policy(&r), r#""key";q=10;w=60, "write";q=1;w=60"#);
    let r = call(&mut svc, Some("alice"), "/orders").await;
    assert_eq!(status(&r), StatusCode::TOO_MANY_REQUESTS, "write: 1/min");
    // Another route: the key tier only (the refusal above charged nothing).
    let r = call(&mut svc, Some("alice"), "/users").await;
    assert_eq!(status(&r), StatusCode::OK);
    assert_eq!(policy(&r), r#""key";q=10;w=60"#);
    assert!(r.headers()["ratelimit"]
        .to_str()
        .unwrap()
        .starts_with(r#""key";r=8;"#));
    for _ in 0..2 {
        let r = call(&mut svc, Some("alice"), "/search").await;
        assert_eq!(status(&r), StatusCode::OK);
        assert_eq!(policy(&r), r#""key";q=10;w=60, "search";q=2;w=60"#);
    }
    let r = call(&mut svc, Some("alice"), "/search").await;
    assert_eq!(status(&r), StatusCode::TOO_MANY_REQUESTS, "search: 2/min");
    // The search tier now decides /users too: alice's spent cells follow.
    reloader.apply(&rules(r#"["/search", "/users"]"#)).unwrap();
    let r = call(&mut svc, Some("alice"), "/users").await;
    assert_eq!(status(&r), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(policy(&r), r#""key";q=10;w=60, "search";q=2;w=60"#);
    assert_eq!(
        status(&call(&mut svc, Some("bob"), "/users").await),
        StatusCode::OK
    );

    // Refused, with their place.
    let bad = |text: &str| {
        read(text)
            .unwrap()
            .build(TestClock(clock.clone()), 1_000)
            .unwrap_err()
            .to_string()
    };
    let tier = |routes: &str| {
        format!(
            "key = {{ client = {{ header = \"x-api-key\" }}, endpoint = \"route\" }}\n\
             [[tiers]]\nname = \"key\"\nquota = \"10/min\"\ncapacity = 16\n\
             [[tiers]]\nname = \"s\"\nquota = \"1/min\"\ncapacity = 16\nroutes = {routes}\n"
        )
    };
    assert_eq!(
        bad(&tier("[]")),
        "tiers[1].routes: names no route: leave it out for every route"
    );
    assert!(bad(&tier(r#"["/a", "/a"]"#))
        .starts_with("tiers[1].routes[1]: route \"/a\" is named twice"));
    assert!(
        bad(&tier(r#"["search"]"#)).starts_with("tiers[1].routes[0]: a route is a matched path")
    );
    assert_eq!(
        bad(&tier(r#"["/a"]"#).replace(", endpoint = \"route\"", "")),
        "tiers[1].routes: a tier limited to some routes needs key.endpoint = \"route\""
    );
    assert!(bad(&tier(r#"["/a"]"#).replace(
        "capacity = 16\n[[tiers]]",
        "capacity = 16\nroutes = [\"/b\"]\n[[tiers]]"
    ))
    .starts_with("tiers: every tier is limited to some routes"));
}

/// Without the `redis` feature a `[redis]` table is an error at its place,
/// never ignored (the tiers would silently run in process).
#[cfg(not(feature = "redis"))]
#[test]
fn a_redis_table_without_the_feature_is_an_error() {
    let text = "key = { client = \"peer_ip\" }\n\
                tiers = [{ name = \"t\", quota = \"1/s\", capacity = 1 }]\n\
                [redis]\ntarget = { standalone = \"redis://127.0.0.1:6379/\" }\nfailure = \"open\"";
    let e = read(text).unwrap_err();
    assert_eq!(e.path(), "redis");
    assert!(e.message().contains("`redis` feature"), "{}", e.message());
    let without = text.split("[redis]").next().unwrap();
    assert!(read(without).is_ok());
}
