//! Mutual TLS between nodes: every node holds a certificate signed by the cluster's CA, valid
//! for the DNS name `node-<node.id>`. A node dialling node 3 checks that the server's
//! certificate is valid for `node-3`; a node accepting a connection requires a client
//! certificate from the same CA and, when the dialler says which node it is (its first
//! message), checks the certificate is valid for that node's name ([`verify_node_name`]).
//! TLS 1.3 only, rustls on ring, ALPN `strand-cluster/1` so nothing else speaks to the port.

use std::io;
use std::sync::Arc;

use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::records::NodeId;

/// The ALPN protocol of the cluster transport.
pub const ALPN: &[u8] = b"strand-cluster/1";

/// The DNS name a node's certificate is issued for.
pub fn node_name(node: NodeId) -> String {
    format!("node-{node}")
}

/// A node's credentials, as PEM text (what `strand cluster certs` writes).
#[derive(Clone, Debug)]
pub struct NodeCredentials {
    /// The cluster CA's certificate: the only issuer trusted for peers.
    pub ca_pem: String,
    /// This node's certificate (and any intermediates), leaf first.
    pub cert_chain_pem: String,
    /// This node's private key (PKCS#8, SEC1 or PKCS#1).
    pub key_pem: String,
}

/// What a transport endpoint needs: the server side for connections it accepts, the client
/// side for those it makes.
pub struct TlsConfigs {
    pub server: Arc<quinn_proto::ServerConfig>,
    pub client: quinn_proto::ClientConfig,
}

fn bad(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {e}"))
}

fn certs(pem: &str, what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(what, e))?;
    if certs.is_empty() {
        return Err(bad(what, "no certificate in the PEM text"));
    }
    Ok(certs)
}

fn key(pem: &str) -> io::Result<PrivateKeyDer<'static>> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .map_err(|e| bad("node key", e))?
        .ok_or_else(|| bad("node key", "no private key in the PEM text"))
}

/// Builds both sides' configurations from PEM credentials, with `transport` settings (flow
/// control, keep-alive, idle timeout) on each connection.
pub fn configs(
    creds: &NodeCredentials,
    transport: Arc<quinn_proto::TransportConfig>,
) -> io::Result<TlsConfigs> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in certs(&creds.ca_pem, "cluster CA")? {
        roots.add(ca).map_err(|e| bad("cluster CA", e))?;
    }
    let roots = Arc::new(roots);
    let chain = certs(&creds.cert_chain_pem, "node certificate")?;
    let key = key(&creds.key_pem)?;

    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots.clone(),
        provider.clone(),
    )
    .build()
    .map_err(|e| bad("client verifier", e))?;
    let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| bad("TLS 1.3", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(|e| bad("node certificate", e))?;
    server.alpn_protocols = vec![ALPN.to_vec()];
    let server = QuicServerConfig::try_from(server).map_err(|e| bad("QUIC server", e))?;
    let mut server = quinn_proto::ServerConfig::with_crypto(Arc::new(server));
    server.transport_config(transport.clone());
    server.max_incoming(crate::limits::CLUSTER_CONNECTIONS_MAX);

    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| bad("TLS 1.3", e))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| bad("node certificate", e))?;
    client.alpn_protocols = vec![ALPN.to_vec()];
    let client = QuicClientConfig::try_from(client).map_err(|e| bad("QUIC client", e))?;
    let mut client = quinn_proto::ClientConfig::new(Arc::new(client));
    client.transport_config(transport);
    Ok(TlsConfigs {
        server: Arc::new(server),
        client,
    })
}

/// Whether the peer's leaf certificate (already checked against the CA by the handshake) is
/// issued for `node`.
pub fn verify_node_name(peer_chain: &[CertificateDer<'static>], node: NodeId) -> bool {
    let Some(leaf) = peer_chain.first() else {
        return false;
    };
    let Ok(cert) = webpki::EndEntityCert::try_from(leaf) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(node_name(node)) else {
        return false;
    };
    cert.verify_is_valid_for_subject_name(&name).is_ok()
}
