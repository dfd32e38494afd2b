//! The security settings of `strand serve`, by Kafka's names.
//!
//! | key | meaning |
//! |---|---|
//! | `listeners` | `NAME://host:port,...`; a name is a security protocol (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`) or one mapped by `listener.security.protocol.map`. Unset: one `PLAINTEXT` listener on `listen` |
//! | `listener.security.protocol.map` | `NAME:PROTOCOL,...` for named listeners (`INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL`) |
//! | `advertised.listeners` | (single node) `NAME://host:port,...`: what Metadata tells clients of each listener (default: its bind address) |
//! | `ssl.keystore.type`, `ssl.truststore.type` | `PEM` (KIP-651; the only type) |
//! | `ssl.keystore.location` | a PEM file holding the private key and the certificate chain |
//! | `ssl.keystore.key`, `ssl.keystore.certificate.chain` | the same, inline |
//! | `ssl.truststore.location`, `ssl.truststore.certificates` | CA certificates client certificates are checked against (file or inline PEM) |
//! | `ssl.client.auth` | `none` (default), `requested`, `required` (mTLS: the principal is `User:` + the certificate's subject) |
//! | `sasl.enabled.mechanisms` | of `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` (default: the two SCRAM ones; PLAIN checks the password against the stored SCRAM credential, as Redpanda does) |
//! | `super.users` | `User:a;User:b`: allowed everything |
//! | `authorizer.class.name` | non-empty turns ACLs on (Kafka's `org.apache.kafka.metadata.authorizer.StandardAuthorizer` or any name) |
//! | `allow.everyone.if.no.acl.found` | with ACLs on: a resource without any ACL is open (default false) |
//! | `connections.max.reauth.ms` | KIP-368: a SASL session lasts this long, then must re-authenticate or is closed (0: forever) |
//! | `connection.failed.authentication.delay.ms` | a failed authentication's reply waits this long before the connection closes (Kafka's 100) |

use std::net::SocketAddr;
use std::path::PathBuf;

use strand_wire::sasl::Mechanism;

/// A refused setting, naming the key (the config module wraps it, as `cluster_config`'s).
#[derive(Debug)]
pub struct ConfigError(pub String);

/// Kafka's `security.protocol` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(text: &str) -> Option<SecurityProtocol> {
        match text.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
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

/// One Kafka listener: where it binds, how it is secured, what clients are told.
#[derive(Clone, Debug, PartialEq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    /// `(host, port)` Metadata gives clients that connected here.
    pub advertised: (String, u16),
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// The TLS material of every TLS listener (PEM only, KIP-651's names).
#[derive(Clone, Debug, PartialEq)]
pub struct SslConfig {
    pub keystore_location: Option<PathBuf>,
    pub keystore_key: Option<String>,
    pub keystore_certificate_chain: Option<String>,
    pub truststore_location: Option<PathBuf>,
    pub truststore_certificates: Option<String>,
    pub client_auth: ClientAuth,
}

/// Everything of security the broker runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct SecurityConfig {
    /// `None`: one PLAINTEXT listener on `listen` (`BrokerConfig::listeners`).
    pub listeners: Option<Vec<Listener>>,
    pub ssl: SslConfig,
    pub sasl_mechanisms: Vec<Mechanism>,
    pub super_users: Vec<String>,
    /// `authorizer.class.name` set: requests are checked against the ACLs.
    pub authorizer: bool,
    pub allow_everyone_if_no_acl_found: bool,
    pub connections_max_reauth_ms: i64,
    pub failed_authentication_delay_ms: u64,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            listeners: None,
            ssl: SslConfig {
                keystore_location: None,
                keystore_key: None,
                keystore_certificate_chain: None,
                truststore_location: None,
                truststore_certificates: None,
                client_auth: ClientAuth::None,
            },
            sasl_mechanisms: vec![Mechanism::ScramSha256, Mechanism::ScramSha512],
            super_users: Vec::new(),
            authorizer: false,
            allow_everyone_if_no_acl_found: false,
            connections_max_reauth_ms: 0,
            failed_authentication_delay_ms: 100,
        }
    }
}

/// The security keys of the config file, as read (all optional).
#[derive(Debug, Default)]
pub struct SecurityKeys {
    pub listeners: Option<String>,
    pub protocol_map: Option<String>,
    pub advertised_listeners: Option<String>,
    pub keystore_type: Option<String>,
    pub keystore_location: Option<PathBuf>,
    pub keystore_key: Option<String>,
    pub keystore_certificate_chain: Option<String>,
    pub key_password: Option<String>,
    pub truststore_type: Option<String>,
    pub truststore_location: Option<PathBuf>,
    pub truststore_certificates: Option<String>,
    pub client_auth: Option<String>,
    pub sasl_enabled_mechanisms: Option<String>,
    pub super_users: Option<String>,
    pub authorizer_class_name: Option<String>,
    pub allow_everyone_if_no_acl_found: Option<bool>,
    pub connections_max_reauth_ms: Option<i64>,
    pub failed_authentication_delay_ms: Option<u64>,
}

fn err(message: String) -> ConfigError {
    ConfigError(message)
}

/// `NAME://host:port` -> (NAME, host, port); an empty host binds every address.
fn split_listener(entry: &str, key: &str) -> Result<(String, String, u16), ConfigError> {
    let (name, addr) = entry
        .split_once("://")
        .ok_or_else(|| err(format!("{key}: {entry:?} is not NAME://HOST:PORT")))?;
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| err(format!("{key}: {entry:?} is not NAME://HOST:PORT")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| err(format!("{key}: bad port in {entry:?}")))?;
    let name = name.trim().to_ascii_uppercase();
    if name.is_empty() {
        return Err(err(format!("{key}: no listener name in {entry:?}")));
    }
    Ok((name, host.trim_matches(['[', ']']).to_string(), port))
}

/// Parses `listeners` with the protocol map and the advertised addresses.
pub fn parse_listeners(
    listeners: &str,
    protocol_map: Option<&str>,
    advertised: Option<&str>,
) -> Result<Vec<Listener>, ConfigError> {
    let mut map: Vec<(String, SecurityProtocol)> = Vec::new();
    for pair in protocol_map
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (name, proto) = pair.split_once(':').ok_or_else(|| {
            err(format!(
                "listener.security.protocol.map: {pair:?} is not NAME:PROTOCOL"
            ))
        })?;
        let proto = SecurityProtocol::parse(proto).ok_or_else(|| {
            err(format!(
                "listener.security.protocol.map: unknown security protocol {proto:?} (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            ))
        })?;
        map.push((name.trim().to_ascii_uppercase(), proto));
    }
    let mut out: Vec<Listener> = Vec::new();
    for entry in listeners
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (name, host, port) = split_listener(entry, "listeners")?;
        let protocol = map
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, p)| p)
            .or_else(|| SecurityProtocol::parse(&name))
            .ok_or_else(|| {
                err(format!(
                    "listeners: {name} is neither a security protocol nor in listener.security.protocol.map"
                ))
            })?;
        let bind_host = if host.is_empty() { "0.0.0.0" } else { &host };
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
            .map_err(|_| err(format!("listeners: cannot resolve {entry:?}")))?;
        if out.iter().any(|l| l.name == name || l.bind == bind) {
            return Err(err(format!(
                "listeners: {entry:?} repeats a listener name or address"
            )));
        }
        let advertised_host = if host.is_empty() {
            "localhost".to_string()
        } else {
            host
        };
        out.push(Listener {
            name,
            protocol,
            bind,
            advertised: (advertised_host, port),
        });
    }
    if out.is_empty() {
        return Err(err("listeners lists no listener".into()));
    }
    for entry in advertised
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (name, host, port) = split_listener(entry, "advertised.listeners")?;
        let listener = out.iter_mut().find(|l| l.name == name).ok_or_else(|| {
            err(format!(
                "advertised.listeners: {name} is not one of the listeners"
            ))
        })?;
        listener.advertised = (host, port);
    }
    Ok(out)
}

impl SecurityKeys {
    pub fn resolve(self, into: &mut SecurityConfig) -> Result<(), ConfigError> {
        if let Some(text) = &self.listeners {
            // In cluster mode `advertised.listeners` is the registered endpoint (cluster_config).
            into.listeners = Some(parse_listeners(
                text,
                self.protocol_map.as_deref(),
                self.advertised_listeners.as_deref(),
            )?);
        } else if self.protocol_map.is_some() {
            return Err(err(
                "listener.security.protocol.map is set but listeners is not".into(),
            ));
        }
        for (key, value) in [
            ("ssl.keystore.type", &self.keystore_type),
            ("ssl.truststore.type", &self.truststore_type),
        ] {
            if let Some(v) = value {
                if !v.eq_ignore_ascii_case("PEM") {
                    return Err(err(format!(
                        "{key}: only PEM is supported (KIP-651), got {v:?}"
                    )));
                }
            }
        }
        if self.key_password.is_some() {
            return Err(err(
                "ssl.key.password: encrypted private keys are not supported; give an unencrypted PEM key (file mode 0600)".into(),
            ));
        }
        let ssl = &mut into.ssl;
        macro_rules! set {
            ($dst:expr, $src:expr) => {
                if let Some(v) = $src {
                    $dst = Some(v);
                }
            };
        }
        set!(ssl.keystore_location, self.keystore_location);
        set!(ssl.keystore_key, self.keystore_key);
        set!(
            ssl.keystore_certificate_chain,
            self.keystore_certificate_chain
        );
        set!(ssl.truststore_location, self.truststore_location);
        set!(ssl.truststore_certificates, self.truststore_certificates);
        if let Some(v) = self.client_auth {
            ssl.client_auth = match v.trim().to_ascii_lowercase().as_str() {
                "none" => ClientAuth::None,
                "requested" => ClientAuth::Requested,
                "required" => ClientAuth::Required,
                other => {
                    return Err(err(format!(
                        "ssl.client.auth must be none, requested or required, got {other:?}"
                    )))
                }
            };
        }
        if let Some(text) = self.sasl_enabled_mechanisms {
            let mut mechanisms = Vec::new();
            for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let m = Mechanism::parse(name).ok_or_else(|| {
                    err(format!(
                        "sasl.enabled.mechanisms: {name:?} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
                    ))
                })?;
                if !mechanisms.contains(&m) {
                    mechanisms.push(m);
                }
            }
            into.sasl_mechanisms = mechanisms;
        }
        if let Some(text) = self.super_users {
            into.super_users = text
                .split(';')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .collect();
            if let Some(bad) = into.super_users.iter().find(|u| !u.contains(':')) {
                return Err(err(format!(
                    "super.users: {bad:?} is not a principal (User:NAME; several separated by ';')"
                )));
            }
        }
        if let Some(name) = self.authorizer_class_name {
            into.authorizer = !name.trim().is_empty();
        }
        if let Some(v) = self.allow_everyone_if_no_acl_found {
            into.allow_everyone_if_no_acl_found = v;
        }
        if let Some(v) = self.connections_max_reauth_ms {
            if v < 0 {
                return Err(err(format!(
                    "connections.max.reauth.ms must not be negative, got {v}"
                )));
            }
            into.connections_max_reauth_ms = v;
        }
        if let Some(v) = self.failed_authentication_delay_ms {
            into.failed_authentication_delay_ms = v.min(60_000);
        }
        Ok(())
    }
}

impl SecurityConfig {
    /// Checks what needs the listeners: TLS material for TLS listeners, mechanisms for SASL.
    pub fn validate(&self, listeners: &[Listener]) -> Result<(), ConfigError> {
        let ssl = &self.ssl;
        if listeners.iter().any(|l| l.protocol.tls()) {
            let inline = ssl.keystore_key.is_some() && ssl.keystore_certificate_chain.is_some();
            if ssl.keystore_location.is_none() && !inline {
                return Err(err(
                    "a SSL or SASL_SSL listener needs ssl.keystore.location (PEM key + chain) or ssl.keystore.key with ssl.keystore.certificate.chain".into(),
                ));
            }
            if ssl.client_auth != ClientAuth::None
                && ssl.truststore_location.is_none()
                && ssl.truststore_certificates.is_none()
            {
                return Err(err(
                    "ssl.client.auth needs ssl.truststore.location (the CA client certificates are checked against)".into(),
                ));
            }
        }
        if listeners.iter().any(|l| l.protocol.sasl()) && self.sasl_mechanisms.is_empty() {
            return Err(err(
                "a SASL listener needs at least one of sasl.enabled.mechanisms".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_with_map_and_advertised() {
        let l = parse_listeners(
            "INTERNAL://127.0.0.1:9092, EXTERNAL://:9093",
            Some("INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL"),
            Some("EXTERNAL://broker.example:19093"),
        )
        .expect("ok");
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(l[0].advertised, ("127.0.0.1".into(), 9092));
        assert_eq!(l[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(l[1].bind.to_string(), "0.0.0.0:9093");
        assert_eq!(l[1].advertised, ("broker.example".into(), 19093));
        let plain = parse_listeners("SASL_SSL://127.0.0.1:1,SSL://127.0.0.1:2", None, None)
            .expect("protocol names");
        assert!(plain[0].protocol.sasl() && plain[0].protocol.tls());
        assert!(!plain[1].protocol.sasl() && plain[1].protocol.tls());
    }

    #[test]
    fn bad_listeners_are_refused_with_the_key() {
        for (listeners, map, adv) in [
            ("FOO://127.0.0.1:1", None, None),
            ("PLAINTEXT://127.0.0.1", None, None),
            (
                "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
                None,
                None,
            ),
            ("A://127.0.0.1:1", Some("A:TLS"), None),
            ("PLAINTEXT://127.0.0.1:1", None, Some("SSL://h:1")),
            ("", None, None),
        ] {
            let e = parse_listeners(listeners, map, adv).expect_err(listeners);
            assert!(e.0.contains("listener"), "{}", e.0);
        }
    }

    #[test]
    fn keys_resolve_and_validate() {
        let mut c = SecurityConfig::default();
        SecurityKeys {
            listeners: Some("SASL_SSL://127.0.0.1:9093".into()),
            sasl_enabled_mechanisms: Some("SCRAM-SHA-512,PLAIN".into()),
            super_users: Some("User:admin; User:ops".into()),
            authorizer_class_name: Some(
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
            ),
            client_auth: Some("required".into()),
            ..Default::default()
        }
        .resolve(&mut c)
        .expect("resolves");
        assert_eq!(
            c.sasl_mechanisms,
            vec![Mechanism::ScramSha512, Mechanism::Plain]
        );
        assert_eq!(c.super_users, vec!["User:admin", "User:ops"]);
        assert!(c.authorizer);
        let listeners = c.listeners.clone().expect("listeners");
        let e = c.validate(&listeners).expect_err("no keystore");
        assert!(e.0.contains("ssl.keystore.location"), "{}", e.0);
        c.ssl.keystore_location = Some("k.pem".into());
        let e = c.validate(&listeners).expect_err("no truststore");
        assert!(e.0.contains("truststore"), "{}", e.0);
        for bad in [
            SecurityKeys {
                sasl_enabled_mechanisms: Some("GSSAPI".into()),
                ..Default::default()
            },
            SecurityKeys {
                keystore_type: Some("JKS".into()),
                ..Default::default()
            },
            SecurityKeys {
                super_users: Some("admin".into()),
                ..Default::default()
            },
        ] {
            assert!(bad.resolve(&mut SecurityConfig::default()).is_err());
        }
    }
}
