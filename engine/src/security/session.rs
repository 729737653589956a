//! One connection's authentication, as Kafka's `SaslServerAuthenticator`
//! runs it: on a SASL listener the client may ask ApiVersions, then sends
//! SaslHandshake with a mechanism, then the mechanism's tokens — inside
//! SaslAuthenticate requests (handshake v1), or as bare size-prefixed
//! frames (handshake v0). Nothing else is served before the exchange
//! succeeds; a failed exchange ends the connection.

use std::collections::HashMap;
use std::time::Instant;

use super::scram::{ScramError, ScramServer, ScramStep};
use super::{Credentials, Mechanism, SaslMechanism};
use crate::limits::{
    AUTH_FAILURE_LOG_INTERVAL, AUTH_FAILURE_LOG_PRINCIPALS_MAX, SASL_PLAIN_BYTES_MAX,
};

/// The principal of connections on listeners without SASL.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

#[derive(Debug)]
pub enum Auth {
    /// A listener without SASL: the principal is the transport's
    /// (`User:ANONYMOUS`, or a TLS client certificate's).
    Transport(String),
    /// Waiting for SaslHandshake.
    Handshake,
    /// A mechanism was chosen; its tokens come in SaslAuthenticate requests
    /// (`raw`: bare frames, handshake v0).
    Tokens {
        mechanism: SaslMechanism,
        raw: bool,
        scram: Option<ScramServer>,
        /// Re-authenticating (KIP-368) the session of this principal.
        reauth_of: Option<String>,
    },
    /// Authenticated as `principal` ("User:name"), until `expires` when
    /// re-authentication is on (`connections.max.reauth.ms`).
    Authenticated {
        principal: String,
        mechanism: SaslMechanism,
        expires: Option<Instant>,
        /// Logged in with a delegation token (which may not ask for
        /// tokens itself, as in Kafka).
        token: bool,
    },
    /// The exchange failed; the connection is closing.
    Failed,
}

/// Why a SaslHandshake is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// Not expected now (no SASL here, or already done): ILLEGAL_SASL_STATE.
    IllegalState,
    /// Not an enabled mechanism: UNSUPPORTED_SASL_MECHANISM.
    Unsupported,
}

/// What a token does to the exchange.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenOutcome {
    /// Send this to the client; more tokens follow.
    Continue(Vec<u8>),
    /// Authenticated; send this last server message (may be empty).
    Done { principal: String, last: Vec<u8> },
    /// Authentication failed (SASL_AUTHENTICATION_FAILED with this text);
    /// `user` is who it was for, when known (for the broker's log).
    Failed {
        message: String,
        user: Option<String>,
    },
    /// A token when none is expected: ILLEGAL_SASL_STATE.
    IllegalState,
}

impl Auth {
    /// A new connection: SASL to come, or authenticated by its transport
    /// as `transport_principal`.
    pub fn new(sasl: bool, transport_principal: String) -> Auth {
        if sasl {
            Auth::Handshake
        } else {
            Auth::Transport(transport_principal)
        }
    }

    /// Whether requests other than ApiVersions and the SASL ones are served
    /// (not once a session has expired without re-authentication).
    pub fn is_authenticated(&self) -> bool {
        match self {
            Auth::Transport(_) => true,
            Auth::Authenticated { expires, .. } => expires.is_none_or(|t| Instant::now() < t),
            _ => false,
        }
    }

    /// Whether the session expired without re-authentication (the next
    /// request other than SASL closes the connection).
    pub fn session_expired(&self) -> bool {
        matches!(self, Auth::Authenticated { expires: Some(t), .. } if Instant::now() >= *t)
    }

    /// Whether the exchange under way renews a session (KIP-368).
    pub fn reauthenticating(&self) -> bool {
        matches!(
            self,
            Auth::Tokens {
                reauth_of: Some(_),
                ..
            }
        )
    }

    /// Whether the next frame is a bare token (after handshake v0).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self, Auth::Tokens { raw: true, .. })
    }

    /// The mechanism chosen by the handshake, once there is one.
    pub fn mechanism(&self) -> Option<SaslMechanism> {
        match self {
            Auth::Tokens { mechanism, .. } | Auth::Authenticated { mechanism, .. } => {
                Some(*mechanism)
            }
            _ => None,
        }
    }

    pub fn principal(&self) -> Option<&str> {
        match self {
            Auth::Transport(principal) => Some(principal),
            Auth::Authenticated { principal, .. } => Some(principal),
            _ => None,
        }
    }

    /// SaslHandshake asking for `mechanism` (request `version`): the first,
    /// or (KIP-368) one re-authenticating a session that expires, with the
    /// same mechanism.
    pub fn handshake(
        &mut self,
        mechanism: &str,
        version: i16,
        enabled: &[SaslMechanism],
    ) -> Result<(), HandshakeError> {
        let reauth_of = match self {
            Auth::Handshake => None,
            Auth::Authenticated {
                principal,
                mechanism: m,
                expires: Some(_),
                ..
            } if version >= 1 => {
                if SaslMechanism::from_name(mechanism) != Some(*m) {
                    *self = Auth::Failed;
                    return Err(HandshakeError::Unsupported);
                }
                Some(principal.clone())
            }
            _ => return Err(HandshakeError::IllegalState),
        };
        let Some(m) = SaslMechanism::from_name(mechanism).filter(|m| enabled.contains(m)) else {
            *self = Auth::Failed;
            return Err(HandshakeError::Unsupported);
        };
        *self = Auth::Tokens {
            mechanism: m,
            raw: version == 0,
            scram: match m {
                SaslMechanism::Plain => None,
                SaslMechanism::Scram(s) => Some(ScramServer::new(s)),
            },
            reauth_of,
        };
        Ok(())
    }

    /// What KIP-368 tells the client of its session: milliseconds left (0:
    /// it never expires).
    pub fn session_left_ms(&self) -> i64 {
        match self {
            Auth::Authenticated {
                expires: Some(t), ..
            } => {
                // Rounded up: just set, it reads as the whole lifetime.
                let left = t.saturating_duration_since(Instant::now());
                left.as_micros().div_ceil(1000).max(1) as i64
            }
            _ => 0,
        }
    }

    /// Whether the session logged in with a delegation token.
    pub fn token_authenticated(&self) -> bool {
        matches!(self, Auth::Authenticated { token: true, .. })
    }

    /// The client's next token; a session that succeeds lasts `session`
    /// (re-authentication on) or for ever. A delegation token logs in as
    /// its owner, found in `tokens`.
    pub fn token(
        &mut self,
        token: &[u8],
        credentials: &Credentials,
        tokens: &super::tokens::TokenSet,
        session: Option<std::time::Duration>,
    ) -> TokenOutcome {
        let Auth::Tokens {
            mechanism,
            scram,
            reauth_of,
            ..
        } = self
        else {
            return TokenOutcome::IllegalState;
        };
        let mechanism = *mechanism;
        // A token's session ends with the token (when sessions expire).
        let mut via_token: Option<i64> = None;
        let outcome = match (mechanism, scram) {
            (SaslMechanism::Plain, _) => plain(token, credentials),
            (SaslMechanism::Scram(m), Some(server)) => {
                // The user of the first message, when this is the final one.
                let mut asked = scram_user(server);
                let now_ms = crate::wall::now_ms();
                match server.step(token, |user, is_token| {
                    asked = Some(user.to_owned());
                    if is_token {
                        tokens.login(user, m, now_ms).map(|(c, _, _)| c)
                    } else {
                        credentials.lookup(user, m)
                    }
                }) {
                    Ok(ScramStep::Challenge(c)) => return TokenOutcome::Continue(c),
                    Ok(ScramStep::Success {
                        user,
                        last,
                        token: false,
                    }) => TokenOutcome::Done {
                        principal: format!("User:{user}"),
                        last,
                    },
                    Ok(ScramStep::Success {
                        user,
                        last,
                        token: true,
                    }) => {
                        match tokens.login(&user, m, crate::wall::now_ms()) {
                            Some((_, owner, expiry_ms)) => {
                                via_token = Some(expiry_ms);
                                TokenOutcome::Done {
                                    principal: owner,
                                    last,
                                }
                            }
                            // Expired during the exchange.
                            None => TokenOutcome::Failed {
                                message: "Authentication failed: the delegation token expired"
                                    .into(),
                                user: Some(user),
                            },
                        }
                    }
                    Err(e) => TokenOutcome::Failed {
                        message: match e {
                            ScramError::InvalidCredentials => format!(
                                "Authentication failed during authentication due to invalid \
                                 credentials with SASL mechanism {}",
                                m.name()
                            ),
                            ScramError::Malformed(why) => {
                                format!("Authentication failed: {why} ({})", m.name())
                            }
                        },
                        user: asked,
                    },
                }
            }
            (SaslMechanism::Scram(_), None) => TokenOutcome::IllegalState,
        };
        let outcome = match (outcome, reauth_of.as_deref()) {
            (TokenOutcome::Done { principal, .. }, Some(was)) if principal != was => {
                TokenOutcome::Failed {
                    message: format!(
                        "Cannot change principals during re-authentication from {was} to {principal}"
                    ),
                    user: principal.strip_prefix("User:").map(str::to_owned),
                }
            }
            (outcome, _) => outcome,
        };
        *self = match &outcome {
            TokenOutcome::Done { principal, .. } => Auth::Authenticated {
                principal: principal.clone(),
                mechanism,
                expires: session.map(|d| {
                    let now = Instant::now();
                    let token_left = via_token.map_or(d, |ms| {
                        std::time::Duration::from_millis(
                            ms.saturating_sub(crate::wall::now_ms()).max(0) as u64,
                        )
                    });
                    now + d.min(token_left)
                }),
                token: via_token.is_some(),
            },
            _ => Auth::Failed,
        };
        outcome
    }
}

fn scram_user(s: &ScramServer) -> Option<String> {
    match s {
        ScramServer::Sent { user, .. } => Some(user.clone()),
        _ => None,
    }
}

/// SASL/PLAIN (RFC 4616): `[authzid] NUL authcid NUL password`, checked
/// against the user's SCRAM credential (SHA-512 if it has one, else
/// SHA-256): rutomq keeps no other password store.
fn plain(token: &[u8], credentials: &Credentials) -> TokenOutcome {
    let failed = |user: Option<&str>| TokenOutcome::Failed {
        message: "Authentication failed: Invalid username or password".into(),
        user: user.map(str::to_owned),
    };
    if token.len() > SASL_PLAIN_BYTES_MAX {
        return failed(None);
    }
    let mut parts = token.split(|&b| b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return failed(None);
    };
    let (Ok(authzid), Ok(user)) = (std::str::from_utf8(authzid), std::str::from_utf8(user)) else {
        return failed(None);
    };
    if user.is_empty() || password.is_empty() {
        return failed(None);
    }
    if !authzid.is_empty() && authzid != user {
        return TokenOutcome::Failed {
            message: "Authentication failed: Client requested an authorization id that is \
                      different from username"
                .into(),
            user: Some(user.to_owned()),
        };
    }
    let found = [Mechanism::Sha512, Mechanism::Sha256]
        .into_iter()
        .find_map(|m| credentials.lookup(user, m).map(|c| (m, c)));
    match found {
        Some((m, c)) if c.verifies(m, password) => TokenOutcome::Done {
            principal: format!("User:{user}"),
            last: Vec::new(),
        },
        _ => failed(Some(user)),
    }
}

/// Failed logins, logged once per principal per interval with how many
/// were not logged (10 000 failures from one client are a few lines, not
/// 10 000); bounded by `AUTH_FAILURE_LOG_PRINCIPALS_MAX` names.
#[derive(Default)]
pub struct FailureLog {
    seen: HashMap<String, (Instant, u64)>,
}

impl FailureLog {
    /// Counts a failure for `who`; `Some(n)` when it is to be logged now,
    /// with `n` failures since the last line for it.
    pub fn record(&mut self, who: &str, now: Instant) -> Option<u64> {
        if let Some((last, n)) = self.seen.get_mut(who) {
            *n += 1;
            if now.duration_since(*last) < AUTH_FAILURE_LOG_INTERVAL {
                return None;
            }
            let count = *n;
            *last = now;
            *n = 0;
            return Some(count);
        }
        if self.seen.len() >= AUTH_FAILURE_LOG_PRINCIPALS_MAX {
            // Forget the oldest half rather than grow.
            let mut times: Vec<Instant> = self.seen.values().map(|v| v.0).collect();
            times.sort_unstable();
            let cut = times[times.len() / 2];
            self.seen.retain(|_, v| v.0 > cut);
        }
        self.seen.insert(who.to_owned(), (now, 0));
        Some(1)
    }
}

/// Any bytes as a SASL exchange (the fuzz target `sasl_exchange` and a
/// mutation test): the first byte picks the mechanism and the handshake
/// version, the rest is split at 0xFF into tokens. Must never panic.
pub fn fuzz_exchange(data: &[u8]) {
    static CREDENTIALS: std::sync::OnceLock<Credentials> = std::sync::OnceLock::new();
    let credentials = CREDENTIALS.get_or_init(|| {
        let c = Credentials::default();
        c.replace(
            Mechanism::ALL
                .into_iter()
                .map(|m| {
                    // One iteration: the exchange's logic, not PBKDF2's cost.
                    let cr = super::Credential::from_password(m, b"pw", 1);
                    rutomq_meta::security::ScramRow {
                        user: "u".into(),
                        mechanism: m.code() as i16,
                        salt: cr.salt,
                        stored_key: cr.stored_key,
                        server_key: cr.server_key,
                        iterations: cr.iterations,
                    }
                })
                .collect(),
        );
        c
    });
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let mechanism = SaslMechanism::ALL[first as usize % SaslMechanism::ALL.len()];
    let mut auth = Auth::new(true, ANONYMOUS.into());
    if auth
        .handshake(mechanism.name(), (first >> 7) as i16, &SaslMechanism::ALL)
        .is_err()
    {
        return;
    }
    for token in rest.split(|&b| b == 0xff) {
        match auth.token(
            token,
            credentials,
            &super::tokens::TokenSet::default(),
            None,
        ) {
            TokenOutcome::Continue(_) => {}
            _ => break,
        }
    }
    let _ = auth.is_authenticated();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::tokens::TokenSet;
    use rutomq_meta::security::ScramRow;

    fn creds() -> Credentials {
        let c = Credentials::default();
        let cr = super::super::Credential::from_password(Mechanism::Sha256, b"pw", 4096);
        c.replace(vec![ScramRow {
            user: "alice".into(),
            mechanism: 1,
            salt: cr.salt,
            stored_key: cr.stored_key,
            server_key: cr.server_key,
            iterations: cr.iterations,
        }]);
        c
    }

    fn creds_for(user: &str) -> Vec<ScramRow> {
        let cr = super::super::Credential::from_password(Mechanism::Sha512, b"pw", 4096);
        vec![ScramRow {
            user: user.into(),
            mechanism: 2,
            salt: cr.salt,
            stored_key: cr.stored_key,
            server_key: cr.server_key,
            iterations: cr.iterations,
        }]
    }

    #[test]
    fn plain_logs_in_against_the_scram_credential() {
        let c = creds();
        let mut a = Auth::new(true, ANONYMOUS.into());
        assert!(!a.is_authenticated());
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        assert!(
            matches!(a.token(b"\0alice\0pw", &c, &TokenSet::default(), None), TokenOutcome::Done { ref principal, .. } if principal == "User:alice")
        );
        assert!(a.is_authenticated());
        assert_eq!(a.principal(), Some("User:alice"));
        assert_eq!(
            a.handshake("PLAIN", 1, &SaslMechanism::ALL),
            Err(HandshakeError::IllegalState)
        );
        for bad in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0pw",
            b"alice\0pw",
            b"x\0alice\0pw",
            b"\0\0pw",
            b"\0alice\0",
        ] {
            let mut a = Auth::new(true, ANONYMOUS.into());
            a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
            assert!(
                matches!(
                    a.token(bad, &c, &TokenSet::default(), None),
                    TokenOutcome::Failed { .. }
                ),
                "{bad:?}"
            );
            assert!(!a.is_authenticated());
            assert_eq!(
                a.token(b"\0alice\0pw", &c, &TokenSet::default(), None),
                TokenOutcome::IllegalState
            );
        }
    }

    #[test]
    fn sessions_expire_and_renew_with_the_same_principal_and_mechanism() {
        let mut rows = creds_for("bob");
        rows.extend(creds_for("alice"));
        let both = Credentials::default();
        both.replace(rows);
        let session = Some(std::time::Duration::from_millis(40));
        let mut a = Auth::new(true, ANONYMOUS.into());
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        assert!(!a.reauthenticating());
        assert!(matches!(
            a.token(b"\0alice\0pw", &both, &TokenSet::default(), session),
            TokenOutcome::Done { .. }
        ));
        assert!(a.is_authenticated() && !a.session_expired());
        // Renewed before expiry, same user: a fresh session.
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        assert!(!a.is_authenticated(), "nothing else is served mid-exchange");
        assert!(a.reauthenticating());
        assert!(matches!(
            a.token(b"\0alice\0pw", &both, &TokenSet::default(), session),
            TokenOutcome::Done { .. }
        ));
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(!a.is_authenticated() && a.session_expired());
        // Expired sessions may still re-authenticate; another principal may not.
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        assert!(matches!(
            a.token(b"\0bob\0pw", &both, &TokenSet::default(), session),
            TokenOutcome::Failed { ref message, .. } if message.contains("Cannot change principals")
        ));
        // Nor another mechanism, nor a v0 handshake.
        let mut a = Auth::new(true, ANONYMOUS.into());
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        a.token(b"\0alice\0pw", &both, &TokenSet::default(), session);
        assert_eq!(
            a.handshake("SCRAM-SHA-256", 1, &SaslMechanism::ALL),
            Err(HandshakeError::Unsupported)
        );
        let mut a = Auth::new(true, ANONYMOUS.into());
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        a.token(b"\0alice\0pw", &both, &TokenSet::default(), session);
        assert_eq!(
            a.handshake("PLAIN", 0, &SaslMechanism::ALL),
            Err(HandshakeError::IllegalState)
        );
        // Without a session lifetime a second handshake stays illegal.
        let mut a = Auth::new(true, ANONYMOUS.into());
        a.handshake("PLAIN", 1, &SaslMechanism::ALL).unwrap();
        a.token(b"\0alice\0pw", &both, &TokenSet::default(), None);
        assert_eq!(
            a.handshake("PLAIN", 1, &SaslMechanism::ALL),
            Err(HandshakeError::IllegalState)
        );
    }

    #[test]
    fn handshake_checks_state_and_mechanism() {
        let mut a = Auth::new(false, ANONYMOUS.into());
        assert!(a.is_authenticated());
        assert_eq!(
            a.handshake("PLAIN", 1, &SaslMechanism::ALL),
            Err(HandshakeError::IllegalState)
        );
        let mut a = Auth::new(true, ANONYMOUS.into());
        assert_eq!(
            a.handshake("GSSAPI", 1, &SaslMechanism::ALL),
            Err(HandshakeError::Unsupported)
        );
        let mut a = Auth::new(true, ANONYMOUS.into());
        assert_eq!(
            a.handshake("PLAIN", 1, &[SaslMechanism::Scram(Mechanism::Sha512)]),
            Err(HandshakeError::Unsupported)
        );
        let mut a = Auth::new(true, ANONYMOUS.into());
        a.handshake("SCRAM-SHA-256", 0, &SaslMechanism::ALL)
            .unwrap();
        assert!(a.expects_raw_token());
    }

    #[test]
    fn mutated_exchanges_never_panic() {
        let seeds: [&[u8]; 3] = [
            b"\x00\x00u\x00pw",
            b"\x01n,,n=u,r=abc\xffc=biws,r=abc,p=AAAA",
            b"\x02n,a=u,n=u,r=x,ext=1\xffc=biws,r=x,p=====",
        ];
        let mut seed = 0x9e37_79b9u64;
        for base in seeds {
            fuzz_exchange(base);
            for _ in 0..3000 {
                let mut msg = base.to_vec();
                for _ in 0..4 {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let i = (seed >> 33) as usize % msg.len();
                    msg[i] = (seed >> 17) as u8;
                }
                fuzz_exchange(&msg);
            }
        }
    }

    #[test]
    fn failure_log_is_bounded_and_rate_limited() {
        let mut l = FailureLog::default();
        let t0 = Instant::now();
        assert_eq!(l.record("User:a", t0), Some(1));
        assert_eq!(l.record("User:a", t0), None);
        assert_eq!(l.record("User:a", t0 + AUTH_FAILURE_LOG_INTERVAL), Some(2));
        for i in 0..(AUTH_FAILURE_LOG_PRINCIPALS_MAX * 3) {
            l.record(
                &format!("u{i}"),
                t0 + std::time::Duration::from_millis(i as u64),
            );
            assert!(l.seen.len() <= AUTH_FAILURE_LOG_PRINCIPALS_MAX);
        }
    }
}
