//! Connection security from Kafka client properties: `security.protocol`, SASL (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512) credentials, and TLS (rustls on ring, PEM only).
//!
//! Both the Java client's names and librdkafka's are understood (see
//! [`ClientSecurity::from_properties`]). The SASL exchange itself runs in [`crate::conn`].
//! - `props` — `.properties` files and `sasl.jaas.config` text.
//! - `tls` — the rustls client configuration.

#[cfg(test)]
mod e2e_tests;
mod props;
#[cfg(test)]
mod tests;
mod tls;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rustls::ClientConfig;
use strand_wire::sasl::Mechanism;

pub use props::parse_properties;
pub use tls::{server_name, tls_client_config};

/// `security.protocol`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    /// Kafka's name, any case (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`).
    pub fn parse(name: &str) -> Option<Protocol> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Protocol::Plaintext),
            "SSL" => Some(Protocol::Ssl),
            "SASL_PLAINTEXT" => Some(Protocol::SaslPlaintext),
            "SASL_SSL" => Some(Protocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// SASL credentials. `Debug` does not print the password.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslSettings {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// TLS material, as PEM bytes. `Debug` does not print the private key.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The CA certificates the broker's certificate must chain to (no system roots).
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and its unencrypted private key, for mutual TLS.
    pub client_chain_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Vec<u8>>,
    /// Whether the broker's certificate must name the host connected to (Kafka's default).
    pub verify_hostname: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            ca_pem: None,
            client_chain_pem: None,
            client_key_pem: None,
            verify_hostname: true,
        }
    }
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = |v: &Option<Vec<u8>>| v.as_ref().map(Vec::len);
        f.debug_struct("TlsSettings")
            .field("ca_pem_bytes", &len(&self.ca_pem))
            .field("client_chain_pem_bytes", &len(&self.client_chain_pem))
            .field(
                "client_key_pem",
                &self.client_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .field("verify_hostname", &self.verify_hostname)
            .finish()
    }
}

/// How to secure every connection to the cluster. The default is plaintext.
#[derive(Clone, Debug, Default)]
pub struct ClientSecurity {
    pub protocol: Protocol,
    /// Used when `protocol` is `SaslPlaintext` or `SaslSsl` (then required).
    pub sasl: Option<SaslSettings>,
    /// Used when `protocol` is `Ssl` or `SaslSsl` (then its `ca_pem` is required).
    pub tls: Option<TlsSettings>,
}

/// Whether `key` is a security property ([`ClientSecurity::from_properties`] reads it, or
/// ignores it as one this client does not need): `security.protocol`, `sasl.*`, `ssl.*` and
/// librdkafka's `enable.ssl.certificate.verification`. Callers can pass the other keys on to
/// the producer or consumer configuration.
pub fn is_security_key(key: &str) -> bool {
    key == "security.protocol"
        || key == "enable.ssl.certificate.verification"
        || key.starts_with("sasl.")
        || key.starts_with("ssl.")
}

impl ClientSecurity {
    /// From Kafka client properties. A key given twice: the last one counts. Keys that are
    /// not security keys ([`is_security_key`]) are ignored, and so are security keys this
    /// client has no use for (`ssl.enabled.protocols`, `ssl.key.password`, `sasl.kerberos.*`,
    /// ...). Understood:
    /// - `security.protocol`: `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`.
    /// - `sasl.mechanism` (librdkafka: `sasl.mechanisms`): `PLAIN`, `SCRAM-SHA-256`,
    ///   `SCRAM-SHA-512`; required with SASL (Kafka's default, GSSAPI, is not supported).
    /// - `sasl.username` + `sasl.password` (librdkafka), or `sasl.jaas.config` (Java:
    ///   `<LoginModule> required username="u" password="p";`); the former win over the latter.
    /// - CA: `ssl.truststore.location` (a PEM file) or `ssl.truststore.certificates` (PEM
    ///   text); librdkafka: `ssl.ca.location`, `ssl.ca.pem`.
    /// - Client certificate (mTLS): `ssl.keystore.location` (one PEM file: key and chain), or
    ///   `ssl.keystore.key` + `ssl.keystore.certificate.chain` (PEM text); librdkafka:
    ///   `ssl.key.location` + `ssl.certificate.location`, `ssl.key.pem` + `ssl.certificate.pem`.
    /// - `ssl.truststore.type` / `ssl.keystore.type`: `PEM` only (JKS and PKCS12 are refused).
    /// - `ssl.endpoint.identification.algorithm`: `https` (default: check the broker's name)
    ///   or empty / `none` (check the chain only).
    ///
    /// Errors start with the key at fault. The TLS material is parsed here, so a bad file is
    /// reported before any connection.
    pub fn from_properties(props: &[(String, String)]) -> Result<ClientSecurity, String> {
        let props = Props(props.iter().map(|(k, v)| (k.trim(), v.as_str())).collect());
        let get = |key: &str| props.get(key);
        let protocol = match get("security.protocol") {
            None => Protocol::Plaintext,
            Some(v) => Protocol::parse(v).ok_or_else(|| {
                format!(
                    "security.protocol: unknown protocol {v:?} (expected PLAINTEXT, SSL, \
                     SASL_PLAINTEXT or SASL_SSL)"
                )
            })?,
        };
        let sasl = if protocol.uses_sasl() {
            Some(sasl_settings(&props, protocol)?)
        } else {
            None
        };
        let tls = if protocol.uses_tls() {
            let tls = tls_settings(&props, protocol)?;
            tls_client_config(&tls)?;
            Some(tls)
        } else {
            None
        };
        Ok(ClientSecurity {
            protocol,
            sasl,
            tls,
        })
    }

    /// Reads a Java `.properties` file into (key, value) pairs, in file order: `key=value`,
    /// `key: value` or `key value` lines, `#` and `!` comment lines, a trailing `\` continuing
    /// a line (as multi-line `sasl.jaas.config` values are written), and Java's escapes
    /// (`\\`, `\t`, `\n`, `\r`, `\f`, `\uXXXX`; `\` before any other character is dropped).
    pub fn read_properties_file(path: &Path) -> Result<Vec<(String, String)>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        parse_properties(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The rustls configuration for this security setting (`None`: no TLS).
    pub fn tls_config(&self) -> Result<Option<Arc<ClientConfig>>, String> {
        if !self.protocol.uses_tls() {
            return Ok(None);
        }
        let tls = self.tls.clone().unwrap_or_default();
        tls_client_config(&tls).map(Some)
    }

    /// The SASL credentials, if the protocol uses SASL (an error if they are missing).
    pub fn sasl_settings(&self) -> Result<Option<&SaslSettings>, String> {
        if !self.protocol.uses_sasl() {
            return Ok(None);
        }
        self.sasl.as_ref().map(Some).ok_or_else(|| {
            format!(
                "security.protocol {} needs SASL credentials (sasl.mechanism, sasl.username, \
                 sasl.password)",
                self.protocol.name()
            )
        })
    }
}

/// Properties by key, the last value of a repeated key winning.
struct Props<'a>(HashMap<&'a str, &'a str>);

impl<'a> Props<'a> {
    /// The value, if set and not empty (an empty value counts as unset, as in Kafka).
    fn get(&self, key: &str) -> Option<&'a str> {
        self.0.get(key).copied().filter(|v| !v.trim().is_empty())
    }
}

fn sasl_settings(props: &Props<'_>, protocol: Protocol) -> Result<SaslSettings, String> {
    let get = |key: &str| props.get(key);
    let (key, name) = match (get("sasl.mechanism"), get("sasl.mechanisms")) {
        (Some(m), _) => ("sasl.mechanism", m),
        (None, Some(m)) => ("sasl.mechanisms", m),
        (None, None) => {
            return Err(format!(
                "sasl.mechanism: not set, and security.protocol is {} (use PLAIN, \
                 SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is not supported)",
                protocol.name()
            ))
        }
    };
    let mechanism = Mechanism::parse(&name.trim().to_ascii_uppercase()).ok_or_else(|| {
        format!(
            "{key}: unsupported mechanism {name:?} (supported: PLAIN, SCRAM-SHA-256, \
             SCRAM-SHA-512)"
        )
    })?;
    let jaas = match get("sasl.jaas.config") {
        Some(text) => props::parse_jaas(text).map_err(|e| format!("sasl.jaas.config: {e}"))?,
        None => HashMap::new(),
    };
    let pick = |key: &str, option: &str| -> Result<String, String> {
        if let Some(v) = get(key) {
            return Ok(v.to_string());
        }
        match jaas.get(option) {
            Some(v) if !v.is_empty() => Ok(v.clone()),
            _ => Err(format!(
                "{key}: not set, and sasl.jaas.config gives no {option} (SASL {mechanism} \
                 needs a username and a password)"
            )),
        }
    };
    Ok(SaslSettings {
        mechanism,
        username: pick("sasl.username", "username")?,
        password: pick("sasl.password", "password")?,
    })
}

fn tls_settings(props: &Props<'_>, protocol: Protocol) -> Result<TlsSettings, String> {
    let get = |key: &str| props.get(key);
    let read = |key: &str| -> Result<Option<Vec<u8>>, String> {
        match get(key) {
            None => Ok(None),
            Some(path) => std::fs::read(path.trim())
                .map(Some)
                .map_err(|e| format!("{key}: cannot read {}: {e}", path.trim())),
        }
    };
    // A setting's PEM: the file it names, or its own text.
    let load = |key: &str, file: bool| match file {
        true => read(key),
        false => Ok(get(key).map(|v| v.as_bytes().to_vec())),
    };
    for key in ["ssl.truststore.type", "ssl.keystore.type"] {
        if let Some(t) = get(key) {
            if !t.trim().eq_ignore_ascii_case("PEM") {
                return Err(format!(
                    "{key}: {t:?} is not supported, only PEM (convert the store with \
                     keytool/openssl)"
                ));
            }
        }
    }
    if let Some(v) = get("enable.ssl.certificate.verification") {
        if !v.trim().eq_ignore_ascii_case("true") {
            return Err(format!(
                "enable.ssl.certificate.verification: {v:?} is not supported (the broker's \
                 certificate is always verified; give its CA with ssl.ca.location)"
            ));
        }
    }
    // The CA: the first of these that is set.
    let mut ca = None;
    for (key, file) in [
        ("ssl.truststore.location", true),
        ("ssl.truststore.certificates", false),
        ("ssl.ca.location", true),
        ("ssl.ca.pem", false),
    ] {
        if let Some(pem) = load(key, file)? {
            tls::certificates(key, &pem)?;
            ca = Some(pem);
            break;
        }
    }
    if ca.is_none() {
        return Err(format!(
            "ssl.truststore.location: not set, and security.protocol is {} (give the CA that \
             signed the broker's certificate as a PEM file: ssl.truststore.location, or \
             ssl.ca.location in librdkafka's terms)",
            protocol.name()
        ));
    }
    // The client certificate: (key setting, its PEM), (chain setting, its PEM).
    let mut client = read("ssl.keystore.location")?.map(|pem| {
        let key = "ssl.keystore.location";
        ((key, pem.clone()), (key, pem))
    });
    for (key_key, chain_key, file) in [
        ("ssl.keystore.key", "ssl.keystore.certificate.chain", false),
        ("ssl.key.location", "ssl.certificate.location", true),
        ("ssl.key.pem", "ssl.certificate.pem", false),
    ] {
        if client.is_some() {
            break;
        }
        match (load(key_key, file)?, load(chain_key, file)?) {
            (None, None) => {}
            (Some(k), Some(c)) => client = Some(((key_key, k), (chain_key, c))),
            (Some(_), None) => return Err(format!("{chain_key}: needed with {key_key}")),
            (None, Some(_)) => return Err(format!("{key_key}: needed with {chain_key}")),
        }
    }
    let (client_key_pem, client_chain_pem) = match client {
        Some(((key_key, key), (chain_key, chain))) => {
            tls::private_key(key_key, &key)?;
            tls::certificates(chain_key, &chain)?;
            (Some(key), Some(chain))
        }
        None => (None, None),
    };
    // Kafka's default is `https`; an empty value disables the check.
    let verify_hostname = match props.0.get("ssl.endpoint.identification.algorithm") {
        None => true,
        Some(a) if a.trim().eq_ignore_ascii_case("https") => true,
        Some(a) if a.trim().is_empty() || a.trim().eq_ignore_ascii_case("none") => false,
        Some(a) => {
            return Err(format!(
                "ssl.endpoint.identification.algorithm: unknown value {a:?} (https, or empty \
                 to skip the host name check)"
            ))
        }
    };
    Ok(TlsSettings {
        ca_pem: ca,
        client_chain_pem,
        client_key_pem,
        verify_hostname,
    })
}
