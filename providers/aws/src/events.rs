//! EC2 events as EventBridge delivers them to the interruption queue.
//!
//! | `detail-type` | notice |
//! |---|---|
//! | `EC2 Spot Instance Interruption Warning` | spot interruption (two minutes' notice) |
//! | `EC2 Instance Rebalance Recommendation` | rebalance recommendation |
//! | `EC2 Instance State-change Notification` with state `stopping`, `stopped`, `shutting-down` or `terminated` | terminated outside muster |
//!
//! Anything else (other states, other sources, malformed bodies) is not a
//! notice; its message is deleted all the same, so it does not come back.

use muster_planner::Time;
use muster_provider_api::{InterruptionKind, parse_rfc3339};
use serde::Deserialize;

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    time: Option<String>,
    detail: Detail,
}

#[derive(Deserialize)]
struct Detail {
    #[serde(rename = "instance-id")]
    instance_id: String,
    #[serde(default)]
    state: Option<String>,
}

/// A notice read from one message: instance id, kind, when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// EC2 instance id.
    pub instance_id: String,
    /// What happened.
    pub kind: InterruptionKind,
    /// The event's time (seconds since the epoch); `None` when absent.
    pub at: Option<Time>,
}

/// The notice a message body carries, if any.
pub fn parse(body: &str) -> Option<Notice> {
    let e: Event = serde_json::from_str(body).ok()?;
    let kind = match e.detail_type.as_str() {
        "EC2 Spot Instance Interruption Warning" => InterruptionKind::SpotInterruption,
        "EC2 Instance Rebalance Recommendation" => InterruptionKind::RebalanceRecommendation,
        "EC2 Instance State-change Notification" => match e.detail.state.as_deref() {
            Some("stopping" | "stopped" | "shutting-down" | "terminated") => {
                InterruptionKind::Terminated
            }
            _ => return None,
        },
        _ => return None,
    };
    Some(Notice {
        instance_id: e.detail.instance_id,
        kind,
        at: e.time.as_deref().and_then(parse_rfc3339).map(Time),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventbridge_bodies_become_notices() {
        let spot = r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-23T10:00:05Z","region":"us-east-1","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#;
        let n = parse(spot).expect("notice");
        assert_eq!(n.instance_id, "i-0abc");
        assert_eq!(n.kind, InterruptionKind::SpotInterruption);
        assert_eq!(n.at, Some(Time(1_795_428_005)));
        let rebalance = r#"{"detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-1"}}"#;
        assert_eq!(
            parse(rebalance).map(|n| n.kind),
            Some(InterruptionKind::RebalanceRecommendation)
        );
        let stopped = r#"{"detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-2","state":"terminated"}}"#;
        assert_eq!(
            parse(stopped).map(|n| n.kind),
            Some(InterruptionKind::Terminated)
        );
        let running = r#"{"detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-2","state":"running"}}"#;
        assert_eq!(parse(running), None);
        assert_eq!(parse("not json"), None);
        assert_eq!(
            parse(r#"{"detail-type":"AWS Health Event","detail":{"instance-id":"i"}}"#),
            None
        );
    }
}
