//! The local Compute fake for tests (`tests/compute_fake.py`, behind the
//! `test-support` feature): started on 127.0.0.1, stopped when dropped, with
//! its control endpoint for stockouts, quota errors, preemptions and failed
//! answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::compute::GcpOptions;

/// A running fake.
pub struct ComputeFake {
    child: Child,
    _stdin: Option<ChildStdin>,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    addr: String,
}

impl ComputeFake {
    /// Starts a fresh fake.
    pub fn start() -> ComputeFake {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compute_fake.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the Compute fake");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the fake prints its port");
        let port = line
            .trim()
            .strip_prefix("compute=")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        let stdin = child.stdin.take();
        ComputeFake {
            child,
            _stdin: stdin,
            endpoint: format!("http://127.0.0.1:{port}"),
            addr: format!("127.0.0.1:{port}"),
        }
    }

    /// Options pointing a provider at the fake, with anonymous credentials.
    pub fn options(&self) -> GcpOptions {
        GcpOptions {
            endpoint: Some(self.endpoint.clone()),
            anonymous: true,
            initial_backoff: std::time::Duration::from_millis(20),
            poll_interval: std::time::Duration::from_millis(20),
            ..GcpOptions::default()
        }
    }

    /// A control request (`/fake/...`); returns the body.
    pub fn control(&self, method: &str, path: &str) -> String {
        let mut s = TcpStream::connect(&self.addr).expect("fake");
        write!(
            s,
            "{method} /fake/{path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()
    }

    /// `GET` of an API path (e.g. `/compute/v1/projects/P/zones/Z/instances/N`):
    /// the resource as the fake holds it.
    pub fn get(&self, path: &str) -> serde_json::Value {
        let mut s = TcpStream::connect(&self.addr).expect("fake");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap_or_default()
    }

    /// Requests so far by method and path without project, zone and names
    /// (`POST projects/zones/instances`, …).
    pub fn calls(&self) -> serde_json::Value {
        serde_json::from_str(&self.control("GET", "calls")).unwrap_or_default()
    }
}

impl Drop for ComputeFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
