//! SaslHandshake (key 17, v1): the client names its mechanism; the answer lists the enabled
//! ones (`sasl.enabled.mechanisms`), with UNSUPPORTED_SASL_MECHANISM for another, or
//! ILLEGAL_SASL_STATE on a listener without SASL or mid-exchange. v0 (raw tokens after the
//! handshake) went in Kafka 4 (KIP-896) and is not served.

use strand_wire::kafka::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use strand_wire::kafka::protocol::StrBytes;

use crate::node::Node;
use crate::security::session::Session;

pub fn handle(node: &Node, session: &Session, req: SaslHandshakeRequest) -> SaslHandshakeResponse {
    let enabled = &node.shared.security.config.sasl_mechanisms;
    let (code, names) = session.handshake(req.mechanism.as_str(), enabled);
    let mut resp = SaslHandshakeResponse::default();
    resp.error_code = code.code();
    resp.mechanisms = names.into_iter().map(StrBytes::from_string).collect();
    resp
}
