//! SASL/PLAIN (RFC 4616): one client token, `authzid NUL username NUL password`.
//!
//! Checked as Kafka's `PlainSaslServer` checks it: exactly three fields, username and password
//! non-empty, and an authzid that is either empty or the username itself. The token must be
//! UTF-8 (Kafka decodes it lossily; Strand refuses instead). PLAIN sends the password in the
//! clear, so it belongs on TLS listeners.

use super::{check_token_size, SaslError};

/// The fields of a PLAIN token. `Debug` does not print the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    pub authzid: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for PlainCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Parses a client's PLAIN token (the server side).
pub fn parse(token: &[u8]) -> Result<PlainCredentials, SaslError> {
    check_token_size(token)?;
    let text = std::str::from_utf8(token)
        .map_err(|_| SaslError("Invalid SASL/PLAIN response: not valid UTF-8".to_string()))?;
    // Kafka stops counting at four fields.
    let fields: Vec<&str> = text.splitn(4, '\0').collect();
    let [authzid, username, password] = fields.as_slice() else {
        return Err(SaslError(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            fields.len()
        )));
    };
    if username.is_empty() {
        return Err(SaslError(
            "Authentication failed: username not specified".to_string(),
        ));
    }
    if password.is_empty() {
        return Err(SaslError(
            "Authentication failed: password not specified".to_string(),
        ));
    }
    if !authzid.is_empty() && authzid != username {
        return Err(SaslError(
            "Authentication failed: Client requested an authorization id that is different from \
             username"
                .to_string(),
        ));
    }
    Ok(PlainCredentials {
        authzid: (*authzid).to_string(),
        username: (*username).to_string(),
        password: (*password).to_string(),
    })
}

/// The client's PLAIN token, with an empty authzid (as Kafka's client sends it).
pub fn token(username: &str, password: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + username.len() + password.len());
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::SASL_TOKEN_BYTES_MAX;

    #[test]
    fn plain_token_round_trip() {
        let creds = parse(&token("alice", "s3cret")).unwrap();
        assert_eq!(creds.authzid, "");
        assert_eq!(creds.username, "alice");
        assert_eq!(creds.password, "s3cret");
        assert!(!format!("{creds:?}").contains("s3cret"));
    }

    #[test]
    fn plain_authzid_rules() {
        let ok = parse(b"alice\0alice\0pw").unwrap();
        assert_eq!(ok.authzid, "alice");
        assert!(parse(b"admin\0alice\0pw").is_err());
    }

    #[test]
    fn plain_malformed_tokens() {
        for bad in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0alice\0pw\0",
            b"\0\0pw",
            b"\0alice\0",
            b"\0\0",
            b"\0\xff\xfe\0pw",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let err = parse(b"a\0b\0c\0d\0e\0f").unwrap_err();
        assert!(err.0.contains("expected 3 tokens, got 4"), "{err}");
        let mut big = token("alice", "pw");
        big.resize(SASL_TOKEN_BYTES_MAX + 1, b'x');
        assert!(parse(&big).is_err());
    }

    #[test]
    fn plain_garbage_never_panics() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..4000 {
            let len = (next() % 48) as usize;
            // Mostly small alphabets so NULs and valid UTF-8 come up often.
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => 0,
                    1 => b'a' + (next() % 3) as u8,
                    _ => next() as u8,
                })
                .collect();
            let _ = parse(&bytes);
        }
    }

    #[test]
    fn plain_accepts_utf8_and_separators_inside_password() {
        let creds = parse("\0zoë\0pä,ss=word".as_bytes()).unwrap();
        assert_eq!(creds.username, "zoë");
        assert_eq!(creds.password, "pä,ss=word");
    }
}
