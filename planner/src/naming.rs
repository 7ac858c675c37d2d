//! Deterministic names for new nodes and idempotency keys for cloud calls.
//!
//! Names are derived from the gang id, the gang's `launch_attempts` and the
//! node's index in the launch set, so a driver that crashes after writing
//! some PoolNodes and plans again gets the same names and keys. Every name is
//! lower case, DNS-safe and at most 63 characters; long ids are shortened
//! and suffixed with a stable hand-written FNV-1a hash (never
//! `DefaultHasher`, whose output may change between Rust releases).

/// 64-bit FNV-1a hash of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `s` as a DNS label fragment: lower-case `a-z0-9-`, no leading or trailing
/// dash, runs of other characters collapsed into one dash.
pub fn dns_slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut dash = false;
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            dash = false;
        } else if !dash && !out.is_empty() {
            out.push('-');
            dash = true;
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Joins a slug and a suffix into a name of at most 63 characters: when the
/// slug is too long it is cut and an 8-hex-digit hash of the full input is
/// inserted, so distinct long ids stay distinct.
pub fn bounded_name(base: &str, suffix: &str) -> String {
    const MAX: usize = 63;
    let slug = dns_slug(base);
    let slug = if slug.is_empty() {
        "x".to_string()
    } else {
        slug
    };
    let full = format!("{slug}-{suffix}");
    if full.len() <= MAX {
        return full;
    }
    let hash = format!("{:08x}", fnv1a64(base.as_bytes()) as u32);
    let keep = MAX.saturating_sub(suffix.len() + hash.len() + 2);
    let cut: String = slug.chars().take(keep).collect();
    let cut = cut.trim_end_matches('-');
    format!("{cut}-{hash}-{suffix}")
}

/// Name of the `index`-th new node of a gang's launch attempt `attempt`.
pub fn new_node_name(gang: &str, attempt: u32, index: usize) -> String {
    bounded_name(gang, &format!("a{attempt}-{index}"))
}

/// Idempotency key of the `index`-th new node of a launch attempt: stable
/// across re-plans of the same attempt, at most 40 characters (fits AWS
/// `ClientToken` and GCP `requestId` rules once hyphenated).
pub fn idempotency_key(gang: &str, attempt: u32, index: usize) -> String {
    format!("muster-{:016x}-{attempt}-{index}", fnv1a64(gang.as_bytes()))
}

/// Name of the node that replaces `node` during consolidation.
pub fn replacement_name(node: &str) -> String {
    bounded_name(node, "r")
}

/// Name of the placement group a launch creates for a gang.
pub fn placement_group_name(gang: &str, attempt: u32) -> String {
    bounded_name(gang, &format!("pg{attempt}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn names_are_dns_safe_and_bounded() {
        assert_eq!(new_node_name("team-a/Train_1", 0, 2), "team-a-train-1-a0-2");
        let long = format!("ns/{}", "x".repeat(200));
        let n = new_node_name(&long, 3, 17);
        assert!(n.len() <= 63, "{n}");
        assert!(n.ends_with("-a3-17"));
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        let other = new_node_name(&format!("ns/{}y", "x".repeat(200)), 3, 17);
        assert_ne!(n, other);
        assert_eq!(new_node_name("///", 0, 0), "x-a0-0");
        assert_eq!(idempotency_key("a/b", 1, 2), idempotency_key("a/b", 1, 2));
        assert_ne!(idempotency_key("a/b", 1, 2), idempotency_key("a/b", 2, 2));
        assert!(idempotency_key("a/b", u32::MAX, 999).len() <= 64);
    }
}
