use crate::controller::webhook::issue::{Issued, dns_names, issue};
use crate::controller::webhook::rotation::*;

const NOW: i64 = 1_800_000_000;
const NAME: &str = "muster-webhook.muster-system.svc";

fn policy(ca_days: i64, cert_days: i64, lookahead_days: i64) -> Policy {
    Policy {
        ca_validity: ca_days * DAY,
        cert_validity: cert_days * DAY,
        lookahead: lookahead_days * DAY,
    }
}

fn issued(service: &str, p: &Policy, at: i64) -> Issued {
    issue(None, true, dns_names(service, "muster-system"), "ca", p, at).expect("issued")
}

fn material(i: &Issued) -> Material<'_> {
    Material {
        ca_crt: Some(i.ca_crt.as_bytes()),
        ca_key: Some(i.ca_key.as_bytes()),
        tls_crt: Some(i.tls_crt.as_bytes()),
        tls_key: Some(i.tls_key.as_bytes()),
    }
}

fn reissue(reason: Reason, new_ca: bool) -> Verdict {
    Verdict::Issue { reason, new_ca }
}

#[test]
fn due_at_is_two_thirds_or_the_lookahead_whichever_is_first() {
    // (validity days, lookahead days, due after days)
    for (validity, lookahead, due) in [
        (90, 10, 60),
        (300, 90, 200),
        (365, 150, 215),
        (30, 20, 10),
        (3, 0, 2),
    ] {
        assert_eq!(
            due_at(NOW, NOW + validity * DAY, lookahead * DAY),
            NOW + due * DAY,
            "{validity} days, lookahead {lookahead}"
        );
    }
}

#[test]
fn decisions_over_the_secret() {
    let p = policy(300, 90, 10);
    let good = issued("muster-webhook", &p, NOW);
    let other = issued("muster-webhook", &p, NOW);
    let wrong_name = issued("other", &p, NOW);
    let short_ca = issued("muster-webhook", &policy(30, 90, 10), NOW);
    let leaf_due = due_at(NOW - 3600, NOW + 90 * DAY, 10 * DAY);
    let m = material(&good);
    let garbage = b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
    // (case, material, now, verdict)
    let cases: Vec<(&str, Option<Material<'_>>, i64, Verdict)> = vec![
        ("no Secret", None, NOW, reissue(Reason::Missing, true)),
        (
            "empty Secret",
            Some(Material::default()),
            NOW,
            reissue(Reason::Missing, true),
        ),
        (
            "fresh",
            Some(m),
            NOW + DAY,
            Verdict::Keep { renew_at: leaf_due },
        ),
        (
            "serving certificate due",
            Some(m),
            leaf_due,
            reissue(Reason::Due, false),
        ),
        (
            "serving certificate expired",
            Some(m),
            NOW + 100 * DAY,
            reissue(Reason::Due, false),
        ),
        (
            "CA due before its serving certificate",
            Some(material(&short_ca)),
            NOW + 21 * DAY,
            reissue(Reason::CaExpiring, true),
        ),
        (
            "serving certificate for another Service",
            Some(material(&wrong_name)),
            NOW + DAY,
            reissue(Reason::WrongNames, false),
        ),
        (
            "serving certificate of another CA",
            Some(Material {
                tls_crt: Some(other.tls_crt.as_bytes()),
                tls_key: Some(other.tls_key.as_bytes()),
                ..m
            }),
            NOW + DAY,
            reissue(Reason::NotSignedByCa, false),
        ),
        (
            "serving key of another certificate",
            Some(Material {
                tls_key: Some(other.tls_key.as_bytes()),
                ..m
            }),
            NOW + DAY,
            reissue(Reason::Unparsable, false),
        ),
        (
            "unreadable serving certificate",
            Some(Material {
                tls_crt: Some(garbage),
                ..m
            }),
            NOW + DAY,
            reissue(Reason::Unparsable, false),
        ),
        (
            "no serving certificate",
            Some(Material {
                tls_crt: None,
                tls_key: None,
                ..m
            }),
            NOW + DAY,
            reissue(Reason::Unparsable, false),
        ),
        (
            "unreadable CA",
            Some(Material {
                ca_crt: Some(garbage),
                ..m
            }),
            NOW + DAY,
            reissue(Reason::Unparsable, true),
        ),
        (
            "CA key of another CA",
            Some(Material {
                ca_key: Some(other.ca_key.as_bytes()),
                ..m
            }),
            NOW + DAY,
            reissue(Reason::Unparsable, true),
        ),
        (
            "a serving certificate is no CA",
            Some(Material {
                ca_crt: Some(good.tls_crt.as_bytes()),
                ca_key: Some(good.tls_key.as_bytes()),
                ..m
            }),
            NOW + DAY,
            reissue(Reason::CaExpiring, true),
        ),
    ];
    for (case, material, now, want) in cases {
        assert_eq!(decide(material.as_ref(), NAME, &p, now), want, "{case}");
    }
}

#[test]
fn a_long_lookahead_makes_a_certificate_due_before_two_thirds() {
    // 90 days of validity, a lookahead of 50: due after 40 days, not 60
    let p = policy(300, 90, 50);
    let i = issued("muster-webhook", &p, NOW);
    let m = material(&i);
    let due = NOW + 40 * DAY; // the end (NOW + 90 days) less the lookahead
    assert_eq!(
        decide(Some(&m), NAME, &p, NOW + 39 * DAY),
        Verdict::Keep { renew_at: due }
    );
    assert_eq!(
        decide(Some(&m), NAME, &p, NOW + 45 * DAY),
        reissue(Reason::Due, false)
    );
}

#[test]
fn a_renewed_serving_certificate_keeps_the_ca_and_is_kept() {
    let p = policy(300, 90, 10);
    let first = issued("muster-webhook", &p, NOW);
    let later = NOW + 70 * DAY;
    let again = issue(
        Some((&first.ca_crt, &first.ca_key)),
        false,
        dns_names("muster-webhook", "muster-system"),
        "ca",
        &p,
        later,
    )
    .expect("renewed");
    assert_eq!(again.ca_crt, first.ca_crt);
    assert_eq!(again.ca_key, first.ca_key);
    assert_ne!(again.tls_crt, first.tls_crt);
    assert!(matches!(
        decide(Some(&material(&again)), NAME, &p, later + DAY),
        Verdict::Keep { .. }
    ));
}

#[test]
fn a_new_ca_keeps_the_previous_one_in_the_bundle_while_valid() {
    let p = policy(300, 90, 10);
    let first = issued("muster-webhook", &p, NOW);
    let later = NOW + 250 * DAY;
    let rotated = issue(
        Some((&first.ca_crt, &first.ca_key)),
        true,
        dns_names("muster-webhook", "muster-system"),
        "ca",
        &p,
        later,
    )
    .expect("rotated");
    assert_ne!(rotated.ca_key, first.ca_key);
    let blocks = rotated.ca_crt.matches("BEGIN CERTIFICATE").count();
    assert_eq!(blocks, 2, "new CA, then the previous one");
    assert!(rotated.ca_crt.ends_with(first.ca_crt.as_str()));
    assert!(matches!(
        decide(Some(&material(&rotated)), NAME, &p, later + DAY),
        Verdict::Keep { .. }
    ));
    // once the previous CA expired it is not carried over again
    let much_later = NOW + 400 * DAY;
    let again = issue(
        Some((&first.ca_crt, &first.ca_key)),
        true,
        dns_names("muster-webhook", "muster-system"),
        "ca",
        &p,
        much_later,
    )
    .expect("rotated");
    assert_eq!(again.ca_crt.matches("BEGIN CERTIFICATE").count(), 1);
}

#[test]
fn a_serving_certificate_never_outlives_its_ca() {
    let p = policy(30, 365, 0);
    let i = issued("muster-webhook", &p, NOW);
    let der = first_der(i.tls_crt.as_bytes()).expect("der");
    let (_, leaf) = x509_parser::parse_x509_certificate(&der).expect("leaf");
    assert_eq!(leaf.validity().not_after.timestamp(), NOW + 30 * DAY);
    // and it chains to the CA, names the Service, is for server authentication
    let ca_der = first_der(i.ca_crt.as_bytes()).expect("ca");
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).expect("ca");
    assert!(ca.is_ca());
    assert!(leaf.verify_signature(Some(ca.public_key())).is_ok());
    assert!(names(&leaf).contains(&NAME.to_string()));
    let eku = leaf
        .extended_key_usage()
        .expect("eku")
        .expect("eku present");
    assert!(eku.value.server_auth);
}
