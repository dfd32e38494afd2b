//! Request decoding and response encoding on top of the `kafka-protocol` crate (generated from
//! Kafka's JSON schemas), plus the few things it leaves to the broker: reading the fixed
//! header prefix of a request we cannot decode (to answer it), and framing responses.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

/// The first fields of every request header, readable even when the rest is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Reads `api_key`, `api_version` and `correlation_id` (the first 8 bytes of any header).
pub fn peek_header(frame: &[u8]) -> Option<HeaderPrefix> {
    if frame.len() < 8 {
        return None;
    }
    Some(HeaderPrefix {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

#[derive(Debug)]
pub enum DecodeError {
    /// Fewer than 8 bytes: not even a header prefix.
    NoHeader,
    /// An API key Kafka does not define.
    UnknownApi(HeaderPrefix),
    /// The header or body did not decode at this version.
    Malformed(HeaderPrefix, String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::NoHeader => f.write_str("request shorter than a header"),
            DecodeError::UnknownApi(h) => write!(f, "unknown api key {}", h.api_key),
            DecodeError::Malformed(h, e) => {
                write!(
                    f,
                    "malformed request (api {} v{}): {e}",
                    h.api_key, h.api_version
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes a request frame (without its size prefix) at the version its header names. The
/// caller must have checked the version is one it supports: the codecs only know the versions
/// in Kafka's schemas. Record sets stay `Bytes` slices of `frame`.
pub fn decode_request(
    mut frame: Bytes,
) -> Result<(RequestHeader, ApiKey, RequestKind), DecodeError> {
    let prefix = peek_header(&frame).ok_or(DecodeError::NoHeader)?;
    let api = ApiKey::try_from(prefix.api_key).map_err(|_| DecodeError::UnknownApi(prefix))?;
    let range = api.valid_versions();
    if prefix.api_version < range.min || prefix.api_version > range.max {
        return Err(DecodeError::Malformed(
            prefix,
            "version outside the schema".into(),
        ));
    }
    let header_version = api.request_header_version(prefix.api_version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| DecodeError::Malformed(prefix, e.to_string()))?;
    let body = RequestKind::decode(api, &mut frame, prefix.api_version)
        .map_err(|e| DecodeError::Malformed(prefix, e.to_string()))?;
    Ok((header, api, body))
}

/// Encodes a response with its size prefix, ready to write to the socket.
pub fn encode_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> anyhow::Result<BytesMut> {
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header.encode(&mut out, api.response_header_version(version))?;
    body.encode(&mut out, version)?;
    let size = (out.len() - 4) as i32;
    out[0..4].copy_from_slice(&size.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsRequest;

    fn frame(api: ApiKey, version: i16, body: &RequestKind) -> Bytes {
        let mut out = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(7);
        header
            .encode(&mut out, api.request_header_version(version))
            .expect("header");
        body.encode(&mut out, version).expect("body");
        out.freeze()
    }

    #[test]
    fn decodes_a_request_and_its_header() {
        let f = frame(
            ApiKey::ApiVersions,
            3,
            &RequestKind::ApiVersions(ApiVersionsRequest::default()),
        );
        let (h, api, body) = decode_request(f).expect("decodes");
        assert_eq!((h.correlation_id, api), (7, ApiKey::ApiVersions));
        assert!(matches!(body, RequestKind::ApiVersions(_)));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(
            decode_request(Bytes::from_static(b"abc")),
            Err(DecodeError::NoHeader)
        ));
        assert!(matches!(
            decode_request(Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 1])),
            Err(DecodeError::UnknownApi(_))
        ));
        let mut f = frame(
            ApiKey::Metadata,
            12,
            &RequestKind::Metadata(Default::default()),
        )
        .to_vec();
        f.truncate(f.len() - 2);
        assert!(decode_request(Bytes::from(f)).is_err());
    }
}
