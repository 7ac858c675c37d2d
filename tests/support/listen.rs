//! The address a child process listens on, read from its log: a child
//! given `127.0.0.1:0` binds a port the kernel picks, so no other test can
//! take it between a pick and the bind, as one could with a port picked
//! free beforehand. Also included by `tests/helm/rendered.rs`, whose test
//! crates do not all have `support`.

use std::process::Child;
use std::time::{Duration, Instant};

/// The first `127.0.0.1:PORT` (PORT not 0) on a line of `log` that
/// contains `message`, read until `child` exits (a panic) or 60 s pass.
pub fn logged_addr(log: &std::path::Path, message: &str, child: &mut Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .filter(|l| l.contains(message))
            .find_map(loopback_addr);
        if let Some(addr) = found {
            return addr;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("exited ({status}) before logging {message:?}:\n{text}");
        }
        assert!(
            Instant::now() < deadline,
            "no {message:?} line with an address within 60 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first `127.0.0.1:PORT` in `line` with a port other than 0.
fn loopback_addr(line: &str) -> Option<String> {
    line.match_indices("127.0.0.1:").find_map(|(i, m)| {
        let digits: String = line[i + m.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let port: u16 = digits.parse().ok()?;
        (port != 0).then(|| format!("127.0.0.1:{port}"))
    })
}
