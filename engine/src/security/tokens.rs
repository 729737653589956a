//! Delegation tokens (Kafka's KIP-48): a principal logged in over SASL (or
//! a TLS client certificate) creates a token; its holder logs in with
//! SCRAM as the token id, the token's HMAC (base64) as the password and
//! the `tokenauth=true` extension, and is the token's owner from then on.
//! Tokens live in PostgreSQL (`delegation_tokens`); every agent keeps those
//! in force ([`Tokens`]), reloaded on `rutomq_tokens`.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use rutomq_meta::token::{TokenRow, TokenScram};

use super::scram::{random_bytes, Credential, Mechanism};
use crate::control::AgentCopy;

/// SCRAM iterations of a token's credentials (the least SCRAM clients
/// accept; the password is a 512-bit HMAC, not something to guess).
pub const TOKEN_ITERATIONS: i32 = 4096;

/// The agent's token settings (Kafka's `delegation.token.*`).
#[derive(Clone)]
pub struct TokenConfig {
    pub secret: Vec<u8>,
    pub max_lifetime_ms: i64,
    pub expiry_time_ms: i64,
}

impl std::fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConfig")
            .field("secret", &"<hidden>")
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("expiry_time_ms", &self.expiry_time_ms)
            .finish()
    }
}

/// A token's HMAC: HMAC-SHA512 of its id under the shared secret.
pub fn hmac(secret: &[u8], token_id: &str) -> Vec<u8> {
    Mechanism::Sha512.hmac(secret, &[token_id.as_bytes()])
}

/// What PostgreSQL keeps of a token's HMAC (its password): SHA-256.
pub fn hmac_hash(hmac: &[u8]) -> Vec<u8> {
    Mechanism::Sha256.hash(hmac)
}

/// The password its holder logs in with: the HMAC in base64.
pub fn password(hmac: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(hmac)
}

/// A new token for `owner`, asked by `requester` at `now_ms`, lasting at
/// most `max_lifetime_ms` (-1: the agent's maximum), and its HMAC.
pub fn new_token(
    cfg: &TokenConfig,
    owner: String,
    requester: String,
    renewers: Vec<String>,
    max_lifetime_ms: i64,
    now_ms: i64,
) -> (TokenRow, Vec<u8>) {
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes(16));
    let mac = hmac(&cfg.secret, &id);
    let pw = password(&mac);
    let lifetime = if max_lifetime_ms <= 0 {
        cfg.max_lifetime_ms
    } else {
        max_lifetime_ms.min(cfg.max_lifetime_ms)
    };
    let max_ms = now_ms.saturating_add(lifetime);
    let scram = |m: Mechanism| {
        let c = Credential::from_password(m, pw.as_bytes(), TOKEN_ITERATIONS);
        TokenScram {
            salt: c.salt,
            stored_key: c.stored_key,
            server_key: c.server_key,
        }
    };
    let row = TokenRow {
        token_id: id,
        hmac_hash: hmac_hash(&mac),
        owner,
        requester,
        renewers,
        issue_ms: now_ms,
        expiry_ms: now_ms.saturating_add(cfg.expiry_time_ms).min(max_ms),
        max_ms,
        iterations: TOKEN_ITERATIONS,
        sha256: scram(Mechanism::Sha256),
        sha512: scram(Mechanism::Sha512),
    };
    (row, mac)
}

/// The tokens in force, by id.
#[derive(Default)]
pub struct TokenSet {
    by_id: HashMap<String, TokenRow>,
}

impl TokenSet {
    pub fn new(rows: Vec<TokenRow>) -> TokenSet {
        TokenSet {
            by_id: rows.into_iter().map(|t| (t.token_id.clone(), t)).collect(),
        }
    }

    /// The SCRAM credential of token `id` for `m`, its owner and expiry,
    /// while it is in force at `now_ms`.
    pub fn login(&self, id: &str, m: Mechanism, now_ms: i64) -> Option<(Credential, String, i64)> {
        let t = self.by_id.get(id).filter(|t| t.expiry_ms >= now_ms)?;
        let s = match m {
            Mechanism::Sha256 => &t.sha256,
            Mechanism::Sha512 => &t.sha512,
        };
        let credential = Credential {
            salt: s.salt.clone(),
            stored_key: s.stored_key.clone(),
            server_key: s.server_key.clone(),
            iterations: t.iterations,
        };
        Some((credential, t.owner.clone(), t.expiry_ms))
    }

    /// Every token in force at `now_ms`, by id.
    pub fn all(&self, now_ms: i64) -> impl Iterator<Item = &TokenRow> {
        let mut v: Vec<&TokenRow> = self
            .by_id
            .values()
            .filter(|t| t.expiry_ms >= now_ms)
            .collect();
        v.sort_by(|a, b| a.token_id.cmp(&b.token_id));
        v.into_iter()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// An agent's copy of the tokens.
pub struct Tokens {
    pub copy: AgentCopy<TokenSet>,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens {
            copy: AgentCopy::new(TokenSet::default()),
        }
    }
}

impl Tokens {
    pub async fn reload(
        &self,
        meta: &rutomq_meta::Meta,
    ) -> Result<Arc<TokenSet>, rutomq_meta::MetaError> {
        self.copy
            .reload(
                "delegation tokens",
                meta.token_load(crate::wall::now_ms()),
                TokenSet::new,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_logs_in_with_its_hmac_until_it_expires() {
        let cfg = TokenConfig {
            secret: b"s3cret".to_vec(),
            max_lifetime_ms: 10_000,
            expiry_time_ms: 1_000,
        };
        let (t, mac) = new_token(
            &cfg,
            "User:alice".into(),
            "User:alice".into(),
            vec![],
            -1,
            100,
        );
        assert_eq!((t.expiry_ms, t.max_ms), (1_100, 10_100));
        assert_eq!(mac, hmac(b"s3cret", &t.token_id));
        assert_eq!(t.hmac_hash, hmac_hash(&mac));
        let set = TokenSet::new(vec![t.clone()]);
        let (c, owner, expiry) = set.login(&t.token_id, Mechanism::Sha512, 500).unwrap();
        assert_eq!(expiry, 1_100);
        assert_eq!(owner, "User:alice");
        assert!(c.verifies(Mechanism::Sha512, password(&mac).as_bytes()));
        assert!(
            set.login(&t.token_id, Mechanism::Sha256, 1_101).is_none(),
            "expired"
        );
        let (capped, _) = new_token(&cfg, "User:a".into(), "User:a".into(), vec![], 50_000, 0);
        assert_eq!(capped.max_ms, 10_000);
    }
}
