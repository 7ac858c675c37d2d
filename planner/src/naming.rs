//! Deterministic names for new nodes and idempotency keys for cloud calls.
//!
//! Names are derived from the gang id, the identity of the workload behind it
//! (the Kubernetes Job's UID; empty where a driver has none), the gang's
//! `launch_attempts` and the node's index in the launch set, so a driver that
//! crashes after writing some PoolNodes and plans again gets the same names
//! and keys, while a workload deleted and created again under the same name
//! never gets the names or keys of its predecessor. Every name is
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

/// Six hex digits standing for a workload's UID in names (empty for none).
fn uid_tag(uid: &str) -> String {
    if uid.is_empty() {
        String::new()
    } else {
        format!("{:06x}-", fnv1a64(uid.as_bytes()) & 0xff_ffff)
    }
}

/// Name of the `index`-th new node of launch attempt `attempt` of the gang
/// `gang` whose workload has the UID `uid`.
pub fn new_node_name(gang: &str, uid: &str, attempt: u32, index: usize) -> String {
    bounded_name(gang, &format!("{}a{attempt}-{index}", uid_tag(uid)))
}

/// Idempotency key of the `index`-th new node of a launch attempt: stable
/// across re-plans of the same attempt, different for another workload of the
/// same name (the hash covers the UID), at most 40 characters (fits AWS
/// `ClientToken` and GCP `requestId` rules once hyphenated).
pub fn idempotency_key(gang: &str, uid: &str, attempt: u32, index: usize) -> String {
    let identity = if uid.is_empty() {
        gang.to_string()
    } else {
        format!("{gang}\u{0}{uid}")
    };
    format!(
        "muster-{:016x}-{attempt}-{index}",
        fnv1a64(identity.as_bytes())
    )
}

/// The names and idempotency keys of the new nodes of one launch attempt:
/// what [`new_node_name`] and [`idempotency_key`] give, with the work that
/// depends only on the gang (its slug and hashes) done once per launch
/// instead of once per node.
pub struct NodeNamer {
    /// `dns_slug(gang)`, or `x` when empty (ASCII only).
    slug: String,
    /// The 8 hex digits of the gang's hash a shortened name carries.
    hash: String,
    /// `uid_tag(uid)`.
    uid_tag: String,
    attempt: u32,
    /// The hash in the idempotency key.
    identity: u64,
}

impl NodeNamer {
    /// The namer of launch attempt `attempt` of gang `gang` whose workload
    /// has the UID `uid`.
    pub fn new(gang: &str, uid: &str, attempt: u32) -> NodeNamer {
        let slug = dns_slug(gang);
        let identity = if uid.is_empty() {
            fnv1a64(gang.as_bytes())
        } else {
            fnv1a64(format!("{gang}\u{0}{uid}").as_bytes())
        };
        NodeNamer {
            slug: if slug.is_empty() {
                "x".to_string()
            } else {
                slug
            },
            hash: format!("{:08x}", fnv1a64(gang.as_bytes()) as u32),
            uid_tag: uid_tag(uid),
            attempt,
            identity,
        }
    }

    /// [`new_node_name`] of the `index`-th new node.
    pub fn name(&self, index: usize) -> String {
        const MAX: usize = 63;
        let mut suffix = String::with_capacity(self.uid_tag.len() + 24);
        suffix.push_str(&self.uid_tag);
        suffix.push('a');
        push_decimal(&mut suffix, u64::from(self.attempt));
        suffix.push('-');
        push_decimal(&mut suffix, index as u64);
        let mut out = String::with_capacity(MAX);
        if self.slug.len() + 1 + suffix.len() <= MAX {
            out.push_str(&self.slug);
        } else {
            // The slug is ASCII: a byte count is a character count.
            let keep = MAX.saturating_sub(suffix.len() + self.hash.len() + 2);
            let cut = &self.slug[..keep.min(self.slug.len())];
            out.push_str(cut.trim_end_matches('-'));
            out.push('-');
            out.push_str(&self.hash);
        }
        out.push('-');
        out.push_str(&suffix);
        out
    }

    /// [`idempotency_key`] of the `index`-th new node.
    pub fn key(&self, index: usize) -> String {
        let mut out = String::with_capacity(48);
        out.push_str("muster-");
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for shift in (0..16).rev() {
            out.push(char::from(
                HEX[((self.identity >> (shift * 4)) & 0xf) as usize],
            ));
        }
        out.push('-');
        push_decimal(&mut out, u64::from(self.attempt));
        out.push('-');
        push_decimal(&mut out, index as u64);
        out
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

/// Name of the node that replaces `node` during consolidation.
pub fn replacement_name(node: &str) -> String {
    bounded_name(node, "r")
}

/// Name of the grant request of launch attempt `attempt` of gang `gang`
/// whose workload has the UID `uid`: the request all its flex-start nodes
/// are granted in. An RFC 1035 label (`muster-<16 hex>-<attempt>-grant`,
/// at most 44 characters), stable across re-plans of the attempt and
/// different for another workload of the same name (the hash covers the UID).
pub fn grant_name(gang: &str, uid: &str, attempt: u32) -> String {
    let identity = if uid.is_empty() {
        gang.to_string()
    } else {
        format!("{gang}\u{0}{uid}")
    };
    format!(
        "muster-{:016x}-{attempt}-grant",
        fnv1a64(identity.as_bytes())
    )
}

/// Name of the placement group a launch creates for a gang.
pub fn placement_group_name(gang: &str, attempt: u32) -> String {
    bounded_name(gang, &format!("pg{attempt}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_grant_name_is_an_rfc1035_label_of_the_attempt_and_the_workload() {
        let a = grant_name("team-a/train", "uid-1", 3);
        assert_eq!(a, grant_name("team-a/train", "uid-1", 3));
        assert_ne!(a, grant_name("team-a/train", "uid-2", 3));
        assert_ne!(a, grant_name("team-a/train", "uid-1", 4));
        assert!(a.len() <= 63 && a.starts_with("muster-") && a.ends_with("-grant"));
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        let long = grant_name(&"x".repeat(300), "", u32::MAX);
        assert!(long.len() <= 63, "{long}");
    }

    proptest! {
        /// A [`NodeNamer`] gives the names and keys of the functions it
        /// stands for: short and long ids (shortened names), ids that slug
        /// to nothing, non-ASCII ids, with and without a UID, any attempt
        /// and index.
        #[test]
        fn a_namer_names_as_the_functions_do(
            gang in prop_oneof![
                "[a-zA-Z0-9/_.-]{0,20}",
                "[a-z/-]{40,90}",
                "[ -~]{0,70}",
                "\\PC{0,30}",
            ],
            uid in prop_oneof![Just(String::new()), "[a-f0-9-]{1,36}"],
            attempt in any::<u32>(),
            index in prop_oneof![0usize..40, any::<usize>()],
        ) {
            let namer = NodeNamer::new(&gang, &uid, attempt);
            prop_assert_eq!(namer.name(index), new_node_name(&gang, &uid, attempt, index));
            prop_assert_eq!(namer.key(index), idempotency_key(&gang, &uid, attempt, index));
        }
    }

    #[test]
    fn fnv_matches_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn names_are_dns_safe_and_bounded() {
        assert_eq!(
            new_node_name("team-a/Train_1", "", 0, 2),
            "team-a-train-1-a0-2"
        );
        let long = format!("ns/{}", "x".repeat(200));
        let n = new_node_name(&long, "", 3, 17);
        assert!(n.len() <= 63, "{n}");
        assert!(n.ends_with("-a3-17"));
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        let other = new_node_name(&format!("ns/{}y", "x".repeat(200)), "", 3, 17);
        assert_ne!(n, other);
        assert_eq!(new_node_name("///", "", 0, 0), "x-a0-0");
        assert_eq!(
            idempotency_key("a/b", "", 1, 2),
            idempotency_key("a/b", "", 1, 2)
        );
        assert_ne!(
            idempotency_key("a/b", "", 1, 2),
            idempotency_key("a/b", "", 2, 2)
        );
        assert!(idempotency_key("a/b", "u", u32::MAX, 999).len() <= 40);
    }

    /// The same gang id with another workload UID (a Job deleted and created
    /// again under its name): no name or key of the first is ever reused;
    /// the same UID always gives the same ones.
    #[test]
    fn another_workload_of_the_same_name_gets_other_names_and_keys() {
        let uids = [
            "",
            "6f1c2a9e-0d1b-4c1e-9a51-3b1e2f7c8d90",
            "0a7e0b3c-5f4d-4f0e-8c2b-1d9e6a5b4c3d",
        ];
        let mut names = std::collections::BTreeSet::new();
        let mut keys = std::collections::BTreeSet::new();
        for uid in uids {
            for attempt in 0..3 {
                for index in 0..4 {
                    let n = new_node_name("team-a/train", uid, attempt, index);
                    assert!(
                        n.len() <= 63 && n.ends_with(&format!("a{attempt}-{index}")),
                        "{n}"
                    );
                    assert_eq!(n, new_node_name("team-a/train", uid, attempt, index));
                    assert!(names.insert(n), "name reused");
                    assert!(
                        keys.insert(idempotency_key("team-a/train", uid, attempt, index)),
                        "key reused"
                    );
                }
            }
        }
        let long = format!("ns/{}", "x".repeat(200));
        assert_ne!(
            new_node_name(&long, uids[1], 0, 0),
            new_node_name(&long, uids[2], 0, 0),
            "the UID survives shortening"
        );
    }
}
