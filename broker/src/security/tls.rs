//! TLS on the Kafka listeners: the rustls server configuration from Kafka's PEM settings
//! (KIP-651), and the principal of a client certificate.
//!
//! The configuration is built once at start-up (a bad key or certificate stops the broker
//! with the setting's name) and shared by every shard; each accepted connection runs the
//! handshake through `futures-rustls` on the shard's own socket, within
//! `limits::AUTHENTICATION_TIMEOUT_MS`.

use std::io;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::config::{ClientAuth, SslConfig};

fn bad(setting: &str, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{setting}: {why}"))
}

fn read_setting(
    setting: &str,
    inline: &Option<String>,
    path: &Option<std::path::PathBuf>,
) -> io::Result<Option<Vec<u8>>> {
    if let Some(text) = inline {
        return Ok(Some(text.as_bytes().to_vec()));
    }
    match path {
        Some(p) => std::fs::read(p)
            .map(Some)
            .map_err(|e| bad(setting, format!("cannot read {}: {e}", p.display()))),
        None => Ok(None),
    }
}

fn certificates(setting: &str, pem: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| bad(setting, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad(setting, "no CERTIFICATE in it"));
    }
    Ok(certs)
}

/// The server side of every TLS listener.
pub fn server_config(ssl: &SslConfig) -> io::Result<Arc<ServerConfig>> {
    let (key_pem, chain_pem, key_setting, chain_setting) = match &ssl.keystore_location {
        Some(path) => {
            let pem = read_setting("ssl.keystore.location", &None, &Some(path.clone()))?
                .unwrap_or_default();
            (
                pem.clone(),
                pem,
                "ssl.keystore.location",
                "ssl.keystore.location",
            )
        }
        None => (
            ssl.keystore_key.clone().unwrap_or_default().into_bytes(),
            ssl.keystore_certificate_chain
                .clone()
                .unwrap_or_default()
                .into_bytes(),
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
        ),
    };
    let chain = certificates(chain_setting, &chain_pem)?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| bad(key_setting, format!("bad PEM: {e}")))?
        .ok_or_else(|| {
            bad(
                key_setting,
                "no unencrypted PRIVATE KEY in it (encrypted keys are not supported)",
            )
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("ssl", e))?;
    let trust = read_setting(
        "ssl.truststore.location",
        &ssl.truststore_certificates,
        &ssl.truststore_location,
    )?;
    let builder = match (ssl.client_auth, trust) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(bad(
                "ssl.client.auth",
                "needs ssl.truststore.location (the CA client certificates are checked against)",
            ))
        }
        (auth, Some(pem)) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("ssl.truststore.location", &pem)? {
                roots
                    .add(cert)
                    .map_err(|e| bad("ssl.truststore.location", e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            }
            .build()
            .map_err(|e| bad("ssl.truststore.location", e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| bad(key_setting, format!("key and certificate do not fit: {e}")))?;
    Ok(Arc::new(config))
}

/// Kafka's principal of a client certificate: `User:` + the subject in RFC 2253 form (the
/// most specific attribute first, `CN=client,O=Example`), as Kafka's default
/// `ssl.principal.mapping.rules` give it. `None` if the certificate does not parse.
pub fn certificate_principal(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut parts = Vec::new();
    for rdn in cert.subject().iter().collect::<Vec<_>>().into_iter().rev() {
        let mut attrs = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type();
            let name = x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                .map(str::to_string)
                .unwrap_or_else(|_| oid.to_id_string());
            let value = attr.as_str().ok()?;
            attrs.push(format!("{name}={}", escape_rfc2253(value)));
        }
        parts.push(attrs.join("+"));
    }
    Some(format!("User:{}", parts.join(",")))
}

fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == value.len() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_is_the_subject_most_specific_first() {
        let mut params = rcgen_params();
        params.distinguished_name = {
            let mut dn = rcgen::DistinguishedName::new();
            dn.push(rcgen::DnType::CountryName, "US");
            dn.push(rcgen::DnType::OrganizationName, "Strand, Inc");
            dn.push(rcgen::DnType::CommonName, "client-1");
            dn
        };
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            certificate_principal(cert.der()).as_deref(),
            Some("User:CN=client-1,O=Strand\\, Inc,C=US")
        );
        assert_eq!(certificate_principal(b"not a certificate"), None);
    }

    fn rcgen_params() -> rcgen::CertificateParams {
        rcgen::CertificateParams::new(Vec::<String>::new()).expect("params")
    }
}
