//! [`RulesWatcher`]: a rules file reloaded into a layer, through its
//! [`Reloader`], when the file's modification time changes and (on unix)
//! on `SIGHUP`; what a reload does and logs is in the type's docs.
//!
//! Invariants: reloads never overlap (each holds the watcher's lock from
//! reading the modification time to applying the rules) and each records
//! the modification time it read, so a `SIGHUP` reload is not followed by
//! a second one for the same change; a refused file changes nothing (the
//! reloader's all-or-nothing `apply`) and calls no hook.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::config::LayerConfig;
use crate::reload::{Reload, Reloaded, Reloader};
use crate::KeyedTiers;

/// The poll interval of a new [`RulesWatcher`].
pub const DEFAULT_RULES_POLL: Duration = Duration::from_secs(1);

type Read<T> = Box<dyn Fn(&Path) -> Result<T, String> + Send + Sync>;
type OnReload<T> = Box<dyn Fn(&T, &Reloaded) + Send + Sync>;

/// Watches a rules file and reloads a layer's rules from it when it
/// changes (its modification time, polled every [`DEFAULT_RULES_POLL`] by
/// default) and on `SIGHUP` (unix), keeping every client's state.
///
/// * A reload reads the whole file and applies it with
///   [`Reloader::apply`]: all or nothing. A file that cannot be read,
///   parsed or checked changes nothing; the rules in force stay and the
///   refusal is logged (`WARN`) with the place of the first error.
/// * Every reload is logged through `tracing`: the file, what set it off,
///   the new rules ([`LayerConfig::summary`], secrets masked) and what
///   became of the overrides set at run time ([`Reloaded`]); `INFO`, or
///   `WARN` when one was dropped (its tier removed or redefined).
/// * The file's modification time is read with a blocking call on the task
///   that runs the watcher (one `stat` per poll), and the file is read the
///   same way when it changed: rules files are small and local.
///
/// `read` turns the file into a `T` that holds the layer's rules
/// (`AsRef<LayerConfig>`: the rules themselves, or a whole file of which
/// they are one table, with [`within`](Self::within) naming it); its error
/// should name the place of the first problem.
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
/// use cellrate_tower::RulesWatcher;
/// use std::time::Duration;
///
/// fn read(path: &std::path::Path) -> Result<LayerConfig, String> {
///     let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
///     let toml = toml::Deserializer::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
///     cellrate_config::from_deserializer(toml).map_err(|e| format!("{}: {e}", path.display()))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let path = std::env::temp_dir().join(format!("cellrate-watch-doc-{}.toml", std::process::id()));
/// let rules = |quota: &str| format!(r#"
///     key = {{ client = {{ header = "x-api-key" }} }}
///     tiers = [{{ name = "key", quota = "{quota}", capacity = 64 }}]
/// "#);
/// std::fs::write(&path, rules("10/min")).unwrap();
/// let layer = read(&path).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
///
/// let watcher = RulesWatcher::new(&path, layer.reloader(), read)
///     .poll_every(Some(Duration::from_millis(100)));
/// // A reload can also be asked for (an admin request, a test):
/// std::fs::write(&path, rules("20/min")).unwrap();
/// watcher.reload("asked").unwrap();
/// assert_eq!(layer.reloader().config().tiers[0].quota.to_string(), "20/min");
/// // A bad file changes nothing, and says where it is wrong.
/// std::fs::write(&path, rules("20/fortnight")).unwrap();
/// let refused = watcher.reload("asked").unwrap_err().to_string();
/// assert!(refused.contains("tiers[0].quota"), "{refused}");
/// assert_eq!(layer.reloader().config().tiers[0].quota.to_string(), "20/min");
///
/// let watching = watcher.spawn(); // polls and listens for SIGHUP until aborted
/// # watching.abort();
/// # std::fs::remove_file(&path).unwrap();
/// # }
/// ```
pub struct RulesWatcher<C, B: Reload = KeyedTiers, T = LayerConfig> {
    path: PathBuf,
    reloader: Reloader<C, B>,
    read: Read<T>,
    within: String,
    poll: Option<Duration>,
    sighup: bool,
    on_reload: Option<OnReload<T>>,
    /// The modification time the last reload read (or the watcher's
    /// making saw); held by each reload, so reloads never overlap.
    seen: Mutex<Option<SystemTime>>,
}

/// Why a reload ([`RulesWatcher::reload`]) changed nothing: the file could
/// not be read or its rules were refused. Its `Display` names the file and
/// the place of the first error.
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
/// use cellrate_tower::RulesWatcher;
///
/// let rules: LayerConfig = toml::from_str(r#"
///     key = { client = { header = "x-api-key" } }
///     tiers = [{ name = "key", quota = "10/min", capacity = 64 }]
/// "#).unwrap();
/// let layer = rules.build(StdClock::new(), StdClock::HZ).unwrap();
/// let watcher = RulesWatcher::new("/nonexistent/rules.toml", layer.reloader(), |path| {
///     std::fs::read_to_string(path)
///         .map_err(|e| format!("cannot read {}: {e}", path.display()))
///         .and_then(|text| toml::from_str::<LayerConfig>(&text).map_err(|e| e.to_string()))
/// });
/// let refused = watcher.reload("asked").unwrap_err();
/// assert!(refused.to_string().starts_with("cannot read /nonexistent/rules.toml"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReloadError {
    message: String,
}

impl core::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReloadError {}

/// The rules are their own rules file's whole content.
///
/// ```
/// use cellrate_tower::config::{KeyConfig, KeySource, LayerConfig};
/// let rules = LayerConfig::new(KeyConfig::new(KeySource::PeerIp), Vec::new());
/// assert!(std::ptr::eq(AsRef::<LayerConfig>::as_ref(&rules), &rules));
/// ```
impl AsRef<LayerConfig> for LayerConfig {
    fn as_ref(&self) -> &LayerConfig {
        self
    }
}

impl<C, B, T> RulesWatcher<C, B, T>
where
    C: cellrate::Clock + Send + Sync + 'static,
    B: Reload,
    T: AsRef<LayerConfig>,
{
    /// Watches the file at `path`, read by `read`, for the layer of
    /// `reloader`: polling every [`DEFAULT_RULES_POLL`], on `SIGHUP` (unix),
    /// once [spawned](Self::spawn). Make it right after the rules in force
    /// were read: a change after this call is a change to reload.
    pub fn new<E, F>(path: impl Into<PathBuf>, reloader: Reloader<C, B>, read: F) -> Self
    where
        E: core::fmt::Display,
        F: Fn(&Path) -> Result<T, E> + Send + Sync + 'static,
    {
        let path = path.into();
        let seen = modified(&path);
        RulesWatcher {
            path,
            reloader,
            read: Box::new(move |p| read(p).map_err(|e| e.to_string())),
            within: String::new(),
            poll: Some(DEFAULT_RULES_POLL),
            sighup: true,
            on_reload: None,
            seen: Mutex::new(seen),
        }
    }

    /// How often the file's modification time is read; `None`: never (a
    /// reload then comes on `SIGHUP` or [`reload`](Self::reload) only).
    /// A zero interval is taken as `None`.
    pub fn poll_every(mut self, interval: Option<Duration>) -> Self {
        self.poll = interval.filter(|i| !i.is_zero());
        self
    }

    /// Whether `SIGHUP` reloads the file (unix only; on by default). While
    /// a watcher listens for it, the signal no longer ends the process.
    pub fn on_sighup(mut self, listen: bool) -> Self {
        self.sighup = listen;
        self
    }

    /// Where the layer's rules sit in the file (`"limits"` for a
    /// `[limits]` table): an error of the rules is placed under it, as the
    /// file's own errors are (`limits.tiers[0].quota: …`).
    pub fn within(mut self, table: &str) -> Self {
        self.within = table.into();
        self
    }

    /// Calls `then` after each reload that changed the rules, with what the
    /// file held and what became of the run-time overrides: for what else
    /// the application keeps in the file (an admin token).
    pub fn on_reload(mut self, then: impl Fn(&T, &Reloaded) + Send + Sync + 'static) -> Self {
        self.on_reload = Some(Box::new(then));
        self
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file and applies its rules now, logging the reload or its
    /// refusal with `why` (what set it off). The rules in force stay on an
    /// error.
    pub fn reload(&self, why: &str) -> Result<Reloaded, ReloadError> {
        let mut seen = self.lock();
        self.reload_locked(&mut seen, why)
    }

    /// Spawns [`run`](Self::run) on the current tokio runtime (call it
    /// inside one); abort the handle to stop watching.
    pub fn spawn(self) -> tokio::task::JoinHandle<()>
    where
        T: 'static,
    {
        tokio::spawn(async move { self.run().await })
    }

    /// Watches until dropped: reloads on each `SIGHUP` and each change of
    /// the file's modification time. Returns at once when neither is on
    /// (or `SIGHUP` cannot be listened for and polling is off).
    pub async fn run(&self) {
        #[cfg(unix)]
        let mut hup = if self.sighup {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::hangup()) {
                Ok(s) => Some(s),
                Err(e) => {
                    warn!(path = %self.path.display(), "no reload on SIGHUP: {e}");
                    None
                }
            }
        } else {
            None
        };
        #[cfg(not(unix))]
        let mut hup: Option<Never> = None;
        let mut tick = self.poll.map(|every| {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        while hup.is_some() || tick.is_some() {
            let event = std::future::poll_fn(|cx| {
                if let Some(signals) = &mut hup {
                    if let Poll::Ready(got) = signals.poll_recv(cx) {
                        return Poll::Ready(Event::Signal(got.is_some()));
                    }
                }
                if let Some(tick) = &mut tick {
                    if tick.poll_tick(cx).is_ready() {
                        return Poll::Ready(Event::Tick);
                    }
                }
                Poll::Pending
            })
            .await;
            match event {
                Event::Signal(true) => {
                    let _ = self.reload("SIGHUP");
                }
                // The signal's stream ended: no more SIGHUPs.
                Event::Signal(false) => hup = None,
                Event::Tick => {
                    let mut seen = self.lock();
                    if modified(&self.path) != *seen {
                        let _ = self.reload_locked(&mut seen, "file changed");
                    }
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<SystemTime>> {
        // A reload that panicked left a time or the one before: either is
        // a time to compare with, so the poison is not a state.
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reload_locked(
        &self,
        seen: &mut Option<SystemTime>,
        why: &str,
    ) -> Result<Reloaded, ReloadError> {
        *seen = modified(&self.path);
        let refused = |message: String| {
            warn!("reload ({why}) refused, rules unchanged: {message}");
            ReloadError { message }
        };
        let file = (self.read)(&self.path).map_err(refused)?;
        let rules = file.as_ref();
        let report = self.reloader.apply(rules).map_err(|e| {
            let e = e.within(&self.within);
            refused(format!("{}: {e}", self.path.display()))
        })?;
        let summary = rules.summary();
        let path = self.path.display();
        if report.dropped.is_empty() {
            info!("reloaded {path} ({why}): {summary}; {report}");
        } else {
            warn!("reloaded {path} ({why}): {summary}; {report}");
        }
        if let Some(then) = &self.on_reload {
            then(&file, &report);
        }
        Ok(report)
    }
}

impl<C, B: Reload, T> core::fmt::Debug for RulesWatcher<C, B, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RulesWatcher")
            .field("path", &self.path)
            .field("poll", &self.poll)
            .field("sighup", &self.sighup)
            .finish_non_exhaustive()
    }
}

/// What woke the watcher.
enum Event {
    /// A `SIGHUP`, or (`false`) the end of the signal's stream.
    Signal(bool),
    /// A poll of the file's modification time.
    Tick,
}

/// No signal stream off unix.
#[cfg(not(unix))]
enum Never {}

#[cfg(not(unix))]
impl Never {
    fn poll_recv(&mut self, _: &mut std::task::Context<'_>) -> Poll<Option<()>> {
        match *self {}
    }
}

/// The file's modification time, or `None` when it cannot be read.
fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
