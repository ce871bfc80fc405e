//! The log lines a test's code writes through `tracing`, collected for
//! the test to read (no ANSI colours, one event per line).

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Once};

/// The lines written so far, shared with the subscriber's writer.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

thread_local! {
    /// Where this thread's events go while a test captures them.
    static CURRENT: RefCell<Option<Logs>> = const { RefCell::new(None) };
}

/// The global subscriber's writer: this thread's capture, if any.
struct ThisThread;

impl std::io::Write for ThisThread {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        CURRENT.with(|c| {
            if let Some(logs) = &*c.borrow() {
                logs.0.lock().unwrap().extend_from_slice(bytes);
            }
        });
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Ends a capture when dropped.
pub struct Capture(());

impl Drop for Capture {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

impl Logs {
    /// Collects every event of this thread (level `INFO` and above) until
    /// the guard is dropped: a current-thread runtime's tasks included.
    ///
    /// One global subscriber writes each event to its thread's capture. A
    /// subscriber per thread (`tracing::subscriber::set_default`) can miss
    /// events: a callsite another test thread registers at the same time
    /// may cache an interest that leaves this thread's subscriber out.
    pub fn capture() -> (Logs, Capture) {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::INFO)
                .with_writer(|| ThisThread)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in the tests that capture logs");
        });
        let logs = Logs::default();
        CURRENT.with(|c| *c.borrow_mut() = Some(logs.clone()));
        (logs, Capture(()))
    }

    /// Everything collected.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines that have every one of `parts`.
    pub fn lines_with(&self, parts: &[&str]) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .map(String::from)
            .collect()
    }
}
