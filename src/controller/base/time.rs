//! Times: Kubernetes timestamps and RFC 3339 strings ↔ planner [`Time`]
//! (seconds since the Unix epoch in the controller).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KubeTime;
use k8s_openapi::jiff::Timestamp;
use muster_planner::Time;

/// The current time as planner time.
pub fn now() -> Time {
    Time(Timestamp::now().as_second())
}

/// A Kubernetes timestamp as planner time.
pub(crate) fn from_kube(t: &KubeTime) -> Time {
    Time(t.0.as_second())
}

/// An RFC 3339 string as planner time; `None` when it does not parse.
pub fn parse(s: &str) -> Option<Time> {
    s.parse::<Timestamp>().ok().map(|t| Time(t.as_second()))
}

/// Planner time as a Kubernetes timestamp (the epoch when out of range).
pub(crate) fn to_kube(t: Time) -> KubeTime {
    KubeTime(Timestamp::from_second(t.0).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Planner time as an RFC 3339 string (seconds precision, UTC).
pub fn format(t: Time) -> String {
    Timestamp::from_second(t.0)
        .map(|ts| ts.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = parse("2026-11-22T03:59:17Z").expect("parses");
        assert_eq!(format(t), "2026-11-22T03:59:17Z");
        assert_eq!(parse("soon"), None);
    }
}
