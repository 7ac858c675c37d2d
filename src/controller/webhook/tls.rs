//! The webhook's serving certificate: a PEM certificate chain and key read
//! from files (a mounted Secret), read again when the certificate file
//! changes, so a renewed Secret is served without a restart ([`FileCert`]);
//! or held in memory and replaced by whoever reads the Secret from the API
//! server ([`CertSlot`], the controller-managed certificates).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why the serving certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The certificate file is missing, unreadable or holds no certificate.
    #[error("certificate {0}: no PEM certificate could be read")]
    Certificate(PathBuf),
    /// The key file is missing, unreadable or holds no usable key.
    #[error("key {0}: no usable PEM private key could be read")]
    Key(PathBuf),
    /// The TLS configuration was refused.
    #[error("TLS configuration refused")]
    Config,
    /// A PEM certificate chain in memory holds no certificate.
    #[error("no PEM certificate could be read")]
    CertificatePem,
    /// A PEM key in memory holds no usable key.
    #[error("no usable PEM private key could be read")]
    KeyPem,
}

impl CertError {
    /// A bounded, user-facing reason.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            CertError::Certificate(_) => "CertificateUnreadable",
            CertError::Key(_) => "KeyUnreadable",
            CertError::Config => "TlsConfigRefused",
            CertError::CertificatePem => "CertificateUnreadable",
            CertError::KeyPem => "KeyUnreadable",
        }
    }
}

fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, CertError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|_| CertError::Certificate(cert.to_path_buf()))?
        .collect::<Result<_, _>>()
        .map_err(|_| CertError::Certificate(cert.to_path_buf()))?;
    if chain.is_empty() {
        return Err(CertError::Certificate(cert.to_path_buf()));
    }
    let der = PrivateKeyDer::from_pem_file(key).map_err(|_| CertError::Key(key.to_path_buf()))?;
    let signing = provider
        .key_provider
        .load_private_key(der)
        .map_err(|_| CertError::Key(key.to_path_buf()))?;
    Ok(CertifiedKey::new(chain, signing))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Serves the certificate of two files, reloaded when the certificate file's
/// modification time changes; a failed reload keeps the previous one.
#[derive(Debug)]
pub struct FileCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<(Option<SystemTime>, Arc<CertifiedKey>)>,
}

impl FileCert {
    /// Loads the certificate now; fails if it cannot be read.
    pub fn new(cert: PathBuf, key: PathBuf) -> Result<FileCert, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = modified(&cert);
        let ck = load(&cert, &key, &provider)?;
        Ok(FileCert {
            cert,
            key,
            provider,
            current: Mutex::new((stamp, Arc::new(ck))),
        })
    }

    /// A rustls server configuration serving this certificate (ALPN h2 and
    /// HTTP/1.1).
    pub fn server_config(self) -> Result<rustls::ServerConfig, CertError> {
        let provider = self.provider.clone();
        server_config(Arc::new(self), provider)
    }
}

/// A rustls server configuration serving what `resolver` hands out (ALPN
/// h2 and HTTP/1.1).
fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ServerConfig, CertError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| CertError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A serving certificate held in memory: none until the first [`set`]
/// (a handshake then fails, and the replica is not Ready), replaced by each
/// later one. The controller-managed certificates are read from the Secret
/// by every replica and handed here, so no file is written and a renewed
/// certificate is served as soon as the watch delivers it (a mounted Secret
/// is refreshed only at the kubelet's next sync).
///
/// [`set`]: CertSlot::set
#[derive(Debug)]
pub struct CertSlot {
    provider: Arc<CryptoProvider>,
    /// The PEM last set (to skip a reload of the same) and its key.
    current: std::sync::RwLock<Option<(Vec<u8>, Arc<CertifiedKey>)>>,
}

impl Default for CertSlot {
    fn default() -> CertSlot {
        CertSlot {
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            current: std::sync::RwLock::new(None),
        }
    }
}

impl CertSlot {
    /// Serves `chain` (PEM certificates, the serving certificate first) with
    /// `key` from now on; `Ok(true)` when it differs from the one served.
    /// A refused pair leaves the current one in place.
    pub(crate) fn set(&self, chain: &[u8], key: &[u8]) -> Result<bool, CertError> {
        let mut stamp = chain.to_vec();
        stamp.extend_from_slice(key);
        let same = self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|(s, _)| *s == stamp);
        if same {
            return Ok(false);
        }
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<_, _>>()
            .map_err(|_| CertError::CertificatePem)?;
        if certs.is_empty() {
            return Err(CertError::CertificatePem);
        }
        let der = PrivateKeyDer::from_pem_slice(key).map_err(|_| CertError::KeyPem)?;
        let signing = self
            .provider
            .key_provider
            .load_private_key(der)
            .map_err(|_| CertError::KeyPem)?;
        let ck = CertifiedKey::new(certs, signing);
        ck.keys_match().map_err(|_| CertError::KeyPem)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some((stamp, Arc::new(ck)));
        Ok(true)
    }

    /// True once a certificate is served.
    pub(crate) fn loaded(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// A rustls server configuration serving this slot's certificate.
    pub fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, CertError> {
        server_config(self.clone(), self.provider.clone())
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(_, ck)| ck.clone())
    }
}

impl ResolvesServerCert for FileCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().ok()?;
        let stamp = modified(&self.cert);
        if stamp != current.0 {
            match load(&self.cert, &self.key, &self.provider) {
                Ok(ck) => *current = (stamp, Arc::new(ck)),
                Err(e) => tracing::warn!(reason = e.as_str(), "webhook certificate not reloaded"),
            }
        }
        Some(current.1.clone())
    }
}
