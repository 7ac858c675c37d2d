//! A small client of the Prometheus HTTP API: one range query
//! (`GET /api/v1/query_range`), plain HTTP, with a deadline. The response
//! shape is Prometheus' documented one: `{"status":"success","data":
//! {"resultType":"matrix","result":[{"metric":{labels},"values":[[unix
//! seconds, "value"], …]}]}}`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// Why a read from Prometheus failed; bounded, for metric labels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromError {
    /// The URL is not `http://host[:port][/prefix]`.
    #[error("not an http://host[:port][/path] URL: {0}")]
    BadUrl(String),
    /// No connection could be made or it broke.
    #[error("Prometheus unreachable: {0}")]
    Unreachable(String),
    /// No answer within the deadline.
    #[error("Prometheus did not answer within {0:?}")]
    Timeout(Duration),
    /// An HTTP status other than 200.
    #[error("Prometheus answered HTTP {0}: {1}")]
    Status(u16, String),
    /// The body is not the documented JSON.
    #[error("unexpected answer from Prometheus: {0}")]
    BadResponse(String),
}

impl PromError {
    /// The bounded category.
    pub fn as_str(&self) -> &'static str {
        match self {
            PromError::BadUrl(_) => "BadUrl",
            PromError::Unreachable(_) => "Unreachable",
            PromError::Timeout(_) => "Timeout",
            PromError::Status(..) => "HttpStatus",
            PromError::BadResponse(_) => "BadResponse",
        }
    }
}

/// Where the Prometheus API is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    port: u16,
    /// Path prefix without a trailing slash (`/prometheus` behind a proxy).
    prefix: String,
}

impl Endpoint {
    /// Reads `http://host[:port][/prefix]` (port 80 when omitted).
    pub fn parse(url: &str) -> Result<Endpoint, PromError> {
        let bad = || PromError::BadUrl(url.to_string());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || path.contains(['?', '#']) {
            return Err(bad());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h, p.parse::<u16>().map_err(|_| bad())?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() || host.contains('@') {
            return Err(bad());
        }
        Ok(Endpoint {
            host: host.to_string(),
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}:{}{}", self.host, self.port, self.prefix)
    }
}

/// One series of a range query.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Its labels.
    pub(crate) labels: BTreeMap<String, String>,
    /// (unix seconds, value), oldest first.
    pub(crate) values: Vec<(i64, f64)>,
}

/// `query` evaluated every `step` seconds from `start` to `end` (unix
/// seconds), answered within `timeout`.
pub(crate) async fn query_range(
    ep: &Endpoint,
    query: &str,
    start: i64,
    end: i64,
    step: u64,
    timeout: Duration,
) -> Result<Vec<Series>, PromError> {
    let path = format!(
        "{}/api/v1/query_range?query={}&start={start}&end={end}&step={}",
        ep.prefix,
        encode(query),
        step.max(1)
    );
    let body = tokio::time::timeout(timeout, get(ep, &path))
        .await
        .map_err(|_| PromError::Timeout(timeout))??;
    parse_matrix(&body)
}

async fn get(ep: &Endpoint, path: &str) -> Result<(u16, Vec<u8>), PromError> {
    let unreachable = |e: &dyn fmt::Display| PromError::Unreachable(e.to_string());
    let stream = tokio::net::TcpStream::connect((ep.host.as_str(), ep.port))
        .await
        .map_err(|e| unreachable(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(&e))?;
    let driver = tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, format!("{}:{}", ep.host, ep.port))
        .header(hyper::header::ACCEPT, "application/json")
        .header(hyper::header::USER_AGENT, "muster")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| PromError::BadUrl(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| unreachable(&e))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| unreachable(&e))?
        .to_bytes()
        .to_vec();
    driver.abort();
    Ok((status, body))
}

/// The series of a `query_range` answer.
pub(crate) fn parse_matrix((status, body): &(u16, Vec<u8>)) -> Result<Vec<Series>, PromError> {
    let doc: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| PromError::BadResponse(format!("HTTP {status}, not JSON: {e}")))?;
    if *status != 200 || doc["status"] != "success" {
        let why = doc["error"]
            .as_str()
            .unwrap_or("no error given")
            .to_string();
        return Err(PromError::Status(*status, why));
    }
    let result = doc["data"]["result"]
        .as_array()
        .ok_or_else(|| PromError::BadResponse("no data.result list".into()))?;
    let mut out = Vec::with_capacity(result.len());
    for r in result {
        let labels: BTreeMap<String, String> = r["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let values = r["values"]
            .as_array()
            .map(|vs| {
                vs.iter()
                    .filter_map(|p| {
                        let t = p.get(0)?.as_f64()?;
                        let v = p.get(1)?.as_str()?.parse::<f64>().ok()?;
                        Some((t.floor() as i64, v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Series { labels, values });
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_print() {
        let cases = [
            ("http://prom:9090", Some("http://prom:9090")),
            ("http://prom", Some("http://prom:80")),
            (
                "http://prom.monitoring:9090/prometheus/",
                Some("http://prom.monitoring:9090/prometheus"),
            ),
            ("http://127.0.0.1:1", Some("http://127.0.0.1:1")),
            ("https://prom:9090", None),
            ("prom:9090", None),
            ("http://:9090", None),
            ("http://prom:port", None),
            ("http://user@prom", None),
            ("http://prom/?q=1", None),
        ];
        for (url, want) in cases {
            let got = Endpoint::parse(url).ok().map(|e| e.to_string());
            assert_eq!(got.as_deref(), want, "{url}");
        }
    }

    #[test]
    fn matrix_answers_and_errors_read() {
        let ok = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","pod":"p"},"values":[[1700000000,"3"],[1700000060.5,"97"],[1700000120,"NaN"]]}]}}"#;
        let s = parse_matrix(&(200, ok.to_vec())).expect("parses");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].labels["gpu"], "0");
        assert_eq!(
            s[0].values[..2],
            [(1_700_000_000, 3.0), (1_700_000_060, 97.0)]
        );
        assert!(s[0].values[2].1.is_nan());
        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        let e = parse_matrix(&(400, bad.to_vec())).expect_err("refused");
        assert_eq!(e.as_str(), "HttpStatus");
        assert!(e.to_string().contains("parse error"));
        let e = parse_matrix(&(502, b"<html>bad gateway</html>".to_vec())).expect_err("not json");
        assert_eq!(e.as_str(), "BadResponse");
    }
}
