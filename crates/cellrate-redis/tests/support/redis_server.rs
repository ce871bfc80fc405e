//! A `redis-server` a test owns: started on a free loopback port (or as a
//! one-node Cluster serving every slot), restarted on the same port,
//! frozen (SIGSTOP) and thawed, stopped on drop. Shared by the test crates
//! that need a server of their own (`tests/redis.rs`, `tests/tower_redis.rs`),
//! each of which uses part of it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A redis-server this test owns, on a fixed port so it can be restarted.
pub struct Server {
    bin: String,
    port: u16,
    child: Option<Child>,
    /// More arguments (a one-node Cluster's).
    extra: Vec<String>,
    /// Its working directory, removed on drop (a one-node Cluster's).
    dir: Option<std::path::PathBuf>,
}

impl Server {
    pub fn start(bin: &str) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut s = Server {
            bin: bin.into(),
            port,
            child: None,
            extra: Vec::new(),
            dir: None,
        };
        s.restart();
        s
    }
    /// A one-node Redis Cluster serving every slot, of its own.
    pub fn start_cluster(bin: &str) -> Server {
        // A port whose cluster bus port (port + 10 000) is free too.
        let port = loop {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let p = l.local_addr().unwrap().port();
            if p < 55_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
                break p;
            }
        };
        let dir = std::env::temp_dir().join(format!("cellrate-node-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("nodes.conf");
        let mut s = Server {
            bin: bin.into(),
            port,
            child: None,
            extra: vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                conf.to_string_lossy().into_owned(),
                "--dir".into(),
                dir.to_string_lossy().into_owned(),
            ],
            dir: Some(dir),
        };
        s.restart();
        let mut c = redis::Client::open(s.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let mut add = redis::cmd("CLUSTER");
        add.arg("ADDSLOTS");
        for slot in 0..16_384 {
            add.arg(slot);
        }
        let _: () = add.query(&mut c).unwrap();
        let start = Instant::now();
        loop {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
            if info.contains("cluster_state:ok") {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{info}");
            thread::sleep(Duration::from_millis(20));
        }
    }
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
    pub fn restart(&mut self) {
        let child = Command::new(&self.bin)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let client = redis::Client::open(self.url()).unwrap();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not start", self.port);
    }
    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }
    /// Thaws it (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }
    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        // The shell's own `kill`: no other binary needed.
        let ok = Command::new("sh")
            .args(["-c", &format!("kill {sig} {pid}")])
            .status()
            .expect("sh");
        assert!(ok.success(), "kill {sig} {pid}");
    }
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("sh")
                .args(["-c", &format!("kill -CONT {}", c.id())])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
