//! The rustls client configuration from PEM settings, and the host-name-blind verifier.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};

use super::TlsSettings;

pub(super) fn certificates(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: bad PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{what}: no PEM CERTIFICATE in it (JKS and PKCS12 are not supported)"
        ));
    }
    Ok(certs)
}

pub(super) fn private_key(what: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| format!("{what}: bad PEM: {e}"))?
        .ok_or_else(|| {
            format!(
                "{what}: no unencrypted PEM PRIVATE KEY in it (encrypted keys are not supported)"
            )
        })
}

/// The rustls client configuration: roots from the CA PEM only, the client certificate if
/// given, and the host name check unless `verify_hostname` is off.
pub fn tls_client_config(tls: &TlsSettings) -> Result<Arc<ClientConfig>, String> {
    let ca_key = "ssl.truststore.location";
    let ca = tls.ca_pem.as_ref().ok_or_else(|| {
        format!(
            "{ca_key}: not set (TLS needs the CA that signed the broker's certificate: set \
             ssl.truststore.location, or ssl.ca.location in librdkafka's terms)"
        )
    })?;
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_key, ca)? {
        roots.add(cert).map_err(|e| format!("{ca_key}: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("{ca_key}: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("ssl: {e}"))?;
    let builder = if tls.verify_hostname {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoHostnameVerifier(verifier)))
    };
    let config = match (&tls.client_chain_pem, &tls.client_key_pem) {
        (Some(chain), Some(key)) => {
            let chain = certificates("ssl.keystore.certificate.chain", chain)?;
            let key = private_key("ssl.keystore.key", key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("ssl.keystore.key: key and certificate do not fit: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(
                "ssl.keystore.key: a client certificate needs both its key and its chain".into(),
            )
        }
    };
    Ok(Arc::new(config))
}

/// The TLS server name for `addr` (`host:port`, `[v6]:port`): an IP address or a DNS name.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => addr.rsplit_once(':').map_or(addr, |(h, _)| h),
    };
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{addr}: {host:?} is not a valid TLS server name: {e}"))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the broker's chain is verified against
/// the CA as usual — signatures, validity, key usage — and only a certificate that does not
/// name the host connected to (`CertificateError::NotValidForName`, which webpki reports
/// after the chain has passed) is accepted anyway.
#[derive(Debug)]
struct NoHostnameVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NoHostnameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
