//! `BrokerConn::connect_secure` against an in-process fake broker: rustls on a glommio
//! listener, answering ApiVersions, SaslHandshake and SaslAuthenticate with `strand_wire`'s
//! server-side SASL.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpListener;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use strand_wire::kafka::messages::api_versions_response::ApiVersion;
use strand_wire::kafka::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
    SaslAuthenticateResponse, SaslHandshakeResponse,
};
use strand_wire::kafka::protocol::{Decodable, Encodable, StrBytes};
use strand_wire::sasl::scram::{ScramCredential, ScramMechanism, ScramServer};
use strand_wire::sasl::{plain, Mechanism};

use super::tests::test_pki;
use super::*;
use crate::conn::BrokerConn;
use crate::error::ClientError;

/// Users the fake broker knows; "tamper" gets a forged server-final.
const USERS: [(&str, &str); 2] = [("alice", "alice-pw"), ("tamper", "tamper-pw")];

fn server_config(cert_pem: &str, key_pem: &str) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("cert");
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .expect("key")
        .expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    Arc::new(config)
}

/// Starts a TLS listener on 127.0.0.1; returns its address.
fn start_broker(config: Arc<rustls::ServerConfig>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let acceptor = futures_rustls::TlsAcceptor::from(config);
    glommio::spawn_local(async move {
        while let Ok(tcp) = listener.accept().await {
            let acceptor = acceptor.clone();
            glommio::spawn_local(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = serve(tls).await;
                }
            })
            .detach();
        }
    })
    .detach();
    addr
}

fn range(api: ApiKey, min: i16, max: i16) -> ApiVersion {
    let mut v = ApiVersion::default();
    v.api_key = api as i16;
    v.min_version = min;
    v.max_version = max;
    v
}

/// One connection: frames in, answers out, until the client leaves.
async fn serve<S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin>(
    mut s: S,
) -> std::io::Result<()> {
    let mut mechanism = None;
    let mut scram: Option<ScramServer> = None;
    let mut rounds = 0;
    loop {
        let mut size = [0u8; 4];
        s.read_exact(&mut size).await?;
        let mut frame = vec![0u8; u32::from_be_bytes(size) as usize];
        s.read_exact(&mut frame).await?;
        let mut buf = Bytes::from(frame);
        let api = ApiKey::try_from(i16::from_be_bytes([buf[0], buf[1]])).expect("api");
        let version = i16::from_be_bytes([buf[2], buf[3]]);
        let header =
            RequestHeader::decode(&mut buf, api.request_header_version(version)).expect("header");
        let answer = match RequestKind::decode(api, &mut buf, version).expect("request") {
            RequestKind::ApiVersions(_) => {
                let mut r = ApiVersionsResponse::default();
                r.api_keys = vec![
                    range(ApiKey::ApiVersions, 0, 3),
                    range(ApiKey::SaslHandshake, 0, 1),
                    range(ApiKey::SaslAuthenticate, 0, 2),
                ];
                ResponseKind::ApiVersions(r)
            }
            RequestKind::SaslHandshake(req) => {
                let mut r = SaslHandshakeResponse::default();
                r.mechanisms = ["PLAIN", "SCRAM-SHA-256"]
                    .map(StrBytes::from_static_str)
                    .to_vec();
                match req.mechanism.as_str() {
                    "PLAIN" => mechanism = Some(Mechanism::Plain),
                    "SCRAM-SHA-256" => {
                        mechanism = Some(Mechanism::ScramSha256);
                        scram = Some(ScramServer::new(ScramMechanism::Sha256));
                    }
                    _ => r.error_code = 33,
                }
                ResponseKind::SaslHandshake(r)
            }
            RequestKind::SaslAuthenticate(req) => {
                let mut r = SaslAuthenticateResponse::default();
                rounds += 1;
                let result = match (mechanism, scram.as_mut()) {
                    (Some(Mechanism::Plain), _) => plain::parse(&req.auth_bytes).and_then(|c| {
                        match USERS.contains(&(c.username.as_str(), c.password.as_str())) {
                            true => Ok(Vec::new()),
                            false => Err(strand_wire::sasl::SaslError::invalid_credentials(
                                Mechanism::Plain,
                            )),
                        }
                    }),
                    (_, Some(server)) if rounds == 1 => {
                        match server.client_first(&req.auth_bytes) {
                            Ok(user) => {
                                let cred = USERS.iter().find(|u| u.0 == user).map(|u| {
                                    ScramCredential::from_password(
                                        ScramMechanism::Sha256,
                                        u.1,
                                        b"salt",
                                        4096,
                                    )
                                });
                                server.server_first(cred)
                            }
                            Err(e) => Err(e),
                        }
                    }
                    (_, Some(server)) => server.client_final(&req.auth_bytes).map(|v| match server
                        .username()
                    {
                        Some("tamper") => b"v=AAAA".to_vec(),
                        _ => v,
                    }),
                    _ => Err(strand_wire::sasl::SaslError("no handshake".into())),
                };
                match result {
                    Ok(token) => r.auth_bytes = Bytes::from(token),
                    Err(e) => {
                        r.error_code = 58;
                        r.error_message = Some(StrBytes::from_string(e.0));
                    }
                }
                ResponseKind::SaslAuthenticate(r)
            }
            other => panic!("unexpected request {other:?}"),
        };
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, api.response_header_version(version))
            .expect("header");
        answer.encode(&mut out, version).expect("body");
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        s.write_all(&out).await?;
        s.flush().await?;
    }
}

fn security(ca: &str, mechanism: Option<(&str, &str, &str)>, verify: bool) -> ClientSecurity {
    let mut props = vec![
        ("ssl.truststore.certificates".to_string(), ca.to_string()),
        (
            "ssl.endpoint.identification.algorithm".to_string(),
            if verify { "https" } else { "" }.to_string(),
        ),
    ];
    let protocol = match mechanism {
        None => "SSL",
        Some((m, user, password)) => {
            props.push(("sasl.mechanism".to_string(), m.to_string()));
            props.push(("sasl.username".to_string(), user.to_string()));
            props.push(("sasl.password".to_string(), password.to_string()));
            "SASL_SSL"
        }
    };
    props.push(("security.protocol".to_string(), protocol.to_string()));
    ClientSecurity::from_properties(&props).expect("valid")
}

#[test]
fn secure_connections_end_to_end() {
    glommio::LocalExecutor::default().run(async {
        // By IP address (the certificate names 127.0.0.1), and by a name it does not list.
        let (ca, cert, key) = test_pki(&["127.0.0.1"]);
        let by_ip = start_broker(server_config(&cert, &key));
        let (other_ca, cert, key) = test_pki(&["broker.example"]);
        let misnamed = start_broker(server_config(&cert, &key));
        let connect = |addr: String, s: ClientSecurity| async move {
            BrokerConn::connect_secure(&addr, "test", &s).await
        };
        let alice = Some(("SCRAM-SHA-256", "alice", "alice-pw"));

        let conn = connect(by_ip.clone(), security(&ca, alice, true)).await;
        let conn = conn.expect("SCRAM over TLS");
        assert_eq!(conn.version(ApiKey::SaslAuthenticate).expect("v"), 2);
        let plain = Some(("PLAIN", "alice", "alice-pw"));
        connect(by_ip.clone(), security(&ca, plain, true))
            .await
            .expect("PLAIN over TLS");
        connect(by_ip.clone(), security(&ca, None, true))
            .await
            .expect("TLS only");

        let wrong = Some(("SCRAM-SHA-256", "alice", "nope"));
        let e = connect(by_ip.clone(), security(&ca, wrong, true)).await;
        let e = e.err().expect("wrong password");
        assert_eq!(e.code(), Some(58), "{e}");
        assert!(e.to_string().contains("invalid credentials"), "{e}");
        assert!(!e.is_retriable());

        let e = connect(
            by_ip.clone(),
            security(&ca, Some(("SCRAM-SHA-512", "alice", "x")), true),
        );
        let e = e.await.err().expect("mechanism not enabled");
        assert_eq!(e.code(), Some(33), "{e}");
        assert!(e.to_string().contains("PLAIN, SCRAM-SHA-256"), "{e}");

        let forged = Some(("SCRAM-SHA-256", "tamper", "tamper-pw"));
        let e = connect(by_ip.clone(), security(&ca, forged, true)).await;
        let e = e.err().expect("forged server signature");
        assert!(matches!(e, ClientError::Auth(_)), "{e}");
        assert!(e.to_string().contains("server signature"), "{e}");

        // The name check, on and off; the chain is checked either way.
        let e = connect(misnamed.clone(), security(&other_ca, alice, true)).await;
        let e = e.err().expect("not valid for 127.0.0.1");
        assert!(matches!(e, ClientError::Auth(_)), "{e}");
        assert!(
            e.to_string()
                .contains("ssl.endpoint.identification.algorithm"),
            "{e}"
        );
        connect(misnamed.clone(), security(&other_ca, alice, false))
            .await
            .expect("name check off");
        let e = connect(misnamed.clone(), security(&ca, alice, false)).await;
        let e = e.err().expect("signed by another CA");
        assert!(e.to_string().contains("ssl.truststore.location"), "{e}");

        // A plaintext listener is not TLS.
        let plain_listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = plain_listener.local_addr().expect("addr").to_string();
        glommio::spawn_local(async move {
            if let Ok(mut tcp) = plain_listener.accept().await {
                let _ = tcp.write_all(b"\0\0\0\x10not a tls server").await;
            }
        })
        .detach();
        let e = connect(addr, security(&ca, None, true)).await;
        let e = e.err().expect("not TLS");
        assert!(e.to_string().contains("TLS"), "{e}");
    });
}
