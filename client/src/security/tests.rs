//! `from_properties`, the text formats, and the TLS configuration.

use super::*;

fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A CA, and a certificate it signed for `names` (DNS names or IP addresses):
/// (CA PEM, certificate PEM, key PEM).
pub(crate) fn test_pki(names: &[&str]) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let params = rcgen::CertificateParams::new(names).expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("cert");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// A file in a fresh temporary directory.
pub(crate) fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "strand-client-security-{}-{:x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn err(pairs: &[(&str, &str)]) -> String {
    ClientSecurity::from_properties(&props(pairs)).expect_err("must fail")
}

#[test]
fn librdkafka_names() {
    let (ca, cert, key) = test_pki(&["localhost"]);
    let ca_path = temp_file("ca.pem", &ca);
    let cert_path = temp_file("client.pem", &cert);
    let key_path = temp_file("client.key", &key);
    let s = ClientSecurity::from_properties(&props(&[
        ("security.protocol", "sasl_ssl"),
        ("sasl.mechanisms", "SCRAM-SHA-512"),
        ("sasl.username", "alice"),
        ("sasl.password", "s3cret"),
        ("ssl.ca.location", ca_path.to_str().unwrap()),
        ("ssl.certificate.location", cert_path.to_str().unwrap()),
        ("ssl.key.location", key_path.to_str().unwrap()),
        ("ssl.endpoint.identification.algorithm", "none"),
        ("linger.ms", "5"),
    ]))
    .expect("valid");
    assert_eq!(s.protocol, Protocol::SaslSsl);
    let sasl = s.sasl.as_ref().expect("sasl");
    assert_eq!(sasl.mechanism, Mechanism::ScramSha512);
    assert_eq!(
        (sasl.username.as_str(), sasl.password.as_str()),
        ("alice", "s3cret")
    );
    let tls = s.tls.as_ref().expect("tls");
    assert_eq!(tls.ca_pem.as_deref(), Some(ca.as_bytes()));
    assert_eq!(tls.client_chain_pem.as_deref(), Some(cert.as_bytes()));
    assert_eq!(tls.client_key_pem.as_deref(), Some(key.as_bytes()));
    assert!(!tls.verify_hostname);
    assert!(s.tls_config().expect("config").is_some());
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("PRIVATE KEY"),
        "{shown}"
    );
    assert!(is_security_key("ssl.ca.location") && !is_security_key("linger.ms"));
}

#[test]
fn java_names_and_jaas_config() {
    let (ca, cert, key) = test_pki(&["localhost"]);
    let keystore = temp_file("keystore.pem", &format!("{key}{cert}"));
    let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required
        username="alice"  password="p \"w\"; x=y" ;"#;
    let s = ClientSecurity::from_properties(&props(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.jaas.config", jaas),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", &ca),
        ("ssl.keystore.location", keystore.to_str().unwrap()),
    ]))
    .expect("valid");
    let sasl = s.sasl.expect("sasl");
    assert_eq!(sasl.mechanism, Mechanism::ScramSha256);
    assert_eq!(sasl.username, "alice");
    assert_eq!(sasl.password, r#"p "w"; x=y"#);
    let tls = s.tls.expect("tls");
    assert!(tls.verify_hostname, "https is the default");
    assert!(tls.client_key_pem.is_some() && tls.client_chain_pem.is_some());

    // The plain module, single quotes, bare values; sasl.password wins over the JAAS one.
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                username=bob password='from-jaas';";
    let s = ClientSecurity::from_properties(&props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.jaas.config", jaas),
        ("sasl.password", "explicit"),
        ("ssl.truststore.location", "/nonexistent"),
    ]))
    .expect("valid: ssl.* is not read without TLS");
    let sasl = s.sasl.expect("sasl");
    assert_eq!(
        (sasl.username.as_str(), sasl.password.as_str()),
        ("bob", "explicit")
    );
    assert!(s.tls.is_none());
}

#[test]
fn errors_name_the_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("security.protocol", "TLS")], "security.protocol:"),
        (
            &[("security.protocol", "SASL_PLAINTEXT")],
            "sasl.mechanism:",
        ),
        (
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "GSSAPI"),
            ],
            "sasl.mechanism:",
        ),
        (
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "alice"),
            ],
            "sasl.password:",
        ),
        (
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "PLAIN"),
                (
                    "sasl.jaas.config",
                    "x.PlainLoginModule username=\"a\" password=\"b\";",
                ),
            ],
            "sasl.jaas.config:",
        ),
        (&[("security.protocol", "SSL")], "ssl.truststore.location:"),
        (
            &[("security.protocol", "SSL"), ("ssl.truststore.type", "JKS")],
            "ssl.truststore.type:",
        ),
        (
            &[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", "/nonexistent/ca.pem"),
            ],
            "ssl.ca.location:",
        ),
        (
            &[
                ("security.protocol", "SSL"),
                ("ssl.truststore.certificates", "junk"),
            ],
            "ssl.truststore.certificates:",
        ),
    ];
    for (pairs, key) in cases {
        let e = err(pairs);
        assert!(e.starts_with(key), "{pairs:?}: {e}");
    }
    let (ca, _, key) = test_pki(&["localhost"]);
    let e = err(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.certificates", &ca),
        ("ssl.keystore.key", &key),
    ]);
    assert!(e.starts_with("ssl.keystore.certificate.chain:"), "{e}");
    let e = err(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.certificates", &ca),
        ("ssl.endpoint.identification.algorithm", "http"),
    ]);
    assert!(
        e.starts_with("ssl.endpoint.identification.algorithm:"),
        "{e}"
    );
    // An empty algorithm turns the name check off.
    let s = ClientSecurity::from_properties(&props(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.certificates", &ca),
        ("ssl.endpoint.identification.algorithm", ""),
    ]))
    .expect("valid");
    assert!(!s.tls.expect("tls").verify_hostname);
    // Plaintext by default; non-security keys ignored.
    let s = ClientSecurity::from_properties(&props(&[("acks", "all")])).expect("valid");
    assert_eq!(s.protocol, Protocol::Plaintext);
    assert!(s.tls_config().expect("none").is_none());
    assert!(s.sasl_settings().expect("none").is_none());
}

#[test]
fn jaas_syntax_errors() {
    for bad in [
        "",
        "Module",
        "Module sometimes username=\"a\";",
        "Module required username=\"a;",
        "Module required username;",
        "Module required username=;",
        "Module required username=\"a\"; Other required password=\"b\";",
    ] {
        assert!(props::parse_jaas(bad).is_err(), "{bad:?}");
    }
    let ok = props::parse_jaas("M required a=\"x\\\\y\" b=c").expect("no ';' is accepted");
    assert_eq!(ok["a"], "x\\y");
    assert_eq!(ok["b"], "c");
}

#[test]
fn properties_files() {
    let text = "# a comment\n\
                ! another\n\
                \n\
                security.protocol = SASL_SSL\n\
                sasl.mechanism:SCRAM-SHA-256\n\
                ssl.truststore.location C:\\\\certs\\\\ca.pem\n\
                sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
                \x20   username=\"alice\" \\\n\
                \x20   password=\"a=b#c\";\n\
                key\\ with\\ space=tab\\there\\u00e9\n\
                empty=\n";
    let path = temp_file("client.properties", text);
    let pairs = ClientSecurity::read_properties_file(&path).expect("parses");
    let expect = [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("ssl.truststore.location", "C:\\certs\\ca.pem"),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"alice\" password=\"a=b#c\";",
        ),
        ("key with space", "tab\there\u{e9}"),
        ("empty", ""),
    ];
    assert_eq!(pairs, props(&expect));
    // SASL_SSL with a CA file that is not there: the CA key is named.
    let e = ClientSecurity::from_properties(&pairs[..4]).expect_err("no readable CA");
    assert!(e.starts_with("ssl.truststore.location: cannot read"), "{e}");
    assert!(parse_properties("bad=\\u12").is_err());
    assert!(ClientSecurity::read_properties_file(Path::new("/nonexistent.properties")).is_err());
}

#[test]
fn server_names() {
    use rustls::pki_types::ServerName;
    assert!(matches!(
        server_name("broker-1.example:9093"),
        Ok(ServerName::DnsName(_))
    ));
    assert!(matches!(
        server_name("127.0.0.1:9093"),
        Ok(ServerName::IpAddress(_))
    ));
    assert!(matches!(
        server_name("[::1]:9093"),
        Ok(ServerName::IpAddress(_))
    ));
    assert!(server_name("bad name:9093").is_err());
}
