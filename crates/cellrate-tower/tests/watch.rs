//! The rules-file watcher (`cellrate_tower::RulesWatcher`, feature
//! `serde`): a changed file is reloaded (polling its modification time,
//! and on SIGHUP), keeping every client's state; a bad file changes
//! nothing and its refusal is logged with the place of the error; every
//! reload is logged with the rules and what became of the run-time
//! overrides; the application's hook sees each file that took effect.
#![cfg(feature = "serde")]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cellrate::StdClock;
use cellrate_tower::config::LayerConfig;
use cellrate_tower::{Reloaded, Reloader, RulesWatcher};

#[path = "support/logs.rs"]
mod logs;
use logs::Logs;

/// A rules file of this test's own, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("cellrate-watch-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
    fn write(&self, text: &str) {
        std::fs::write(&self.0, text).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Rules with a "key" tier of `quota` and, when `burst` is set, a second
/// tier named "burst".
fn rules(quota: &str, burst: bool) -> String {
    let mut text = format!(
        "key = {{ client = {{ header = \"x-api-key\" }} }}\n\
         [[tiers]]\nname = \"key\"\nquota = \"{quota}\"\ncapacity = 64\n"
    );
    if burst {
        text += "[[tiers]]\nname = \"burst\"\nquota = \"10/s\"\ncapacity = 64\n";
    }
    text
}

/// A file of `[app]` settings and `[limits]` rules, as an application
/// keeps them.
#[derive(serde::Deserialize)]
struct File {
    app: App,
    limits: LayerConfig,
}

#[derive(serde::Deserialize)]
struct App {
    greeting: String,
}

impl AsRef<LayerConfig> for File {
    fn as_ref(&self) -> &LayerConfig {
        &self.limits
    }
}

fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let toml = toml::Deserializer::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    cellrate_config::from_deserializer(toml).map_err(|e| format!("{}: {e}", path.display()))
}

fn layer(file: &TempFile) -> Reloader<StdClock> {
    let layer = read_toml::<LayerConfig>(&file.0)
        .unwrap()
        .build(StdClock::new(), StdClock::HZ)
        .unwrap();
    layer.reloader()
}

fn key_quota(reloader: &Reloader<StdClock>) -> String {
    reloader.config().tiers[0].quota.to_string()
}

/// Waits (at most 5 s) until `done`.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

#[tokio::test(flavor = "current_thread")]
async fn a_changed_file_is_reloaded_and_a_bad_one_refused() {
    let (logs, _guard) = Logs::capture();
    let file = TempFile::new("poll", &rules("10/min", false));
    let reloader = layer(&file);
    let watching = RulesWatcher::new(&file.0, reloader.clone(), read_toml::<LayerConfig>)
        .poll_every(Some(Duration::from_millis(20)))
        .on_sighup(false)
        .spawn();
    // Unchanged: nothing happens.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(logs.lines_with(&["reloaded"]).is_empty(), "{}", logs.text());

    // A new modification time, whatever the file system's granularity.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    file.write(&rules("7/min", false));
    assert!(
        eventually(|| key_quota(&reloader) == "7/min").await,
        "no reload on change"
    );
    let reloaded = logs.lines_with(&["INFO", "reloaded", "(file changed)"]);
    assert_eq!(reloaded.len(), 1, "{}", logs.text());
    assert!(
        reloaded[0].contains("1 tier: key 7/min per client; in process; no run-time overrides"),
        "{}",
        reloaded[0]
    );

    tokio::time::sleep(Duration::from_millis(1_100)).await;
    file.write(&rules("7/fortnight", false));
    assert!(
        eventually(|| !logs.lines_with(&["WARN", "refused"]).is_empty()).await,
        "{}",
        logs.text()
    );
    let refused = &logs.lines_with(&["WARN", "reload (file changed) refused, rules unchanged"])[0];
    assert!(refused.contains("tiers[0].quota"), "the place: {refused}");
    assert_eq!(key_quota(&reloader), "7/min");
    watching.abort();
}

#[test]
fn a_reload_reports_dropped_overrides_and_calls_the_hook() {
    let (logs, _guard) = Logs::capture();
    let file = TempFile::new("dropped", &rules("10/min", true));
    let reloader = layer(&file);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let hook = Arc::clone(&seen);
    let watcher = RulesWatcher::new(&file.0, reloader.clone(), read_toml::<LayerConfig>).on_reload(
        move |rules: &LayerConfig, report: &Reloaded| {
            hook.lock()
                .unwrap()
                .push(format!("{} | {report}", rules.tiers[0].quota));
        },
    );
    assert_eq!(watcher.path(), file.0.as_path());
    reloader
        .set_override("key", "ann", Some("1/min".parse().unwrap()))
        .unwrap();
    reloader
        .set_override("burst", "ann", Some("1/s".parse().unwrap()))
        .unwrap();

    // The "burst" tier removed: ann's override there is dropped, logged WARN.
    file.write(&rules("20/min", false));
    let report = watcher.reload("asked").unwrap();
    assert_eq!(report.kept, [("key".to_string(), "ann".to_string())]);
    assert_eq!(report.dropped.len(), 1);
    let line = &logs.lines_with(&["reloaded", "(asked)"])[0];
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("kept: key/ann; dropped: burst/ann (its tier was removed)"),
        "{line}"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        ["20/min | run-time overrides kept: key/ann; dropped: burst/ann (its tier was removed)"]
    );
    assert_eq!(
        reloader.config().tiers[0].overrides["ann"].to_string(),
        "1/min"
    );

    // A refused file: no hook, the error returned and logged.
    file.write(&rules("20/min", false).replace("capacity = 64", "capacity = 65"));
    let e = watcher.reload("asked").unwrap_err().to_string();
    assert!(
        e.contains("tiers[0].capacity: fixed while tier \"key\" lives"),
        "{e}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(
        logs.lines_with(&["WARN", "reload (asked) refused", "capacity"])
            .len(),
        1
    );
}

#[test]
fn errors_of_the_rules_are_placed_within_their_table() {
    let (logs, _guard) = Logs::capture();
    let text = |quota: &str, capacity: usize| {
        format!(
            "[app]\ngreeting = \"hi\"\n[limits]\nkey = {{ client = {{ header = \"x-api-key\" }} }}\n\
             [[limits.tiers]]\nname = \"key\"\nquota = \"{quota}\"\ncapacity = {capacity}\n"
        )
    };
    let file = TempFile::new("within", &text("10/min", 64));
    let layer = read_toml::<File>(&file.0)
        .unwrap()
        .limits
        .build(StdClock::new(), StdClock::HZ)
        .unwrap();
    let greeting = Arc::new(Mutex::new(String::from("hi")));
    let hook = Arc::clone(&greeting);
    let watcher = RulesWatcher::new(&file.0, layer.reloader(), read_toml::<File>)
        .within("limits")
        .on_reload(move |file: &File, _| *hook.lock().unwrap() = file.app.greeting.clone());

    // Refused by the reload (not by the reading): placed under `limits`.
    file.write(&text("10/min", 65));
    let e = watcher.reload("asked").unwrap_err().to_string();
    let at = format!("{}: limits.tiers[0].capacity: ", file.0.display());
    assert!(e.starts_with(&at), "{e}");
    // Refused by the reading: the reader's own place.
    file.write(&text("10/fortnight", 64));
    let e = watcher.reload("asked").unwrap_err().to_string();
    assert!(e.contains("limits.tiers[0].quota"), "{e}");
    assert_eq!(
        *greeting.lock().unwrap(),
        "hi",
        "no hook for a refused file"
    );

    file.write(&text("30/min", 64).replace("\"hi\"", "\"hello\""));
    watcher.reload("asked").unwrap();
    assert_eq!(*greeting.lock().unwrap(), "hello");
    assert_eq!(
        layer.reloader().config().tiers[0].quota.to_string(),
        "30/min"
    );
    // A file that is gone: refused, the rules stay.
    std::fs::remove_file(&file.0).unwrap();
    let e = watcher.reload("asked").unwrap_err().to_string();
    assert!(e.starts_with("cannot read "), "{e}");
    assert_eq!(
        layer.reloader().config().tiers[0].quota.to_string(),
        "30/min"
    );
    assert_eq!(
        logs.lines_with(&["WARN", "refused"]).len(),
        3,
        "{}",
        logs.text()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn with_nothing_to_watch_run_returns() {
    let file = TempFile::new("idle", &rules("10/min", false));
    let watcher = RulesWatcher::new(&file.0, layer(&file), read_toml::<LayerConfig>)
        .poll_every(Some(Duration::ZERO))
        .on_sighup(false);
    tokio::time::timeout(Duration::from_secs(5), watcher.run())
        .await
        .expect("run returns at once");
}

#[cfg(unix)]
#[tokio::test(flavor = "current_thread")]
async fn sighup_reloads() {
    use tokio::signal::unix::{signal, SignalKind};
    // Listening first: a SIGHUP to this process can no longer end it.
    let _listening = signal(SignalKind::hangup()).unwrap();
    let file = TempFile::new("hup", &rules("10/min", false));
    let reloader = layer(&file);
    let watching = RulesWatcher::new(&file.0, reloader.clone(), read_toml::<LayerConfig>)
        .poll_every(None)
        .spawn();
    file.write(&rules("9/min", false));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(key_quota(&reloader), "10/min", "polling is off");
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(sent);
    assert!(
        eventually(|| key_quota(&reloader) == "9/min").await,
        "no reload on SIGHUP"
    );
    watching.abort();
}
