//! NodeClass resolution: subnets by id or tags, security groups by id, or
//! name and tags (filters `group-id`, `group-name`, `tag:<key>` and
//! `tag-key`, as Karpenter's security group provider builds them), AMIs by
//! id, name (with owner) or tags — the newest image per architecture. Terms
//! are alternatives (a resource matching any term is selected); within a
//! term, every condition must hold. A list of terms that matches nothing is
//! `NotFound` naming the field and its terms.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;
use muster_crds::nodeclass::{AmiSelectorTerm, AwsSelectorTerm, SecurityGroupSelectorTerm};
use muster_provider_api::{ProviderError, ResolvedImage, ResolvedSecurityGroup, ResolvedSubnet};

use crate::client::failure;
use crate::errors::classify;

/// Tag conditions as EC2 filters (`*` matches any value).
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::builder().name("tag-key").values(k).build()
            } else {
                Filter::builder().name(format!("tag:{k}")).values(v).build()
            }
        })
        .collect()
}

/// How a term reads in messages: `id subnet-1` or `tags team=a,env=*`.
pub fn describe_term(
    id: Option<&str>,
    name: Option<&str>,
    tags: Option<&BTreeMap<String, String>>,
) -> String {
    let mut parts = Vec::new();
    if let Some(id) = id {
        parts.push(format!("id {id}"));
    }
    if let Some(n) = name {
        parts.push(format!("name {n}"));
    }
    if let Some(t) = tags {
        let t: Vec<String> = t.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(format!("tags {}", t.join(",")));
    }
    parts.join(" ")
}

fn nothing(field: &str, terms: Vec<String>) -> ProviderError {
    ProviderError::NotFound {
        what: format!("spec.aws.{field} ({})", terms.join("; ")),
    }
}

/// Subnets matching any term.
pub async fn subnets(
    ec2: &aws_sdk_ec2::Client,
    terms: &[AwsSelectorTerm],
) -> Result<Vec<ResolvedSubnet>, ProviderError> {
    let mut out: BTreeMap<String, ResolvedSubnet> = BTreeMap::new();
    for t in terms {
        let mut req = ec2.describe_subnets();
        if let Some(id) = &t.id {
            req = req.filters(Filter::builder().name("subnet-id").values(id).build());
        }
        for f in t.tags.as_ref().map(tag_filters).unwrap_or_default() {
            req = req.filters(f);
        }
        let resp = req.send().await.map_err(|e| classify(&failure(&e), None))?;
        for s in resp.subnets() {
            let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else {
                continue;
            };
            out.insert(
                id.to_string(),
                ResolvedSubnet {
                    id: id.to_string(),
                    zone: zone.to_string(),
                    zone_id: s.availability_zone_id().map(String::from),
                    available_ips: s
                        .available_ip_address_count()
                        .and_then(|n| u32::try_from(n).ok()),
                    public: s.map_public_ip_on_launch(),
                },
            );
        }
    }
    if out.is_empty() {
        return Err(nothing(
            "subnetSelectorTerms",
            terms
                .iter()
                .map(|t| describe_term(t.id.as_deref(), None, t.tags.as_ref()))
                .collect(),
        ));
    }
    Ok(out.into_values().collect())
}

/// Security groups matching any term.
pub async fn security_groups(
    ec2: &aws_sdk_ec2::Client,
    terms: &[SecurityGroupSelectorTerm],
) -> Result<Vec<ResolvedSecurityGroup>, ProviderError> {
    let mut out: BTreeMap<String, ResolvedSecurityGroup> = BTreeMap::new();
    for t in terms {
        let mut req = ec2.describe_security_groups();
        if let Some(id) = &t.id {
            req = req.filters(Filter::builder().name("group-id").values(id).build());
        }
        if let Some(name) = &t.name {
            req = req.filters(Filter::builder().name("group-name").values(name).build());
        }
        for f in t.tags.as_ref().map(tag_filters).unwrap_or_default() {
            req = req.filters(f);
        }
        let resp = req.send().await.map_err(|e| classify(&failure(&e), None))?;
        for g in resp.security_groups() {
            if let Some(id) = g.group_id() {
                out.insert(
                    id.to_string(),
                    ResolvedSecurityGroup {
                        id: id.to_string(),
                        name: g.group_name().map(String::from),
                    },
                );
            }
        }
    }
    if out.is_empty() {
        return Err(nothing(
            "securityGroupSelectorTerms",
            terms
                .iter()
                .map(|t| describe_term(t.id.as_deref(), t.name.as_deref(), t.tags.as_ref()))
                .collect(),
        ));
    }
    Ok(out.into_values().collect())
}

/// The newest image per architecture among those matching any term.
pub async fn images(
    ec2: &aws_sdk_ec2::Client,
    terms: &[AmiSelectorTerm],
) -> Result<Vec<ResolvedImage>, ProviderError> {
    // architecture → (creation date, image)
    let mut newest: BTreeMap<String, (String, ResolvedImage)> = BTreeMap::new();
    for (i, t) in terms.iter().enumerate() {
        if let Some(alias) = &t.alias {
            return Err(ProviderError::Permanent {
                message: format!(
                    "spec.aws.amiSelectorTerms[{i}].alias {alias}: an alias needs spec.aws.cluster \
                     (the image follows the cluster's Kubernetes version); name the cluster or \
                     select the AMI by id, name or tags"
                ),
            });
        }
        let mut req = ec2.describe_images();
        if let Some(id) = &t.id {
            req = req.image_ids(id);
        }
        if let Some(name) = &t.name {
            req = req.filters(Filter::builder().name("name").values(name).build());
        }
        if let Some(owner) = &t.owner {
            req = req.owners(owner);
        }
        for f in t.tags.as_ref().map(tag_filters).unwrap_or_default() {
            req = req.filters(f);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let err = classify(&failure(&e), None);
                if matches!(err, ProviderError::NotFound { .. }) {
                    continue; // an id that does not exist matches nothing
                }
                return Err(err);
            }
        };
        for img in resp.images() {
            let Some(id) = img.image_id() else { continue };
            let arch = img
                .architecture()
                .map(|a| a.as_str().to_string())
                .unwrap_or_else(|| "x86_64".to_string());
            let created = img.creation_date().unwrap_or("").to_string();
            let candidate = ResolvedImage {
                id: id.to_string(),
                name: img.name().map(String::from),
                architecture: Some(arch.clone()),
            };
            let replace = newest
                .get(&arch)
                .is_none_or(|(c, cur)| (created.as_str(), id) > (c.as_str(), cur.id.as_str()));
            if replace {
                newest.insert(arch, (created, candidate));
            }
        }
    }
    if newest.is_empty() {
        return Err(nothing(
            "amiSelectorTerms",
            terms
                .iter()
                .map(|t| describe_term(t.id.as_deref(), t.name.as_deref(), t.tags.as_ref()))
                .collect(),
        ));
    }
    Ok(newest.into_values().map(|(_, i)| i).collect())
}
