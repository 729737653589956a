//! TLS listeners: the server configuration built from PEM files
//! (certificate chain, private key, and the CAs client certificates must
//! chain to), Kafka's `ssl.client.auth`, the reload of those files on
//! SIGHUP or when they change, and the principal of a client certificate.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rutomq_shards::tls::{rustls, TlsServer};

use super::x500::{self, PrincipalMapper};

/// Kafka's `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate asked for (the principal is `User:ANONYMOUS`).
    None,
    /// Asked for; a client without one connects as `User:ANONYMOUS`.
    Requested,
    /// A client without a valid certificate is refused.
    Required,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Option<ClientAuth> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => return None,
        })
    }
}

/// Where the TLS listeners' keys come from and what they ask of clients.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    /// PEM: the server's certificate, then its chain.
    pub certificate: PathBuf,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1; not encrypted).
    pub key: PathBuf,
    /// PEM: the CAs client certificates must chain to.
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
    /// Kafka's `ssl.enabled.protocols`: TLSv1.2, TLSv1.3.
    pub protocols: Vec<&'static rustls::SupportedProtocolVersion>,
}

impl TlsSettings {
    /// Parses `ssl.enabled.protocols`.
    pub fn parse_protocols(
        s: &str,
    ) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let v = match p {
                "TLSv1.3" => &rustls::version::TLS13,
                "TLSv1.2" => &rustls::version::TLS12,
                _ => return Err(format!("{p:?} is not TLSv1.2 or TLSv1.3")),
            };
            if !out
                .iter()
                .any(|o: &&rustls::SupportedProtocolVersion| o.version == v.version)
            {
                out.push(v);
            }
        }
        if out.is_empty() {
            return Err("no TLS version enabled".into());
        }
        Ok(out)
    }

    fn files(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.certificate, &self.key]
            .into_iter()
            .chain(self.truststore.as_ref())
    }

    /// Reads the files once and builds the two server configurations from
    /// them: SSL listeners' (asking for client certificates as
    /// `client_auth` says) and SASL_SSL listeners' (asking none).
    pub fn server_configs(&self) -> Result<ServerConfigs, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.certificate)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| format!("{}: {e}", self.certificate.display()))?;
        let leaf = chain
            .first()
            .ok_or_else(|| format!("{}: no certificate", self.certificate.display()))?;
        let summary = x500::summarize(leaf).ok_or_else(|| {
            format!(
                "{}: the first certificate cannot be read",
                self.certificate.display()
            )
        })?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| {
            format!(
                "{}: {e} (an unencrypted PKCS#8, PKCS#1 or SEC1 key)",
                self.key.display()
            )
        })?;
        let builder = || {
            rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&self.protocols)
                .map_err(|e| format!("TLS versions: {e}"))
        };
        let finish =
            |b: rustls::ConfigBuilder<rustls::ServerConfig, rustls::server::WantsServerCert>| {
                b.with_single_cert(chain.clone(), key.clone_key())
                    .map_err(|e| {
                        format!(
                            "{} and {}: {e}",
                            self.certificate.display(),
                            self.key.display()
                        )
                    })
            };
        let ssl = match self.client_auth {
            ClientAuth::None => builder()?.with_no_client_auth(),
            auth => {
                let path = self.truststore.as_ref().ok_or(
                    "--ssl-client-auth requested or required needs --ssl-truststore-location",
                )?;
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?
                {
                    let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                }
                if roots.is_empty() {
                    return Err(format!("{}: no CA certificate", path.display()));
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider.clone(),
                );
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder()?.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| format!("{}: {e}", path.display()))?,
                )
            }
        };
        Ok(ServerConfigs {
            ssl: finish(ssl)?,
            sasl_ssl: finish(builder()?.with_no_client_auth())?,
            summary,
        })
    }

    /// What the files look like now (modification time and length each),
    /// to tell a change.
    fn stamp(&self) -> Vec<Option<(SystemTime, u64)>> {
        self.files()
            .map(|p| {
                std::fs::metadata(p)
                    .ok()
                    .and_then(|m| Some((m.modified().ok()?, m.len())))
            })
            .collect()
    }
}

/// What one reading of the files makes.
pub struct ServerConfigs {
    pub ssl: rustls::ServerConfig,
    pub sasl_ssl: rustls::ServerConfig,
    /// The served certificate's subject and expiry.
    pub summary: x500::CertSummary,
}

/// The TLS state of an agent: the configurations its listeners share, how
/// a certificate names its principal, and the reload counters.
///
/// `--ssl-client-auth` applies to SSL listeners only: on SASL_SSL the
/// client is named by SASL and no certificate is asked for, as Kafka does
/// with a broker-wide `ssl.client.auth`.
pub struct Tls {
    pub settings: TlsSettings,
    /// For SSL listeners.
    pub ssl: Arc<TlsServer>,
    /// For SASL_SSL listeners.
    pub sasl_ssl: Arc<TlsServer>,
    pub mapper: PrincipalMapper,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    /// When the serving certificate expires (seconds since the epoch).
    pub not_after: AtomicI64,
}

impl Tls {
    /// Builds the first configuration (an error here stops the agent).
    pub fn start(settings: TlsSettings, mapping_rules: &str) -> Result<Arc<Tls>, String> {
        let mapper = PrincipalMapper::parse(mapping_rules)
            .map_err(|e| format!("--ssl-principal-mapping-rules: {e}"))?;
        let ServerConfigs {
            ssl,
            sasl_ssl,
            summary,
        } = settings.server_configs()?;
        tracing::info!(subject = %summary.subject, not_after = summary.not_after,
            client_auth = ?settings.client_auth, "TLS certificate loaded");
        Ok(Arc::new(Tls {
            settings,
            ssl: TlsServer::new(ssl),
            sasl_ssl: TlsServer::new(sasl_ssl),
            mapper,
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            not_after: AtomicI64::new(summary.not_after.unwrap_or(0)),
        }))
    }

    /// The server configuration of a listener of `protocol` (`None`:
    /// not a TLS protocol).
    pub fn server_for(&self, protocol: super::SecurityProtocol) -> Option<Arc<TlsServer>> {
        match protocol {
            super::SecurityProtocol::Ssl => Some(self.ssl.clone()),
            super::SecurityProtocol::SaslSsl => Some(self.sasl_ssl.clone()),
            _ => None,
        }
    }

    /// The principal of a client that presented `chain` (its own
    /// certificate first): `User:` and its mapped subject; `User:ANONYMOUS`
    /// without a certificate. `Err(subject)` when no mapping rule takes it
    /// (`"?"`: unreadable): the connection is refused, as Kafka does.
    pub fn principal(&self, chain: &[Vec<u8>]) -> Result<String, String> {
        let Some(leaf) = chain.first() else {
            return Ok(super::session::ANONYMOUS.to_owned());
        };
        let subject = x500::summarize(leaf).ok_or("?")?.subject;
        match self.mapper.map(&subject) {
            Some(name) => Ok(format!("User:{name}")),
            None => Err(subject),
        }
    }

    /// Builds the configuration again from the files; whether it worked.
    fn reload(&self, why: &str) -> bool {
        match self.settings.server_configs() {
            Ok(ServerConfigs {
                ssl,
                sasl_ssl,
                summary,
            }) => {
                self.ssl.replace(ssl);
                self.sasl_ssl.replace(sasl_ssl);
                self.reloads.fetch_add(1, Ordering::Relaxed);
                self.not_after
                    .store(summary.not_after.unwrap_or(0), Ordering::Relaxed);
                tracing::info!(subject = %summary.subject, not_after = summary.not_after, why,
                    "TLS certificate reloaded; new connections use it, open ones keep theirs");
                true
            }
            Err(e) => {
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    why,
                    "cannot reload the TLS certificate, keeping the old one: {e}"
                );
                false
            }
        }
    }
}

/// Reloads the TLS files on SIGHUP and when any of them changes (checked
/// every [`crate::limits::TLS_RELOAD_POLL`]). Runs on the storage runtime
/// until the process ends.
pub async fn keep_certificates(tls: Arc<Tls>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGHUP; TLS files are still reloaded when they change");
            None
        }
    };
    let mut stamp = tls.settings.stamp();
    let mut retry = false;
    loop {
        let hangup = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let signalled = tokio::select! {
            _ = hangup => true,
            _ = tokio::time::sleep(crate::limits::TLS_RELOAD_POLL) => false,
        };
        let now = tls.settings.stamp();
        let changed = now != stamp;
        if !signalled && !changed && !retry {
            continue;
        }
        stamp = now;
        let ok = tls.reload(if signalled { "SIGHUP" } else { "files changed" });
        // A file caught mid-write is read once more at the next poll.
        retry = !ok && changed;
    }
}
