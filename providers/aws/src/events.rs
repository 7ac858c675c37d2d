//! EC2 and AWS Health events as EventBridge delivers them to the
//! interruption queue.
//!
//! | `source` | `detail-type` | notice |
//! |---|---|---|
//! | `aws.ec2` | `EC2 Spot Instance Interruption Warning` | spot interruption (two minutes' notice) |
//! | `aws.ec2` | `EC2 Instance Rebalance Recommendation` | rebalance recommendation |
//! | `aws.ec2` | `EC2 Instance State-change Notification` with state `stopping`, `stopped`, `shutting-down` or `terminated` | terminated outside muster |
//! | `aws.health` | `AWS Health Event` with `detail.service` `EC2` and `detail.eventTypeCategory` `scheduledChange` | scheduled maintenance, one notice per instance id in `detail.affectedEntities[].entityValue` |
//!
//! The Health event is read as Karpenter reads it (its `scheduledchange`
//! message): other services and other categories (`issue`,
//! `accountNotification`) are not notices.
//!
//! Anything else (other states, other sources, malformed bodies) is not a
//! notice; its message is deleted all the same, so it does not come back.

use muster_planner::Time;
use muster_provider_api::{InterruptionKind, parse_rfc3339};
use serde::Deserialize;

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    source: Option<String>,
    #[serde(rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    time: Option<String>,
    detail: Detail,
}

#[derive(Deserialize)]
struct Detail {
    /// EC2 events: the instance.
    #[serde(rename = "instance-id", default)]
    instance_id: Option<String>,
    /// EC2 state-change events: the new state.
    #[serde(default)]
    state: Option<String>,
    /// Health events: the service (`EC2`).
    #[serde(default)]
    service: Option<String>,
    /// Health events: `scheduledChange`, `issue`, `accountNotification`.
    #[serde(rename = "eventTypeCategory", default)]
    event_type_category: Option<String>,
    /// Health events: what the event is about (instance ids for EC2).
    #[serde(rename = "affectedEntities", default)]
    affected_entities: Vec<AffectedEntity>,
}

#[derive(Deserialize)]
struct AffectedEntity {
    #[serde(rename = "entityValue", default)]
    entity_value: Option<String>,
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

/// The notices a message body carries: none, one, or (an AWS Health event
/// naming several instances) one per instance.
pub fn parse(body: &str) -> Vec<Notice> {
    let Ok(e) = serde_json::from_str::<Event>(body) else {
        return Vec::new();
    };
    let at = e.time.as_deref().and_then(parse_rfc3339).map(Time);
    let one = |kind| -> Vec<Notice> {
        e.detail
            .instance_id
            .iter()
            .map(|id| Notice {
                instance_id: id.clone(),
                kind,
                at,
            })
            .collect()
    };
    match e.detail_type.as_str() {
        "EC2 Spot Instance Interruption Warning" => one(InterruptionKind::SpotInterruption),
        "EC2 Instance Rebalance Recommendation" => one(InterruptionKind::RebalanceRecommendation),
        "EC2 Instance State-change Notification" => match e.detail.state.as_deref() {
            Some("stopping" | "stopped" | "shutting-down" | "terminated") => {
                one(InterruptionKind::Terminated)
            }
            _ => Vec::new(),
        },
        "AWS Health Event"
            if e.source.as_deref() == Some("aws.health")
                && e.detail.service.as_deref() == Some("EC2")
                && e.detail.event_type_category.as_deref() == Some("scheduledChange") =>
        {
            let mut ids: Vec<&str> = e
                .detail
                .affected_entities
                .iter()
                .filter_map(|a| a.entity_value.as_deref())
                .filter(|v| !v.is_empty())
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter()
                .map(|id| Notice {
                    instance_id: id.to_string(),
                    kind: InterruptionKind::ScheduledMaintenance,
                    at,
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str) -> Option<Notice> {
        let mut all = parse(body);
        assert!(all.len() <= 1, "{all:?}");
        all.pop()
    }

    #[test]
    fn eventbridge_bodies_become_notices() {
        let spot = r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-23T10:00:05Z","region":"us-east-1","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#;
        let n = one(spot).expect("notice");
        assert_eq!(n.instance_id, "i-0abc");
        assert_eq!(n.kind, InterruptionKind::SpotInterruption);
        assert_eq!(n.at, Some(Time(1_795_428_005)));
        let rebalance = r#"{"detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-1"}}"#;
        assert_eq!(
            one(rebalance).map(|n| n.kind),
            Some(InterruptionKind::RebalanceRecommendation)
        );
        let stopped = r#"{"detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-2","state":"terminated"}}"#;
        assert_eq!(
            one(stopped).map(|n| n.kind),
            Some(InterruptionKind::Terminated)
        );
        let running = r#"{"detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-2","state":"running"}}"#;
        assert_eq!(one(running), None);
        assert_eq!(one("not json"), None);
        assert_eq!(
            one(r#"{"detail-type":"EC2 Spot Instance Interruption Warning","detail":{}}"#),
            None
        );
        assert_eq!(
            one(r#"{"detail-type":"AWS Health Event","detail":{"instance-id":"i"}}"#),
            None
        );
    }

    /// An AWS Health event as EventBridge delivers it (the shape of the
    /// `aws.health` `AWS Health Event` schema), with the given service,
    /// category and affected instance ids.
    fn health(service: &str, category: &str, ids: &[&str]) -> String {
        let entities: Vec<serde_json::Value> = ids
            .iter()
            .map(|id| serde_json::json!({"entityValue": id}))
            .collect();
        serde_json::json!({
            "version": "0",
            "id": "7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type": "AWS Health Event",
            "source": "aws.health",
            "account": "123456789012",
            "time": "2026-11-23T10:00:05Z",
            "region": "us-east-1",
            "resources": ids,
            "detail": {
                "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_1",
                "service": service,
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "eventTypeCategory": category,
                "startTime": "Mon, 30 Nov 2026 10:00:00 GMT",
                "endTime": "Mon, 30 Nov 2026 12:00:00 GMT",
                "eventDescription": [{"language": "en_US", "latestDescription": "EC2 has detected degradation of the underlying hardware hosting your instance."}],
                "affectedEntities": entities
            }
        })
        .to_string()
    }

    #[test]
    fn a_scheduled_change_to_one_instance_is_scheduled_maintenance() {
        let got = parse(&health("EC2", "scheduledChange", &["i-0abc"]));
        assert_eq!(
            got,
            vec![Notice {
                instance_id: "i-0abc".into(),
                kind: InterruptionKind::ScheduledMaintenance,
                at: Some(Time(1_795_428_005)),
            }]
        );
    }

    #[test]
    fn a_scheduled_change_to_several_instances_is_one_notice_each() {
        let got = parse(&health(
            "EC2",
            "scheduledChange",
            &["i-0b", "i-0a", "i-0c", "i-0a"],
        ));
        let ids: Vec<&str> = got.iter().map(|n| n.instance_id.as_str()).collect();
        assert_eq!(ids, ["i-0a", "i-0b", "i-0c"]);
        assert!(
            got.iter()
                .all(|n| n.kind == InterruptionKind::ScheduledMaintenance)
        );
    }

    #[test]
    fn health_events_of_other_services_are_not_notices() {
        assert_eq!(parse(&health("RDS", "scheduledChange", &["db-1"])), []);
        assert_eq!(parse(&health("EBS", "scheduledChange", &["vol-1"])), []);
    }

    #[test]
    fn health_events_of_other_categories_are_not_notices() {
        for category in ["issue", "accountNotification", "investigation", ""] {
            assert_eq!(
                parse(&health("EC2", category, &["i-0abc"])),
                [],
                "{category}"
            );
        }
    }

    #[test]
    fn health_events_need_the_health_source() {
        let forged = health("EC2", "scheduledChange", &["i-0abc"]).replace("aws.health", "custom");
        assert_eq!(parse(&forged), []);
    }
}
