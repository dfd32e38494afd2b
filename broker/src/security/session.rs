//! One connection's authentication: which listener it came in on, who it is, and the SASL
//! exchange (SaslHandshake v1 then SaslAuthenticate, KIP-152) that makes it someone.
//!
//! A state machine driven by the two SASL requests and the time; no I/O (the connection
//! feeds it and closes when told). Kafka's rules:
//! - on a SASL listener, until authenticated, only ApiVersions, SaslHandshake and
//!   SaslAuthenticate are served; anything else closes the connection unread;
//! - a failed authentication answers SASL_AUTHENTICATION_FAILED and the connection closes
//!   (after `connection.failed.authentication.delay.ms`);
//! - with `connections.max.reauth.ms` (KIP-368) the session lasts that long: the client
//!   re-authenticates (as the same principal) on the same connection, or a request after
//!   the expiry closes it.
//!
//! PLAIN checks the password against the user's stored SCRAM credential (Redpanda's way:
//! one credential store), SCRAM-SHA-256/512 run RFC 5802 (`strand_wire::sasl::scram`).

use std::cell::RefCell;

use strand_wire::kafka::messages::ApiKey;
use strand_wire::sasl::scram::{ScramCredential, ScramMechanism, ScramServer};
use strand_wire::sasl::{plain, Mechanism, SASL_TOKEN_BYTES_MAX};
use strand_wire::ErrorCode;

use super::config::{Listener, SecurityProtocol};
use super::store::SecurityState;

/// Who a connection is before anything proves otherwise (Kafka's `User:ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

enum State {
    /// A non-SASL listener: the principal is fixed (anonymous, or the client certificate's).
    Open,
    /// A SASL listener waiting for SaslHandshake.
    AwaitHandshake,
    /// Handshake done: the first SaslAuthenticate uses this mechanism.
    AwaitAuthenticate(Mechanism),
    /// SCRAM's server-first sent; the next SaslAuthenticate carries client-final.
    ScramFinal(Box<ScramServer>, String),
    /// Authenticated (SASL) until `expires_ms` (KIP-368), if set.
    Authenticated { expires_ms: Option<i64> },
    /// Failed: the connection is closing.
    Failed,
}

/// What the connection does with a request before decoding it.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    Serve,
    Close(&'static str),
}

/// The outcome of a SaslAuthenticate for the connection to answer with.
pub struct AuthReply {
    pub error: ErrorCode,
    pub message: Option<String>,
    pub auth_bytes: Vec<u8>,
    pub session_lifetime_ms: i64,
    /// Close the connection after this reply (a failure).
    pub close: bool,
}

pub struct Session {
    pub listener: Listener,
    /// The peer's IP address (ACL host).
    pub host: String,
    principal: RefCell<String>,
    state: RefCell<State>,
    /// Authentications done on this connection (the first and re-authentications).
    authentications: std::cell::Cell<u32>,
}

impl Session {
    /// A new connection; `certificate_principal` is the mTLS client's, if it sent one.
    pub fn new(listener: Listener, host: String, certificate_principal: Option<String>) -> Self {
        let state = if listener.protocol.sasl() {
            State::AwaitHandshake
        } else {
            State::Open
        };
        Session {
            listener,
            host,
            principal: RefCell::new(certificate_principal.unwrap_or_else(|| ANONYMOUS.into())),
            state: RefCell::new(state),
            authentications: std::cell::Cell::new(0),
        }
    }

    pub fn principal(&self) -> String {
        self.principal.borrow().clone()
    }

    /// May a request of `api` be served now (`now_ms` for the KIP-368 expiry)?
    pub fn gate(&self, api: ApiKey, now_ms: i64) -> Gate {
        let sasl_api = matches!(
            api,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        );
        match &*self.state.borrow() {
            State::Open => Gate::Serve,
            State::Failed => Gate::Close("authentication failed"),
            State::Authenticated { expires_ms } => match expires_ms {
                Some(at) if now_ms >= *at && !sasl_api => {
                    Gate::Close("the SASL session expired (connections.max.reauth.ms)")
                }
                _ => Gate::Serve,
            },
            _ if sasl_api => Gate::Serve,
            _ => Gate::Close("a request before SASL authentication completed"),
        }
    }

    /// SaslHandshake: the error code and the enabled mechanisms to answer with.
    pub fn handshake(&self, mechanism: &str, enabled: &[Mechanism]) -> (ErrorCode, Vec<String>) {
        let names = enabled.iter().map(|m| m.name().to_string()).collect();
        let mut state = self.state.borrow_mut();
        let ready = matches!(*state, State::AwaitHandshake | State::Authenticated { .. });
        if !self.listener.protocol.sasl() || !ready {
            return (ErrorCode::IllegalSaslState, names);
        }
        match Mechanism::parse(mechanism).filter(|m| enabled.contains(m)) {
            Some(m) => {
                *state = match &*state {
                    // Re-authentication keeps the session until it succeeds or fails.
                    State::Authenticated { .. } => State::AwaitAuthenticate(m),
                    _ => State::AwaitAuthenticate(m),
                };
                (ErrorCode::None, names)
            }
            None => (ErrorCode::UnsupportedSaslMechanism, names),
        }
    }

    /// SaslAuthenticate with `token`, against the credentials in `security`.
    pub fn authenticate(
        &self,
        token: &[u8],
        security: &SecurityState,
        reauth_ms: i64,
        now_ms: i64,
    ) -> AuthReply {
        let fail = |message: String| AuthReply {
            error: ErrorCode::SaslAuthenticationFailed,
            message: Some(message),
            auth_bytes: Vec::new(),
            session_lifetime_ms: 0,
            close: true,
        };
        if token.len() > SASL_TOKEN_BYTES_MAX {
            *self.state.borrow_mut() = State::Failed;
            return fail(format!(
                "SASL token of {} bytes is over the limit of {SASL_TOKEN_BYTES_MAX}",
                token.len()
            ));
        }
        let state = std::mem::replace(&mut *self.state.borrow_mut(), State::Failed);
        let outcome: Result<(Vec<u8>, Option<String>), String> = match state {
            State::AwaitAuthenticate(Mechanism::Plain) => match plain::parse(token) {
                Ok(c) => {
                    let stored = [ScramMechanism::Sha512, ScramMechanism::Sha256]
                        .into_iter()
                        .find_map(|m| security.credential(&c.username, m));
                    if stored.is_some_and(|s| password_matches(&s, &c.password)) {
                        Ok((Vec::new(), Some(c.username)))
                    } else {
                        Err("Authentication failed: Invalid username or password".into())
                    }
                }
                Err(e) => Err(e.0),
            },
            State::AwaitAuthenticate(m) => {
                let Some(sm) = ScramMechanism::from_mechanism(m) else {
                    return fail("unsupported mechanism".into());
                };
                let mut server = ScramServer::new(sm);
                match server.client_first(token) {
                    Ok(user) => {
                        let credential = security.credential(&user, sm);
                        match server.server_first(credential) {
                            Ok(reply) => {
                                *self.state.borrow_mut() =
                                    State::ScramFinal(Box::new(server), user);
                                return AuthReply {
                                    error: ErrorCode::None,
                                    message: None,
                                    auth_bytes: reply,
                                    session_lifetime_ms: 0,
                                    close: false,
                                };
                            }
                            Err(e) => Err(e.0),
                        }
                    }
                    Err(e) => Err(e.0),
                }
            }
            State::ScramFinal(mut server, user) => match server.client_final(token) {
                Ok(reply) => Ok((reply, Some(user))),
                Err(e) => Err(e.0),
            },
            _ => return fail("SaslAuthenticate out of order: SaslHandshake first".into()),
        };
        match outcome {
            Ok((reply, Some(user))) => {
                let principal = format!("User:{user}");
                let first = self.authentications.get() == 0;
                if !first && *self.principal.borrow() != principal {
                    return fail(format!(
                        "re-authentication as {principal} on a connection of {}",
                        self.principal.borrow()
                    ));
                }
                self.authentications.set(self.authentications.get() + 1);
                *self.principal.borrow_mut() = principal;
                let expires_ms = (reauth_ms > 0).then(|| now_ms + reauth_ms);
                *self.state.borrow_mut() = State::Authenticated { expires_ms };
                AuthReply {
                    error: ErrorCode::None,
                    message: None,
                    auth_bytes: reply,
                    session_lifetime_ms: reauth_ms.max(0),
                    close: false,
                }
            }
            Ok((_, None)) => fail("no user".into()),
            Err(message) => fail(message),
        }
    }

    /// Authenticated by SASL (and not failed since).
    pub fn authenticated(&self) -> bool {
        matches!(*self.state.borrow(), State::Authenticated { .. })
    }

    /// A failed authentication: the connection closes after its reply.
    pub fn failed(&self) -> bool {
        matches!(*self.state.borrow(), State::Failed)
    }

    pub fn is_sasl(&self) -> bool {
        self.listener.protocol == SecurityProtocol::SaslPlaintext
            || self.listener.protocol == SecurityProtocol::SaslSsl
    }
}

/// Does `password` give the stored credential's keys (PLAIN against a SCRAM credential)?
fn password_matches(stored: &ScramCredential, password: &str) -> bool {
    if strand_wire::sasl::scram::check_iterations(stored.iterations).is_err() {
        return false;
    }
    let computed =
        ScramCredential::from_password(stored.mechanism, password, &stored.salt, stored.iterations);
    strand_wire::sasl::constant_time_eq(&computed.stored_key, &stored.stored_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::sasl::scram::ScramClient;

    fn listener(protocol: SecurityProtocol) -> Listener {
        Listener {
            name: protocol.name().into(),
            protocol,
            bind: "127.0.0.1:9093".parse().expect("addr"),
            advertised: ("127.0.0.1".into(), 9093),
        }
    }

    fn state_with(user: &str, password: &str) -> SecurityState {
        let mut s = SecurityState::default();
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let c = ScramCredential::from_password(m, password, b"0123456789abcdef", 4096);
            s.credentials.insert((user.into(), m), c);
        }
        s
    }

    const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    fn scram(
        session: &Session,
        s: &SecurityState,
        m: ScramMechanism,
        user: &str,
        pw: &str,
        now: i64,
    ) -> AuthReply {
        let (code, _) = session.handshake(m.name(), &ALL);
        assert_eq!(code, ErrorCode::None);
        let mut client = ScramClient::new(m, user, pw);
        let first = session.authenticate(&client.client_first(), s, 60_000, now);
        if first.error != ErrorCode::None {
            return first;
        }
        let Ok(last) = client.server_first(&first.auth_bytes) else {
            panic!("server-first did not parse");
        };
        let done = session.authenticate(&last, s, 60_000, now);
        if done.error == ErrorCode::None {
            client
                .server_final(&done.auth_bytes)
                .expect("server signature verifies");
        }
        done
    }

    #[test]
    fn before_authentication_only_the_sasl_apis_pass_the_gate() {
        let session = Session::new(listener(SecurityProtocol::SaslSsl), "10.0.0.1".into(), None);
        for (api, gate) in [
            (ApiKey::ApiVersions, true),
            (ApiKey::SaslHandshake, true),
            (ApiKey::SaslAuthenticate, true),
            (ApiKey::Produce, false),
            (ApiKey::Fetch, false),
            (ApiKey::Metadata, false),
        ] {
            assert_eq!(session.gate(api, 0) == Gate::Serve, gate, "{api:?}");
        }
        assert_eq!(session.principal(), ANONYMOUS);
        let open = Session::new(
            listener(SecurityProtocol::Ssl),
            "h".into(),
            Some("User:CN=x".into()),
        );
        assert_eq!(open.gate(ApiKey::Produce, 0), Gate::Serve);
        assert_eq!(open.principal(), "User:CN=x");
        assert_eq!(open.handshake("PLAIN", &ALL).0, ErrorCode::IllegalSaslState);
    }

    #[test]
    fn scram_both_hashes_and_plain_authenticate_and_set_the_principal() {
        let s = state_with("alice", "pw");
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let session = Session::new(listener(SecurityProtocol::SaslPlaintext), "h".into(), None);
            let r = scram(&session, &s, m, "alice", "pw", 1_000);
            assert_eq!(r.error, ErrorCode::None, "{:?}", r.message);
            assert_eq!(r.session_lifetime_ms, 60_000);
            assert!(session.authenticated());
            assert_eq!(session.principal(), "User:alice");
            assert_eq!(session.gate(ApiKey::Produce, 2_000), Gate::Serve);
        }
        let session = Session::new(listener(SecurityProtocol::SaslPlaintext), "h".into(), None);
        assert_eq!(session.handshake("PLAIN", &ALL).0, ErrorCode::None);
        let r = session.authenticate(&plain::token("alice", "pw"), &s, 0, 0);
        assert_eq!(r.error, ErrorCode::None);
        assert_eq!(r.session_lifetime_ms, 0);
        assert_eq!(session.principal(), "User:alice");
    }

    #[test]
    fn failures_close_and_say_sasl_authentication_failed() {
        let s = state_with("alice", "pw");
        for (user, pw) in [("alice", "wrong"), ("nobody", "pw")] {
            let session = Session::new(listener(SecurityProtocol::SaslSsl), "h".into(), None);
            let r = scram(&session, &s, ScramMechanism::Sha512, user, pw, 0);
            assert_eq!(r.error, ErrorCode::SaslAuthenticationFailed);
            assert!(r.close && session.failed());
            assert_ne!(session.gate(ApiKey::Produce, 0), Gate::Serve);
            assert_eq!(session.principal(), ANONYMOUS);
        }
        let session = Session::new(listener(SecurityProtocol::SaslSsl), "h".into(), None);
        assert_eq!(session.handshake("PLAIN", &ALL).0, ErrorCode::None);
        let r = session.authenticate(&plain::token("alice", "wrong"), &s, 0, 0);
        assert_eq!(r.error, ErrorCode::SaslAuthenticationFailed);
        // Out of order: SaslAuthenticate before any handshake.
        let session = Session::new(listener(SecurityProtocol::SaslSsl), "h".into(), None);
        let r = session.authenticate(b"n,,n=alice,r=abc", &s, 0, 0);
        assert_eq!(r.error, ErrorCode::SaslAuthenticationFailed);
        // A mechanism that is not enabled.
        let session = Session::new(listener(SecurityProtocol::SaslSsl), "h".into(), None);
        let (code, names) = session.handshake("PLAIN", &[Mechanism::ScramSha512]);
        assert_eq!(code, ErrorCode::UnsupportedSaslMechanism);
        assert_eq!(names, vec!["SCRAM-SHA-512".to_string()]);
        // An oversized token.
        let session = Session::new(listener(SecurityProtocol::SaslSsl), "h".into(), None);
        session.handshake("PLAIN", &ALL);
        let big = vec![0u8; SASL_TOKEN_BYTES_MAX + 1];
        assert!(session.authenticate(&big, &s, 0, 0).close);
    }

    #[test]
    fn a_session_expires_unless_reauthenticated_as_the_same_user() {
        let mut s = state_with("alice", "pw");
        let c = ScramCredential::from_password(
            ScramMechanism::Sha512,
            "pw2",
            b"salt-salt-salt!!",
            4096,
        );
        s.credentials
            .insert(("bob".into(), ScramMechanism::Sha512), c);
        let session = Session::new(listener(SecurityProtocol::SaslSsl), "h".into(), None);
        assert_eq!(
            scram(&session, &s, ScramMechanism::Sha512, "alice", "pw", 0).error,
            ErrorCode::None
        );
        assert_eq!(session.gate(ApiKey::Fetch, 59_999), Gate::Serve);
        assert_ne!(session.gate(ApiKey::Fetch, 60_000), Gate::Serve);
        assert_eq!(session.gate(ApiKey::SaslHandshake, 60_000), Gate::Serve);
        // Re-authentication extends the session.
        assert_eq!(
            scram(&session, &s, ScramMechanism::Sha512, "alice", "pw", 60_000).error,
            ErrorCode::None
        );
        assert_eq!(session.gate(ApiKey::Fetch, 100_000), Gate::Serve);
        // As someone else: refused.
        let r = scram(&session, &s, ScramMechanism::Sha512, "bob", "pw2", 100_000);
        assert_eq!(r.error, ErrorCode::SaslAuthenticationFailed);
        assert!(session.failed());
    }
}
