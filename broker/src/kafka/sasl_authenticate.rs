//! SaslAuthenticate (key 36, v0-v2): one step of the mechanism chosen by SaslHandshake —
//! PLAIN in one step, SCRAM in two (client-first -> server-first, client-final ->
//! server-final). A failure answers SASL_AUTHENTICATION_FAILED and the connection closes
//! (`conn`); success makes the connection `User:<name>` and, with
//! `connections.max.reauth.ms`, answers the session's lifetime (v1+, KIP-368).

use bytes::Bytes;
use strand_wire::kafka::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;
use tracing::info;

use crate::node::Node;
use crate::security::session::Session;

pub fn handle(
    node: &Node,
    session: &Session,
    req: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    let security = &node.shared.security;
    let state = security.store.state();
    let reauth_ms = security.config.connections_max_reauth_ms;
    let now_ms = crate::runtime::clock::now_ms();
    let reply = session.authenticate(&req.auth_bytes, &state, reauth_ms, now_ms);
    if reply.error == ErrorCode::SaslAuthenticationFailed {
        info!(host = %session.host, listener = %session.listener.name, reason = reply.message.as_deref().unwrap_or(""), "SASL authentication failed");
        crate::metrics::with(|m| m.sasl_authentication_failures += 1);
    } else if session.authenticated() && reply.error == ErrorCode::None {
        crate::metrics::with(|m| m.sasl_authentications += 1);
    }
    let mut resp = SaslAuthenticateResponse::default();
    resp.error_code = reply.error.code();
    resp.error_message = reply.message.map(StrBytes::from_string);
    resp.auth_bytes = Bytes::from(reply.auth_bytes);
    resp.session_lifetime_ms = reply.session_lifetime_ms;
    resp
}
