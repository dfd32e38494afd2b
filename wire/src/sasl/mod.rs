//! SASL authentication, sans-IO: the bytes of `SaslAuthenticate` tokens in, bytes out.
//!
//! Both sides live here: the broker runs the server side, the native client the client side.
//! - [`plain`] — PLAIN (RFC 4616), checked as Kafka's `PlainSaslServer` checks it.
//! - [`scram`] — SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's
//!   `ScramSaslServer` and `ScramSaslClient` speak them: no channel binding (gs2 header `n,,`
//!   or `n,a=<authzid>,` with the authzid equal to the username), no SASLprep (passwords are
//!   their UTF-8 bytes), extensions in client-first accepted and ignored.
//!
//! Every token is bounded by [`SASL_TOKEN_BYTES_MAX`]; malformed input gives a [`SaslError`],
//! never a panic. A server-side error's text is safe to send to the client: like Kafka's, it
//! never says whether the user exists.

pub mod plain;
pub mod scram;

/// The largest SASL token either side accepts from its peer.
pub const SASL_TOKEN_BYTES_MAX: usize = 64 * 1024;

/// The SASL mechanisms Strand speaks, by their Kafka names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism, in the order the broker lists them in `SaslHandshake` responses.
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    /// The mechanism's name on the wire (`SaslHandshake`, JAAS config).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism with this exact name (case-sensitive, as Kafka).
    pub fn parse(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed SASL step. The text is meant for the peer (the `SaslAuthenticate` error message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslError(pub String);

impl SaslError {
    /// Kafka's answer to any credential failure (unknown user, wrong password): it does not
    /// say which.
    pub fn invalid_credentials(mechanism: Mechanism) -> SaslError {
        SaslError(format!(
            "Authentication failed during authentication due to invalid credentials with SASL \
             mechanism {}",
            mechanism.name()
        ))
    }
}

impl std::fmt::Display for SaslError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SaslError {}

/// Refuses a token over [`SASL_TOKEN_BYTES_MAX`].
pub(crate) fn check_token_size(token: &[u8]) -> Result<(), SaslError> {
    if token.len() > SASL_TOKEN_BYTES_MAX {
        return Err(SaslError(format!(
            "SASL token of {} bytes exceeds the limit of {SASL_TOKEN_BYTES_MAX} bytes",
            token.len()
        )));
    }
    Ok(())
}

/// Compares two byte strings in time that depends on their lengths only (passwords, proofs).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_mechanism_names_round_trip() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::parse(m.name()), Some(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!(Mechanism::parse("plain"), None);
        assert_eq!(Mechanism::parse("SCRAM-SHA-1"), None);
        assert_eq!(Mechanism::parse("GSSAPI"), None);
        assert_eq!(Mechanism::parse(""), None);
    }

    #[test]
    fn sasl_token_size_limit() {
        assert!(check_token_size(&vec![0u8; SASL_TOKEN_BYTES_MAX]).is_ok());
        assert!(check_token_size(&vec![0u8; SASL_TOKEN_BYTES_MAX + 1]).is_err());
    }
}

/// Whole SCRAM exchanges, both sides against each other, and hostile input to every step.
#[cfg(test)]
mod scram_tests {
    use super::scram::*;
    use super::{Mechanism, SaslError, SASL_TOKEN_BYTES_MAX};
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use ScramMechanism::{Sha256, Sha512};

    fn credential(m: ScramMechanism, password: &str) -> ScramCredential {
        ScramCredential::from_password(m, password, b"some salt", SCRAM_ITERATIONS_MIN)
    }

    /// Runs a whole exchange; the server knows `known` (user, password) only.
    fn exchange(
        m: ScramMechanism,
        user: &str,
        password: &str,
        known: (&str, &str),
    ) -> Result<String, SaslError> {
        let mut client = ScramClient::new(m, user, password);
        let mut server = ScramServer::new(m);
        let asked = server.client_first(&client.client_first())?;
        let cred = (asked == known.0).then(|| credential(m, known.1));
        let server_first = server.server_first(cred)?;
        let server_final = server.client_final(&client.server_first(&server_first)?)?;
        client.server_final(&server_final)?;
        assert!(client.is_done());
        Ok(server.username().unwrap_or_default().to_string())
    }

    #[test]
    fn sasl_scram_round_trips_and_failures() {
        for m in [Sha256, Sha512] {
            assert_eq!(
                exchange(m, "alice", "pw", ("alice", "pw")).unwrap(),
                "alice"
            );
            let wrong = exchange(m, "alice", "nope", ("alice", "pw")).unwrap_err();
            let unknown = exchange(m, "bob", "pw", ("alice", "pw")).unwrap_err();
            assert_eq!(wrong, unknown, "must not reveal whether the user exists");
            assert_eq!(wrong, SaslError::invalid_credentials(m.mechanism()));
        }
        let c = ScramCredential::from_password(Sha512, "pw", b"salt", 5000);
        assert_eq!(c.stored_key.len(), 64);
        let salted = salted_password(Sha512, "pw", b"salt", 5000);
        assert_eq!(
            ScramCredential::from_salted_password(Sha512, &salted, b"salt", 5000),
            c
        );
        assert_eq!(
            ScramMechanism::from_kafka_code(Sha512.kafka_code()),
            Some(Sha512)
        );
        assert_eq!(ScramMechanism::from_kafka_code(0), None);
        assert_eq!(ScramMechanism::from_mechanism(Mechanism::Plain), None);
        assert!(check_iterations(4095).is_err() && check_iterations(16385).is_err());
    }

    #[test]
    fn sasl_scram_escaped_usernames() {
        let mut client = ScramClient::with_nonce(Sha256, "a,b=c", "pw", "abc");
        assert_eq!(client.client_first(), b"n,,n=a=2Cb=3Dc,r=abc");
        assert_eq!(
            exchange(Sha256, "a,b=c", "pw", ("a,b=c", "pw")).unwrap(),
            "a,b=c"
        );
        for bad in ["", "a=", "a=2", "a=2c", "a=41", "=3", "a\0b"] {
            assert!(unescape_username(bad).is_err(), "{bad:?}");
        }
        assert_eq!(unescape_username("=3D=2Czoë").unwrap(), "=,zoë");
    }

    #[test]
    fn sasl_scram_client_first_forms() {
        let parse = |msg: &str| ScramServer::new(Sha256).client_first(msg.as_bytes());
        assert_eq!(parse("n,a=user,n=user,r=abc").unwrap(), "user");
        assert_eq!(parse("n,,n=user,r=abc,tokenauth=true,x=1").unwrap(), "user");
        for bad in [
            "n,a=admin,n=user,r=abc",
            "n,a=,n=user,r=abc",
            "y,,n=user,r=abc",
            "p=tls-unique,,n=user,r=abc",
            "n,,m=ext,n=user,r=abc",
            "n,,n=user,r=a,bc",
            "n,,n=user,r=",
            "n,,n=user",
            "n,,r=abc,n=user",
            "n,,n=user,r=abc,1=2",
            "n,,n=user,r=abc,x=",
            "n,,n=user,r=a\u{7f}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let big = format!("n,,n=user,r={}", "a".repeat(SASL_TOKEN_BYTES_MAX));
        assert!(parse(&big).is_err());
    }

    /// Client-first with an authzid: the channel binding must be that header, not `biws`.
    #[test]
    fn sasl_scram_authzid_channel_binding() {
        use ring::{digest, hmac};
        let salted = salted_password(Sha256, "pw", b"some salt", SCRAM_ITERATIONS_MIN);
        let client_key = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &salted), b"Client Key");
        let stored_key = digest::digest(&digest::SHA256, client_key.as_ref());
        for (binding, ok) in [("n,a=alice,", true), ("n,,", false)] {
            let mut server = ScramServer::with_nonce(Sha256, "xyz");
            server.client_first(b"n,a=alice,n=alice,r=abc").unwrap();
            let server_first = server.server_first(Some(credential(Sha256, "pw"))).unwrap();
            // The proof over this client-final-without-proof, as a client would compute it.
            let without_proof = format!("c={},r=abcxyz", STANDARD.encode(binding));
            let auth = format!(
                "n=alice,r=abc,{},{without_proof}",
                std::str::from_utf8(&server_first).unwrap()
            );
            let key = hmac::Key::new(hmac::HMAC_SHA256, stored_key.as_ref());
            let signature = hmac::sign(&key, auth.as_bytes());
            let proof: Vec<u8> = (client_key.as_ref().iter().zip(signature.as_ref()))
                .map(|(a, b)| a ^ b)
                .collect();
            let msg = format!("{without_proof},p={}", STANDARD.encode(proof));
            assert_eq!(server.client_final(msg.as_bytes()).is_ok(), ok, "{binding}");
        }
    }

    #[test]
    fn sasl_scram_tampering_fails() {
        let cred = credential(Sha256, "pw");
        // The server changes the nonce: the client refuses.
        let mut client = ScramClient::with_nonce(Sha256, "u", "pw", "abc");
        let _ = client.client_first();
        assert!(client.server_first(b"r=abXdef,s=c2FsdA==,i=4096").is_err());
        for bad in [
            &b"r=abc,s=c2FsdA==,i=4096"[..],
            b"r=abcd,s=c2FsdA==,i=4095",
            b"r=abcd,s=c2FsdA==,i=1000001",
            b"r=abcd,s=c2FsdA==,i=+4096",
            b"r=abcd,s=,i=4096",
            b"r=abcd,s=c2FsdA=,i=4096",
            b"m=x,r=abcd,s=c2FsdA==,i=4096",
        ] {
            let mut client = ScramClient::with_nonce(Sha256, "u", "pw", "abc");
            let _ = client.client_first();
            assert!(client.server_first(bad).is_err(), "{bad:?}");
        }
        // The client changes the nonce, the proof or the binding: the server refuses.
        let mut client = ScramClient::with_nonce(Sha256, "u", "pw", "abc");
        let mut server = ScramServer::with_nonce(Sha256, "def");
        server.client_first(&client.client_first()).unwrap();
        let good = client.server_first(&server.server_first(Some(cred.clone())).unwrap());
        let good = String::from_utf8(good.unwrap()).unwrap();
        let tampered = [
            good.replace("r=abcdef", "r=abcdeX"),
            good.replace("c=biws", "c=eSws"),
            good.replace("p=", "p=AA"),
            format!("{good},x=1"),
        ];
        for bad in tampered
            .iter()
            .map(String::as_str)
            .chain(["", "c=biws", "p=abc"])
        {
            let mut server = ScramServer::with_nonce(Sha256, "def");
            server.client_first(b"n,,n=u,r=abc").unwrap();
            server.server_first(Some(cred.clone())).unwrap();
            assert!(server.client_final(bad.as_bytes()).is_err(), "{bad}");
            assert_eq!(server.username(), None);
        }
        // A bad server signature and a server error fail the client.
        for bad in [&b"v=AAAA"[..], b"e=invalid-proof", b"", b"v=", b"x=1"] {
            let mut client = ScramClient::with_nonce(Sha256, "u", "pw", "abc");
            let _ = client.client_first();
            client.server_first(b"r=abcd,s=c2FsdA==,i=4096").unwrap();
            assert!(client.server_final(bad).is_err());
            assert!(!client.is_done());
        }
        // A credential the server must not use.
        for cred in [
            ScramCredential::from_password(Sha256, "pw", b"s", 4095),
            credential(Sha512, "pw"),
        ] {
            let mut server = ScramServer::new(Sha256);
            server.client_first(b"n,,n=u,r=abc").unwrap();
            assert!(server.server_first(Some(cred)).is_err());
        }
    }

    #[test]
    fn sasl_scram_out_of_order_calls_fail() {
        let mut server = ScramServer::new(Sha256);
        assert!(server.client_final(b"c=biws,r=a,p=AAAA").is_err());
        assert!(
            server.client_first(b"n,,n=u,r=abc").is_err(),
            "failed is final"
        );
        let mut server = ScramServer::new(Sha256);
        assert!(server.server_first(Some(credential(Sha256, "pw"))).is_err());
        let mut server = ScramServer::new(Sha256);
        server.client_first(b"n,,n=u,r=abc").unwrap();
        assert!(server.client_first(b"n,,n=u,r=abc").is_err());
        assert!(server.server_first(Some(credential(Sha256, "pw"))).is_err());

        let mut client = ScramClient::new(Sha256, "u", "pw");
        assert!(client.server_first(b"r=x,s=c2FsdA==,i=4096").is_err());
        assert!(client.client_first().is_empty(), "failed is final");
        let mut client = ScramClient::new(Sha256, "u", "pw");
        assert!(client.server_final(b"v=AAAA").is_err());
        let mut client = ScramClient::new(Sha256, "u", "pw");
        assert!(!client.client_first().is_empty());
        assert!(client.client_first().is_empty());
        assert!(client.server_final(b"v=AAAA").is_err());
    }

    #[test]
    fn sasl_scram_garbage_never_panics() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let cred = credential(Sha256, "pw");
        let seeds: [&[u8]; 4] = [
            b"n,a=u=2C,n=u=2C,r=abc,ext=1",
            b"c=biws,r=abcdef,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            b"r=abcdef,s=c2FsdA==,i=4096",
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        ];
        for round in 0..4000 {
            // Half random bytes, half a seed with a few bytes changed, cut or repeated.
            let mut msg: Vec<u8> = if round % 2 == 0 {
                (0..next() % 64).map(|_| next() as u8).collect()
            } else {
                seeds[(next() % 4) as usize].to_vec()
            };
            for _ in 0..next() % 4 {
                let at = (next() as usize) % (msg.len() + 1);
                match next() % 3 {
                    0 => msg.insert(at, b",=\0nrcpvie2C3D"[(next() % 14) as usize]),
                    1 => msg.truncate(at),
                    _ => msg.extend_from_within(at..),
                }
            }
            let mut server = ScramServer::with_nonce(Sha256, "def");
            if server.client_first(&msg).is_ok() {
                let _ = server.server_first(Some(cred.clone()));
            }
            let mut server = ScramServer::with_nonce(Sha256, "def");
            server.client_first(b"n,,n=u,r=abc").unwrap();
            server.server_first(Some(cred.clone())).unwrap();
            let _ = server.client_final(&msg);
            let mut client = ScramClient::with_nonce(Sha256, "u", "pw", "abc");
            let _ = client.client_first();
            let _ = client.server_first(&msg);
            let _ = super::plain::parse(&msg);
        }
        // The client's server-final parsing, on garbage.
        let mut client = ScramClient::with_nonce(Sha256, "u", "pw", "abc");
        let _ = client.client_first();
        client.server_first(b"r=abcd,s=c2FsdA==,i=4096").unwrap();
        for round in 0..2000 {
            let mut msg: Vec<u8> = (0..next() % 64).map(|_| next() as u8).collect();
            if round % 2 == 0 {
                msg.splice(0..0, *b"v=");
            }
            let _ = client.clone().server_final(&msg);
        }
    }
}
