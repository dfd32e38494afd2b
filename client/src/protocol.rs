//! One broker connection's protocol state (sans-IO): which version of each API to speak,
//! request framing, and matching responses to requests by correlation id.
//!
//! The driver feeds it bytes and takes bytes from it; nothing here touches a socket. Versions:
//! the client prefers the versions in [`PREFERRED`] (supported by Strand and by Apache Kafka
//! 4.x) and speaks `min(preferred, broker max)` once ApiVersions has answered, refusing an API
//! whose range does not meet ours.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use strand_wire::kafka::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use strand_wire::kafka::protocol::{Decodable, Encodable, StrBytes};

use crate::error::ClientError;

/// (api, lowest version we can speak, version we prefer).
pub const PREFERRED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 1, 3),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 3, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 1),
    (ApiKey::ShareAcknowledge, 1, 1),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeQuorum, 0, 2),
    // v1+: v0 has no election type.
    (ApiKey::ElectLeaders, 1, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    // v1: the tokens travel in SaslAuthenticate (v0 sent them as raw frames).
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The version of ApiVersions sent first, before anything is known (v3: flexible, and
/// brokers answer an unknown version at v0 with their range).
pub const API_VERSIONS_FIRST: i16 = 3;

/// Protocol state of one connection.
#[derive(Debug)]
pub struct Wire {
    client_id: String,
    next_correlation: i32,
    /// Correlation id -> (api, version) of requests awaiting a response.
    pending: HashMap<i32, (ApiKey, i16)>,
    /// Negotiated versions; empty until [`Wire::set_versions`].
    versions: HashMap<i16, i16>,
}

impl Wire {
    pub fn new(client_id: &str) -> Wire {
        Wire {
            client_id: client_id.to_string(),
            next_correlation: 1,
            pending: HashMap::new(),
            versions: HashMap::new(),
        }
    }

    /// Adopts the broker's ApiVersions answer.
    pub fn set_versions(&mut self, resp: &ApiVersionsResponse) {
        for (api, min, preferred) in PREFERRED {
            if let Some(b) = resp.api_keys.iter().find(|k| k.api_key == *api as i16) {
                let v = (*preferred).min(b.max_version);
                if v >= *min && v >= b.min_version {
                    self.versions.insert(*api as i16, v);
                }
            }
        }
    }

    /// The version this connection speaks for `api`, if the broker supports one we know.
    pub fn version(&self, api: ApiKey) -> Result<i16, ClientError> {
        if api == ApiKey::ApiVersions && self.versions.is_empty() {
            return Ok(API_VERSIONS_FIRST);
        }
        self.versions.get(&(api as i16)).copied().ok_or_else(|| {
            ClientError::Unsupported(format!(
                "the broker does not support {api:?} at a version this client speaks"
            ))
        })
    }

    /// Frames `body` (size prefix included) and remembers it; returns the correlation id.
    pub fn encode(&mut self, body: &RequestKind) -> Result<(i32, Bytes), ClientError> {
        let api = api_of(body);
        let version = self.version(api)?;
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1).max(1);
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        // Sized up front: a Produce frame carries whole batches, and growing the buffer by
        // doubling showed up as a tenth of the producer's CPU (allocations and copies).
        let body_size = match body {
            RequestKind::Produce(p) => p
                .topic_data
                .iter()
                .flat_map(|t| &t.partition_data)
                .map(|d| d.records.as_ref().map_or(0, |r| r.len()) + 64)
                .sum(),
            _ => 256,
        };
        let mut out = BytesMut::with_capacity(body_size + self.client_id.len() + 64);
        out.put_i32(0);
        header
            .encode(&mut out, api.request_header_version(version))
            .map_err(|e| ClientError::Protocol(format!("encoding {api:?} header: {e}")))?;
        body.encode(&mut out, version)
            .map_err(|e| ClientError::Protocol(format!("encoding {api:?} v{version}: {e}")))?;
        let size = (out.len() - 4) as i32;
        out[0..4].copy_from_slice(&size.to_be_bytes());
        self.pending.insert(correlation_id, (api, version));
        Ok((correlation_id, out.freeze()))
    }

    /// Forgets a request that will get no response (Produce with acks=0).
    pub fn forget(&mut self, correlation_id: i32) {
        self.pending.remove(&correlation_id);
    }

    /// Decodes one response frame (without its size prefix).
    pub fn decode(&mut self, mut frame: Bytes) -> Result<(i32, ResponseKind), ClientError> {
        if frame.len() < 4 {
            return Err(ClientError::Protocol(
                "response shorter than a header".into(),
            ));
        }
        let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let (api, version) = self.pending.remove(&correlation_id).ok_or_else(|| {
            ClientError::Protocol(format!("response for unknown request {correlation_id}"))
        })?;
        ResponseHeader::decode(&mut frame, api.response_header_version(version))
            .map_err(|e| ClientError::Protocol(format!("{api:?} response header: {e}")))?;
        let body = ResponseKind::decode(api, &mut frame, version)
            .map_err(|e| ClientError::Protocol(format!("{api:?} v{version} response: {e}")))?;
        Ok((correlation_id, body))
    }
}

/// The API a request body belongs to.
pub fn api_of(body: &RequestKind) -> ApiKey {
    match body {
        RequestKind::Produce(_) => ApiKey::Produce,
        RequestKind::Fetch(_) => ApiKey::Fetch,
        RequestKind::ListOffsets(_) => ApiKey::ListOffsets,
        RequestKind::Metadata(_) => ApiKey::Metadata,
        RequestKind::OffsetCommit(_) => ApiKey::OffsetCommit,
        RequestKind::OffsetFetch(_) => ApiKey::OffsetFetch,
        RequestKind::FindCoordinator(_) => ApiKey::FindCoordinator,
        RequestKind::JoinGroup(_) => ApiKey::JoinGroup,
        RequestKind::Heartbeat(_) => ApiKey::Heartbeat,
        RequestKind::LeaveGroup(_) => ApiKey::LeaveGroup,
        RequestKind::SyncGroup(_) => ApiKey::SyncGroup,
        RequestKind::DescribeGroups(_) => ApiKey::DescribeGroups,
        RequestKind::ConsumerGroupDescribe(_) => ApiKey::ConsumerGroupDescribe,
        RequestKind::ShareGroupHeartbeat(_) => ApiKey::ShareGroupHeartbeat,
        RequestKind::ShareGroupDescribe(_) => ApiKey::ShareGroupDescribe,
        RequestKind::ShareFetch(_) => ApiKey::ShareFetch,
        RequestKind::ShareAcknowledge(_) => ApiKey::ShareAcknowledge,
        RequestKind::ListGroups(_) => ApiKey::ListGroups,
        RequestKind::ApiVersions(_) => ApiKey::ApiVersions,
        RequestKind::CreateTopics(_) => ApiKey::CreateTopics,
        RequestKind::DeleteTopics(_) => ApiKey::DeleteTopics,
        RequestKind::InitProducerId(_) => ApiKey::InitProducerId,
        RequestKind::DescribeConfigs(_) => ApiKey::DescribeConfigs,
        RequestKind::IncrementalAlterConfigs(_) => ApiKey::IncrementalAlterConfigs,
        RequestKind::DescribeCluster(_) => ApiKey::DescribeCluster,
        RequestKind::DescribeQuorum(_) => ApiKey::DescribeQuorum,
        RequestKind::ElectLeaders(_) => ApiKey::ElectLeaders,
        RequestKind::AlterPartitionReassignments(_) => ApiKey::AlterPartitionReassignments,
        RequestKind::ListPartitionReassignments(_) => ApiKey::ListPartitionReassignments,
        RequestKind::SaslHandshake(_) => ApiKey::SaslHandshake,
        RequestKind::SaslAuthenticate(_) => ApiKey::SaslAuthenticate,
        // Anything else is refused by `version` (a broker-internal API, not in PREFERRED).
        _ => ApiKey::Envelope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::kafka::messages::api_versions_response::ApiVersion;
    use strand_wire::kafka::messages::{ApiVersionsRequest, MetadataRequest};

    fn broker_range(api: ApiKey, min: i16, max: i16) -> ApiVersion {
        let mut v = ApiVersion::default();
        v.api_key = api as i16;
        v.min_version = min;
        v.max_version = max;
        v
    }

    #[test]
    fn negotiates_versions_and_matches_responses() {
        let mut w = Wire::new("test");
        assert_eq!(w.version(ApiKey::ApiVersions).expect("first"), 3);
        assert!(
            w.version(ApiKey::Metadata).is_err(),
            "unknown before ApiVersions"
        );
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = vec![
            broker_range(ApiKey::Metadata, 0, 8),
            broker_range(ApiKey::Fetch, 13, 17),
            broker_range(ApiKey::ApiVersions, 0, 4),
        ];
        w.set_versions(&resp);
        assert_eq!(w.version(ApiKey::Metadata).expect("metadata"), 8);
        assert!(
            w.version(ApiKey::Fetch).is_err(),
            "broker min above our preferred"
        );
        let (id, frame) = w
            .encode(&RequestKind::Metadata(MetadataRequest::default()))
            .expect("encodes");
        assert_eq!(
            i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize,
            frame.len() - 4
        );
        // A response for an unknown correlation id is an error, not a panic.
        assert!(w.decode(Bytes::from_static(&[0, 0, 0, 99])).is_err());
        assert!(w.decode(Bytes::from_static(&[1])).is_err());
        w.forget(id);
        let _ = ApiVersionsRequest::default();
    }

    #[test]
    fn negotiates_sasl_versions() {
        use strand_wire::kafka::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        let mut w = Wire::new("test");
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = vec![
            broker_range(ApiKey::SaslHandshake, 0, 1),
            broker_range(ApiKey::SaslAuthenticate, 0, 2),
        ];
        w.set_versions(&resp);
        assert_eq!(w.version(ApiKey::SaslHandshake).expect("handshake"), 1);
        assert_eq!(
            w.version(ApiKey::SaslAuthenticate).expect("authenticate"),
            2
        );
        w.encode(&RequestKind::SaslHandshake(SaslHandshakeRequest::default()))
            .expect("encodes");
        w.encode(&RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default(),
        ))
        .expect("encodes");
        // A broker with only SaslHandshake v0 (raw tokens) is refused.
        let mut w = Wire::new("test");
        resp.api_keys = vec![broker_range(ApiKey::SaslHandshake, 0, 0)];
        w.set_versions(&resp);
        assert!(w.version(ApiKey::SaslHandshake).is_err());
    }
}
