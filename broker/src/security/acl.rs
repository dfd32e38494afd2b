//! Kafka ACLs: bindings, filters, CreateAcls validation and an authoriser.
//!
//! Follows Apache Kafka's `StandardAuthorizer` semantics (literal, wildcard
//! and KIP-290 prefixed patterns; deny wins; implied DESCRIBE /
//! DESCRIBE_CONFIGS; `allow.everyone.if.no.acl.found`; super users; KIP-679
//! and KIP-430 helpers). Sans-IO: plain data and pure functions, no I/O,
//! clocks or logging; callers persist [`Authorizer::to_json`] themselves.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $code:literal => $text:literal),+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[repr(i8)]
        pub enum $name { $(#[serde(rename = $text)] $variant = $code),+ }

        impl $name {
            /// Every value, in code order.
            pub const VALUES: &'static [$name] = &[$($name::$variant),+];
            /// Kafka's wire code.
            pub fn code(self) -> i8 { self as i8 }
            /// The value for a wire code; `None` for 0 (UNKNOWN) and unknown codes.
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)+ _ => None }
            }
            /// Kafka's name for the value, e.g. `"TRANSACTIONAL_ID"` (also the JSON form).
            pub fn kafka_name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// Inverse of [`Self::kafka_name`] (exact, upper case).
            pub fn from_kafka_name(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

wire_enum!(
    /// Kafka `ResourceType`.
    ResourceType { Any = 1 => "ANY", Topic = 2 => "TOPIC", Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER", TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN", User = 7 => "USER" }
);
wire_enum!(
    /// Kafka `PatternType` (KIP-290): bindings are `Literal` or `Prefixed`; `Any` and `Match`
    /// are for filters only.
    PatternType { Any = 1 => "ANY", Match = 2 => "MATCH", Literal = 3 => "LITERAL",
        Prefixed = 4 => "PREFIXED" }
);
wire_enum!(
    /// Kafka `AclOperation`.
    Operation { Any = 1 => "ANY", All = 2 => "ALL", Read = 3 => "READ", Write = 4 => "WRITE",
        Create = 5 => "CREATE", Delete = 6 => "DELETE", Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE", ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS", AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE", CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS" }
);
wire_enum!(
    /// Kafka `AclPermissionType`.
    Permission { Any = 1 => "ANY", Deny = 2 => "DENY", Allow = 3 => "ALLOW" }
);

/// The only valid name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// Literal resource name matching every resource; host matching every host.
pub const WILDCARD: &str = "*";
/// Principal matching every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// Kafka's INVALID_REQUEST error code.
pub const INVALID_REQUEST: i16 = 42;

impl Operation {
    /// Does a DENY ACL for `self` deny `requested`? (Only the operation itself or ALL.)
    fn denies(self, requested: Operation) -> bool {
        self == Operation::All || self == requested
    }

    /// Does an ALLOW ACL for `self` allow `requested`? ALL, the operation itself, and the
    /// implications READ/WRITE/DELETE/ALTER => DESCRIBE, ALTER_CONFIGS => DESCRIBE_CONFIGS.
    fn allows(self, requested: Operation) -> bool {
        use Operation::*;
        self == All
            || self == requested
            || (requested == Describe && matches!(self, Read | Write | Delete | Alter))
            || (requested == DescribeConfigs && self == AlterConfigs)
    }
}

impl ResourceType {
    /// The operations reported in KIP-430 `authorized_operations` for this type.
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Delete,
                Alter,
                Describe,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Delete, Describe],
            ResourceType::Cluster => &[
                Create,
                Alter,
                Describe,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
            ],
            ResourceType::TransactionalId => &[Write, Describe],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Any => &[],
        }
    }
}

/// One ACL: a resource pattern plus an access control entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// Does the entry name this requester (principal or `User:*`) and host (or `*`)?
    fn names(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == host || self.host == WILDCARD)
    }
}

/// A DescribeAcls / DeleteAcls filter. `None` strings and `Any` enums match everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBindingFilter {
    /// The filter matching every binding.
    pub const ANY: AclBindingFilter = AclBindingFilter {
        resource_type: ResourceType::Any,
        resource_name: None,
        pattern_type: PatternType::Any,
        principal: None,
        host: None,
        operation: Operation::Any,
        permission: Permission::Any,
    };

    /// Kafka's `AclBindingFilter.matches`. Resource name: with pattern `Any` or the binding's
    /// own pattern type it must be equal; with `Match` it matches a literal binding of that
    /// name or `*`, and any prefixed binding whose name is a prefix of it. Principal, host,
    /// operation and permission match exactly (no wildcard expansion) unless `None`/`Any`.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let type_ok =
            self.resource_type == ResourceType::Any || self.resource_type == b.resource_type;
        let pattern_ok = matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            || self.pattern_type == b.pattern_type;
        let name_ok = match &self.resource_name {
            None => true,
            Some(name) if self.pattern_type != PatternType::Match => *name == b.resource_name,
            Some(name) => match b.pattern_type {
                PatternType::Literal => *name == b.resource_name || b.resource_name == WILDCARD,
                PatternType::Prefixed => name.starts_with(b.resource_name.as_str()),
                PatternType::Any | PatternType::Match => false,
            },
        };
        type_ok
            && pattern_ok
            && name_ok
            && self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && (self.operation == Operation::Any || self.operation == b.operation)
            && (self.permission == Permission::Any || self.permission == b.permission)
    }
}

/// Why a binding cannot be created: Kafka's error code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclError {
    pub code: i16,
    pub message: String,
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for AclError {}

/// CreateAcls validation, in Kafka's order (broker `AclApis` checks, then the controller's
/// `validateNewAcl`, then principal parsing); every failure is INVALID_REQUEST. The principal
/// must be `Type:name`; unlike Kafka's parser, an empty type or name is rejected too.
/// Hosts are not validated (Kafka does not either).
pub fn validate(b: &AclBinding) -> Result<(), AclError> {
    let typed = b
        .principal
        .split_once(':')
        .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty());
    let message = if b.resource_type == ResourceType::Cluster && b.resource_name != CLUSTER_NAME {
        format!("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    } else if b.resource_name.is_empty() {
        "Invalid empty resource name".to_owned()
    } else if b.resource_type == ResourceType::Any {
        "Invalid resourceType ANY".to_owned()
    } else if !matches!(b.pattern_type, PatternType::Literal | PatternType::Prefixed) {
        format!("Invalid patternType {}", b.pattern_type.kafka_name())
    } else if b.operation == Operation::Any {
        "Invalid operation ANY".to_owned()
    } else if b.permission == Permission::Any {
        "Invalid permissionType ANY".to_owned()
    } else if !typed {
        let p = &b.principal;
        format!("Invalid principal {p:?}: expected a string in format principalType:principalName")
    } else {
        return Ok(());
    };
    Err(AclError {
        code: INVALID_REQUEST,
        message,
    })
}

/// The ACL store and authoriser. Bindings are kept in a `BTreeSet` ordered by
/// (resource type, resource name, ...), so a resource type or an exact
/// (type, name) pair is a contiguous range: authorising a name of length n costs
/// n + 2 range lookups (exact, `*`, and each prefix).
#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    acls: BTreeSet<AclBinding>,
    super_users: BTreeSet<String>,
    allow_everyone_if_no_acl_found: bool,
}

type Acl = AclBinding;

fn lowest(rt: ResourceType, name: &str) -> AclBinding {
    AclBinding {
        resource_type: rt,
        resource_name: name.to_owned(),
        pattern_type: PatternType::Any,
        principal: String::new(),
        host: String::new(),
        operation: Operation::Any,
        permission: Permission::Any,
    }
}

/// Every non-empty prefix of `name`, on char boundaries, the whole name included.
fn prefixes(name: &str) -> impl Iterator<Item = &str> {
    name.char_indices()
        .map(move |(i, c)| &name[..i + c.len_utf8()])
}

impl Authorizer {
    /// `super_users` are principal strings (`super.users`); the flag is
    /// `allow.everyone.if.no.acl.found`.
    pub fn new(super_users: Vec<String>, allow_everyone_if_no_acl_found: bool) -> Authorizer {
        Authorizer {
            acls: BTreeSet::new(),
            super_users: super_users.into_iter().collect(),
            allow_everyone_if_no_acl_found,
        }
    }

    /// All bindings, in (resource type, name, pattern, principal, host, op, permission) order.
    pub fn bindings(&self) -> impl Iterator<Item = &AclBinding> {
        self.acls.iter()
    }

    /// Validates and stores `b`. `Ok(false)` if it was already present (still a success in Kafka).
    pub fn add(&mut self, b: AclBinding) -> Result<bool, AclError> {
        validate(&b)?;
        Ok(self.acls.insert(b))
    }

    /// Removes and returns every binding the filter matches.
    pub fn remove_matching(&mut self, f: &AclBindingFilter) -> Vec<AclBinding> {
        let removed = self.describe(f);
        self.acls.retain(|b| !f.matches(b));
        removed
    }

    /// Every binding the filter matches.
    pub fn describe(&self, f: &AclBindingFilter) -> Vec<AclBinding> {
        self.acls.iter().filter(|b| f.matches(b)).cloned().collect()
    }

    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Bindings with exactly this resource type and name (any pattern type).
    fn section<'a>(&'a self, rt: ResourceType, name: &'a str) -> impl Iterator<Item = &'a Acl> {
        self.acls
            .range(lowest(rt, name)..)
            .take_while(move |b| b.resource_type == rt && b.resource_name == name)
    }

    /// Bindings whose pattern matches the resource: literal `name` or `*`, prefixed prefixes.
    fn matching<'a>(&'a self, rt: ResourceType, name: &'a str) -> impl Iterator<Item = &'a Acl> {
        let literal = |b: &&AclBinding| b.pattern_type == PatternType::Literal;
        let wildcard = (name != WILDCARD).then(|| self.section(rt, WILDCARD).filter(literal));
        self.section(rt, name)
            .filter(literal)
            .chain(wildcard.into_iter().flatten())
            .chain(prefixes(name).flat_map(move |p| {
                self.section(rt, p)
                    .filter(|b| b.pattern_type == PatternType::Prefixed)
            }))
    }

    /// Is `principal` (e.g. "User:alice"; "User:ANONYMOUS" when unauthenticated) from `host`
    /// (an IP string) allowed `op` on the resource? Super users: yes. Otherwise, over the ACLs
    /// whose pattern matches the resource: an applicable DENY (op or ALL) denies; else an
    /// applicable ALLOW (op, ALL or implying op) allows; else, if no ACL matches the resource
    /// at all (whoever it names), `allow.everyone.if.no.acl.found` decides; else deny.
    /// `op`/`rt` of `Any` (an error in Kafka) are denied.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        if op == Operation::Any || rt == ResourceType::Any {
            return false;
        }
        let (mut found, mut allowed) = (false, false);
        for b in self.matching(rt, name) {
            found = true;
            if !b.names(principal, host) {
                continue;
            }
            match b.permission {
                Permission::Deny if b.operation.denies(op) => return false,
                Permission::Allow if b.operation.allows(op) => allowed = true,
                _ => {}
            }
        }
        allowed || (!found && self.allow_everyone_if_no_acl_found)
    }

    /// KIP-679 `authorizeByResourceType`: may `op` be allowed on at least one resource of
    /// type `rt`? Follows Kafka's default `Authorizer.authorizeByResourceType`:
    /// 1. authorise against a name no prefixed or non-`*` literal ACL can match (Kafka uses
    ///    `"hardcode"`, we use `""`): super users, literal-`*` ALLOWs, and the
    ///    allow-everyone flag when no literal-`*` ACL exists for the type, say yes;
    /// 2. over this requester's ACLs of the type for `op` (or ALL): a literal-`*` DENY says no;
    ///    otherwise yes iff some literal ALLOW is neither denied literally nor by a prefixed
    ///    DENY of a prefix of it, or some prefixed ALLOW has no prefixed DENY on a prefix of it.
    ///
    /// Deviation: ALLOWs count through the implied operations too (READ allows DESCRIBE...),
    /// as in [`Self::authorize`]; Kafka only counts `op` and ALL here.
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        rt: ResourceType,
    ) -> bool {
        if op == Operation::Any || rt == ResourceType::Any {
            return false;
        }
        if self.authorize(principal, host, op, rt, "") {
            return true;
        }
        // Names of this requester's DENYs and ALLOWs of `op` on resources of type `rt`.
        let (mut deny_literal, mut deny_prefixed) = (Vec::new(), Vec::new());
        let (mut allow_literal, mut allow_prefixed) = (Vec::new(), Vec::new());
        let of_type = self
            .acls
            .range(lowest(rt, "")..)
            .take_while(|b| b.resource_type == rt);
        for b in of_type.filter(|b| b.names(principal, host)) {
            let name = b.resource_name.as_str();
            match (b.permission, b.pattern_type == PatternType::Literal) {
                (Permission::Deny, _) if !b.operation.denies(op) => {}
                (Permission::Allow, _) if !b.operation.allows(op) => {}
                (Permission::Deny, true) if name == WILDCARD => return false,
                (Permission::Deny, true) => deny_literal.push(name),
                (Permission::Deny, false) => deny_prefixed.push(name),
                (Permission::Allow, true) => allow_literal.push(name),
                (Permission::Allow, false) => allow_prefixed.push(name),
                (Permission::Any, _) => {}
            }
        }
        let dominated = |name: &str| deny_prefixed.iter().any(|p| name.starts_with(p));
        // A literal-`*` ALLOW was already granted by the first step.
        allow_literal
            .iter()
            .any(|n| !deny_literal.contains(n) && !dominated(n))
            || allow_prefixed.iter().any(|n| !dominated(n))
    }

    /// KIP-430: `1 << code` for each operation of [`ResourceType::supported_operations`]
    /// that [`Self::authorize`] allows on the resource.
    pub fn authorized_operations(
        &self,
        principal: &str,
        host: &str,
        rt: ResourceType,
        name: &str,
    ) -> i32 {
        rt.supported_operations()
            .iter()
            .filter(|op| self.authorize(principal, host, **op, rt, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// The bindings as a JSON array (enum values by Kafka name), for a durable file.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.acls).expect("ACL bindings always serialise")
    }

    /// Parses [`Self::to_json`] output, validating every binding.
    pub fn bindings_from_json(text: &str) -> Result<Vec<AclBinding>, String> {
        let bindings: Vec<AclBinding> =
            serde_json::from_str(text).map_err(|e| format!("invalid ACL JSON: {e}"))?;
        for (i, b) in bindings.iter().enumerate() {
            validate(b).map_err(|e| format!("invalid ACL #{i}: {}", e.message))?;
        }
        Ok(bindings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "RT PATTERN NAME PRINCIPAL HOST OP PERMISSION" in Kafka names; `-` is empty.
    fn acl(spec: &str) -> AclBinding {
        let t: Vec<&str> = spec.split_whitespace().collect();
        assert_eq!(t.len(), 7, "{spec}");
        let s = |i: usize| String::from(if t[i] == "-" { "" } else { t[i] });
        AclBinding {
            resource_type: rt(t[0]),
            resource_name: s(2),
            pattern_type: PatternType::from_kafka_name(t[1]).expect(t[1]),
            principal: s(3),
            host: s(4),
            operation: op(t[5]),
            permission: Permission::from_kafka_name(t[6]).expect(t[6]),
        }
    }

    /// Same layout as [`acl`]; `-` is `None`.
    fn filter(spec: &str) -> AclBindingFilter {
        let b = acl(spec);
        let opt = |s: String| (!s.is_empty()).then_some(s);
        AclBindingFilter {
            resource_type: b.resource_type,
            resource_name: opt(b.resource_name),
            pattern_type: b.pattern_type,
            principal: opt(b.principal),
            host: opt(b.host),
            operation: b.operation,
            permission: b.permission,
        }
    }

    fn op(name: &str) -> Operation {
        Operation::from_kafka_name(name).expect(name)
    }

    fn rt(name: &str) -> ResourceType {
        ResourceType::from_kafka_name(name).expect(name)
    }

    /// Super user `User:admin`, the allow.everyone flag, and `acls` ("; "-separated, `-`: none).
    fn authorizer(acls: &str, everyone: bool) -> Authorizer {
        let mut a = Authorizer::new(vec!["User:admin".into()], everyone);
        for spec in acls.split("; ").filter(|s| *s != "-") {
            assert_eq!(a.add(acl(spec)), Ok(true), "{spec}");
        }
        a
    }

    /// Rows "rule | acls | allow.everyone y/n | call | expected", call one of
    /// `authorize P HOST OP RT NAME`, `any P HOST OP RT`, `ops P HOST RT NAME`.
    const AUTHORIZER: &[&str] = &[
        "no ACL, flag off | - | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "no ACL, flag on | - | y | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "literal allow | TOPIC LITERAL foo User:alice * READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "allow is per operation | TOPIC LITERAL foo User:alice * READ ALLOW | y | authorize User:alice 10.0.0.1 WRITE TOPIC foo | false",
        "other principal's ACL: resource has ACLs | TOPIC LITERAL foo User:bob * READ ALLOW | y | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "other resource's ACL doesn't count | TOPIC LITERAL bar User:bob * READ ALLOW | y | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "other resource type doesn't count | GROUP LITERAL foo User:bob * READ ALLOW | y | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "literal is not a prefix (flag) | TOPIC LITERAL fo User:bob * READ ALLOW | y | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "deny wins | TOPIC LITERAL foo User:alice * READ ALLOW; TOPIC LITERAL foo User:alice * READ DENY | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "deny ALL wins | TOPIC LITERAL foo User:alice * READ ALLOW; TOPIC LITERAL foo User:alice * ALL DENY | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "deny of other op | TOPIC LITERAL foo User:alice * READ ALLOW; TOPIC LITERAL foo User:alice * WRITE DENY | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "allow ALL | TOPIC LITERAL foo User:alice * ALL ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "wildcard principal allow | TOPIC LITERAL foo User:* * READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "wildcard principal, other type | TOPIC LITERAL foo User:* * READ ALLOW | n | authorize Group:ops 1.2.3.4 READ TOPIC foo | true",
        "wildcard principal deny | TOPIC LITERAL foo User:alice * READ ALLOW; TOPIC LITERAL foo User:* * READ DENY | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "host must match | TOPIC LITERAL foo User:alice 10.0.0.2 READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "exact host | TOPIC LITERAL foo User:alice 10.0.0.1 READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "deny from other host | TOPIC LITERAL foo User:alice * READ ALLOW; TOPIC LITERAL foo User:alice 10.0.0.2 READ DENY | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "wildcard resource allow | TOPIC LITERAL * User:alice * READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "wildcard resource deny | TOPIC LITERAL foo User:alice * READ ALLOW; TOPIC LITERAL * User:alice * READ DENY | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "prefixed allow | TOPIC PREFIXED fo User:alice * READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "prefixed equal to name | TOPIC PREFIXED foo User:alice * READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "prefixed longer than name | TOPIC PREFIXED foo- User:alice * READ ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "prefixed not a prefix (flag) | TOPIC PREFIXED bar User:bob * READ ALLOW | y | authorize User:alice 10.0.0.1 READ TOPIC foo | true",
        "prefixed deny in wildcard allow | TOPIC LITERAL * User:* * ALL ALLOW; TOPIC PREFIXED foo- User:* * WRITE DENY | n | authorize User:x 1.1.1.1 WRITE TOPIC foo-1 | false",
        "... outside the prefix | TOPIC LITERAL * User:* * ALL ALLOW; TOPIC PREFIXED foo- User:* * WRITE DENY | n | authorize User:x 1.1.1.1 WRITE TOPIC foo | true",
        "prefixed non-ascii | TOPIC PREFIXED tö User:alice * READ ALLOW | n | authorize User:alice 1.1.1.1 READ TOPIC töpic | true",
        "READ implies DESCRIBE | TOPIC LITERAL foo User:alice * READ ALLOW | n | authorize User:alice 10.0.0.1 DESCRIBE TOPIC foo | true",
        "WRITE implies DESCRIBE | TOPIC LITERAL foo User:alice * WRITE ALLOW | n | authorize User:alice 10.0.0.1 DESCRIBE TOPIC foo | true",
        "ALTER implies DESCRIBE | TOPIC LITERAL foo User:alice * ALTER ALLOW | n | authorize User:alice 10.0.0.1 DESCRIBE TOPIC foo | true",
        "CREATE doesn't imply DESCRIBE | TOPIC LITERAL foo User:alice * CREATE ALLOW | n | authorize User:alice 10.0.0.1 DESCRIBE TOPIC foo | false",
        "DESCRIBE doesn't imply READ | TOPIC LITERAL foo User:alice * DESCRIBE ALLOW | n | authorize User:alice 10.0.0.1 READ TOPIC foo | false",
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS | TOPIC LITERAL foo User:alice * ALTER_CONFIGS ALLOW | n | authorize User:alice 10.0.0.1 DESCRIBE_CONFIGS TOPIC foo | true",
        "ALTER doesn't imply DESCRIBE_CONFIGS | TOPIC LITERAL foo User:alice * ALTER ALLOW | n | authorize User:alice 10.0.0.1 DESCRIBE_CONFIGS TOPIC foo | false",
        "deny READ doesn't deny DESCRIBE | TOPIC LITERAL foo User:alice * DESCRIBE ALLOW; TOPIC LITERAL foo User:alice * READ DENY | n | authorize User:alice 10.0.0.1 DESCRIBE TOPIC foo | true",
        "super user beats deny | TOPIC LITERAL * User:* * ALL DENY | n | authorize User:admin 1.1.1.1 WRITE TOPIC foo | true",
        "super user, no ACL, flag off | - | n | authorize User:admin 1.1.1.1 ALTER CLUSTER kafka-cluster | true",
        "cluster ACL | CLUSTER LITERAL kafka-cluster User:alice * CLUSTER_ACTION ALLOW | n | authorize User:alice 1.1.1.1 CLUSTER_ACTION CLUSTER kafka-cluster | true",
        "ANY operation is never allowed | TOPIC LITERAL foo User:alice * ALL ALLOW | y | authorize User:alice 10.0.0.1 ANY TOPIC foo | false",
        // authorize_any (KIP-679)
        "no ACL, flag off | - | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "no ACL, flag on | - | y | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "flag on, no wildcard ACL: some topic has none | TOPIC LITERAL foo User:bob * WRITE ALLOW | y | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "flag on, wildcard ACL for someone else | TOPIC LITERAL * User:bob * WRITE ALLOW | y | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "super user beats wildcard deny | TOPIC LITERAL * User:* * ALL DENY | n | any User:admin 1.1.1.1 WRITE TOPIC | true",
        "literal allow | TOPIC LITERAL foo User:alice * WRITE ALLOW | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "ALL allow | TOPIC LITERAL foo User:alice * ALL ALLOW | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "allow of other op | TOPIC LITERAL foo User:alice * READ ALLOW | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "other host | TOPIC LITERAL foo User:alice 10.0.0.9 WRITE ALLOW | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "other type | GROUP LITERAL foo User:alice * ALL ALLOW | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "literal allow, literal deny | TOPIC LITERAL foo User:alice * WRITE ALLOW; TOPIC LITERAL foo User:alice * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "literal allow, prefixed deny covers | TOPIC LITERAL foo User:alice * WRITE ALLOW; TOPIC PREFIXED f User:* * ALL DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "literal allow, longer prefixed deny | TOPIC LITERAL foo User:alice * WRITE ALLOW; TOPIC PREFIXED foo1 User:alice * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "prefixed allow, literal deny | TOPIC PREFIXED foo User:alice * WRITE ALLOW; TOPIC LITERAL foo User:alice * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "prefixed allow, shorter prefixed deny | TOPIC PREFIXED foo User:alice * WRITE ALLOW; TOPIC PREFIXED fo User:alice * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "deny of other op | TOPIC LITERAL foo User:alice * WRITE ALLOW; TOPIC PREFIXED f User:alice * READ DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "two allows, one dominated | TOPIC LITERAL foo User:alice * WRITE ALLOW; TOPIC LITERAL bar User:alice * WRITE ALLOW; TOPIC PREFIXED f User:alice * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "wildcard deny beats everything | TOPIC LITERAL foo User:alice * WRITE ALLOW; TOPIC LITERAL * User:* * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | false",
        "wildcard allow | TOPIC LITERAL * User:alice * WRITE ALLOW; TOPIC PREFIXED f User:alice * WRITE DENY | n | any User:alice 10.0.0.1 WRITE TOPIC | true",
        "implied DESCRIBE (deviation) | TOPIC LITERAL foo User:alice * READ ALLOW | n | any User:alice 10.0.0.1 DESCRIBE TOPIC | true",
        "ANY operation | - | y | any User:alice 10.0.0.1 ANY TOPIC | false",
        "ANY resource type | - | y | any User:alice 10.0.0.1 WRITE ANY | false",
        // authorized_operations (KIP-430): all topic ops 3576, cluster 8096, group 328, txn 272
        "super user, topic | - | n | ops User:admin 10.0.0.1 TOPIC foo | 3576",
        "super user, cluster | - | n | ops User:admin 10.0.0.1 CLUSTER kafka-cluster | 8096",
        "super user, group | - | n | ops User:admin 10.0.0.1 GROUP g | 328",
        "super user, transactional id | - | n | ops User:admin 10.0.0.1 TRANSACTIONAL_ID t | 272",
        "super user, token | - | n | ops User:admin 10.0.0.1 DELEGATION_TOKEN d | 256",
        "super user, user | - | n | ops User:admin 10.0.0.1 USER u | 24576",
        "no ACL, flag on | - | y | ops User:alice 10.0.0.1 TOPIC foo | 3576",
        "no ACL, flag off | - | n | ops User:alice 10.0.0.1 TOPIC foo | 0",
        "READ + implied DESCRIBE | TOPIC LITERAL foo User:alice * READ ALLOW | n | ops User:alice 10.0.0.1 TOPIC foo | 264",
        "ALL less denied WRITE | TOPIC PREFIXED f User:alice * ALL ALLOW; TOPIC LITERAL foo User:* * WRITE DENY | n | ops User:alice 10.0.0.1 TOPIC foo | 3560",
        "ALTER_CONFIGS + DESCRIBE_CONFIGS | TOPIC LITERAL foo User:alice * ALTER_CONFIGS ALLOW | n | ops User:alice 10.0.0.1 TOPIC foo | 3072",
        "cluster IDEMPOTENT_WRITE | CLUSTER LITERAL kafka-cluster User:alice * IDEMPOTENT_WRITE ALLOW | n | ops User:alice 10.0.0.1 CLUSTER kafka-cluster | 4096",
        "other principal's ACL | TOPIC LITERAL foo User:bob * READ ALLOW | y | ops User:alice 10.0.0.1 TOPIC foo | 0",
    ];

    #[test]
    fn authorizer_table() {
        for row in AUTHORIZER {
            let f: Vec<&str> = row.split(" | ").collect();
            let a = authorizer(f[1], f[2] == "y");
            let q: Vec<&str> = f[3].split_whitespace().collect();
            let got = match q[0] {
                "authorize" => format!("{}", a.authorize(q[1], q[2], op(q[3]), rt(q[4]), q[5])),
                "any" => format!("{}", a.authorize_any(q[1], q[2], op(q[3]), rt(q[4]))),
                _ => format!("{}", a.authorized_operations(q[1], q[2], rt(q[3]), q[4])),
            };
            assert_eq!(got, f[4], "{row}");
        }
    }

    #[test]
    fn codes_and_names_round_trip() {
        macro_rules! check {
            ($t:ty, $n:expr) => {
                assert_eq!(<$t>::VALUES.len(), $n);
                for (i, v) in <$t>::VALUES.iter().enumerate() {
                    assert_eq!(v.code() as usize, i + 1);
                    assert_eq!(<$t>::from_code(v.code()), Some(*v));
                    assert_eq!(<$t>::from_kafka_name(v.kafka_name()), Some(*v));
                }
                assert_eq!([<$t>::from_code(0), <$t>::from_code($n + 1)], [None, None]);
            };
        }
        check!(ResourceType, 7);
        check!(PatternType, 4);
        check!(Operation, 14);
        check!(Permission, 3);
        assert_eq!(rt("TRANSACTIONAL_ID"), ResourceType::TransactionalId);
        assert_eq!(Operation::from_code(12), Some(Operation::IdempotentWrite));
    }

    const STORE: &[&str] = &[
        "TOPIC LITERAL foo User:alice * READ ALLOW",
        "TOPIC LITERAL * User:bob * WRITE DENY",
        "TOPIC PREFIXED fo User:alice 10.0.0.1 ALL ALLOW",
        "TOPIC PREFIXED bar User:alice * READ ALLOW",
        "GROUP LITERAL foo User:alice * READ ALLOW",
        "TOPIC LITERAL fo User:alice * READ ALLOW",
    ];

    /// (filter, indices into STORE it matches)
    const FILTERS: &[(&str, &[usize])] = &[
        ("ANY ANY - - - ANY ANY", &[0, 1, 2, 3, 4, 5]),
        ("TOPIC MATCH foo - - ANY ANY", &[0, 1, 2]),
        ("TOPIC LITERAL foo - - ANY ANY", &[0]),
        ("TOPIC ANY foo - - ANY ANY", &[0]),
        ("TOPIC ANY fo - - ANY ANY", &[2, 5]),
        ("TOPIC PREFIXED fo - - ANY ANY", &[2]),
        ("TOPIC PREFIXED foo - - ANY ANY", &[]),
        ("ANY MATCH foo - - ANY ANY", &[0, 1, 2, 4]),
        ("TOPIC MATCH * - - ANY ANY", &[1]),
        ("TOPIC MATCH - - - ANY ANY", &[0, 1, 2, 3, 5]),
        ("TOPIC MATCH bar-1 - - ANY ANY", &[1, 3]),
        ("ANY ANY - User:alice - ANY ANY", &[0, 2, 3, 4, 5]),
        ("ANY ANY - User:* - ANY ANY", &[]),
        ("ANY ANY - - 10.0.0.1 ANY ANY", &[2]),
        ("ANY ANY - - - READ ANY", &[0, 3, 4, 5]),
        ("ANY ANY - - - ALL ANY", &[2]),
        ("ANY ANY - - - ANY DENY", &[1]),
        ("GROUP LITERAL foo User:alice * READ ALLOW", &[4]),
    ];

    fn store(indices: &[usize]) -> Vec<AclBinding> {
        let mut v: Vec<AclBinding> = indices.iter().map(|i| acl(STORE[*i])).collect();
        v.sort();
        v
    }

    #[test]
    fn filter_describe_and_remove_table() {
        let all = authorizer(&STORE.join("; "), false);
        for (spec, expected) in FILTERS {
            let f = filter(spec);
            assert_eq!(all.describe(&f), store(expected), "{spec}");
            for (i, s) in STORE.iter().enumerate() {
                assert_eq!(f.matches(&acl(s)), expected.contains(&i), "{spec} vs {s}");
            }
            let mut a = all.clone();
            assert_eq!(a.remove_matching(&f), store(expected), "{spec}");
            let rest: Vec<usize> = (0..STORE.len()).filter(|i| !expected.contains(i)).collect();
            assert_eq!(a.describe(&AclBindingFilter::ANY), store(&rest), "{spec}");
            assert_eq!(a.remove_matching(&f), vec![], "{spec}");
        }
    }

    #[test]
    fn add_is_idempotent_and_remove_restores_the_default() {
        let mut a = Authorizer::new(vec![], true);
        let bob = acl("TOPIC LITERAL foo User:bob * READ ALLOW");
        let alice_reads =
            |a: &Authorizer| a.authorize("User:alice", "::1", op("READ"), rt("TOPIC"), "foo");
        assert!(alice_reads(&a));
        assert_eq!(a.add(bob.clone()), Ok(true));
        assert_eq!(a.add(bob.clone()), Ok(false));
        assert_eq!(a.bindings().collect::<Vec<_>>(), vec![&bob]);
        assert!(!alice_reads(&a));
        let bad = acl("TOPIC MATCH foo User:bob * READ ALLOW");
        assert_eq!(a.add(bad).unwrap_err().code, 42);
        let foo = filter("TOPIC LITERAL foo - - ANY ANY");
        assert_eq!(a.remove_matching(&foo), vec![bob]);
        assert!(alice_reads(&a));
        assert!(!a.is_super_user("User:bob"));
    }

    /// "binding | expected error message fragment", `-` for a valid binding.
    const VALIDATION: &[&str] = &[
        "TOPIC LITERAL foo User:alice * READ ALLOW | -",
        "TOPIC PREFIXED foo Group:ops 10.0.0.1 ALL DENY | -",
        "CLUSTER LITERAL kafka-cluster User:CN=a,O=b:c * ALTER ALLOW | -",
        "TRANSACTIONAL_ID LITERAL * User:* * WRITE ALLOW | -",
        "CLUSTER LITERAL my-cluster User:alice * ALTER ALLOW | The only valid name for the CLUSTER resource is kafka-cluster",
        "CLUSTER LITERAL - User:alice * ALTER ALLOW | The only valid name for the CLUSTER resource",
        "TOPIC LITERAL - User:alice * READ ALLOW | Invalid empty resource name",
        "ANY LITERAL foo User:alice * READ ALLOW | Invalid resourceType ANY",
        "TOPIC MATCH foo User:alice * READ ALLOW | Invalid patternType MATCH",
        "TOPIC ANY foo User:alice * READ ALLOW | Invalid patternType ANY",
        "TOPIC LITERAL foo User:alice * ANY ALLOW | Invalid operation ANY",
        "TOPIC LITERAL foo User:alice * READ ANY | Invalid permissionType ANY",
        "TOPIC LITERAL foo alice * READ ALLOW | format principalType:principalName",
        "TOPIC LITERAL foo User: * READ ALLOW | format principalType:principalName",
        "TOPIC LITERAL foo - * READ ALLOW | format principalType:principalName",
    ];

    #[test]
    fn validation_table() {
        for row in VALIDATION {
            let (spec, want) = row.split_once(" | ").unwrap();
            match validate(&acl(spec)) {
                Ok(()) => assert_eq!(want, "-", "{row}: accepted"),
                Err(e) => assert!(e.code == 42 && e.message.contains(want), "{row}: {e}"),
            }
        }
    }

    #[test]
    fn json_round_trip() {
        let a = authorizer(&STORE.join("; "), false);
        let text = a.to_json();
        assert!(text.contains(r#""pattern_type": "PREFIXED""#), "{text}");
        let parsed = Authorizer::bindings_from_json(&text).unwrap();
        assert_eq!(parsed, a.bindings().cloned().collect::<Vec<_>>());
        assert_eq!(Authorizer::bindings_from_json("[]"), Ok(vec![]));
        assert!(Authorizer::bindings_from_json("{").is_err());
        let bad_name = text.replacen(r#""READ""#, r#""READS""#, 1);
        assert!(Authorizer::bindings_from_json(&bad_name).is_err());
        let invalid = text.replacen(r#""LITERAL""#, r#""MATCH""#, 1);
        let err = Authorizer::bindings_from_json(&invalid).unwrap_err();
        assert!(err.contains("Invalid patternType MATCH"), "{err}");
    }
}
