//! TLS on a listener: the server configuration every shard's handshakes
//! read (replaced whole when certificates are reloaded, so connections
//! already open keep their session and new ones get the new certificate)
//! and what the service learns of a handshake.

use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use futures_rustls::rustls;

/// Bytes read from the socket at a time under TLS (rustls asks for a few
/// KiB per call; this buffer turns those into one receive per 64 KiB).
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Bytes of TLS records gathered before a send (rustls hands over one
/// 16 KiB record per write).
pub const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The alert of a failed handshake is sent within this, or not at all.
pub const ALERT_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// The server side of a TLS listener.
pub struct TlsServer {
    current: RwLock<Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsServer")
    }
}

impl TlsServer {
    pub fn new(config: rustls::ServerConfig) -> Arc<TlsServer> {
        Arc::new(TlsServer {
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// The configuration new handshakes use.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the configuration for handshakes from now on.
    pub fn replace(&self, config: rustls::ServerConfig) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
    }
}

/// What a finished handshake tells the service.
#[derive(Debug, Default)]
pub struct TlsInfo {
    /// The client's certificate chain, its own certificate first (DER);
    /// empty when it sent none.
    pub peer_certificates: Vec<Vec<u8>>,
    /// "TLSv1.3", "TLSv1.2".
    pub protocol: Option<&'static str>,
}

impl TlsInfo {
    pub fn of(conn: &rustls::ServerConnection) -> TlsInfo {
        TlsInfo {
            peer_certificates: conn
                .peer_certificates()
                .map(|chain| chain.iter().map(|c| c.as_ref().to_vec()).collect())
                .unwrap_or_default(),
            protocol: conn.protocol_version().map(|v| match v {
                rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
                rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
                _ => "TLS",
            }),
        }
    }
}
