//! `NodeClass` condition `SubnetsUsable`: whether every subnet the class's
//! selectors resolved can take a launch, written with each resolution of a
//! class that resolved subnets (AWS). `False` names the subnets that had
//! no free address when resolved, by zone, and the zones that leaves
//! without a subnet (no launch goes there: a launch planned there is
//! refused as short of capacity, and the gang is planned in another zone).
//! Zones whose launches go into a public subnet, for want of a usable
//! private one, are named in the message either way.
//!
//! The provider decides which subnets a launch may use and reports it with
//! its resolution (`muster_provider_api::ResolvedSubnet::usability`, the
//! rule `ResolvedSubnet::choose` follows); this module only words it.

use muster_provider_api::{Resolution, ResolvedSubnet, SubnetUsability};

/// Reason while every resolved subnet may take launches.
pub(crate) const USABLE: &str = "SubnetsUsable";
/// Reason while some subnets are full and every zone still has another.
pub(crate) const SUBNETS_FULL: &str = "SubnetsFull";
/// Reason while a zone's every subnet is full.
pub(crate) const ZONE_WITHOUT_SUBNET: &str = "ZoneWithoutFreeSubnet";

/// The condition's status, reason and message for what a resolution found;
/// `None` for a class that resolved no subnets (a cloud without them).
pub(crate) fn verdict(r: &Resolution) -> Option<(bool, &'static str, String)> {
    if r.subnets.is_empty() {
        return None;
    }
    Some(words(&ResolvedSubnet::usability(&r.subnets)))
}

fn words(u: &SubnetUsability) -> (bool, &'static str, String) {
    let mut parts = Vec::new();
    if !u.full.is_empty() {
        let full: Vec<String> = u
            .full
            .iter()
            .map(|(id, zone)| format!("{id} ({zone})"))
            .collect();
        parts.push(format!(
            "no free addresses, so no launch goes into {}",
            full.join(", ")
        ));
    }
    if !u.zones_without_subnet.is_empty() {
        parts.push(format!(
            "no subnet with a free address in {}: launches there are refused as short of capacity and gangs are planned in other zones",
            u.zones_without_subnet.join(", ")
        ));
    }
    if !u.public_zones.is_empty() {
        let public: Vec<String> = u
            .public_zones
            .iter()
            .map(|(zone, id)| format!("{zone} ({id})"))
            .collect();
        parts.push(format!(
            "launches go into a public subnet, no private one being usable, in {}",
            public.join(", ")
        ));
    }
    let (ok, reason) = if !u.zones_without_subnet.is_empty() {
        (false, ZONE_WITHOUT_SUBNET)
    } else if !u.full.is_empty() {
        (false, SUBNETS_FULL)
    } else {
        (true, USABLE)
    };
    let message = if parts.is_empty() {
        "every resolved subnet has free addresses".to_string()
    } else {
        parts.join("; ")
    };
    (ok, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, ips: u32, public: bool) -> ResolvedSubnet {
        ResolvedSubnet {
            id: id.into(),
            zone: zone.into(),
            zone_id: None,
            available_ips: Some(ips),
            public: Some(public),
        }
    }

    fn resolution(subnets: Vec<ResolvedSubnet>) -> Resolution {
        Resolution {
            subnets,
            ..Resolution::default()
        }
    }

    #[test]
    fn a_full_subnet_is_named_with_its_zone() {
        let (ok, reason, message) = verdict(&resolution(vec![
            subnet("subnet-1", "us-east-1a", 0, false),
            subnet("subnet-2", "us-east-1a", 200, false),
            subnet("subnet-3", "us-east-1b", 10, false),
        ]))
        .expect("a verdict");
        assert!(!ok);
        assert_eq!(reason, SUBNETS_FULL);
        assert_eq!(
            message,
            "no free addresses, so no launch goes into subnet-1 (us-east-1a)"
        );
    }

    #[test]
    fn a_zone_whose_subnets_are_all_full_is_named() {
        let (ok, reason, message) = verdict(&resolution(vec![
            subnet("subnet-1", "us-east-1a", 0, false),
            subnet("subnet-2", "us-east-1a", 0, true),
            subnet("subnet-3", "us-east-1b", 10, true),
        ]))
        .expect("a verdict");
        assert!(!ok);
        assert_eq!(reason, ZONE_WITHOUT_SUBNET);
        assert!(
            message.contains("subnet-1 (us-east-1a), subnet-2 (us-east-1a)"),
            "{message}"
        );
        assert!(
            message.contains("no subnet with a free address in us-east-1a"),
            "{message}"
        );
        assert!(
            message
                .contains("public subnet, no private one being usable, in us-east-1b (subnet-3)"),
            "{message}"
        );
    }

    #[test]
    fn subnets_with_addresses_are_usable_and_clouds_without_subnets_get_none() {
        let (ok, reason, message) = verdict(&resolution(vec![subnet(
            "subnet-1",
            "us-east-1a",
            5,
            false,
        )]))
        .expect("a verdict");
        assert!(ok);
        assert_eq!(reason, USABLE);
        assert_eq!(message, "every resolved subnet has free addresses");
        assert_eq!(verdict(&Resolution::default()), None);
    }

    #[test]
    fn the_reasons_are_in_the_reason_table() {
        for r in [USABLE, SUBNETS_FULL, ZONE_WITHOUT_SUBNET] {
            assert!(crate::controller::base::reasons::known(r), "{r}");
        }
    }
}
