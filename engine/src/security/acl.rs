//! Kafka's ACL model and its decisions, as `StandardAuthorizer` makes them:
//! bindings of (resource type, name, pattern) to (principal, host,
//! operation, ALLOW/DENY); DENY wins; `ALL` covers every operation;
//! DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS
//! by ALTER_CONFIGS; a literal `*` names every resource of its type, a
//! prefixed pattern every name it begins; `User:*` is every principal, `*`
//! every host; super users may do anything; a resource no binding names is
//! open only with `allow.everyone.if.no.acl.found`.
//!
//! Filters (DescribeAcls, DeleteAcls) follow Kafka's `AclBindingFilter`:
//! ANY and null match everything, the MATCH pattern type matches what would
//! apply to a resource of that name.

/// Kafka's `ResourceType` codes.
pub mod resource {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    pub const DELEGATION_TOKEN: i8 = 6;
    pub const USER: i8 = 7;

    /// The type's name as Kafka's logs write it.
    pub fn name(code: i8) -> &'static str {
        match code {
            TOPIC => "Topic",
            GROUP => "Group",
            CLUSTER => "Cluster",
            TRANSACTIONAL_ID => "TransactionalId",
            DELEGATION_TOKEN => "DelegationToken",
            USER => "User",
            _ => "Unknown",
        }
    }
}

/// Kafka's `PatternType` codes.
pub mod pattern {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// Kafka's `AclOperation` codes.
pub mod op {
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;
    pub const CREATE_TOKENS: i8 = 13;
    pub const DESCRIBE_TOKENS: i8 = 14;
    pub const TWO_PHASE_COMMIT: i8 = 15;

    /// The operation's name as Kafka's logs write it.
    pub fn name(code: i8) -> &'static str {
        match code {
            ALL => "All",
            READ => "Read",
            WRITE => "Write",
            CREATE => "Create",
            DELETE => "Delete",
            ALTER => "Alter",
            DESCRIBE => "Describe",
            CLUSTER_ACTION => "ClusterAction",
            DESCRIBE_CONFIGS => "DescribeConfigs",
            ALTER_CONFIGS => "AlterConfigs",
            IDEMPOTENT_WRITE => "IdempotentWrite",
            CREATE_TOKENS => "CreateTokens",
            DESCRIBE_TOKENS => "DescribeTokens",
            TWO_PHASE_COMMIT => "TwoPhaseCommit",
            _ => "Unknown",
        }
    }
}

/// Kafka's `AclPermissionType` codes.
pub mod permission {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// The one name a CLUSTER resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The name a literal binding gives to every resource of its type.
pub const WILDCARD: &str = "*";
/// Every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

use std::collections::HashMap;

pub use rutomq_meta::acl::AclBinding;

/// What a DescribeAcls or DeleteAcls filter asks for (`None`: any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

fn known_resource(t: i8) -> bool {
    (resource::TOPIC..=resource::USER).contains(&t)
}

fn known_operation(o: i8) -> bool {
    (op::ALL..=op::TWO_PHASE_COMMIT).contains(&o)
}

/// A client's address as Kafka's ACLs name hosts (Java's
/// `getHostAddress`): IPv4 dotted, an IPv4-mapped IPv6 address as its IPv4
/// one, IPv6 as eight uncompressed hexadecimal groups
/// (`0:0:0:0:0:0:0:1`).
pub fn acl_host(ip: std::net::IpAddr) -> String {
    match ip.to_canonical() {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => v6
            .segments()
            .iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join(":"),
    }
}

/// A principal as Kafka writes it: `Type:name`, both parts non-empty.
pub fn valid_principal(p: &str) -> bool {
    p.split_once(':')
        .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
}

/// Why CreateAcls refuses this binding (Kafka's INVALID_REQUEST
/// messages), if it does.
pub fn invalid(b: &AclBinding) -> Option<String> {
    if !known_resource(b.resource_type) {
        return Some(format!("Invalid resource type {}", b.resource_type));
    }
    if !matches!(b.pattern_type, pattern::LITERAL | pattern::PREFIXED) {
        return Some(format!("Invalid pattern type {}", b.pattern_type));
    }
    if b.resource_name.is_empty() {
        return Some("Invalid empty resource name specified".into());
    }
    // Kafka's checks, no more: a PREFIXED `*`, an empty host or `User:`
    // are stored as it stores them (and match what they match).
    if b.resource_type == resource::CLUSTER && b.resource_name != CLUSTER_NAME {
        return Some(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    if !b.principal.contains(':') {
        return Some(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
            b.principal
        ));
    }
    if !known_operation(b.operation) {
        return Some(format!("Invalid operation {}", b.operation));
    }
    if !matches!(b.permission, permission::ALLOW | permission::DENY) {
        return Some(format!("Invalid permission type {}", b.permission));
    }
    None
}

fn applies_to(b: &AclBinding, principal: &str, host: &str) -> bool {
    (b.principal == principal || b.principal == WILDCARD_PRINCIPAL)
        && (b.host == host || b.host == WILDCARD)
}

impl AclFilter {
    /// The filter that matches every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: resource::ANY,
            resource_name: None,
            pattern_type: pattern::ANY,
            principal: None,
            host: None,
            operation: op::ANY,
            permission: permission::ANY,
        }
    }

    /// Why a filter cannot be used (DeleteAcls refuses it), if so.
    pub fn invalid(&self) -> Option<String> {
        if self.resource_type != resource::ANY && !known_resource(self.resource_type) {
            return Some(format!("Invalid resource type {}", self.resource_type));
        }
        if !(pattern::ANY..=pattern::PREFIXED).contains(&self.pattern_type) {
            return Some(format!("Invalid pattern type {}", self.pattern_type));
        }
        if self.operation != op::ANY && !known_operation(self.operation) {
            return Some(format!("Invalid operation {}", self.operation));
        }
        if !(permission::ANY..=permission::ALLOW).contains(&self.permission) {
            return Some(format!("Invalid permission type {}", self.permission));
        }
        None
    }

    pub fn matches(&self, b: &AclBinding) -> bool {
        let resource_ok = (self.resource_type == resource::ANY
            || self.resource_type == b.resource_type)
            && match (&self.resource_name, self.pattern_type) {
                (None, pattern::ANY | pattern::MATCH) => true,
                (None, p) => p == b.pattern_type,
                (Some(n), pattern::ANY) => *n == b.resource_name,
                (Some(n), pattern::MATCH) => match b.pattern_type {
                    pattern::LITERAL => b.resource_name == *n || b.resource_name == WILDCARD,
                    pattern::PREFIXED => n.starts_with(b.resource_name.as_str()),
                    _ => false,
                },
                (Some(n), p) => p == b.pattern_type && *n == b.resource_name,
            };
        resource_ok
            && self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && (self.operation == op::ANY || self.operation == b.operation)
            && (self.permission == permission::ANY || self.permission == b.permission)
    }
}

/// The operations an ALLOW of `granted` also allows.
fn allows(granted: i8, asked: i8) -> bool {
    granted == asked
        || granted == op::ALL
        || (asked == op::DESCRIBE
            && matches!(granted, op::READ | op::WRITE | op::DELETE | op::ALTER))
        || (asked == op::DESCRIBE_CONFIGS && granted == op::ALTER_CONFIGS)
}

/// The authorizer's settings.
#[derive(Clone, Debug, Default)]
pub struct AuthorizerConfig {
    /// Kafka's `super.users` (principals, `User:name`).
    pub super_users: Vec<String>,
    /// Kafka's `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

impl AuthorizerConfig {
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.iter().any(|s| s == principal)
    }

    /// Parses Kafka's `super.users` list (`User:a;User:b`).
    pub fn parse_super_users(s: &str) -> Result<Vec<String>, String> {
        s.split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                if valid_principal(p) {
                    Ok(p.to_owned())
                } else {
                    Err(format!(
                        "{p:?} is not a principal (Type:name, e.g. User:admin)"
                    ))
                }
            })
            .collect()
    }
}

/// The bindings of one resource type, indexed by what they name: a
/// decision looks up the literal name, the literal `*` and the name's
/// prefixes of the lengths some prefixed binding has, never every binding.
#[derive(Debug, Default)]
struct TypeIndex {
    literal: HashMap<String, Vec<AclBinding>>,
    prefixed: HashMap<String, Vec<AclBinding>>,
    /// The distinct byte lengths of the prefixed names, ascending.
    prefix_lengths: Vec<usize>,
}

impl TypeIndex {
    /// Every binding that names resource `name`.
    fn covering<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a AclBinding> {
        let literal = self.literal.get(name).into_iter().flatten();
        let wildcard = (name != WILDCARD)
            .then(|| self.literal.get(WILDCARD))
            .flatten()
            .into_iter()
            .flatten();
        let prefixed = self
            .prefix_lengths
            .iter()
            .take_while(move |&&n| n <= name.len())
            .filter_map(move |&n| name.get(..n))
            .filter_map(move |p| self.prefixed.get(p))
            .flatten();
        literal.chain(wildcard).chain(prefixed)
    }

    fn all(&self) -> impl Iterator<Item = &AclBinding> {
        self.literal
            .values()
            .chain(self.prefixed.values())
            .flatten()
    }
}

/// Every ACL, indexed by resource type and name, as one agent holds them.
#[derive(Debug, Default)]
pub struct AclSet {
    by_type: HashMap<i8, TypeIndex>,
    len: usize,
}

/// The operations Kafka reports in `authorized_operations` for each
/// resource type.
pub fn reported_operations(resource_type: i8) -> &'static [i8] {
    match resource_type {
        resource::TOPIC => &[
            op::READ,
            op::WRITE,
            op::CREATE,
            op::DELETE,
            op::ALTER,
            op::DESCRIBE,
            op::DESCRIBE_CONFIGS,
            op::ALTER_CONFIGS,
        ],
        resource::GROUP => &[
            op::READ,
            op::DELETE,
            op::DESCRIBE,
            op::DESCRIBE_CONFIGS,
            op::ALTER_CONFIGS,
        ],
        resource::CLUSTER => &[
            op::CREATE,
            op::ALTER,
            op::DESCRIBE,
            op::CLUSTER_ACTION,
            op::DESCRIBE_CONFIGS,
            op::ALTER_CONFIGS,
            op::IDEMPOTENT_WRITE,
        ],
        resource::TRANSACTIONAL_ID => &[op::WRITE, op::DESCRIBE],
        _ => &[],
    }
}

/// `operations` as the bit set of `authorized_operations` (bit n for
/// code n).
pub fn operation_bits(operations: impl IntoIterator<Item = i8>) -> i32 {
    operations.into_iter().fold(0, |bits, o| bits | (1 << o))
}

impl AclSet {
    pub fn new(bindings: impl IntoIterator<Item = AclBinding>) -> AclSet {
        let mut set = AclSet::default();
        for b in bindings {
            let index = set.by_type.entry(b.resource_type).or_default();
            if b.pattern_type == pattern::PREFIXED {
                if !index.prefix_lengths.contains(&b.resource_name.len()) {
                    index.prefix_lengths.push(b.resource_name.len());
                }
                index
                    .prefixed
                    .entry(b.resource_name.clone())
                    .or_default()
                    .push(b);
            } else {
                index
                    .literal
                    .entry(b.resource_name.clone())
                    .or_default()
                    .push(b);
            }
            set.len += 1;
        }
        for index in set.by_type.values_mut() {
            index.prefix_lengths.sort_unstable();
        }
        set
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every binding a filter matches.
    pub fn matching<'a>(&'a self, f: &'a AclFilter) -> impl Iterator<Item = &'a AclBinding> {
        self.by_type
            .values()
            .flat_map(TypeIndex::all)
            .filter(|b| f.matches(b))
    }

    /// Whether `principal` from `host` may do `operation` on resource
    /// (`resource_type`, `name`).
    pub fn authorize(
        &self,
        cfg: &AuthorizerConfig,
        principal: &str,
        host: &str,
        operation: i8,
        resource_type: i8,
        name: &str,
    ) -> bool {
        if cfg.is_super_user(principal) {
            return true;
        }
        let mut named = false;
        let mut allowed = false;
        let Some(index) = self.by_type.get(&resource_type) else {
            return cfg.allow_if_no_acl;
        };
        for b in index.covering(name) {
            named = true;
            if !applies_to(b, principal, host) {
                continue;
            }
            match b.permission {
                permission::DENY if b.operation == operation || b.operation == op::ALL => {
                    return false
                }
                permission::ALLOW if allows(b.operation, operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!named && cfg.allow_if_no_acl)
    }

    /// Whether `principal` from `host` may do `operation` on some resource
    /// of `resource_type` (Kafka's `authorizeByResourceType`, which lets
    /// WRITE on any topic stand for IDEMPOTENT_WRITE): an ALLOW binding
    /// for it that no DENY of the principal covers.
    pub fn authorize_any(
        &self,
        cfg: &AuthorizerConfig,
        principal: &str,
        host: &str,
        operation: i8,
        resource_type: i8,
    ) -> bool {
        if cfg.is_super_user(principal) {
            return true;
        }
        let Some(index) = self.by_type.get(&resource_type) else {
            return cfg.allow_if_no_acl;
        };
        let denies: Vec<&AclBinding> = index
            .all()
            .filter(|b| {
                b.permission == permission::DENY
                    && (b.operation == operation || b.operation == op::ALL)
                    && applies_to(b, principal, host)
            })
            .collect();
        let denied = |allow: &AclBinding| {
            denies
                .iter()
                .any(|d| match (d.pattern_type, allow.pattern_type) {
                    (pattern::LITERAL, _) if d.resource_name == WILDCARD => true,
                    (pattern::LITERAL, pattern::LITERAL) => d.resource_name == allow.resource_name,
                    (pattern::PREFIXED, _) => {
                        allow.resource_name.starts_with(d.resource_name.as_str())
                    }
                    _ => false,
                })
        };
        index.all().any(|b| {
            b.permission == permission::ALLOW
                && allows(b.operation, operation)
                && applies_to(b, principal, host)
                && !denied(b)
        })
    }

    /// The `authorized_operations` bits of resource (`resource_type`,
    /// `name`) for `principal` from `host`.
    pub fn authorized_operations(
        &self,
        cfg: &AuthorizerConfig,
        principal: &str,
        host: &str,
        resource_type: i8,
        name: &str,
    ) -> i32 {
        operation_bits(
            reported_operations(resource_type)
                .iter()
                .copied()
                .filter(|&o| self.authorize(cfg, principal, host, o, resource_type, name)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: i8, name: &str, pt: i8, who: &str, operation: i8, perm: i8) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: who.into(),
            host: "*".into(),
            operation,
            permission: perm,
        }
    }

    #[test]
    fn decisions_follow_kafka() {
        use op::*;
        use permission::{ALLOW, DENY};
        use resource::{GROUP, TOPIC};
        let set = AclSet::new([
            acl(TOPIC, "orders", pattern::LITERAL, "User:alice", READ, ALLOW),
            acl(TOPIC, "logs-", pattern::PREFIXED, "User:*", WRITE, ALLOW),
            acl(
                TOPIC,
                "logs-secret",
                pattern::LITERAL,
                "User:bob",
                ALL,
                DENY,
            ),
            acl(TOPIC, "*", pattern::LITERAL, "User:carol", ALL, ALLOW),
            acl(GROUP, "g", pattern::LITERAL, "User:alice", READ, ALLOW),
            AclBinding {
                host: "10.0.0.1".into(),
                ..acl(TOPIC, "hosted", pattern::LITERAL, "User:dave", WRITE, ALLOW)
            },
        ]);
        let cfg = AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let can = |who: &str, host: &str, o: i8, rt: i8, name: &str| {
            set.authorize(&cfg, who, host, o, rt, name)
        };
        assert!(can("User:alice", "1.2.3.4", READ, TOPIC, "orders"));
        assert!(
            can("User:alice", "1.2.3.4", DESCRIBE, TOPIC, "orders"),
            "implied"
        );
        assert!(!can("User:alice", "1.2.3.4", WRITE, TOPIC, "orders"));
        assert!(!can("User:alice", "1.2.3.4", READ, TOPIC, "orders2"));
        assert!(
            can("User:bob", "h", WRITE, TOPIC, "logs-app"),
            "prefix, any user"
        );
        assert!(
            !can("User:bob", "h", WRITE, TOPIC, "logs-secret"),
            "DENY wins"
        );
        assert!(can("User:eve", "h", WRITE, TOPIC, "logs-secret"));
        assert!(
            can("User:carol", "h", DELETE, TOPIC, "anything"),
            "wildcard name, ALL"
        );
        assert!(can(
            "User:admin",
            "h",
            ALTER,
            resource::CLUSTER,
            CLUSTER_NAME
        ));
        assert!(can("User:dave", "10.0.0.1", WRITE, TOPIC, "hosted"));
        assert!(
            !can("User:dave", "10.0.0.2", WRITE, TOPIC, "hosted"),
            "host"
        );
        assert!(!can("User:alice", "h", READ, GROUP, "other"));
        assert!(!can("User:x", "h", DESCRIBE_CONFIGS, TOPIC, "unnamed"));
        // No binding names the resource: open only when configured so.
        let open = AuthorizerConfig {
            allow_if_no_acl: true,
            ..cfg.clone()
        };
        assert!(set.authorize(&open, "User:x", "h", READ, GROUP, "free"));
        assert!(!set.authorize(&open, "User:x", "h", READ, TOPIC, "orders"));
        let alter_configs = AclSet::new([acl(
            TOPIC,
            "t",
            pattern::LITERAL,
            "User:x",
            ALTER_CONFIGS,
            ALLOW,
        )]);
        assert!(alter_configs.authorize(&cfg, "User:x", "h", DESCRIBE_CONFIGS, TOPIC, "t"));
        assert!(!alter_configs.authorize(&cfg, "User:x", "h", READ, TOPIC, "t"));
    }

    #[test]
    fn the_index_finds_every_binding_that_names_a_resource() {
        use op::*;
        use permission::{ALLOW, DENY};
        use resource::TOPIC;
        // Prefixes of several lengths, a multi-byte name, the wildcard.
        let set = AclSet::new([
            acl(TOPIC, "a", pattern::PREFIXED, "User:u", READ, ALLOW),
            acl(TOPIC, "ab-", pattern::PREFIXED, "User:v", READ, ALLOW),
            acl(TOPIC, "ab-x", pattern::PREFIXED, "User:u", READ, DENY),
            acl(TOPIC, "é", pattern::PREFIXED, "User:w", READ, ALLOW),
            acl(TOPIC, "*", pattern::LITERAL, "User:star", WRITE, ALLOW),
        ]);
        let cfg = AuthorizerConfig::default();
        let can = |who: &str, name: &str, o: i8| set.authorize(&cfg, who, "h", o, TOPIC, name);
        assert!(can("User:u", "a", READ) && can("User:u", "abc", READ));
        assert!(can("User:v", "ab-1", READ) && !can("User:v", "ab", READ));
        assert!(!can("User:u", "ab-xyz", READ), "the longer DENY prefix");
        assert!(can("User:w", "été", READ) && !can("User:w", "e", READ));
        assert!(can("User:star", "anything", WRITE) && can("User:star", "*", WRITE));
        assert!(!can("User:star", "anything", READ));
        assert_eq!(set.len(), 5);
        assert_eq!(set.matching(&AclFilter::any()).count(), 5);
    }

    #[test]
    fn idempotent_write_follows_write_on_some_topic() {
        use op::*;
        use permission::{ALLOW, DENY};
        use resource::TOPIC;
        let cfg = AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let set = AclSet::new([
            acl(TOPIC, "t", pattern::LITERAL, "User:w", WRITE, ALLOW),
            acl(TOPIC, "p-", pattern::PREFIXED, "User:d", WRITE, ALLOW),
            acl(TOPIC, "p", pattern::PREFIXED, "User:d", WRITE, DENY),
            acl(TOPIC, "q", pattern::LITERAL, "User:e", ALL, ALLOW),
            acl(TOPIC, "*", pattern::LITERAL, "User:e", WRITE, DENY),
        ]);
        let any = |who: &str| set.authorize_any(&cfg, who, "h", WRITE, TOPIC);
        assert!(any("User:w"));
        assert!(!any("User:d"), "its only ALLOW is under a DENY prefix");
        assert!(!any("User:e"), "a DENY on every topic");
        assert!(!any("User:nobody"));
        assert!(any("User:admin"));
        assert!(!set.authorize_any(&cfg, "User:w", "h", READ, TOPIC));
    }

    #[test]
    fn authorized_operations_are_the_allowed_bits() {
        use op::*;
        use permission::ALLOW;
        let set = AclSet::new([
            acl(
                resource::TOPIC,
                "t",
                pattern::LITERAL,
                "User:r",
                READ,
                ALLOW,
            ),
            acl(resource::GROUP, "g", pattern::LITERAL, "User:r", ALL, ALLOW),
        ]);
        let cfg = AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_if_no_acl: false,
        };
        let ops =
            |who: &str, rt: i8, name: &str| set.authorized_operations(&cfg, who, "h", rt, name);
        assert_eq!(
            ops("User:r", resource::TOPIC, "t"),
            (1 << READ) | (1 << DESCRIBE)
        );
        assert_eq!(ops("User:r", resource::TOPIC, "u"), 0);
        assert_eq!(
            ops("User:r", resource::GROUP, "g"),
            (1 << READ)
                | (1 << DELETE)
                | (1 << DESCRIBE)
                | (1 << DESCRIBE_CONFIGS)
                | (1 << ALTER_CONFIGS)
        );
        assert_eq!(
            ops("User:admin", resource::CLUSTER, CLUSTER_NAME),
            operation_bits(reported_operations(resource::CLUSTER).iter().copied())
        );
    }

    #[test]
    fn hosts_are_written_as_java_writes_them() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(acl_host(ip("10.0.0.1")), "10.0.0.1");
        assert_eq!(acl_host(ip("::ffff:10.0.0.1")), "10.0.0.1");
        assert_eq!(acl_host(ip("::1")), "0:0:0:0:0:0:0:1");
        assert_eq!(acl_host(ip("fe80::1:abcd")), "fe80:0:0:0:0:0:1:abcd");
    }

    #[test]
    fn super_users_parse_as_kafka_writes_them() {
        assert_eq!(
            AuthorizerConfig::parse_super_users("User:admin; User:ops;").unwrap(),
            vec!["User:admin".to_owned(), "User:ops".to_owned()]
        );
        assert!(AuthorizerConfig::parse_super_users("admin").is_err());
        assert!(AuthorizerConfig::parse_super_users("").unwrap().is_empty());
    }

    #[test]
    fn filters_follow_kafka() {
        use permission::ALLOW;
        let lit = acl(
            resource::TOPIC,
            "orders",
            pattern::LITERAL,
            "User:a",
            op::READ,
            ALLOW,
        );
        let pre = acl(
            resource::TOPIC,
            "ord",
            pattern::PREFIXED,
            "User:b",
            op::WRITE,
            ALLOW,
        );
        let star = acl(
            resource::TOPIC,
            "*",
            pattern::LITERAL,
            "User:c",
            op::READ,
            ALLOW,
        );
        let any = AclFilter::any();
        for b in [&lit, &pre, &star] {
            assert!(any.matches(b));
        }
        let m = AclFilter {
            resource_name: Some("orders".into()),
            pattern_type: pattern::MATCH,
            ..any.clone()
        };
        assert!(m.matches(&lit) && m.matches(&pre) && m.matches(&star));
        let exact = AclFilter {
            pattern_type: pattern::ANY,
            ..m.clone()
        };
        assert!(exact.matches(&lit) && !exact.matches(&pre) && !exact.matches(&star));
        let prefixed = AclFilter {
            resource_name: None,
            pattern_type: pattern::PREFIXED,
            ..any.clone()
        };
        assert!(!prefixed.matches(&lit) && prefixed.matches(&pre));
        let by_principal = AclFilter {
            principal: Some("User:b".into()),
            ..any.clone()
        };
        assert!(by_principal.matches(&pre) && !by_principal.matches(&lit));
    }

    #[test]
    fn bad_bindings_are_named() {
        let good = acl(
            resource::TOPIC,
            "t",
            pattern::LITERAL,
            "User:a",
            op::READ,
            permission::ALLOW,
        );
        assert_eq!(invalid(&good), None);
        for bad in [
            AclBinding {
                resource_type: resource::ANY,
                ..good.clone()
            },
            AclBinding {
                pattern_type: pattern::MATCH,
                ..good.clone()
            },
            AclBinding {
                resource_name: String::new(),
                ..good.clone()
            },
            AclBinding {
                resource_type: resource::CLUSTER,
                ..good.clone()
            },
            AclBinding {
                principal: "alice".into(),
                ..good.clone()
            },
            AclBinding {
                operation: op::ANY,
                ..good.clone()
            },
            AclBinding {
                operation: 99,
                ..good.clone()
            },
            AclBinding {
                permission: permission::ANY,
                ..good.clone()
            },
        ] {
            assert!(invalid(&bad).is_some(), "{bad:?}");
        }
    }
}
