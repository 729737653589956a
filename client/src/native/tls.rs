//! TLS to brokers with rustls (the `ring` provider): the broker's chain is
//! checked against the configured CA certificates (or the system's), its
//! name against the host the client dialled (Kafka's
//! `ssl.endpoint.identification.algorithm=https`, on by default), and a
//! client certificate is offered when one is configured (mutual TLS).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// PEM text, in a file or inline.
#[derive(Clone, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    Inline(String),
}

impl std::fmt::Debug for Pem {
    /// Never prints inline PEM (it may hold a private key).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(p) => write!(f, "File({})", p.display()),
            Pem::Inline(_) => write!(f, "Inline(..)"),
        }
    }
}

impl Pem {
    fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Pem::File(p) => std::fs::read(p)
                .map_err(|e| Error::Config(format!("TLS: reading {}: {e}", p.display()))),
            Pem::Inline(s) => Ok(s.as_bytes().to_vec()),
        }
    }

    fn certificates(&self, what: &str) -> Result<Vec<CertificateDer<'static>>> {
        let bytes = self.bytes()?;
        let certs = CertificateDer::pem_slice_iter(&bytes)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Config(format!("TLS: {what} {self:?}: {e}")))?;
        if certs.is_empty() {
            return Err(Error::Config(format!(
                "TLS: {what} {self:?} holds no CERTIFICATE block"
            )));
        }
        Ok(certs)
    }
}

/// TLS settings (`security.protocol=SSL` / `SASL_SSL`). Immutable once
/// built; the rustls configuration is made once, on first use, and shared
/// by clones.
#[derive(Clone)]
pub struct TlsSettings {
    ca: Option<Pem>,
    client_cert: Option<(Pem, Pem)>,
    verify_hostname: bool,
    config: Arc<OnceLock<std::result::Result<Arc<ClientConfig>, String>>>,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings::new()
    }
}

impl PartialEq for TlsSettings {
    fn eq(&self, o: &Self) -> bool {
        self.ca == o.ca
            && self.client_cert == o.client_cert
            && self.verify_hostname == o.verify_hostname
    }
}
impl Eq for TlsSettings {}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca", &self.ca)
            .field("client_cert", &self.client_cert.as_ref().map(|c| &c.0))
            .field("verify_hostname", &self.verify_hostname)
            .finish()
    }
}

impl TlsSettings {
    /// Trusts the system's CA certificates, checks the broker's name, and
    /// offers no client certificate.
    pub fn new() -> TlsSettings {
        TlsSettings {
            ca: None,
            client_cert: None,
            verify_hostname: true,
            config: Arc::default(),
        }
    }

    /// `ssl.truststore.location` / `ssl.ca.location`: trust only the CA
    /// certificates in this PEM file.
    pub fn with_ca_pem_file(self, path: impl Into<PathBuf>) -> Self {
        self.ca(Some(Pem::File(path.into())))
    }

    /// `ssl.ca.pem`: trust only these CA certificates.
    pub fn with_ca_pem(self, pem: impl Into<String>) -> Self {
        self.ca(Some(Pem::Inline(pem.into())))
    }

    /// Mutual TLS: present this certificate chain (leaf first) and its
    /// private key (PKCS#8, PKCS#1 or SEC1, unencrypted).
    pub fn with_client_cert(mut self, chain: Pem, key: Pem) -> Self {
        self.client_cert = Some((chain, key));
        self.config = Arc::default();
        self
    }

    /// `ssl.endpoint.identification.algorithm=` (empty): accept a broker
    /// certificate that does not name the host dialled. The chain is still
    /// checked against the trusted CAs.
    pub fn without_hostname_verification(mut self) -> Self {
        self.verify_hostname = false;
        self.config = Arc::default();
        self
    }

    fn ca(mut self, ca: Option<Pem>) -> Self {
        self.ca = ca;
        self.config = Arc::default();
        self
    }

    pub fn ca_pem(&self) -> Option<&Pem> {
        self.ca.as_ref()
    }

    pub fn client_cert_pem(&self) -> Option<&(Pem, Pem)> {
        self.client_cert.as_ref()
    }

    pub fn verifies_hostname(&self) -> bool {
        self.verify_hostname
    }

    /// The rustls configuration (built on first use; an error names the
    /// file or setting at fault).
    pub fn client_config(&self) -> Result<Arc<ClientConfig>> {
        self.config
            .get_or_init(|| self.build().map_err(|e| e.to_string()))
            .clone()
            .map_err(Error::Config)
    }

    fn build(&self) -> Result<Arc<ClientConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        match &self.ca {
            Some(pem) => {
                for c in pem.certificates("CA certificates")? {
                    roots
                        .add(c)
                        .map_err(|e| Error::Config(format!("TLS: CA certificate {pem:?}: {e}")))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(Error::Config(format!(
                        "TLS: no system CA certificates found ({} errors); name a CA file with TlsSettings::with_ca_pem_file",
                        found.errors.len()
                    )));
                }
            }
        }
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| Error::Config(format!("TLS: {e}")))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?;
        let builder = if self.verify_hostname {
            builder.with_webpki_verifier(verifier)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
        };
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain_der = chain.certificates("client certificate chain")?;
                let key_der = PrivateKeyDer::from_pem_slice(&key.bytes()?)
                    .map_err(|e| Error::Config(format!("TLS: private key {key:?}: {e}")))?;
                builder
                    .with_client_auth_cert(chain_der, key_der)
                    .map_err(|e| Error::Config(format!("TLS: client certificate {chain:?}: {e}")))?
            }
        };
        Ok(Arc::new(config))
    }
}

/// The TLS handshake over `tcp` to `addr` ("host:port"; the host is the
/// name the broker's certificate must carry).
pub async fn handshake(
    tcp: TcpStream,
    addr: &str,
    tls: &TlsSettings,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let config = tls.client_config()?;
    let host = addr
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(addr)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| Error::Config(format!("TLS: {host:?} is not a server name: {e}")))?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| {
            // A refused certificate or a failed negotiation is not worth
            // retrying; a lost connection is.
            match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                Some(t) => Error::Tls(format!("to {addr}: {t}")),
                None => Error::Io(e),
            }
        })
}

/// Checks the chain but not the name (hostname verification off).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name after the chain: this error means the
        // chain was good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
