//! Client errors: a Kafka error code by its protocol name, or what went wrong locally.

use strand_wire::ErrorCode;

#[derive(Debug)]
pub enum ClientError {
    /// The broker answered with an error code (and maybe a message).
    Kafka {
        /// The wire value (`ErrorCode::from_code` names the ones Strand knows).
        code: i16,
        message: Option<String>,
    },
    /// The connection failed or closed.
    Io(std::io::Error),
    /// A response did not decode, or did not match its request.
    Protocol(String),
    /// The broker does not speak a version of an API this client needs.
    Unsupported(String),
    /// No answer in time.
    Timeout(String),
    /// A bad argument (unknown topic, partition out of range, ...), said plainly.
    Invalid(String),
    /// TLS or SASL failed on this side: a certificate refused, a bad security setting, a
    /// SCRAM server that did not prove it knows the credential. Not retriable.
    Auth(String),
}

impl ClientError {
    /// `Ok(())` for code 0, the error otherwise.
    pub fn check(code: i16, message: Option<&str>) -> Result<(), ClientError> {
        if code == 0 {
            return Ok(());
        }
        Err(ClientError::Kafka {
            code,
            message: message.map(str::to_string),
        })
    }

    /// The Kafka error code, if the broker sent one.
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether retrying the same request may succeed (leader moved, broker busy, ...).
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Kafka { code, .. } => {
                ErrorCode::from_code(*code).is_some_and(ErrorCode::is_retriable)
            }
            ClientError::Io(_) | ClientError::Timeout(_) => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Kafka { code, message } => {
                match ErrorCode::from_code(*code) {
                    Some(name) => write!(f, "{name:?} (error {code})")?,
                    None => write!(f, "Kafka error {code}")?,
                }
                if let Some(m) = message.as_deref().filter(|m| !m.is_empty()) {
                    write!(f, ": {m}")?;
                }
                match hint(*code) {
                    Some(h) => write!(f, " — {h}"),
                    None => Ok(()),
                }
            }
            ClientError::Io(e) => write!(f, "connection error: {e}"),
            ClientError::Protocol(m) => write!(f, "protocol error: {m}"),
            ClientError::Unsupported(m) => write!(f, "unsupported: {m}"),
            ClientError::Timeout(m) => write!(f, "timed out: {m}"),
            ClientError::Invalid(m) => f.write_str(m),
            ClientError::Auth(m) => f.write_str(m),
        }
    }
}

/// What to do about a security error code.
fn hint(code: i16) -> Option<&'static str> {
    Some(match code {
        29 => "check the user's ACLs for the topic",
        30 => "check the user's ACLs for the group",
        31 => "check the user's ACLs for the cluster",
        53 => "check the user's ACLs for the transactional id",
        33 => "set sasl.mechanism to one the broker enables",
        34 => "check that security.protocol matches the broker's listener",
        58 => {
            "check the username and password (sasl.username and sasl.password, or \
             sasl.jaas.config) and sasl.mechanism"
        }
        _ => return None,
    })
}

impl std::error::Error for ClientError {}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}
