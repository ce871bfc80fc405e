//! The README's axum quick start: 10 requests per minute per API key.
//! `cargo run --example axum_quickstart --features axum`, then
//! `curl -i -H 'x-api-key: alice' http://127.0.0.1:3000/`.
use axum::{routing::get, Router};
use cellrate::{Quota, StdClock};
use cellrate_tower::{HeaderKey, KeyedTiers, RateLimitLayer};

#[tokio::main]
async fn main() {
    let tiers = KeyedTiers::new()
        .per_client("key", Quota::per_minute(10).at_hz(StdClock::HZ), 100_000)
        .unwrap();
    let layer = RateLimitLayer::builder(HeaderKey::new("x-api-key"), tiers, StdClock::new())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000")
        .await
        .unwrap();
    axum::serve(listener, app).await.unwrap();
}
