//! When the controller-managed serving certificate is issued again: a pure
//! decision over what the Secret holds, the Service's DNS name and the time
//! (no I/O, no clock: `now` is given).
//!
//! The rules follow open-policy-agent/cert-controller
//! (`pkg/rotator/rotator.go`), which Kueue's internal certificate
//! management runs (`pkg/util/cert/cert.go` in kubernetes-sigs/kueue): a CA
//! and a serving certificate it signed live in one Secret (`ca.crt`,
//! `ca.key`, `tls.crt`, `tls.key`); the CA is issued again (and with it the
//! serving certificate) when it is missing, unreadable or no longer valid a
//! lookahead from now; the serving certificate alone when it is unreadable,
//! does not chain to the CA, does not name `SERVICE.NAMESPACE.svc`, or is
//! due. cert-controller judges "due" only by its lookahead (90 days by
//! default); here a certificate is also due once two thirds of its validity
//! have passed, so a short-lived certificate is renewed well before the end
//! whatever the lookahead.

use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// Validity and renewal settings, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// How long a new CA is valid.
    pub ca_validity: i64,
    /// How long a new serving certificate is valid (never past its CA).
    pub cert_validity: i64,
    /// A certificate that would expire within this much time is due.
    pub lookahead: i64,
}

const DAY: i64 = 24 * 3600;

impl Default for Policy {
    /// cert-controller's defaults: a CA of 10 years, serving certificates of
    /// one year, a lookahead of 90 days.
    fn default() -> Policy {
        Policy {
            ca_validity: 3650 * DAY,
            cert_validity: 365 * DAY,
            lookahead: 90 * DAY,
        }
    }
}

/// Why a certificate is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// No Secret, or one without the CA.
    Missing,
    /// A PEM block or key that cannot be read, or a key that does not belong
    /// to its certificate.
    Unparsable,
    /// The CA is due (or expired).
    CaExpiring,
    /// The serving certificate does not name the Service.
    WrongNames,
    /// The serving certificate is not signed by the CA.
    NotSignedByCa,
    /// The serving certificate is due (or expired).
    Due,
}

impl Reason {
    /// A bounded, user-facing reason (logs, metric labels).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "Missing",
            Reason::Unparsable => "Unparsable",
            Reason::CaExpiring => "CAExpiring",
            Reason::WrongNames => "WrongDNSNames",
            Reason::NotSignedByCa => "NotSignedByCA",
            Reason::Due => "Due",
        }
    }
}

/// What to do with the Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep it; decide again at `renew_at` (Unix seconds) at the latest.
    Keep {
        /// When the first of the CA and the serving certificate is due.
        renew_at: i64,
    },
    /// Issue a serving certificate, and a new CA first when `new_ca`.
    Issue {
        /// Why.
        reason: Reason,
        /// The CA is issued again as well.
        new_ca: bool,
    },
}

/// The Secret's four entries, as stored (PEM); `None` where absent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Material<'a> {
    /// `ca.crt`: the current CA first, then possibly the previous one.
    pub ca_crt: Option<&'a [u8]>,
    /// `ca.key`: the current CA's private key.
    pub ca_key: Option<&'a [u8]>,
    /// `tls.crt`: the serving certificate.
    pub tls_crt: Option<&'a [u8]>,
    /// `tls.key`: its private key.
    pub tls_key: Option<&'a [u8]>,
}

/// When a certificate valid from `not_before` to `not_after` is due: two
/// thirds into its validity, or a lookahead before its end, whichever is
/// first.
pub(crate) fn due_at(not_before: i64, not_after: i64, lookahead: i64) -> i64 {
    let two_thirds = not_before + (not_after - not_before).max(0) * 2 / 3;
    two_thirds.min(not_after - lookahead)
}

/// The DER of the first certificate of a PEM text.
pub(crate) fn first_der(pem: &[u8]) -> Option<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let first = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
    Some(first.to_vec())
}

/// The SubjectPublicKeyInfo (DER) of a PEM private key.
fn key_spki(pem: &[u8]) -> Option<Vec<u8>> {
    use rcgen::PublicKeyData;
    let text = std::str::from_utf8(pem).ok()?;
    let key = rcgen::KeyPair::from_pem(text).ok()?;
    Some(key.subject_public_key_info())
}

/// The certificate and its validity, if `pem` holds one whose key is `key`.
fn parse_pair<'a>(der: &'a [u8], key: Option<&[u8]>) -> Option<(X509Certificate<'a>, i64, i64)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let spki = key_spki(key?)?;
    if cert.public_key().raw != spki.as_slice() {
        return None;
    }
    let v = cert.validity();
    let (nb, na) = (v.not_before.timestamp(), v.not_after.timestamp());
    Some((cert, nb, na))
}

fn names(cert: &X509Certificate<'_>) -> Vec<String> {
    match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The decision for the Secret's `material` (`None`: no Secret), the name
/// the API server checks (`SERVICE.NAMESPACE.svc`) and `now` (Unix seconds).
pub fn decide(
    material: Option<&Material<'_>>,
    dns_name: &str,
    policy: &Policy,
    now: i64,
) -> Verdict {
    let issue = |reason, new_ca| Verdict::Issue { reason, new_ca };
    let Some(m) = material else {
        return issue(Reason::Missing, true);
    };
    let Some(ca_crt) = m.ca_crt.filter(|c| !c.is_empty()) else {
        return issue(Reason::Missing, true);
    };
    let Some(ca_der) = first_der(ca_crt) else {
        return issue(Reason::Unparsable, true);
    };
    let Some((ca, ca_nb, ca_na)) = parse_pair(&ca_der, m.ca_key) else {
        return issue(Reason::Unparsable, true);
    };
    let ca_due = due_at(ca_nb, ca_na, policy.lookahead);
    if !ca.is_ca() || now >= ca_due {
        return issue(Reason::CaExpiring, true);
    }
    let Some(leaf_der) = m.tls_crt.and_then(first_der) else {
        return issue(Reason::Unparsable, false);
    };
    let Some((leaf, nb, na)) = parse_pair(&leaf_der, m.tls_key) else {
        return issue(Reason::Unparsable, false);
    };
    if leaf.verify_signature(Some(ca.public_key())).is_err() {
        return issue(Reason::NotSignedByCa, false);
    }
    if !names(&leaf).iter().any(|n| n == dns_name) {
        return issue(Reason::WrongNames, false);
    }
    let leaf_due = due_at(nb, na, policy.lookahead);
    if now >= leaf_due {
        return issue(Reason::Due, false);
    }
    Verdict::Keep {
        renew_at: leaf_due.min(ca_due),
    }
}

#[cfg(test)]
mod tests;
