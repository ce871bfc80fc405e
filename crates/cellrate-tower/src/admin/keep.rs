//! Overrides set through the endpoint, kept in a file so that a restart
//! restores them ([`Admin::keep_overrides`](super::Admin::keep_overrides)).
//!
//! * The file holds [`OverrideSet`] in the application's serde format. It
//!   is rewritten after every change the endpoint accepts (under the
//!   endpoint's change lock, so writes follow the changes' order), to a
//!   temporary file beside it, then renamed over it: a reader never sees
//!   half a file.
//! * At start each override in the file is set again; one whose tier no
//!   longer exists, or that the rules refuse, is logged and left out.
//! * A failed write is logged; the change it follows stays in force.

use std::path::{Path, PathBuf};

use tracing::{error, warn};

use crate::reload::{OverrideSet, Reload, Reloader};

/// How the set is rendered.
pub(super) type RenderSet = Box<dyn Fn(&OverrideSet) -> Result<String, String> + Send + Sync>;

/// Where the overrides are kept, and how.
pub(super) struct Keep {
    path: PathBuf,
    render: RenderSet,
}

/// Why [`Admin::keep_overrides`](super::Admin::keep_overrides) could not
/// read its file (a missing file is not an error: nothing to restore).
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
/// use cellrate_tower::{Admin, AdminToken};
/// let layer = toml::from_str::<LayerConfig>(r#"
///     key = { client = { header = "x-api-key" } }
///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
/// "#).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
/// let file = std::env::temp_dir().join("cellrate-doc-bad-overrides.toml");
/// std::fs::write(&file, "[key]\nacct_1 = 5\n").unwrap();
/// let e = Admin::new(layer.reloader(), AdminToken::new("change-me").unwrap())
///     .keep_overrides(&file, toml::to_string, |text| toml::from_str(text))
///     .unwrap_err();
/// assert_eq!(e.path(), file.as_path());
/// # std::fs::remove_file(file).unwrap();
/// ```
#[derive(Debug)]
pub struct KeepError {
    path: PathBuf,
    reason: String,
}

impl KeepError {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl core::fmt::Display for KeepError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "overrides file {}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for KeepError {}

impl Keep {
    /// Reads `path` (if it exists) with `parse`, sets each override it
    /// holds through `reloader`, and returns where to keep them.
    pub(super) fn restore<C: cellrate::Clock + Send + Sync + 'static, B: Reload>(
        path: PathBuf,
        render: RenderSet,
        parse: impl Fn(&str) -> Result<OverrideSet, String>,
        reloader: &Reloader<C, B>,
    ) -> Result<Keep, KeepError> {
        let fail = |reason: String| KeepError {
            path: path.clone(),
            reason,
        };
        let set = match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text).map_err(fail)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => OverrideSet::new(),
            Err(e) => return Err(fail(e.to_string())),
        };
        for (tier, clients) in &set {
            for (client, quota) in clients {
                if let Err(e) = reloader.set_override(tier, client, Some(*quota)) {
                    warn!(
                        %tier, %client, quota = %quota, file = %path.display(),
                        "admin: a kept override is not restored: {e}"
                    );
                }
            }
        }
        let keep = Keep { path, render };
        keep.save(&reloader.run_time_overrides());
        Ok(keep)
    }

    /// Writes `set` over the file (through a temporary file and a rename).
    pub(super) fn save(&self, set: &OverrideSet) {
        let written = (self.render)(set).and_then(|text| {
            let mut tmp = self.path.clone().into_os_string();
            tmp.push(".tmp");
            std::fs::write(&tmp, text)
                .and_then(|()| std::fs::rename(&tmp, &self.path))
                .map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            error!(file = %self.path.display(), "admin: the overrides cannot be kept: {e}");
        }
    }
}
