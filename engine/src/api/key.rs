//! API keys as the registry knows them: kafka-protocol's [`ApiKey`], and
//! the keys it lacks (served with codecs generated from Kafka's specs,
//! [`super::generated`]).

use std::fmt;

use kafka_protocol::messages::ApiKey;

/// A Kafka API key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(pub i16);

/// The keys kafka-protocol 0.18 has no codec for, by name.
const GENERATED: [(i16, &str); 2] = [(88, "StreamsGroupHeartbeat"), (89, "StreamsGroupDescribe")];

impl Key {
    pub const fn of(key: ApiKey) -> Key {
        Key(key as i16)
    }

    /// kafka-protocol's name for the key, when it has one.
    pub fn api_key(self) -> Option<ApiKey> {
        ApiKey::try_from(self.0).ok()
    }

    /// Whether the key is one of `keys`.
    pub fn is_any(self, keys: &[ApiKey]) -> bool {
        keys.iter().any(|k| self == *k)
    }
}

impl PartialEq<ApiKey> for Key {
    fn eq(&self, other: &ApiKey) -> bool {
        self.0 == *other as i16
    }
}

impl From<ApiKey> for Key {
    fn from(key: ApiKey) -> Key {
        Key::of(key)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(k) = self.api_key() {
            return write!(f, "{k:?}");
        }
        match GENERATED.iter().find(|(n, _)| *n == self.0) {
            Some((_, name)) => f.write_str(name),
            None => write!(f, "ApiKey({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_library_or_the_generated_list() {
        assert_eq!(format!("{:?}", Key::of(ApiKey::Fetch)), "Fetch");
        assert_eq!(format!("{:?}", Key(88)), "StreamsGroupHeartbeat");
        assert_eq!(format!("{:?}", Key(1000)), "ApiKey(1000)");
        assert!(Key(1) == ApiKey::Fetch);
        assert!(Key(18).is_any(&[ApiKey::Fetch, ApiKey::ApiVersions]));
    }
}
