//! A real Prometheus server (the `prometheus` binary, Debian package) that
//! scrapes one target every second, and a minimal client of its query API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running Prometheus; killed on drop.
pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`/metrics`) every second. Panics
    /// with a clear message when the binary is missing.
    pub fn start(target: SocketAddr) -> Prometheus {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("muster-prometheus-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: muster\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("prometheus config");
        let log = dir.join("prometheus.log");
        let mut child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            // port 0: the kernel picks a free one, which Prometheus logs
            .arg("--web.listen-address=127.0.0.1:0")
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus log"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `prometheus` ({e}): install the Debian package `prometheus` \
                     (.ci/run does) or set MUSTER_SKIP_PROMETHEUS=1"
                )
            });
        // web/web.go logs the configured address first ("Start listening
        // for connections", 127.0.0.1:0), then exporter-toolkit the bound
        // one ("Listening on")
        let addr = super::logged_addr(&log, "Listening on", &mut child)
            .parse()
            .expect("a socket address");
        Prometheus { child, addr, dir }
    }

    /// The base URL of its HTTP API, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The value of the single series an instant `query` returns, if any.
    pub fn value(&self, query: &str) -> Option<f64> {
        let path = format!("/api/v1/query?query={}", encode(query));
        let mut sock = TcpStream::connect(self.addr).ok()?;
        let req = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr);
        sock.write_all(req.as_bytes()).ok()?;
        let mut resp = String::new();
        sock.read_to_string(&mut resp).ok()?;
        let body = resp.split_once("\r\n\r\n")?.1;
        let doc: serde_json::Value = serde_json::from_str(body).ok()?;
        let result = doc["data"]["result"].as_array()?;
        if result.len() != 1 {
            return None;
        }
        result[0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
