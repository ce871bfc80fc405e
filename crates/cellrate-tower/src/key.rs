//! Which client (and which endpoint) a request is charged to.

use core::fmt::{self, Write};
use std::net::{IpAddr, SocketAddr};

use http::header::HeaderName;
use http::request::Parts;

/// The longest key accepted from a request, in bytes. Longer keys are
/// [`KeyError::Invalid`]: a limiter key is an identifier, not a payload.
pub const MAX_KEY_LEN: usize = 256;

/// The scope every request without a matched route shares (see [`Route`]).
pub const UNMATCHED_ROUTE: &str = "(unmatched)";

/// One part of a request's key: a client or an endpoint.
///
/// ```
/// use cellrate_tower::Part;
/// let p = Part::Str("alice");
/// let mut buf = cellrate_tower::KeyText::new();
/// assert_eq!(p.as_str(&mut buf), "alice");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part<'r> {
    /// A string taken from the request (a header value, a route).
    Str(&'r str),
    /// A peer's IP address.
    Ip(IpAddr),
    /// The one client every keyless request shares ([`Keyless::Shared`](super::Keyless::Shared)).
    Keyless,
}

impl Part<'_> {
    /// The part as text, written into `buf` when it is not text already. The
    /// keyless client is `"\u{1}keyless"`, which no header value can spell
    /// (header text has no control characters).
    ///
    /// ```
    /// use cellrate_tower::{KeyText, Part};
    /// use std::net::{IpAddr, Ipv4Addr};
    /// let mut buf = KeyText::new();
    /// assert_eq!(Part::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)).as_str(&mut buf), "127.0.0.1");
    /// ```
    pub fn as_str<'a>(&'a self, buf: &'a mut KeyText) -> &'a str {
        match self {
            Part::Str(s) => s,
            Part::Keyless => "\u{1}keyless",
            Part::Ip(ip) => {
                buf.len = 0;
                // An IPv6 address is at most 45 characters: it always fits.
                let _ = write!(buf, "{ip}");
                buf.as_str()
            }
        }
    }
}

/// A stack buffer for a key part written as text (an IP address).
///
/// ```
/// let buf = cellrate_tower::KeyText::new();
/// assert_eq!(buf.as_str(), "");
/// ```
#[derive(Clone, Copy)]
pub struct KeyText {
    buf: [u8; 48],
    len: usize,
}

impl KeyText {
    /// An empty buffer.
    pub const fn new() -> Self {
        KeyText {
            buf: [0; 48],
            len: 0,
        }
    }
    /// The text written so far.
    pub fn as_str(&self) -> &str {
        // Only whole `&str`s are ever copied in: always UTF-8.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl Default for KeyText {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for KeyText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The key of one request: the client, and the endpoint for limits per
/// (client, endpoint).
///
/// ```
/// use cellrate_tower::{Part, RequestKey};
/// let k = RequestKey::new(Part::Str("alice"), Some(Part::Str("/orders/{id}")));
/// assert_eq!(k.scope(), Some(Part::Str("/orders/{id}")));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestKey<'r> {
    client: Part<'r>,
    scope: Option<Part<'r>>,
}

impl<'r> RequestKey<'r> {
    /// A key from its parts.
    pub const fn new(client: Part<'r>, scope: Option<Part<'r>>) -> Self {
        RequestKey { client, scope }
    }
    /// The client.
    pub const fn client(&self) -> Part<'r> {
        self.client
    }
    /// The endpoint, if the extractor has one.
    pub const fn scope(&self) -> Option<Part<'r>> {
        self.scope
    }
}

/// Why no key was extracted.
///
/// ```
/// use cellrate_tower::{Extract, HeaderKey, KeyError};
/// let (parts, ()) = http::Request::new(()).into_parts();
/// assert_eq!(HeaderKey::new("x-api-key").extract(&parts), Err(KeyError::Missing));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyError {
    /// The request carries no key (answered as [`Keyless`](super::Keyless) says).
    Missing,
    /// The request carries a key that cannot be one: empty, not UTF-8,
    /// repeated, or longer than [`MAX_KEY_LEN`] (answered 400).
    Invalid,
    /// The server does not supply what the extractor reads (e.g. [`PeerIp`]
    /// under a server that records no peer address): a misconfiguration,
    /// not the client's fault. Answered 500 (fixed body); the layer logs
    /// the hint, which names the fix, once (through `tracing` with that
    /// feature, else on stderr).
    Unavailable(&'static str),
}

/// One part of a key, read from a request's head.
pub trait KeyPart: Send + Sync + 'static {
    /// The part, borrowed from the request where it can be.
    fn part<'r>(&self, req: &'r Parts) -> Result<Part<'r>, KeyError>;
}

/// A request's whole key. Implemented by each [`KeyPart`] (client only) and
/// by pairs `(client, endpoint)` of them.
pub trait Extract: Send + Sync + 'static {
    /// The key, borrowed from the request where it can be.
    fn extract<'r>(&self, req: &'r Parts) -> Result<RequestKey<'r>, KeyError>;

    /// The endpoint alone, for a request whose client is missing (the
    /// shared keyless client still has per-endpoint limits). `None` by
    /// default.
    fn scope<'r>(&self, req: &'r Parts) -> Option<Part<'r>> {
        let _ = req;
        None
    }
}

/// The client named by a request header (an API key, a user id set by an
/// authentication layer).
///
/// Missing header: [`KeyError::Missing`]. Present but empty, not visible
/// ASCII, repeated, or longer than [`MAX_KEY_LEN`]: [`KeyError::Invalid`].
///
/// ```
/// use cellrate_tower::{Extract, HeaderKey, KeyError, Part};
/// let key = HeaderKey::new("x-api-key");
/// let req = |v: &[u8]| http::Request::builder().header("x-api-key", v).body(()).unwrap().into_parts().0;
/// assert_eq!(key.extract(&req(b"alice")).unwrap().client(), Part::Str("alice"));
/// assert_eq!(key.extract(&req(b"")), Err(KeyError::Invalid));
/// assert_eq!(key.extract(&req(b"\xff")), Err(KeyError::Invalid));
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
}

impl HeaderKey {
    /// The header `name` (lower-case ASCII, as HTTP/2 requires). A name that
    /// is not a valid header name is a programming error caught at once:
    /// use [`try_new`](Self::try_new) for names read at run time.
    pub fn new(name: &'static str) -> Self {
        HeaderKey {
            name: HeaderName::from_static(name),
        }
    }
    /// The header `name`, or `None` if it is not a valid header name.
    ///
    /// ```
    /// use cellrate_tower::HeaderKey;
    /// assert!(HeaderKey::try_new("bad name").is_none());
    /// ```
    pub fn try_new(name: &str) -> Option<Self> {
        HeaderName::from_bytes(name.as_bytes())
            .ok()
            .map(|name| HeaderKey { name })
    }
}

impl KeyPart for HeaderKey {
    fn part<'r>(&self, req: &'r Parts) -> Result<Part<'r>, KeyError> {
        let mut values = req.headers.get_all(&self.name).iter();
        let Some(value) = values.next() else {
            return Err(KeyError::Missing);
        };
        if values.next().is_some() {
            return Err(KeyError::Invalid);
        }
        let bytes = value.as_bytes();
        if bytes.is_empty() || bytes.len() > MAX_KEY_LEN {
            return Err(KeyError::Invalid);
        }
        // Visible ASCII only (no spaces, no control characters, no bytes
        // above 0x7e): what an identifier is, and what every backend stores.
        if !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(KeyError::Invalid);
        }
        match core::str::from_utf8(bytes) {
            Ok(s) => Ok(Part::Str(s)),
            Err(_) => Err(KeyError::Invalid),
        }
    }
}

/// The peer's IP address: axum's `ConnectInfo<SocketAddr>` (feature
/// `axum`), or a `SocketAddr` or `IpAddr` request extension set by the
/// server. None of them: [`KeyError::Unavailable`] (the server was not set
/// up to record peers; with axum, serve the router with
/// `into_make_service_with_connect_info::<SocketAddr>()`), answered 500.
///
/// ```
/// use cellrate_tower::{Extract, Part, PeerIp};
/// use std::net::{IpAddr, Ipv4Addr, SocketAddr};
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 7], 5000)));
/// let (parts, ()) = req.into_parts();
/// assert_eq!(PeerIp.extract(&parts).unwrap().client(), Part::Ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerIp;

/// What [`PeerIp`] logs when the server records no peer address.
const NO_PEER: &str = "the rate-limit key is the peer address (PeerIp), but the server \
    records none: with axum, serve the router with \
    `into_make_service_with_connect_info::<SocketAddr>()` (or insert a SocketAddr or IpAddr \
    request extension before the layer); until then every request is answered 500";

impl KeyPart for PeerIp {
    fn part<'r>(&self, req: &'r Parts) -> Result<Part<'r>, KeyError> {
        match peer_ip(&req.extensions) {
            Some(ip) => Ok(Part::Ip(ip)),
            None => Err(KeyError::Unavailable(NO_PEER)),
        }
    }
}

/// The peer's IP address as [`PeerIp`] finds it in a request's extensions.
pub(crate) fn peer_ip(extensions: &http::Extensions) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    if let Some(addr) = extensions.get::<SocketAddr>() {
        return Some(addr.ip());
    }
    extensions.get::<IpAddr>().copied()
}

/// The endpoint as the router matched it, never the raw path: axum's
/// `MatchedPath` (feature `axum`; add the layer with `Router::route_layer`
/// or `Router::layer` so it runs after routing), or a [`RouteName`]
/// extension set by another router. A request that matched no route is
/// scoped to [`UNMATCHED_ROUTE`], so `/a`, `/a/`, `//a` and `/%61` can never
/// be four endpoints.
///
/// ```
/// use cellrate_tower::{KeyPart, Part, Route, RouteName, UNMATCHED_ROUTE};
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(RouteName("/orders/{id}"));
/// assert_eq!(Route.part(&req.into_parts().0), Ok(Part::Str("/orders/{id}")));
/// let bare = http::Request::new(()).into_parts().0;
/// assert_eq!(Route.part(&bare), Ok(Part::Str(UNMATCHED_ROUTE)));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Route;

/// A route's name as a request extension, for routers other than axum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RouteName(pub &'static str);

impl KeyPart for Route {
    fn part<'r>(&self, req: &'r Parts) -> Result<Part<'r>, KeyError> {
        #[cfg(feature = "axum")]
        if let Some(m) = req.extensions.get::<axum::extract::MatchedPath>() {
            return Ok(Part::Str(m.as_str()));
        }
        if let Some(r) = req.extensions.get::<RouteName>() {
            return Ok(Part::Str(r.0));
        }
        Ok(Part::Str(UNMATCHED_ROUTE))
    }
}

macro_rules! client_only {
    ($($t:ty),*) => {$(
        impl Extract for $t {
            fn extract<'r>(&self, req: &'r Parts) -> Result<RequestKey<'r>, KeyError> {
                Ok(RequestKey::new(self.part(req)?, None))
            }
        }
    )*};
}
client_only!(HeaderKey, PeerIp, Route);

/// `(client, endpoint)`: the first part names the client, the second the
/// endpoint. A missing client is [`KeyError::Missing`] whatever the endpoint.
///
/// ```
/// use cellrate_tower::{Extract, HeaderKey, Part, Route, RouteName};
/// let mut req = http::Request::builder().header("x-api-key", "k1").body(()).unwrap();
/// req.extensions_mut().insert(RouteName("/ep"));
/// let (parts, ()) = req.into_parts();
/// let key = (HeaderKey::new("x-api-key"), Route).extract(&parts).unwrap();
/// assert_eq!((key.client(), key.scope()), (Part::Str("k1"), Some(Part::Str("/ep"))));
/// ```
impl<C: KeyPart, S: KeyPart> Extract for (C, S) {
    fn extract<'r>(&self, req: &'r Parts) -> Result<RequestKey<'r>, KeyError> {
        let client = self.0.part(req)?;
        let scope = self.1.part(req)?;
        Ok(RequestKey::new(client, Some(scope)))
    }
    fn scope<'r>(&self, req: &'r Parts) -> Option<Part<'r>> {
        self.1.part(req).ok()
    }
}
