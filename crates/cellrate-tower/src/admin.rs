//! [`Admin`]: the admin endpoint of a layer built from a configuration,
//! an axum router over the layer's [`Reloader`]; its routes and answers
//! are in the type's docs, who may call them in [`auth`].
//!
//! Invariants:
//! * every route answers only after [`auth`] admitted the request, and
//!   only a change that [`Reloader::set_override`] accepted is answered
//!   204 and logged;
//! * changes are serialized by one lock that no request of the layer
//!   takes, so the quota a change logs as the old one is the one it
//!   replaced (the layer itself reads the rules lock-free as ever);
//! * what `/admin/config` shows went through [`LayerConfig::redacted`]
//!   before the application's renderer sees it;
//! * with [`Admin::keep_overrides`], the file is rewritten after each
//!   accepted change, under the same lock, whole or not at all ([`keep`]).

mod auth;
mod keep;

use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::Router;
use cellrate::config::QuotaSpec;
use cellrate::Clock;
use tracing::{error, info};

pub use auth::{AdminToken, TokenError};
pub use keep::KeepError;

use crate::config::LayerConfig;
use crate::key::peer_ip;
use crate::reload::{OverrideError, OverrideSet, Reload, Reloader};
use crate::KeyedTiers;

type Render = Box<dyn Fn(&LayerConfig) -> Result<String, String> + Send + Sync>;

/// The admin endpoint over a layer's [`Reloader`]: an axum [`Router`] an
/// application serves on the listener it chooses (one bound to an internal
/// interface, say). Clones share the token and the wrong-token budgets.
///
/// Routes, every one behind the token (see [`AdminToken`] for the 401,
/// 403 and per-IP 429 answers):
/// * `PUT /admin/overrides/{tier}/{client}` with a quota as the body
///   (`500/min`, `10/s, burst 20`): that client's override in that tier
///   ([`Reloader::set_override`]); 204, or 400 with the reason (a body
///   that is not a quota, no such tier, rules refused);
/// * `DELETE /admin/overrides/{tier}/{client}`: back to the tier's quota;
///   204, or 404 when the tier or the override does not exist;
/// * `GET /admin/config`: the rules in force ([`LayerConfig::redacted`]:
///   secrets masked) in the format [`show_config`](Admin::show_config)
///   renders; 404 until one is given.
///
/// Each change is logged (`INFO`, through `tracing`) with its tier, client,
/// the peer, and the quota that decided the client before and after; each
/// wrong token and each lock-out is a `WARN`. The peer's IP address is read
/// as [`PeerIp`](crate::PeerIp) reads it: serve the router with
/// `into_make_service_with_connect_info::<SocketAddr>()` (or insert a
/// `SocketAddr` or `IpAddr` request extension); without one a request is
/// answered 500.
///
/// ```no_run
/// use axum::http::HeaderValue;
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
/// use cellrate_tower::{Admin, AdminToken};
/// use std::net::SocketAddr;
///
/// # #[tokio::main]
/// # async fn main() {
/// let layer = toml::from_str::<LayerConfig>(r#"
///     key = { client = { header = "x-api-key" } }
///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
/// "#)
/// .unwrap()
/// .build(StdClock::new(), StdClock::HZ)
/// .unwrap();
/// let admin = Admin::new(layer.reloader(), AdminToken::new("change-me").unwrap())
///     .show_config(HeaderValue::from_static("text/plain; charset=utf-8"), toml::to_string);
/// let router = admin.router();
///
/// // On an internal address of its own, with each request's peer recorded.
/// let listener = tokio::net::TcpListener::bind("10.0.0.1:9090").await.unwrap();
/// axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>())
///     .await
///     .unwrap();
/// # }
/// ```
pub struct Admin<C, B: Reload = KeyedTiers> {
    inner: Arc<Inner<C, B>>,
}

struct Inner<C, B: Reload> {
    reloader: Reloader<C, B>,
    guard: auth::Guard,
    /// How `/admin/config` renders the rules, and its media type.
    render: RwLock<Option<(HeaderValue, Render)>>,
    /// Held by each change, so the quota it logs as the old one is the one
    /// it replaced.
    changes: Mutex<()>,
    /// Where the overrides set here are kept, if anywhere.
    keep: RwLock<Option<keep::Keep>>,
}

impl<C, B: Reload> Clone for Admin<C, B> {
    fn clone(&self) -> Self {
        Admin {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C, B: Reload> core::fmt::Debug for Admin<C, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

impl<C, B> Admin<C, B>
where
    C: Clock + Send + Sync + 'static,
    B: Reload + Send + Sync + 'static,
{
    /// The endpoint of `reloader`'s layer, behind `token`; each peer IP
    /// may send 5 wrong tokens a minute (a keyed table of 4096 IPs; past
    /// them the untracked IPs share one budget).
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// use cellrate_tower::{Admin, AdminToken};
    /// let layer = toml::from_str::<LayerConfig>(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
    /// "#).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
    /// let admin = Admin::new(layer.reloader(), "change-me".parse::<AdminToken>().unwrap());
    /// let _router: axum::Router = admin.router();
    /// ```
    pub fn new(reloader: Reloader<C, B>, token: AdminToken) -> Self {
        Admin {
            inner: Arc::new(Inner {
                reloader,
                guard: auth::Guard::new(token),
                render: RwLock::new(None),
                changes: Mutex::new(()),
                keep: RwLock::new(None),
            }),
        }
    }

    /// Serves `GET /admin/config`: the rules in force, secrets masked,
    /// rendered by `render` (any serde format: `toml::to_string`,
    /// `serde_json::to_string_pretty`) and sent as `media_type`, for every
    /// router of this endpoint, made before or after. A render error is
    /// answered 500 and logged.
    ///
    /// ```
    /// use axum::http::HeaderValue;
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// use cellrate_tower::{Admin, AdminToken};
    /// let layer = toml::from_str::<LayerConfig>(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
    /// "#).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
    /// let admin = Admin::new(layer.reloader(), AdminToken::new("change-me").unwrap())
    ///     .show_config(HeaderValue::from_static("application/json"), serde_json::to_string_pretty);
    /// # let _ = admin;
    /// ```
    pub fn show_config<E, F>(self, media_type: HeaderValue, render: F) -> Self
    where
        E: core::fmt::Display,
        F: Fn(&LayerConfig) -> Result<String, E> + Send + Sync + 'static,
    {
        let render: Render = Box::new(move |c| render(c).map_err(|e| e.to_string()));
        *self.inner.render.write().unwrap_or_else(|p| p.into_inner()) = Some((media_type, render));
        self
    }

    /// Keeps the overrides set at run time in the file at `path`, in the
    /// format of `render` and `parse` (any serde format: `toml::to_string`
    /// and `|text| toml::from_str(text)`, say), so that a restart restores them: each
    /// override the file holds is set now (one whose tier no longer exists,
    /// or that the rules refuse, is logged and left out), and the file is
    /// rewritten after every change the endpoint accepts, through a
    /// temporary file renamed over it. A missing file holds none; one that
    /// cannot be read or parsed is an error, and nothing is set.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// use cellrate_tower::{Admin, AdminToken};
    /// let layer = toml::from_str::<LayerConfig>(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
    /// "#).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
    /// let file = std::env::temp_dir().join("cellrate-doc-overrides.toml");
    /// std::fs::write(&file, "[key]\nacct_1 = \"500/min\"\n").unwrap();
    /// let admin = Admin::new(layer.reloader(), AdminToken::new("change-me").unwrap())
    ///     .keep_overrides(&file, toml::to_string, |text| toml::from_str(text))
    ///     .unwrap();
    /// assert_eq!(layer.reloader().run_time_overrides()["key"]["acct_1"].to_string(), "500/min");
    /// # let _ = (admin, std::fs::remove_file(file));
    /// ```
    pub fn keep_overrides<E, D, R, P>(
        self,
        path: impl Into<std::path::PathBuf>,
        render: R,
        parse: P,
    ) -> Result<Self, KeepError>
    where
        E: core::fmt::Display,
        D: core::fmt::Display,
        R: Fn(&OverrideSet) -> Result<String, E> + Send + Sync + 'static,
        P: Fn(&str) -> Result<OverrideSet, D>,
    {
        let render: keep::RenderSet = Box::new(move |s| render(s).map_err(|e| e.to_string()));
        let change = self.inner.change();
        let kept = keep::Keep::restore(
            path.into(),
            render,
            |text| parse(text).map_err(|e| e.to_string()),
            &self.inner.reloader,
        )?;
        *self.inner.keep.write().unwrap_or_else(|p| p.into_inner()) = Some(kept);
        drop(change);
        Ok(self)
    }

    /// Makes `token` the one the endpoint accepts (a rules file reloaded
    /// with a new one), for every clone and router of this endpoint.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// use cellrate_tower::{Admin, AdminToken};
    /// let layer = toml::from_str::<LayerConfig>(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
    /// "#).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
    /// let admin = Admin::new(layer.reloader(), AdminToken::new("old").unwrap());
    /// admin.set_token(AdminToken::new("new").unwrap());
    /// ```
    pub fn set_token(&self, token: AdminToken) {
        self.inner.guard.set_token(token);
    }

    /// The routes (see [`Admin`]), not rate-limited by the layer (the
    /// wrong-token budget is theirs), to serve or merge into a router.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/admin/overrides/{tier}/{client}",
                put(set_override::<C, B>).delete(remove_override::<C, B>),
            )
            .route("/admin/config", get(show_config::<C, B>))
            .with_state(Arc::clone(&self.inner))
    }
}

type Shared<C, B> = State<Arc<Inner<C, B>>>;

impl<C: Clock + Send + Sync + 'static, B: Reload> Inner<C, B> {
    /// The peer, or the refusal of the request (no peer recorded, or the
    /// token's: see [`AdminToken`]).
    fn admit(&self, extensions: &Extensions, headers: &HeaderMap) -> Result<IpAddr, Box<Response>> {
        let Some(peer) = peer_ip(extensions) else {
            error!(
                "admin: the server records no peer address: serve the admin router with \
                 `into_make_service_with_connect_info::<SocketAddr>()`"
            );
            return Err(Box::new(
                (StatusCode::INTERNAL_SERVER_ERROR, "no peer address\n").into_response(),
            ));
        };
        match self.guard.refusal(peer, headers) {
            Some(refused) => Err(Box::new(refused)),
            None => Ok(peer),
        }
    }

    /// The quota that decides `client` in `tier` now, and whether it is
    /// the client's override or the tier's own.
    fn deciding(&self, tier: &str, client: &str) -> String {
        let config = self.reloader.config();
        match config.tiers.iter().find(|t| t.name == tier) {
            None => "none (no such tier)".into(),
            Some(t) => match t.overrides.get(client) {
                Some(q) => format!("{q} (override)"),
                None => format!("{} (tier quota)", t.quota),
            },
        }
    }

    fn change(&self) -> std::sync::MutexGuard<'_, ()> {
        self.changes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the overrides in force to the kept file, if there is one
    /// (under the change lock).
    fn save(&self) {
        if let Some(keep) = &*self.keep.read().unwrap_or_else(|p| p.into_inner()) {
            keep.save(&self.reloader.run_time_overrides());
        }
    }
}

fn bad_request(e: impl core::fmt::Display) -> Response {
    (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
}

/// `PUT /admin/overrides/{tier}/{client}` with a quota as the body.
async fn set_override<C, B>(
    State(admin): Shared<C, B>,
    UrlPath((tier, client)): UrlPath<(String, String)>,
    extensions: Extensions,
    headers: HeaderMap,
    body: String,
) -> Response
where
    C: Clock + Send + Sync + 'static,
    B: Reload + Send + Sync + 'static,
{
    let peer = match admin.admit(&extensions, &headers) {
        Ok(peer) => peer,
        Err(refused) => return *refused,
    };
    let quota: QuotaSpec = match body.trim().parse() {
        Ok(q) => q,
        Err(e) => return bad_request(format_args!("body: {e}")),
    };
    let _change = admin.change();
    let old = admin.deciding(&tier, &client);
    match admin.reloader.set_override(&tier, &client, Some(quota)) {
        Ok(()) => {
            let new = format!("{quota} (override)");
            info!(%tier, %client, ?old, ?new, %peer, "admin: override set");
            admin.save();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => bad_request(e),
    }
}

/// `DELETE /admin/overrides/{tier}/{client}`: back to the tier's quota
/// (404 if there is no such tier or override).
async fn remove_override<C, B>(
    State(admin): Shared<C, B>,
    UrlPath((tier, client)): UrlPath<(String, String)>,
    extensions: Extensions,
    headers: HeaderMap,
) -> Response
where
    C: Clock + Send + Sync + 'static,
    B: Reload + Send + Sync + 'static,
{
    let peer = match admin.admit(&extensions, &headers) {
        Ok(peer) => peer,
        Err(refused) => return *refused,
    };
    let _change = admin.change();
    let old = admin.deciding(&tier, &client);
    match admin.reloader.set_override(&tier, &client, None) {
        Ok(()) => {
            let new = admin.deciding(&tier, &client);
            info!(%tier, %client, ?old, ?new, %peer, "admin: override removed");
            admin.save();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e @ (OverrideError::NoTier(_) | OverrideError::NoOverride { .. })) => {
            (StatusCode::NOT_FOUND, format!("{e}\n")).into_response()
        }
        Err(e) => bad_request(e),
    }
}

/// `GET /admin/config`: the rules in force, secrets masked.
async fn show_config<C, B>(
    State(admin): Shared<C, B>,
    extensions: Extensions,
    headers: HeaderMap,
) -> Response
where
    C: Clock + Send + Sync + 'static,
    B: Reload + Send + Sync + 'static,
{
    if let Err(refused) = admin.admit(&extensions, &headers) {
        return *refused;
    }
    let shown = admin.reloader.config().redacted();
    let render = admin.render.read().unwrap_or_else(|p| p.into_inner());
    let Some((media_type, render)) = render.as_ref() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match render(&shown) {
        Ok(text) => ([(header::CONTENT_TYPE, media_type.clone())], text).into_response(),
        Err(e) => {
            error!("admin: the rules in force cannot be rendered: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
