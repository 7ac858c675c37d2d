//! Instance names and provider ids.
//!
//! GCE names match `[a-z]([-a-z0-9]{0,61}[a-z0-9])?`. The name of the
//! instance launched for a PoolNode is derived only from the PoolNode's
//! idempotency key, so a retried launch finds (and adopts) the instance an
//! earlier attempt created instead of creating a second one.

/// Longest GCE resource name.
pub const MAX_NAME_LEN: usize = 63;

/// The instance name for an idempotency key: `muster-` followed by the key
/// lowercased with every character outside `[a-z0-9-]` turned into `-`;
/// when that is longer than 63 characters, or when mapping lost
/// information, the name is cut and ends in a 16-hex-digit FNV-1a hash of
/// the whole key so distinct keys stay distinct.
pub fn instance_name(idempotency_key: &str) -> String {
    let mapped: String = idempotency_key
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let lossless = mapped == idempotency_key;
    let plain = format!("muster-{mapped}");
    if lossless && plain.len() <= MAX_NAME_LEN && !plain.ends_with('-') {
        return plain;
    }
    let hash = format!("{:016x}", fnv1a(idempotency_key.as_bytes()));
    let keep = MAX_NAME_LEN - hash.len() - 1;
    let head: String = plain.chars().take(keep).collect();
    format!("{}-{hash}", head.trim_end_matches('-'))
}

/// Whether `name` is a valid GCE resource name.
pub fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME_LEN
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.last().is_some_and(|b| *b != b'-')
}

/// The provider id of an instance, as the GCE cloud provider sets it on the
/// Node: `gce://<project>/<zone>/<name>`.
pub fn provider_id(project: &str, zone: &str, name: &str) -> String {
    format!("gce://{project}/{zone}/{name}")
}

/// A provider id split into project, zone and instance name; `None` when it
/// is not a `gce://` id with exactly three non-empty parts.
pub fn parse_provider_id(id: &str) -> Option<(&str, &str, &str)> {
    let rest = id.strip_prefix("gce://")?;
    let mut parts = rest.split('/');
    let (project, zone, name) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || project.is_empty() || zone.is_empty() || name.is_empty() {
        return None;
    }
    Some((project, zone, name))
}

/// 64-bit FNV-1a: stable across releases and platforms, unlike std's hasher.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_deterministic_and_distinct() {
        let keys = [
            "pn-abc123",
            "PoolNode/Team_A.7",
            "x",
            &"k".repeat(200),
            &format!("{}a", "k".repeat(200)),
            "ends-with-",
            "trailing.",
        ];
        let names: Vec<String> = keys.iter().map(|k| instance_name(k)).collect();
        for (key, name) in keys.iter().zip(&names) {
            assert!(is_valid_name(name), "{key:?} -> {name:?} is not a GCE name");
            assert_eq!(name, &instance_name(key), "not deterministic for {key:?}");
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "collision among {names:?}");
        assert_eq!(names[0], "muster-pn-abc123");
    }

    #[test]
    fn keys_differing_only_in_mapped_characters_get_different_names() {
        assert_ne!(instance_name("a.b"), instance_name("a-b"));
        assert_ne!(instance_name("A"), instance_name("a"));
    }

    #[test]
    fn validity_rules() {
        for (name, ok) in [
            ("a", true),
            ("a-1", true),
            ("1a", false),
            ("a-", false),
            ("A", false),
            ("", false),
            (&"a".repeat(64), false),
            (&"a".repeat(63), true),
        ] {
            assert_eq!(is_valid_name(name), ok, "{name:?}");
        }
    }

    #[test]
    fn provider_ids_round_trip() {
        let id = provider_id("proj-1", "us-central1-a", "muster-x");
        assert_eq!(id, "gce://proj-1/us-central1-a/muster-x");
        assert_eq!(
            parse_provider_id(&id),
            Some(("proj-1", "us-central1-a", "muster-x"))
        );
        for bad in ["aws:///x", "gce://p/z", "gce://p/z/n/extra", "gce:///z/n"] {
            assert_eq!(parse_provider_id(bad), None, "{bad}");
        }
    }
}
