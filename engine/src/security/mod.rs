//! Security: named listeners with their protocols, SASL authentication
//! (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the SCRAM credentials every
//! agent keeps a copy of.
//!
//! A listener's protocol decides what a connection must do before it is
//! served: PLAINTEXT nothing (its principal is `User:ANONYMOUS`), SSL a
//! TLS handshake ([`tls`]; the principal from the client's certificate,
//! `User:ANONYMOUS` without one), SASL_PLAINTEXT a SASL exchange
//! ([`session`]), SASL_SSL both (the principal from SASL). Credentials live in PostgreSQL
//! (salted, never a password) and are loaded whole into [`Credentials`]:
//! a login is never a PostgreSQL round trip, and a change reaches every
//! agent by `rutomq_credentials` notifications, or within
//! [`crate::limits::CREDENTIALS_REFRESH`] if one is lost.

pub mod acl;
pub mod authorizer;
pub mod scram;
pub mod session;
pub mod tls;
pub mod tokens;
pub mod users;
pub mod x500;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::RwLock;

use rutomq_meta::security::ScramRow;

pub use scram::{Credential, Mechanism};

/// Kafka's `security.protocol` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        Some(match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One named listener: where it binds, what clients are told, and its
/// protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: i32,
}

/// A SASL mechanism served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    Scram(Mechanism),
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::Scram(Mechanism::Sha256),
        SaslMechanism::Scram(Mechanism::Sha512),
    ];

    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    pub fn from_name(s: &str) -> Option<SaslMechanism> {
        SaslMechanism::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// The agent's security settings.
#[derive(Clone, Debug)]
pub struct SecurityConfig {
    pub listeners: Vec<Listener>,
    /// Kafka's `sasl.enabled.mechanisms`.
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// The TLS listeners' certificate (when there is one).
    pub tls: Option<tls::TlsSettings>,
    /// Kafka's `ssl.principal.mapping.rules`.
    pub principal_mapping_rules: String,
    /// Kafka's `connections.max.reauth.ms` (`None`: 0, sessions never
    /// expire).
    pub reauth: Option<std::time::Duration>,
    /// The authorizer's settings (`None`: no authorizer, as Kafka without
    /// `authorizer.class.name`).
    pub authorizer: Option<acl::AuthorizerConfig>,
    /// Delegation tokens' settings (`None`: no secret key, tokens off).
    pub tokens: Option<tokens::TokenConfig>,
}

/// Parses Kafka's `listeners` / `advertised.listeners` syntax,
/// `NAME://HOST:PORT[,NAME://HOST:PORT...]`, into (name, host, port).
pub fn parse_listener_list(s: &str) -> Result<Vec<(String, String, u16)>, String> {
    let mut out: Vec<(String, String, u16)> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, addr) = item
            .split_once("://")
            .ok_or_else(|| format!("listener {item:?} is not NAME://HOST:PORT"))?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("listener {item:?} has no port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("listener {item:?} has a bad port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = name.to_ascii_uppercase();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "listener name {name:?} must be letters, digits, '_' or '-'"
            ));
        }
        if out.iter().any(|(n, _, _)| *n == name) {
            return Err(format!("listener {name} is named twice"));
        }
        out.push((name, host.to_owned(), port));
    }
    if out.is_empty() {
        return Err("no listener given".into());
    }
    Ok(out)
}

/// Parses `NAME:PROTOCOL[,NAME:PROTOCOL...]`
/// (`listener.security.protocol.map`).
pub fn parse_protocol_map(s: &str) -> Result<HashMap<String, SecurityProtocol>, String> {
    let mut out = HashMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, proto) = item
            .split_once(':')
            .ok_or_else(|| format!("{item:?} is not NAME:PROTOCOL"))?;
        let proto = SecurityProtocol::parse(proto).ok_or_else(|| {
            format!("{proto:?} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        })?;
        out.insert(name.to_ascii_uppercase(), proto);
    }
    Ok(out)
}

/// The listeners of `--listeners`, `--advertised-listeners` and
/// `--listener-security-protocol-map`: a listener named after a protocol
/// has that protocol unless the map says otherwise; any other name must be
/// in the map. A listener not advertised is advertised at its bind
/// address.
pub fn resolve_listeners(
    listeners: &str,
    advertised: Option<&str>,
    protocol_map: Option<&str>,
) -> Result<Vec<Listener>, String> {
    let binds = parse_listener_list(listeners)?;
    let adv = advertised
        .map(parse_listener_list)
        .transpose()?
        .unwrap_or_default();
    let map = protocol_map
        .map(parse_protocol_map)
        .transpose()?
        .unwrap_or_default();
    for (name, _, _) in &adv {
        if !binds.iter().any(|(n, _, _)| n == name) {
            return Err(format!("advertised listener {name} is not a listener"));
        }
    }
    binds
        .into_iter()
        .map(|(name, host, port)| {
            let protocol = map
                .get(&name)
                .copied()
                .or_else(|| SecurityProtocol::parse(&name))
                .ok_or_else(|| {
                    format!("listener {name} has no protocol: add it to --listener-security-protocol-map")
                })?;
            let bind_host = if host.is_empty() { "0.0.0.0" } else { host.as_str() };
            let bind: SocketAddr = format!("{bind_host}:{port}")
                .parse()
                .or_else(|_| {
                    use std::net::ToSocketAddrs;
                    (bind_host, port)
                        .to_socket_addrs()
                        .ok()
                        .and_then(|mut a| a.next())
                        .ok_or(())
                })
                .map_err(|_| format!("listener {name}: cannot resolve {bind_host:?}"))?;
            let (adv_host, adv_port) = match adv.iter().find(|(n, _, _)| *n == name) {
                Some((_, h, p)) => (h.clone(), *p as i32),
                None => (bind.ip().to_string(), port as i32),
            };
            Ok(Listener {
                name,
                protocol,
                bind,
                advertised_host: adv_host,
                advertised_port: adv_port,
            })
        })
        .collect()
}

/// Every SCRAM credential, by (user, mechanism): the agent's copy, read by
/// every shard at login (rare; never per request) and replaced whole when
/// PostgreSQL announces a change.
#[derive(Default)]
pub struct Credentials {
    by_user: RwLock<HashMap<(String, Mechanism), Credential>>,
}

impl Credentials {
    pub fn lookup(&self, user: &str, m: Mechanism) -> Option<Credential> {
        self.by_user
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(user.to_owned(), m))
            .cloned()
    }

    /// Replaces the copy with `rows` (rows of unknown mechanisms are
    /// skipped).
    pub fn replace(&self, rows: Vec<ScramRow>) {
        let map = rows
            .into_iter()
            .filter_map(|r| {
                let m = Mechanism::from_code(i8::try_from(r.mechanism).ok()?)?;
                Some((
                    (r.user, m),
                    Credential {
                        salt: r.salt,
                        stored_key: r.stored_key,
                        server_key: r.server_key,
                        iterations: r.iterations,
                    },
                ))
            })
            .collect();
        *self.by_user.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    pub fn len(&self) -> usize {
        self.by_user.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Loads the credentials once, before the listeners open.
pub fn reload_credentials(
    rt: &tokio::runtime::Runtime,
    meta: &rutomq_meta::Meta,
    credentials: &Credentials,
) -> Result<(), rutomq_meta::MetaError> {
    rt.block_on(load_into(meta, credentials))
}

async fn load_into(
    meta: &rutomq_meta::Meta,
    credentials: &Credentials,
) -> Result<(), rutomq_meta::MetaError> {
    let (rows, cut) = meta.scram_load().await?;
    if cut {
        tracing::warn!(
            loaded = rows.len(),
            "more SCRAM credentials than an agent loads; users past the limit cannot log in"
        );
    }
    credentials.replace(rows);
    Ok(())
}

/// Keeps the agent's copy current: reloads on every `rutomq_credentials`
/// notice and every `CREDENTIALS_REFRESH`.
pub async fn keep_credentials(
    meta: rutomq_meta::Meta,
    credentials: std::sync::Arc<Credentials>,
    changed: std::sync::Arc<tokio::sync::Notify>,
) {
    let every = crate::limits::CREDENTIALS_REFRESH;
    crate::control::keep("SCRAM credentials", every, changed, || {
        load_into(&meta, &credentials)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_resolve_with_kafka_syntax() {
        let l = resolve_listeners(
            "PLAINTEXT://127.0.0.1:9092,sasl_plaintext://127.0.0.1:9093,INTERNAL://127.0.0.1:0",
            Some("SASL_PLAINTEXT://broker.example:19093"),
            Some("INTERNAL:SASL_PLAINTEXT"),
        )
        .unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(
            (l[0].advertised_host.as_str(), l[0].advertised_port),
            ("127.0.0.1", 9092)
        );
        assert_eq!(l[1].name, "SASL_PLAINTEXT");
        assert_eq!(
            (l[1].advertised_host.as_str(), l[1].advertised_port),
            ("broker.example", 19093)
        );
        assert_eq!(l[2].protocol, SecurityProtocol::SaslPlaintext);
    }

    #[test]
    fn bad_listener_lists_are_refused() {
        for (l, a, m) in [
            ("", None, None),
            ("127.0.0.1:9092", None, None),
            ("PLAINTEXT://127.0.0.1", None, None),
            (
                "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
                None,
                None,
            ),
            ("OTHER://127.0.0.1:9092", None, None),
            ("OTHER://127.0.0.1:9092", None, Some("OTHER:KERBEROS")),
            ("PLAINTEXT://127.0.0.1:9092", Some("SSL://h:1"), None),
        ] {
            assert!(resolve_listeners(l, a, m).is_err(), "{l} {a:?} {m:?}");
        }
    }
}
