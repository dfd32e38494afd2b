//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), both sides, as Kafka speaks them.
//!
//! The exchange is client-first, server-first, client-final, server-final. Following Kafka's
//! `ScramSaslServer` / `ScramSaslClient`:
//! - no channel binding: the gs2 header is `n,,` or `n,a=<authzid>,` with the authzid equal to
//!   the username, and client-final's `c=` must be that header in base64 (`biws` for `n,,`);
//! - usernames are saslnames (`=2C` for `,`, `=3D` for `=`); passwords are not SASLprepped;
//! - extensions after the nonce in client-first (Kafka's `tokenauth=true`, …) are accepted and
//!   ignored; a mandatory `m=` extension is refused (RFC 5802);
//! - the server stores a [`ScramCredential`] (salt, iterations, StoredKey, ServerKey), never the
//!   password, and uses credentials with 4096..=16384 iterations only;
//! - an unknown user, a wrong password and a bad nonce all give the same error text.

use std::num::NonZeroU32;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};

use super::{check_token_size, constant_time_eq, Mechanism, SaslError};

/// The fewest iterations a server-side credential may have (Kafka's `minIterations`).
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;
/// The most iterations a server-side credential may have (Kafka's `maxIterations`).
pub const SCRAM_ITERATIONS_MAX: u32 = 16384;
/// The most iterations the client runs for a server, so a hostile one cannot make it spin.
pub const SCRAM_CLIENT_ITERATIONS_MAX: u32 = 1_000_000;

/// The SCRAM hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub fn name(self) -> &'static str {
        self.mechanism().name()
    }

    pub fn mechanism(self) -> Mechanism {
        match self {
            ScramMechanism::Sha256 => Mechanism::ScramSha256,
            ScramMechanism::Sha512 => Mechanism::ScramSha512,
        }
    }

    /// Kafka's `ScramMechanism` type in `DescribeUserScramCredentials` and
    /// `AlterUserScramCredentials`.
    pub fn kafka_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_code(code: i8) -> Option<ScramMechanism> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn from_mechanism(m: Mechanism) -> Option<ScramMechanism> {
        match m {
            Mechanism::ScramSha256 => Some(ScramMechanism::Sha256),
            Mechanism::ScramSha512 => Some(ScramMechanism::Sha512),
            Mechanism::Plain => None,
        }
    }

    /// Bytes in a digest: the length of salted passwords, keys, proofs and signatures.
    pub fn digest_len(self) -> usize {
        self.digest().output_len()
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn hmac_key(self, key: &[u8]) -> hmac::Key {
        let alg = match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        };
        hmac::Key::new(alg, key)
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&self.hmac_key(key), data).as_ref().to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }

    fn invalid_credentials(self) -> SaslError {
        SaslError::invalid_credentials(self.mechanism())
    }
}

/// Whether a server-side credential may use this many iterations (Kafka's bounds).
pub fn check_iterations(iterations: u32) -> Result<(), SaslError> {
    if (SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
        Ok(())
    } else {
        Err(SaslError(format!(
            "SCRAM iterations {iterations} outside {SCRAM_ITERATIONS_MIN}..={SCRAM_ITERATIONS_MAX}"
        )))
    }
}

/// What the server stores (never the password).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub mechanism: ScramMechanism,
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// Runs PBKDF2 for `iterations` (check them first: see [`check_iterations`]).
    pub fn from_password(
        m: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let salted = salted_password(m, password, salt, iterations);
        ScramCredential::from_salted_password(m, &salted, salt, iterations)
    }

    /// From a salted password, as `AlterUserScramCredentials` carries it.
    pub fn from_salted_password(
        m: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        ScramCredential {
            mechanism: m,
            salt: salt.to_vec(),
            iterations,
            stored_key: m.hash(&m.hmac(salted_password, b"Client Key")),
            server_key: m.hmac(salted_password, b"Server Key"),
        }
    }
}

/// `Hi(password, salt, iterations)`: PBKDF2 with the mechanism's HMAC (0 iterations run as 1).
pub fn salted_password(m: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let alg = match m {
        ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
        ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
    };
    let mut out = vec![0u8; m.digest_len()];
    let iterations = NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN);
    pbkdf2::derive(alg, iterations, salt, password.as_bytes(), &mut out);
    out
}

/// `n` bytes from the system's secure random generator (salts, nonces).
///
/// Panics only if the operating system cannot supply randomness.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut out)
        .expect("the system random number generator failed");
    out
}

/// A fresh nonce: 24 random bytes as 32 printable characters.
fn random_nonce() -> String {
    URL_SAFE_NO_PAD.encode(random_bytes(24))
}

/// A username as a saslname: `=` as `=3D`, `,` as `=2C`.
pub fn escape_username(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// A saslname back to the username; any other `=` sequence, an empty name or NUL is refused.
pub fn unescape_username(saslname: &str) -> Result<String, SaslError> {
    let bad = || SaslError("Invalid SCRAM username".to_string());
    if saslname.is_empty() || saslname.contains(['\0', ',']) {
        return Err(bad());
    }
    let mut out = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find('=') {
        out.push_str(rest.get(..at).ok_or_else(bad)?);
        let tail = rest.get(at..).ok_or_else(bad)?;
        if let Some(after) = tail.strip_prefix("=2C") {
            out.push(',');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("=3D") {
            out.push('=');
            rest = after;
        } else {
            return Err(bad());
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of `key=value`, if `part` has that key.
fn attr(part: &str, key: char) -> Option<&str> {
    part.strip_prefix(key)?.strip_prefix('=')
}

/// RFC 5802 `printable`: 0x21..=0x7E except `,`, at least one.
fn valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// An extension attribute: letters, `=`, a non-empty value (Kafka's `ALPHA=VALUE`).
fn valid_extension(part: &str) -> bool {
    match part.split_once('=') {
        Some((key, value)) => {
            !key.is_empty()
                && key.bytes().all(|b| b.is_ascii_alphabetic())
                && !value.is_empty()
                && !value.contains('\0')
        }
        None => false,
    }
}

fn utf8(msg: &[u8], what: &str) -> Result<String, SaslError> {
    check_token_size(msg)?;
    String::from_utf8(msg.to_vec()).map_err(|_| SaslError(format!("Invalid SCRAM {what}")))
}

fn b64(value: &str, what: &str) -> Result<Vec<u8>, SaslError> {
    STANDARD
        .decode(value)
        .map_err(|_| SaslError(format!("Invalid SCRAM {what}: bad base64")))
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

fn out_of_order() -> SaslError {
    SaslError("SCRAM message out of order".to_string())
}

/// A parsed client-first message.
#[derive(Clone)]
struct ClientFirst {
    /// `n,,` or `n,a=<authzid>,` exactly as sent.
    gs2_header: String,
    /// `client-first-message-bare` exactly as sent (it enters the AuthMessage).
    bare: String,
    username: String,
    nonce: String,
}

fn parse_client_first(msg: &[u8]) -> Result<ClientFirst, SaslError> {
    let bad = || SaslError("Invalid SCRAM client first message".to_string());
    let text = utf8(msg, "client first message")?;
    let Some(rest) = text.strip_prefix("n,") else {
        return Err(SaslError(
            "Invalid SCRAM client first message: channel binding is not supported".to_string(),
        ));
    };
    let (authz_part, bare) = rest.split_once(',').ok_or_else(bad)?;
    let authzid = match authz_part {
        "" => None,
        part => Some(unescape_username(attr(part, 'a').ok_or_else(bad)?)?),
    };
    let mut parts = bare.split(',');
    let first = parts.next().ok_or_else(bad)?;
    if first.starts_with("m=") {
        return Err(SaslError(
            "Invalid SCRAM client first message: mandatory extension not supported".to_string(),
        ));
    }
    let username = unescape_username(attr(first, 'n').ok_or_else(bad)?)?;
    let nonce = parts.next().and_then(|p| attr(p, 'r')).ok_or_else(bad)?;
    if !valid_nonce(nonce) || !parts.all(valid_extension) {
        return Err(bad());
    }
    if authzid.is_some_and(|a| a != username) {
        return Err(SaslError(
            "Authentication failed: Client requested an authorization id that is different from \
             username"
                .to_string(),
        ));
    }
    Ok(ClientFirst {
        gs2_header: format!("n,{authz_part},"),
        bare: bare.to_string(),
        username,
        nonce: nonce.to_string(),
    })
}

#[derive(Clone)]
enum ServerState {
    AwaitClientFirst,
    AwaitCredential(ClientFirst),
    AwaitClientFinal {
        first: ClientFirst,
        credential: ScramCredential,
        server_first: String,
        nonce: String,
    },
    Done(String),
    Failed,
}

/// Server side of one exchange: first client message -> server-first; final client message ->
/// server-final. Any error ends the exchange: later calls fail too.
#[derive(Clone)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    server_nonce: String,
    state: ServerState,
}

impl ScramServer {
    /// With a random server nonce.
    pub fn new(m: ScramMechanism) -> ScramServer {
        ScramServer::with_nonce(m, &random_nonce())
    }

    /// With a chosen server nonce (tests: the RFC vectors).
    pub fn with_nonce(m: ScramMechanism, server_nonce: &str) -> ScramServer {
        ScramServer {
            mechanism: m,
            server_nonce: server_nonce.to_string(),
            state: ServerState::AwaitClientFirst,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Parses client-first and returns the username asked for (unescaped), without answering
    /// yet, so the caller can look up the credential.
    pub fn client_first(&mut self, msg: &[u8]) -> Result<String, SaslError> {
        let ServerState::AwaitClientFirst = std::mem::replace(&mut self.state, ServerState::Failed)
        else {
            return Err(out_of_order());
        };
        let first = parse_client_first(msg)?;
        let username = first.username.clone();
        self.state = ServerState::AwaitCredential(first);
        Ok(username)
    }

    /// Given the user's credential (None: unknown user -> error), returns server-first.
    pub fn server_first(
        &mut self,
        credential: Option<ScramCredential>,
    ) -> Result<Vec<u8>, SaslError> {
        let ServerState::AwaitCredential(first) =
            std::mem::replace(&mut self.state, ServerState::Failed)
        else {
            return Err(out_of_order());
        };
        let m = self.mechanism;
        let credential = credential.ok_or_else(|| m.invalid_credentials())?;
        if credential.mechanism != m
            || check_iterations(credential.iterations).is_err()
            || credential.stored_key.len() != m.digest_len()
            || credential.server_key.len() != m.digest_len()
            || !valid_nonce(&self.server_nonce)
        {
            return Err(m.invalid_credentials());
        }
        let nonce = format!("{}{}", first.nonce, self.server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&credential.salt),
            credential.iterations
        );
        let out = server_first.clone().into_bytes();
        self.state = ServerState::AwaitClientFinal {
            first,
            credential,
            server_first,
            nonce,
        };
        Ok(out)
    }

    /// Checks client-final (channel binding, nonce, proof) and returns server-final (`v=...`).
    pub fn client_final(&mut self, msg: &[u8]) -> Result<Vec<u8>, SaslError> {
        let ServerState::AwaitClientFinal {
            first,
            credential,
            server_first,
            nonce,
        } = std::mem::replace(&mut self.state, ServerState::Failed)
        else {
            return Err(out_of_order());
        };
        let m = self.mechanism;
        let bad = || SaslError("Invalid SCRAM client final message".to_string());
        let text = utf8(msg, "client final message")?;
        let (without_proof, proof_part) = text.rsplit_once(',').ok_or_else(bad)?;
        let proof = b64(attr(proof_part, 'p').ok_or_else(bad)?, "client proof")?;
        let mut parts = without_proof.split(',');
        let binding = parts.next().and_then(|p| attr(p, 'c')).ok_or_else(bad)?;
        let client_nonce = parts.next().and_then(|p| attr(p, 'r')).ok_or_else(bad)?;
        if !parts.all(valid_extension) {
            return Err(bad());
        }
        if b64(binding, "channel binding")? != first.gs2_header.as_bytes() {
            return Err(SaslError(
                "Invalid SCRAM client final message: channel binding mismatch".to_string(),
            ));
        }
        if client_nonce != nonce || proof.len() != m.digest_len() {
            return Err(m.invalid_credentials());
        }
        let auth_message = format!("{},{server_first},{without_proof}", first.bare);
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let client_key = xor(&proof, &client_signature);
        if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
            return Err(m.invalid_credentials());
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        self.state = ServerState::Done(first.username);
        Ok(format!("v={}", STANDARD.encode(server_signature)).into_bytes())
    }

    /// The authenticated username, once the exchange has succeeded.
    pub fn username(&self) -> Option<&str> {
        match &self.state {
            ServerState::Done(username) => Some(username),
            _ => None,
        }
    }
}

#[derive(Clone)]
enum ClientState {
    Start,
    AwaitServerFirst,
    AwaitServerFinal {
        server_key: Vec<u8>,
        auth_message: String,
    },
    Done,
    Failed,
}

/// Client side of one exchange (our CLI and bench). Any error ends the exchange.
#[derive(Clone)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_nonce: String,
    /// `n=<saslname>,r=<nonce>`.
    client_first_bare: String,
    state: ClientState,
}

impl ScramClient {
    /// With a random client nonce.
    pub fn new(m: ScramMechanism, username: &str, password: &str) -> ScramClient {
        ScramClient::with_nonce(m, username, password, &random_nonce())
    }

    /// With a chosen client nonce (tests: the RFC vectors).
    pub fn with_nonce(
        m: ScramMechanism,
        username: &str,
        password: &str,
        client_nonce: &str,
    ) -> ScramClient {
        ScramClient {
            mechanism: m,
            password: password.to_string(),
            client_nonce: client_nonce.to_string(),
            client_first_bare: format!("n={},r={client_nonce}", escape_username(username)),
            state: ClientState::Start,
        }
    }

    /// `n,,n=<user>,r=<nonce>`. Called a second time, it ends the exchange and returns an
    /// empty token.
    pub fn client_first(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.state, ClientState::Failed) {
            ClientState::Start => {
                self.state = ClientState::AwaitServerFirst;
                format!("n,,{}", self.client_first_bare).into_bytes()
            }
            _ => Vec::new(),
        }
    }

    /// Checks server-first (nonce extends ours, iterations within
    /// [`SCRAM_ITERATIONS_MIN`]..=[`SCRAM_CLIENT_ITERATIONS_MAX`]) and returns client-final.
    pub fn server_first(&mut self, msg: &[u8]) -> Result<Vec<u8>, SaslError> {
        let ClientState::AwaitServerFirst = std::mem::replace(&mut self.state, ClientState::Failed)
        else {
            return Err(out_of_order());
        };
        let m = self.mechanism;
        let bad = || SaslError("Invalid SCRAM server first message".to_string());
        let text = utf8(msg, "server first message")?;
        let mut parts = text.split(',');
        let nonce = parts.next().and_then(|p| attr(p, 'r')).ok_or_else(bad)?;
        let salt = b64(
            parts.next().and_then(|p| attr(p, 's')).ok_or_else(bad)?,
            "salt",
        )?;
        let iterations = parts.next().and_then(|p| attr(p, 'i')).ok_or_else(bad)?;
        if !valid_nonce(nonce)
            || !nonce.starts_with(&self.client_nonce)
            || nonce.len() <= self.client_nonce.len()
        {
            return Err(SaslError(
                "Invalid server nonce: does not start with client nonce".to_string(),
            ));
        }
        if salt.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let iterations: u32 = iterations.parse().map_err(|_| bad())?;
        if !(SCRAM_ITERATIONS_MIN..=SCRAM_CLIENT_ITERATIONS_MAX).contains(&iterations) {
            return Err(SaslError(format!(
                "Requested iterations {iterations} outside {SCRAM_ITERATIONS_MIN}..=\
                 {SCRAM_CLIENT_ITERATIONS_MAX}"
            )));
        }
        let salted = salted_password(m, &self.password, &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = m.hmac(&m.hash(&client_key), auth_message.as_bytes());
        let proof = xor(&client_key, &client_signature);
        self.state = ClientState::AwaitServerFinal {
            server_key: m.hmac(&salted, b"Server Key"),
            auth_message,
        };
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    /// Verifies the server's signature; `e=...` is an error.
    pub fn server_final(&mut self, msg: &[u8]) -> Result<(), SaslError> {
        let ClientState::AwaitServerFinal {
            server_key,
            auth_message,
        } = std::mem::replace(&mut self.state, ClientState::Failed)
        else {
            return Err(out_of_order());
        };
        let text = utf8(msg, "server final message")?;
        let first = text.split(',').next().unwrap_or_default();
        if let Some(error) = attr(first, 'e') {
            return Err(SaslError(format!("SCRAM server error: {error}")));
        }
        let bad = || SaslError("Invalid SCRAM server final message".to_string());
        let signature = b64(attr(first, 'v').ok_or_else(bad)?, "server signature")?;
        let key = self.mechanism.hmac_key(&server_key);
        hmac::verify(&key, auth_message.as_bytes(), &signature)
            .map_err(|_| SaslError("Invalid SCRAM server signature".to_string()))?;
        self.state = ClientState::Done;
        Ok(())
    }

    /// Whether the server has proven it knows the credential.
    pub fn is_done(&self) -> bool {
        matches!(self.state, ClientState::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScramMechanism::Sha256;

    #[test]
    fn sasl_scram_rfc7677_sha256_vector() {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = ScramCredential::from_password(Sha256, "pencil", &salt, 4096);
        let mut client = ScramClient::with_nonce(Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        let mut server = ScramServer::with_nonce(Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
        let client_first = client.client_first();
        assert_eq!(client_first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(server.client_first(&client_first).unwrap(), "user");
        let server_first = server.server_first(Some(cred)).unwrap();
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        assert_eq!(
            String::from_utf8(server_first.clone()).unwrap(),
            format!("r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
        );
        let client_final = client.server_first(&server_first).unwrap();
        assert_eq!(
            String::from_utf8(client_final.clone()).unwrap(),
            format!("c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        );
        let server_final = server.client_final(&client_final).unwrap();
        assert_eq!(
            server_final,
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        client.server_final(&server_final).unwrap();
        assert_eq!(server.username(), Some("user"));
    }
}
