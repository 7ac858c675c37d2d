//! The webhook's serving certificate: a PEM certificate chain and key read
//! from files (a mounted Secret), read again when the certificate file
//! changes, so a renewed Secret is served without a restart.

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
}

impl CertError {
    /// A bounded, user-facing reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            CertError::Certificate(_) => "CertificateUnreadable",
            CertError::Key(_) => "KeyUnreadable",
            CertError::Config => "TlsConfigRefused",
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
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|_| CertError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
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
