//! The routes a configuration names, checked against the application's.
//!
//! A tier's `routes` name matched routes (`/orders/{id}`). A route that no
//! request can match (a typo, a path instead of its pattern) leaves the
//! tier deciding nothing, silently. When the application's routes are
//! known (axum's router is built from a list), [`LayerConfig::check_routes`]
//! reports each such route at its place before the layer serves.
//! Otherwise the layer cannot tell a route that never matches from one not
//! requested yet, so it reports facts only: which named routes no request
//! has matched so far ([`Reloader::unmatched_routes`](crate::Reloader::unmatched_routes)).

use cellrate_config::ConfigError as Error;

use super::LayerConfig;

impl LayerConfig {
    /// Checks every tier's `routes` against `app`, the application's
    /// matched routes (as `key.endpoint = "route"` reads them: axum's
    /// route patterns, `/orders/{id}`). A route of a tier that is not one
    /// of them is an error at `tiers[i].routes[j]`.
    ///
    /// ```
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = toml::from_str(r#"
    ///     key = { client = "peer_ip", endpoint = "route" }
    ///     [[tiers]]
    ///     name = "all"
    ///     quota = "100/min"
    ///     capacity = 64
    ///     [[tiers]]
    ///     name = "search"
    ///     quota = "10/min"
    ///     capacity = 64
    ///     routes = ["/search", "/orders/123"]
    /// "#).unwrap();
    /// let app = ["/search", "/orders/{id}"];
    /// assert_eq!(
    ///     c.check_routes(app).unwrap_err().to_string(),
    ///     "tiers[1].routes[1]: \"/orders/123\" is not a route of the application \
    ///      (a matched route is a pattern such as \"/orders/{id}\")"
    /// );
    /// ```
    pub fn check_routes<I, S>(&self, app: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let known: std::collections::BTreeSet<String> =
            app.into_iter().map(|r| r.as_ref().to_owned()).collect();
        for (i, t) in self.tiers.iter().enumerate() {
            for (j, route) in t.routes.iter().flatten().enumerate() {
                if !known.contains(route) {
                    return Err(Error::new(
                        format!("tiers[{i}].routes[{j}]"),
                        format_args!(
                            "{route:?} is not a route of the application \
                             (a matched route is a pattern such as \"/orders/{{id}}\")"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
