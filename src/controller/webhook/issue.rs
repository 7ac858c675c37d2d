//! Issues the webhook's CA and serving certificates (rcgen, ECDSA P-256).
//!
//! As cert-controller does (`pkg/rotator/rotator.go`): every certificate
//! starts an hour before it is issued, so a replica whose clock is a little
//! behind still accepts it; the serving certificate is for server
//! authentication only and names the Service. Unlike cert-controller, a
//! serving certificate never outlives its CA, and a new CA is added in front
//! of the previous one in `ca.crt` while that one is still valid, so the
//! caBundle trusts both during the change.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::controller::webhook::rotation::{Policy, first_der};

/// How far back a new certificate's validity starts (clock skew).
const BACKDATE: i64 = 3600;

/// Why a certificate could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// Key generation or signing failed.
    #[error("signing failed")]
    Sign,
    /// The CA of the Secret cannot sign (unreadable certificate or key).
    #[error("the CA cannot be read")]
    Ca,
    /// A DNS name or a time is out of range.
    #[error("invalid certificate parameters")]
    Params,
}

impl IssueError {
    /// A bounded, user-facing reason.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            IssueError::Sign => "SigningFailed",
            IssueError::Ca => "CAUnreadable",
            IssueError::Params => "InvalidParameters",
        }
    }
}

/// The four entries of the Secret, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The CA bundle: the current CA, then the previous one while valid.
    pub ca_crt: String,
    /// The current CA's key.
    pub ca_key: String,
    /// The serving certificate.
    pub tls_crt: String,
    /// Its key.
    pub tls_key: String,
}

fn at(unix: i64) -> Result<time::OffsetDateTime, IssueError> {
    time::OffsetDateTime::from_unix_timestamp(unix).map_err(|_| IssueError::Params)
}

/// The DNS names of the serving certificate of Service `service` in
/// `namespace`: the short forms and `SERVICE.NAMESPACE.svc`, which the API
/// server checks.
pub fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A new self-signed CA valid from now (less the backdate) for the
/// policy's CA validity: (certificate PEM, key PEM).
pub(crate) fn new_ca(
    name: &str,
    policy: &Policy,
    now: i64,
) -> Result<(String, String), IssueError> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(DnType::OrganizationName, "muster");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = at(now - BACKDATE)?;
    params.not_after = at(now + policy.ca_validity)?;
    let key = KeyPair::generate().map_err(|_| IssueError::Sign)?;
    let cert = params.self_signed(&key).map_err(|_| IssueError::Sign)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `names`, signed by the CA (`ca_crt`'s first
/// certificate, key `ca_key`), valid for the policy's certificate validity
/// but never past the CA: (certificate PEM, key PEM).
pub(crate) fn serving(
    ca_crt: &str,
    ca_key: &str,
    names: Vec<String>,
    policy: &Policy,
    now: i64,
) -> Result<(String, String), IssueError> {
    let ca_der = first_der(ca_crt.as_bytes()).ok_or(IssueError::Ca)?;
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).map_err(|_| IssueError::Ca)?;
    let ca_end = ca.validity().not_after.timestamp();
    let signing = KeyPair::from_pem(ca_key).map_err(|_| IssueError::Ca)?;
    let issuer =
        Issuer::from_ca_cert_der(&ca_der.as_slice().into(), signing).map_err(|_| IssueError::Ca)?;
    let common = names.get(2).or(names.first()).cloned().unwrap_or_default();
    let mut params = CertificateParams::new(names).map_err(|_| IssueError::Params)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common);
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = at(now - BACKDATE)?;
    params.not_after = at((now + policy.cert_validity).min(ca_end))?;
    let key = KeyPair::generate().map_err(|_| IssueError::Sign)?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|_| IssueError::Sign)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// What the Secret holds after issuing: with `new_ca`, a new CA (the
/// previous `ca.crt`'s first certificate kept behind it while still valid at
/// `now`), else the current CA of `old`; a serving certificate signed by it.
pub fn issue(
    old: Option<(&str, &str)>,
    new_ca_needed: bool,
    names: Vec<String>,
    ca_name: &str,
    policy: &Policy,
    now: i64,
) -> Result<Issued, IssueError> {
    let (ca_crt, ca_key) = match old {
        Some((crt, key)) if !new_ca_needed => (crt.to_string(), key.to_string()),
        _ => {
            let (crt, key) = new_ca(ca_name, policy, now)?;
            let previous = old.and_then(|(crt, _)| still_valid_first(crt, now));
            (format!("{crt}{}", previous.unwrap_or_default()), key)
        }
    };
    let (tls_crt, tls_key) = serving(&ca_crt, &ca_key, names, policy, now)?;
    Ok(Issued {
        ca_crt,
        ca_key,
        tls_crt,
        tls_key,
    })
}

/// The first certificate of a PEM text, as PEM, if it is valid at `now`.
fn still_valid_first(pem: &str, now: i64) -> Option<String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()?
        .ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let v = cert.validity();
    if v.not_before.timestamp() > now || v.not_after.timestamp() <= now {
        return None;
    }
    let body = base64::engine::Engine::encode(&base64::engine::general_purpose::STANDARD, &*der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).ok()?);
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    Some(out)
}
