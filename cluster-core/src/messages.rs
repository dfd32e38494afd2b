//! What travels between nodes on the cluster transport: one byte naming the channel, then
//! that channel's encoding. Quorum messages are raft-rs's own (`eraftpb::Message`, protobuf:
//! the library's wire format, not ours to redesign); the cluster's own messages (broker
//! registration and heartbeats, replication) get their channels as they arrive.
//!
//! raft-rs reserves id 0 ("none"), and Kafka's `node.id` starts at 0, so voter `node` is raft
//! id `node + 1` everywhere ([`raft_id`], [`node_of`]).

use protobuf::Message as PbMessage;
use raft::eraftpb::Message;

use crate::records::NodeId;

/// The first byte of every cluster message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Channel {
    /// A metadata-quorum (raft) message between controllers.
    Quorum = 1,
    /// A broker's request to the active controller (`controller_rpc`, FlatBuffers).
    ControllerRequest = 2,
    /// The active controller's answer (`controller_rpc`, FlatBuffers).
    ControllerAnswer = 3,
    /// A broker's request to another broker (`broker_rpc`, FlatBuffers): transaction markers.
    BrokerRequest = 4,
    /// The answer to a `BrokerRequest`.
    BrokerAnswer = 5,
}

/// The raft id of voter `node` (`node` >= 0, checked by the config).
pub fn raft_id(node: NodeId) -> u64 {
    debug_assert!(node >= 0, "node ids are checked to be >= 0");
    node as u64 + 1
}

/// The node of raft id `id` (`None` for 0, raft's "nobody", or an id beyond `i32`).
pub fn node_of(id: u64) -> Option<NodeId> {
    id.checked_sub(1).and_then(|n| NodeId::try_from(n).ok())
}

/// A quorum message, ready for the transport.
pub fn encode_quorum(msg: &Message) -> Result<Vec<u8>, String> {
    let mut out = vec![Channel::Quorum as u8];
    msg.write_to_vec(&mut out)
        .map_err(|e| format!("quorum message encoding: {e}"))?;
    Ok(out)
}

/// A message of `channel` with `body` (already encoded), ready for the transport.
pub fn with_channel(channel: Channel, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + body.len());
    out.push(channel as u8);
    out.extend_from_slice(body);
    out
}

/// Whether a quorum message carries a snapshot (the driver reports its delivery).
pub fn is_snapshot(msg: &Message) -> bool {
    msg.get_msg_type() == raft::eraftpb::MessageType::MsgSnapshot
}

/// A message's channel and the rest of its bytes.
pub fn channel_of(bytes: &[u8]) -> Result<(Channel, &[u8]), String> {
    match bytes.split_first() {
        Some((1, rest)) => Ok((Channel::Quorum, rest)),
        Some((2, rest)) => Ok((Channel::ControllerRequest, rest)),
        Some((3, rest)) => Ok((Channel::ControllerAnswer, rest)),
        Some((4, rest)) => Ok((Channel::BrokerRequest, rest)),
        Some((5, rest)) => Ok((Channel::BrokerAnswer, rest)),
        Some((c, _)) => Err(format!("unknown cluster message channel {c}")),
        None => Err("empty cluster message".to_string()),
    }
}

/// A quorum message's body (after the channel byte).
pub fn decode_quorum(body: &[u8]) -> Result<Message, String> {
    Message::parse_from_bytes(body).map_err(|e| format!("malformed quorum message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_messages_round_trip_and_garbage_is_an_error() {
        let mut m = Message::default();
        m.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
        m.from = raft_id(0);
        m.to = raft_id(2);
        m.term = 7;
        let bytes = encode_quorum(&m).unwrap();
        let (ch, body) = channel_of(&bytes).unwrap();
        assert_eq!(ch, Channel::Quorum);
        assert_eq!(decode_quorum(body).unwrap(), m);
        assert_eq!(node_of(m.to), Some(2));
        assert_eq!(node_of(0), None);
        assert!(channel_of(&[]).is_err());
        assert!(channel_of(&[9, 1]).is_err());
        assert!(decode_quorum(&[0xff, 0xff, 0xff]).is_err());
    }
}
