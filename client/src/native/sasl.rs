//! SASL on a new connection (KIP-152: SaslHandshake v1, then the
//! mechanism's messages in SaslAuthenticate requests): PLAIN (RFC 4616) and
//! SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677).

use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use sha2::{Digest, Sha256, Sha512};

use super::conn::Connection;
use crate::error::{Error, Result};

/// A SASL mechanism and its credentials.
#[derive(Clone, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain { username: String, password: String },
    ScramSha256 { username: String, password: String },
    ScramSha512 { username: String, password: String },
}

impl std::fmt::Debug for SaslMechanism {
    /// Never prints the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:?})", self.name(), self.username())
    }
}

impl SaslMechanism {
    pub fn name(&self) -> &'static str {
        match self {
            SaslMechanism::Plain { .. } => "PLAIN",
            SaslMechanism::ScramSha256 { .. } => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 { .. } => "SCRAM-SHA-512",
        }
    }

    fn username(&self) -> &str {
        match self {
            SaslMechanism::Plain { username, .. }
            | SaslMechanism::ScramSha256 { username, .. }
            | SaslMechanism::ScramSha512 { username, .. } => username,
        }
    }
}

const SASL_HANDSHAKE_VERSIONS: (i16, i16) = (1, 1);
const SASL_AUTHENTICATE_VERSIONS: (i16, i16) = (0, 2);

/// Authenticates `conn` (just connected; nothing else sent on it yet).
pub async fn authenticate(conn: &Connection, m: &SaslMechanism) -> Result<()> {
    let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(m.name()));
    let resp = conn.call(&hs, SASL_HANDSHAKE_VERSIONS).await?;
    if resp.error_code != 0 {
        let offered: Vec<String> = resp.mechanisms.iter().map(|s| s.to_string()).collect();
        return Err(Error::Auth(format!(
            "the broker does not take SASL {} (error {}); it offers {offered:?}",
            m.name(),
            resp.error_code
        )));
    }
    match m {
        SaslMechanism::Plain { username, password } => {
            let mut msg = Vec::with_capacity(2 + username.len() + password.len());
            msg.push(0);
            msg.extend_from_slice(username.as_bytes());
            msg.push(0);
            msg.extend_from_slice(password.as_bytes());
            exchange(conn, msg).await?;
        }
        SaslMechanism::ScramSha256 { username, password } => {
            scram(conn, ScramHash::Sha256, username, password).await?
        }
        SaslMechanism::ScramSha512 { username, password } => {
            scram(conn, ScramHash::Sha512, username, password).await?
        }
    }
    Ok(())
}

async fn exchange(conn: &Connection, msg: Vec<u8>) -> Result<Bytes> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(msg));
    let resp = conn.call(&req, SASL_AUTHENTICATE_VERSIONS).await?;
    if resp.error_code != 0 {
        return Err(Error::Auth(format!(
            "error {}: {}",
            resp.error_code,
            resp.error_message
                .map(|m| m.to_string())
                .unwrap_or_default()
        )));
    }
    Ok(resp.auth_bytes)
}

async fn scram(conn: &Connection, hash: ScramHash, username: &str, password: &str) -> Result<()> {
    let nonce: String = {
        use rand::Rng;
        let mut r = rand::rng();
        (0..24)
            .map(|_| r.sample(rand::distr::Alphanumeric) as char)
            .collect()
    };
    let mut client = Scram::new(hash, username, password, nonce);
    let first = client.client_first();
    let server_first = exchange(conn, first.into_bytes()).await?;
    let server_first = std::str::from_utf8(&server_first)
        .map_err(|_| Error::Auth("server-first-message is not UTF-8".into()))?;
    let fin = client.client_final(server_first)?;
    let server_final = exchange(conn, fin.into_bytes()).await?;
    let server_final = std::str::from_utf8(&server_final)
        .map_err(|_| Error::Auth("server-final-message is not UTF-8".into()))?;
    client.verify_server_final(server_final)
}

/// The hash of a SCRAM mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramHash::Sha512 => {
                let mut m = <Hmac<Sha512> as KeyInit>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}

/// The SaltedPassword of RFC 5802 (what a broker stores for a SCRAM user,
/// e.g. in an AlterUserScramCredentials upsertion).
pub fn salted_password(hash: ScramHash, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    Scram::hi(hash, password.as_bytes(), salt, iterations)
}

/// The client side of one SCRAM exchange.
pub struct Scram {
    hash: ScramHash,
    username: String,
    password: String,
    nonce: String,
    auth_message: String,
    server_key: Vec<u8>,
}

/// Iterations accepted from a server at most (Kafka allows up to 16384).
const SCRAM_ITERATIONS_MAX: u32 = 1 << 20;
/// Kafka refuses fewer.
const SCRAM_ITERATIONS_MIN: u32 = 4096;

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl Scram {
    pub fn new(hash: ScramHash, username: &str, password: &str, nonce: String) -> Self {
        Scram {
            hash,
            // RFC 5802 saslname: ',' and '=' escaped.
            username: username.replace('=', "=3D").replace(',', "=2C"),
            password: password.to_owned(),
            nonce,
            auth_message: String::new(),
            server_key: Vec::new(),
        }
    }

    fn bare(&self) -> String {
        format!("n={},r={}", self.username, self.nonce)
    }

    pub fn client_first(&self) -> String {
        format!("n,,{}", self.bare())
    }

    /// PBKDF2 with HMAC (RFC 5802 "Hi"), one block.
    fn hi(hash: ScramHash, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut block = salt.to_vec();
        block.extend_from_slice(&1u32.to_be_bytes());
        let mut u = hash.hmac(password, &block);
        let mut out = u.clone();
        for _ in 1..iterations {
            u = hash.hmac(password, &u);
            for (o, x) in out.iter_mut().zip(&u) {
                *o ^= x;
            }
        }
        out
    }

    /// The client-final-message for `server_first`.
    pub fn client_final(&mut self, server_first: &str) -> Result<String> {
        let bad = |why: &str| Error::Auth(format!("server-first-message {server_first:?}: {why}"));
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for field in server_first.split(',') {
            match field.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => {
                    salt = Some(b64().decode(v).map_err(|_| bad("salt is not base64"))?)
                }
                Some(("i", v)) => {
                    iterations = Some(v.parse::<u32>().map_err(|_| bad("iterations"))?)
                }
                Some(("e", v)) => return Err(Error::Auth(format!("server error: {v}"))),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(bad("missing r, s or i"));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(bad("the nonce does not extend ours"));
        }
        if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
            return Err(bad("iteration count out of range"));
        }
        let h = self.hash;
        let salted = Self::hi(h, self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.digest(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("{},{server_first},{without_proof}", self.bare());
        let signature = h.hmac(&stored_key, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        self.server_key = h.hmac(&salted, b"Server Key");
        Ok(format!("{without_proof},p={}", b64().encode(proof)))
    }

    /// Checks the server's signature: the server knew the password too.
    pub fn verify_server_final(&self, server_final: &str) -> Result<()> {
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(Error::Auth(format!("server error: {e}")));
        }
        let v = server_final
            .split(',')
            .find_map(|f| f.strip_prefix("v="))
            .ok_or_else(|| {
                Error::Auth(format!("server-final-message {server_final:?} has no v="))
            })?;
        let want = self
            .hash
            .hmac(&self.server_key, self.auth_message.as_bytes());
        if b64().decode(v).ok().as_deref() != Some(&want[..]) {
            return Err(Error::Auth("the server's SCRAM signature is wrong".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3 (SCRAM-SHA-256).
    #[test]
    fn scram_sha256_matches_rfc_7677() {
        let mut c = Scram::new(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(c.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let fin = c
            .client_final("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            fin,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(
            c.verify_server_final("v=AAAA").is_err(),
            "a wrong server signature"
        );
    }

    /// SCRAM-SHA-512 against a server side computed here from the RFC's
    /// definitions (no published vector), and hostile server messages.
    #[test]
    fn scram_sha512_round_trip_and_refusals() {
        let salt = b"some salt";
        let mut c = Scram::new(ScramHash::Sha512, "a=b,c", "secret", "clientnonce".into());
        assert_eq!(c.client_first(), "n,,n=a=3Db=2Cc,r=clientnonce");
        let server_first = format!("r=clientnonceSERVER,s={},i=4096", b64().encode(salt));
        let fin = c.client_final(&server_first).unwrap();
        // The server's check.
        let h = ScramHash::Sha512;
        let salted = Scram::hi(h, b"secret", salt, 4096);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored = h.digest(&client_key);
        let auth = format!("n=a=3Db=2Cc,r=clientnonce,{server_first},c=biws,r=clientnonceSERVER");
        let sig = h.hmac(&stored, auth.as_bytes());
        let proof = b64().decode(fin.rsplit_once(",p=").unwrap().1).unwrap();
        let recovered: Vec<u8> = proof.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        assert_eq!(
            h.digest(&recovered),
            stored,
            "the proof proves the password"
        );
        let server_sig = h.hmac(&h.hmac(&salted, b"Server Key"), auth.as_bytes());
        c.verify_server_final(&format!("v={}", b64().encode(server_sig)))
            .unwrap();
        // A nonce that does not extend ours, too few iterations, an error.
        let mut c = Scram::new(ScramHash::Sha512, "u", "p", "abc".into());
        assert!(c.client_final("r=xyz,s=c2FsdA==,i=4096").is_err());
        assert!(c.client_final("r=abcd,s=c2FsdA==,i=10").is_err());
        assert!(c.client_final("e=invalid-proof").is_err());
        assert!(c.verify_server_final("e=other-error").is_err());
    }
}
