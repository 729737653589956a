//! SCRAM (RFC 5802, RFC 7677) as Kafka speaks it: SCRAM-SHA-256 and
//! SCRAM-SHA-512, no channel binding, the server side of the exchange, and
//! the derivation of stored credentials (salt, stored key, server key,
//! iterations) from a salted password — what AlterUserScramCredentials
//! sends — or from a password (the offline `rutomq user` command, PLAIN).
//!
//! Only the salted credential is ever stored; a password is never kept.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

/// Kafka's bounds on the iteration count (`ScramMechanism`): fewer is weak,
/// more is a CPU cost an attacker could make the agent pay per login.
pub const ITERATIONS_MIN: i32 = 4096;
pub const ITERATIONS_MAX: i32 = 16384;
/// The salt a credential gets when the server makes it.
pub const SALT_BYTES: usize = 32;
/// The server's share of the nonce, in random bytes (base64 on the wire).
const SERVER_NONCE_BYTES: usize = 24;
/// Longest SCRAM message taken apart (a username, a nonce and a proof fit
/// in far less); longer is refused before it is looked at.
pub const MESSAGE_BYTES_MAX: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's `ScramMechanism` type code (DescribeUserScramCredentials,
    /// AlterUserScramCredentials): 1 SHA-256, 2 SHA-512.
    pub fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    pub fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            for p in parts {
                m.update(p);
            }
            m.finalize().into_bytes().to_vec()
        }
        match self {
            Mechanism::Sha256 => run::<Hmac<Sha256>>(key, parts),
            Mechanism::Sha512 => run::<Hmac<Sha512>>(key, parts),
        }
    }

    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with this HMAC, one block.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
        fn run<M: Mac + KeyInit + Clone>(password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
            let keyed =
                <M as KeyInit>::new_from_slice(password).expect("HMAC takes any key length");
            let mut m = keyed.clone();
            m.update(salt);
            m.update(&1u32.to_be_bytes());
            let mut u = m.finalize().into_bytes().to_vec();
            let mut out = u.clone();
            for _ in 1..iterations.max(1) {
                let mut m = keyed.clone();
                m.update(&u);
                u = m.finalize().into_bytes().to_vec();
                for (o, b) in out.iter_mut().zip(&u) {
                    *o ^= b;
                }
            }
            out
        }
        match self {
            Mechanism::Sha256 => run::<Hmac<Sha256>>(password, salt, iterations),
            Mechanism::Sha512 => run::<Hmac<Sha512>>(password, salt, iterations),
        }
    }
}

/// A stored SCRAM credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl Credential {
    /// The credential of a salted password (what AlterUserScramCredentials
    /// carries: the client salts and hashes, the password never travels).
    pub fn from_salted(m: Mechanism, salt: Vec<u8>, salted: &[u8], iterations: i32) -> Credential {
        let client_key = m.hmac(salted, &[b"Client Key"]);
        Credential {
            salt,
            stored_key: m.hash(&client_key),
            server_key: m.hmac(salted, &[b"Server Key"]),
            iterations,
        }
    }

    /// The credential of `password` with a fresh random salt.
    pub fn from_password(m: Mechanism, password: &[u8], iterations: i32) -> Credential {
        let salt = random_bytes(SALT_BYTES);
        let salted = m.salted_password(password, &salt, iterations);
        Credential::from_salted(m, salt, &salted, iterations)
    }

    /// Whether `password` is this credential's (SASL/PLAIN checks against
    /// the SCRAM credential; the comparison is constant-time).
    pub fn verifies(&self, m: Mechanism, password: &[u8]) -> bool {
        let salted = m.salted_password(password, &self.salt, self.iterations);
        let client_key = m.hmac(&salted, &[b"Client Key"]);
        constant_time_eq(&m.hash(&client_key), &self.stored_key)
    }
}

/// Why an exchange failed: said to the client as Kafka says it (a SASL
/// authentication failure; the text names no secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    /// Not a SCRAM message, or one this server does not take (channel
    /// binding, extensions it does not know, a bad nonce).
    Malformed(&'static str),
    /// No such user, or a wrong proof.
    InvalidCredentials,
}

/// The server's side of one SCRAM exchange.
#[derive(Debug)]
pub enum ScramServer {
    /// Waiting for client-first-message.
    Start {
        mechanism: Mechanism,
    },
    /// server-first-message sent; waiting for client-final-message.
    Sent {
        mechanism: Mechanism,
        user: String,
        credential: Credential,
        nonce: String,
        /// client-first-message-bare "," server-first-message: the first
        /// two thirds of the AuthMessage.
        auth_prefix: String,
        gs2_header: String,
        /// A delegation token logs in (`tokenauth=true`): `user` is its id.
        token: bool,
    },
    Finished,
}

/// What a step of the exchange yields.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this challenge; the exchange goes on.
    Challenge(Vec<u8>),
    /// Authenticated as this user (a delegation token's id when `token`);
    /// send this server-final-message.
    Success {
        user: String,
        last: Vec<u8>,
        token: bool,
    },
}

impl ScramServer {
    pub fn new(mechanism: Mechanism) -> ScramServer {
        ScramServer::Start { mechanism }
    }

    /// Takes the client's next message; `lookup(user, token)` finds the
    /// stored credential of a user (of a delegation token, when `token`)
    /// for this exchange's mechanism.
    pub fn step(
        &mut self,
        msg: &[u8],
        lookup: impl FnOnce(&str, bool) -> Option<Credential>,
    ) -> Result<ScramStep, ScramError> {
        if msg.len() > MESSAGE_BYTES_MAX {
            *self = ScramServer::Finished;
            return Err(ScramError::Malformed("SCRAM message too long"));
        }
        let msg = std::str::from_utf8(msg)
            .map_err(|_| ScramError::Malformed("SCRAM message is not UTF-8"))?;
        match std::mem::replace(self, ScramServer::Finished) {
            ScramServer::Start { mechanism } => {
                let first = parse_client_first(msg)?;
                let credential =
                    lookup(&first.user, first.token).ok_or(ScramError::InvalidCredentials)?;
                let nonce = format!(
                    "{}{}",
                    first.nonce,
                    B64.encode(random_bytes(SERVER_NONCE_BYTES))
                );
                let server_first = format!(
                    "r={nonce},s={},i={}",
                    B64.encode(&credential.salt),
                    credential.iterations
                );
                let auth_prefix = format!("{},{server_first}", first.bare);
                *self = ScramServer::Sent {
                    mechanism,
                    user: first.user,
                    credential,
                    nonce,
                    auth_prefix,
                    gs2_header: first.gs2_header,
                    token: first.token,
                };
                Ok(ScramStep::Challenge(server_first.into_bytes()))
            }
            ScramServer::Sent {
                mechanism: m,
                user,
                credential,
                nonce,
                auth_prefix,
                gs2_header,
                token,
            } => {
                let (without_proof, proof) = msg.rsplit_once(",p=").ok_or(
                    ScramError::Malformed("client-final-message without a proof"),
                )?;
                let mut attrs = without_proof.split(',');
                let binding = attrs.next().and_then(|a| a.strip_prefix("c=")).ok_or(
                    ScramError::Malformed("client-final-message without channel binding"),
                )?;
                if B64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
                    return Err(ScramError::Malformed(
                        "channel binding does not match the first message",
                    ));
                }
                let got_nonce = attrs.next().and_then(|a| a.strip_prefix("r=")).ok_or(
                    ScramError::Malformed("client-final-message without a nonce"),
                )?;
                if got_nonce != nonce {
                    return Err(ScramError::Malformed("nonce does not match"));
                }
                let proof = B64
                    .decode(proof)
                    .map_err(|_| ScramError::Malformed("proof is not base64"))?;
                let auth_message = format!("{auth_prefix},{without_proof}");
                let signature = m.hmac(&credential.stored_key, &[auth_message.as_bytes()]);
                if proof.len() != signature.len() {
                    return Err(ScramError::InvalidCredentials);
                }
                let client_key: Vec<u8> =
                    proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
                if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
                    return Err(ScramError::InvalidCredentials);
                }
                let server_signature = m.hmac(&credential.server_key, &[auth_message.as_bytes()]);
                Ok(ScramStep::Success {
                    user,
                    last: format!("v={}", B64.encode(server_signature)).into_bytes(),
                    token,
                })
            }
            ScramServer::Finished => Err(ScramError::Malformed("SCRAM exchange already finished")),
        }
    }
}

struct ClientFirst {
    gs2_header: String,
    bare: String,
    user: String,
    nonce: String,
    token: bool,
}

/// gs2-header client-first-message-bare: "n,[a=authzid]," "n=user,r=nonce[,ext]".
fn parse_client_first(msg: &str) -> Result<ClientFirst, ScramError> {
    let mut it = msg.splitn(3, ',');
    let cb = it.next().unwrap_or_default();
    let authzid = it
        .next()
        .ok_or(ScramError::Malformed("client-first-message too short"))?;
    let bare = it
        .next()
        .ok_or(ScramError::Malformed("client-first-message too short"))?;
    match cb {
        "n" | "y" => {}
        _ => return Err(ScramError::Malformed("channel binding is not supported")),
    }
    if !authzid.is_empty() && !authzid.starts_with("a=") {
        return Err(ScramError::Malformed("bad authorization identity"));
    }
    let gs2_header = format!("{cb},{authzid},");
    let mut attrs = bare.split(',');
    let user = attrs
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or(ScramError::Malformed(
            "client-first-message without a user name",
        ))?;
    let user = unescape_name(user)?;
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed(
            "client-first-message without a nonce",
        ))?;
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(ScramError::Malformed("bad client nonce"));
    }
    // Extensions: Kafka's `tokenauth` (a delegation token logs in); an
    // unknown extension is ignored, as RFC 5802 allows.
    let mut token = false;
    for ext in attrs {
        match ext.strip_prefix("tokenauth=") {
            Some(v) if v.eq_ignore_ascii_case("true") => token = true,
            Some(v) if v.eq_ignore_ascii_case("false") => token = false,
            Some(_) => return Err(ScramError::Malformed("tokenauth is neither true nor false")),
            None => {}
        }
    }
    if let Some(authz) = authzid.strip_prefix("a=") {
        if unescape_name(authz)? != user {
            return Err(ScramError::Malformed(
                "authorization identity differs from the user",
            ));
        }
    }
    Ok(ClientFirst {
        gs2_header,
        bare: bare.to_owned(),
        nonce: nonce.to_owned(),
        token,
        user,
    })
}

/// saslname of RFC 5802: "=2C" is ',', "=3D" is '='; any other '=' is bad.
fn unescape_name(s: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in the user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramError::Malformed("empty user name"));
    }
    Ok(out)
}

pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::fill(&mut v[..]);
    v
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's side, written from RFC 5802 for the test.
    fn client_final(
        m: Mechanism,
        password: &str,
        first_bare: &str,
        server_first: &str,
    ) -> (String, Vec<u8>) {
        let attrs: Vec<&str> = server_first.split(',').collect();
        let nonce = attrs[0].strip_prefix("r=").unwrap();
        let salt = B64.decode(attrs[1].strip_prefix("s=").unwrap()).unwrap();
        let iterations: i32 = attrs[2].strip_prefix("i=").unwrap().parse().unwrap();
        let salted = m.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, &[b"Client Key"]);
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{first_bare},{server_first},{without_proof}");
        let sig = m.hmac(&stored_key, &[auth.as_bytes()]);
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let server_key = m.hmac(&salted, &[b"Server Key"]);
        let expect_v = format!("v={}", B64.encode(m.hmac(&server_key, &[auth.as_bytes()])));
        (
            format!("{without_proof},p={}", B64.encode(proof)),
            expect_v.into_bytes(),
        )
    }

    fn exchange(
        m: Mechanism,
        stored: &Credential,
        password: &str,
    ) -> Result<ScramStep, ScramError> {
        let mut s = ScramServer::new(m);
        let bare = "n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
        let ScramStep::Challenge(first) = s.step(format!("n,,{bare}").as_bytes(), |u, _| {
            (u == "alice").then(|| stored.clone())
        })?
        else {
            panic!("expected a challenge");
        };
        let first = String::from_utf8(first).unwrap();
        assert!(first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL"));
        let (fin, expect_v) = client_final(m, password, bare, &first);
        let r = s.step(fin.as_bytes(), |_, _| unreachable!())?;
        if let ScramStep::Success { last, .. } = &r {
            assert_eq!(last, &expect_v);
        }
        Ok(r)
    }

    #[test]
    fn pbkdf2_matches_rfc_7677_vector() {
        // RFC 7677's example: user "user", password "pencil".
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = Mechanism::Sha256.salted_password(b"pencil", &salt, 4096);
        let c = Credential::from_salted(Mechanism::Sha256, salt, &salted, 4096);
        // From the RFC's proof and signature: ServerSignature over its
        // AuthMessage.
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let v = B64.encode(Mechanism::Sha256.hmac(&c.server_key, &[auth.as_bytes()]));
        assert_eq!(v, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    #[test]
    fn exchange_succeeds_with_the_password_and_fails_without() {
        for m in Mechanism::ALL {
            let stored = Credential::from_password(m, b"secret", 4096);
            let ok = exchange(m, &stored, "secret").unwrap();
            assert!(matches!(ok, ScramStep::Success { ref user, .. } if user == "alice"));
            assert_eq!(
                exchange(m, &stored, "wrong"),
                Err(ScramError::InvalidCredentials)
            );
            assert!(stored.verifies(m, b"secret"));
            assert!(!stored.verifies(m, b"secreT"));
        }
    }

    #[test]
    fn unknown_user_and_forged_messages_are_refused() {
        let m = Mechanism::Sha256;
        let mut s = ScramServer::new(m);
        assert_eq!(
            s.step(b"n,,n=bob,r=abc", |_, _| None),
            Err(ScramError::InvalidCredentials)
        );
        for bad in [
            &b"p=tls-unique,,n=a,r=x"[..],
            b"n,,r=x",
            b"n,,n=a",
            b"n,,n=a=,r=x",
            b"n,,n=a,r=",
            b"n,,n=a,r=x,tokenauth=maybe",
            b"n,a=b,n=a,r=x",
            b"",
            b"\xff\xfe",
        ] {
            let mut s = ScramServer::new(m);
            let stored = Credential::from_password(m, b"pw", 4096);
            assert!(
                matches!(
                    s.step(bad, |_, _| Some(stored.clone())),
                    Err(ScramError::Malformed(_))
                ),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // A final message with another nonce (forged) or another binding.
        let stored = Credential::from_password(m, b"pw", 4096);
        for forge in [
            "c=biws,r=other,p=AAAA",
            "c=eSws,r=NONCE,p=AAAA",
            "c=biws,r=NONCE",
        ] {
            let mut s = ScramServer::new(m);
            let ScramStep::Challenge(first) = s
                .step(b"n,,n=a,r=abc", |_, _| Some(stored.clone()))
                .unwrap()
            else {
                panic!()
            };
            let nonce = String::from_utf8(first).unwrap()[2..]
                .split(',')
                .next()
                .unwrap()
                .to_owned();
            let msg = forge.replace("NONCE", &nonce);
            assert!(
                matches!(
                    s.step(msg.as_bytes(), |_, _| None),
                    Err(ScramError::Malformed(_))
                ),
                "{forge}"
            );
            assert!(s.step(b"again", |_, _| None).is_err());
        }
    }

    #[test]
    fn names_unescape() {
        assert_eq!(unescape_name("a=2Cb=3D").unwrap(), "a,b=");
        assert!(unescape_name("a=2").is_err());
    }
}
