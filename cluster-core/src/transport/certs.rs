//! A development CA and node certificates (`strand cluster certs --out DIR`): one CA, and for
//! each node a certificate valid for `node-<id>` (and `localhost`), usable as both TLS server
//! and client. Production clusters bring certificates from their own CA.

use std::io;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::tls::{node_name, NodeCredentials};
use crate::records::NodeId;

fn gen_err(e: rcgen::Error) -> io::Error {
    io::Error::other(format!("certificate generation: {e}"))
}

/// A CA able to issue node certificates.
pub struct DevCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl DevCa {
    /// A fresh self-signed CA named `name`.
    pub fn new(name: &str) -> io::Result<DevCa> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(gen_err)?;
        let cert = params.self_signed(&key).map_err(gen_err)?;
        Ok(DevCa { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA's private key (PKCS#8 PEM): keep it away from the nodes.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Credentials for `node`, issued by this CA.
    pub fn issue(&self, node: NodeId) -> io::Result<NodeCredentials> {
        let mut params = CertificateParams::new(vec![node_name(node), "localhost".to_string()])
            .map_err(gen_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, node_name(node));
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().map_err(gen_err)?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(gen_err)?;
        Ok(NodeCredentials {
            ca_pem: self.cert_pem(),
            cert_chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}
