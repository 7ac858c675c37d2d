//! What a provider resolved from its NodeClass: the concrete subnets,
//! security groups, images and zones its selectors matched. The controller
//! copies it into the NodeClass status; a selector that matches nothing is a
//! [`ProviderError::NotFound`](crate::ProviderError::NotFound) naming the
//! selector, which becomes a `Ready=False` condition.

use serde::{Deserialize, Serialize};

/// A subnet a selector matched (AWS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedSubnet {
    /// Subnet id.
    pub id: String,
    /// Zone name, e.g. `us-east-1a`.
    pub zone: String,
    /// Zone id, e.g. `use1-az1`, when the cloud reports it.
    pub zone_id: Option<String>,
    /// Free addresses when resolved, when the cloud reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_ips: Option<u32>,
    /// Instances launched into it get a public address by default (a public
    /// subnet), when the cloud reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<bool>,
}

impl ResolvedSubnet {
    /// The subnet a launch in `zone` goes into, chosen as Karpenter does
    /// (`pkg/providers/subnet`: the zone's subnet with the most free
    /// addresses): among the subnets of `zone` that have a free address (or
    /// report none), private ones before public ones, then the most free
    /// addresses, then the lowest id. `None` when the zone has no usable
    /// subnet.
    pub fn choose<'a>(subnets: &'a [ResolvedSubnet], zone: &str) -> Option<&'a ResolvedSubnet> {
        subnets
            .iter()
            .filter(|s| s.zone == zone && s.available_ips != Some(0))
            .min_by(|a, b| {
                let key = |s: &ResolvedSubnet| {
                    (
                        s.public == Some(true),
                        std::cmp::Reverse(s.available_ips.unwrap_or(0)),
                    )
                };
                key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
            })
    }

    /// Which of `subnets` take no launch and which zones that leaves
    /// without one, by the rule [`ResolvedSubnet::choose`] follows.
    pub fn usability(subnets: &[ResolvedSubnet]) -> SubnetUsability {
        let zones: std::collections::BTreeSet<&str> =
            subnets.iter().map(|s| s.zone.as_str()).collect();
        let mut out = SubnetUsability::default();
        for zone in zones {
            match ResolvedSubnet::choose(subnets, zone) {
                None => out.zones_without_subnet.push(zone.to_string()),
                Some(s) if s.public == Some(true) => {
                    out.public_zones.push((zone.to_string(), s.id.clone()))
                }
                Some(_) => {}
            }
        }
        let mut full: Vec<&ResolvedSubnet> = subnets
            .iter()
            .filter(|s| s.available_ips == Some(0))
            .collect();
        full.sort_by(|a, b| (&a.zone, &a.id).cmp(&(&b.zone, &b.id)));
        out.full = full
            .into_iter()
            .map(|s| (s.id.clone(), s.zone.clone()))
            .collect();
        out
    }
}

/// What [`ResolvedSubnet::usability`] found: the subnets no launch goes
/// into and why, and the zones that leaves without a subnet. Empty when
/// every resolved subnet may take launches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetUsability {
    /// Subnets with no free address when resolved, `(id, zone)`, by zone
    /// and id: never chosen.
    pub full: Vec<(String, String)>,
    /// Zones none of whose subnets has a free address: no launch goes there
    /// (a launch planned there is refused as short of capacity).
    pub zones_without_subnet: Vec<String>,
    /// Zones whose launches go into a public subnet, `(zone, subnet id)`,
    /// because no private subnet of the zone was selected or has a free
    /// address. Usable, but the node gets a public address unless the
    /// NodeClass says otherwise.
    pub public_zones: Vec<(String, String)>,
}

impl SubnetUsability {
    /// True when every resolved subnet may take launches.
    pub fn all_usable(&self) -> bool {
        self.full.is_empty() && self.zones_without_subnet.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, ips: Option<u32>, public: Option<bool>) -> ResolvedSubnet {
        ResolvedSubnet {
            id: id.into(),
            zone: zone.into(),
            zone_id: None,
            available_ips: ips,
            public,
        }
    }

    #[test]
    fn private_subnets_with_the_most_free_addresses_come_first() {
        let all = [
            subnet("subnet-a", "z1", Some(4000), Some(true)),
            subnet("subnet-b", "z1", Some(10), Some(false)),
            subnet("subnet-c", "z1", Some(200), Some(false)),
            subnet("subnet-d", "z2", Some(0), Some(false)),
            subnet("subnet-e", "z2", Some(5), Some(true)),
            subnet("subnet-f", "z3", Some(0), None),
        ];
        let pick = |zone| ResolvedSubnet::choose(&all, zone).map(|s| s.id.as_str());
        // private before public, then the most free addresses
        assert_eq!(pick("z1"), Some("subnet-c"));
        // a full subnet is never chosen; a public one beats none
        assert_eq!(pick("z2"), Some("subnet-e"));
        assert_eq!(pick("z3"), None);
        assert_eq!(pick("z4"), None);
        // equal figures: the lowest id, whatever the order listed
        let tie = [
            subnet("subnet-2", "z", Some(9), Some(false)),
            subnet("subnet-1", "z", Some(9), Some(false)),
        ];
        assert_eq!(
            ResolvedSubnet::choose(&tie, "z").map(|s| s.id.as_str()),
            Some("subnet-1")
        );
    }

    #[test]
    fn full_subnets_and_the_zones_they_leave_without_one_are_named() {
        let all = [
            subnet("subnet-a", "z1", Some(4000), Some(false)),
            subnet("subnet-b", "z1", Some(0), Some(false)),
            subnet("subnet-d", "z2", Some(0), Some(false)),
            subnet("subnet-c", "z2", Some(0), Some(true)),
            subnet("subnet-e", "z3", Some(7), Some(true)),
            subnet("subnet-f", "z4", None, None),
        ];
        let u = ResolvedSubnet::usability(&all);
        assert_eq!(
            u.full,
            [
                ("subnet-b".to_string(), "z1".to_string()),
                ("subnet-c".to_string(), "z2".to_string()),
                ("subnet-d".to_string(), "z2".to_string()),
            ]
        );
        assert_eq!(u.zones_without_subnet, ["z2"]);
        assert_eq!(u.public_zones, [("z3".to_string(), "subnet-e".to_string())]);
        assert!(!u.all_usable());
        // a subnet that reports no figure is usable
        let fine = ResolvedSubnet::usability(&all[4..]);
        assert!(fine.all_usable(), "{fine:?}");
    }
}

/// A security group a selector matched (AWS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedSecurityGroup {
    /// Group id.
    pub id: String,
    /// Group name.
    pub name: Option<String>,
}

/// An image a selector matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedImage {
    /// Image id (AWS AMI id) or self link (GCP).
    pub id: String,
    /// Image name.
    pub name: Option<String>,
    /// CPU architecture, e.g. `x86_64`.
    pub architecture: Option<String>,
}

/// Everything a provider resolved from its NodeClass. Fields a cloud has no
/// notion of stay empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// Subnets (AWS).
    pub subnets: Vec<ResolvedSubnet>,
    /// Security groups (AWS).
    pub security_groups: Vec<ResolvedSecurityGroup>,
    /// Images.
    pub images: Vec<ResolvedImage>,
    /// Zones machines may be placed in.
    pub zones: Vec<String>,
}
