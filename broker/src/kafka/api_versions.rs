//! ApiVersions (key 18): the table of supported APIs and versions. A request at a version we
//! do not know is answered at v0 with UNSUPPORTED_VERSION and the table (KIP-511), so the
//! client can retry at a version we speak.

use strand_wire::kafka::messages::api_versions_response::ApiVersion;
use strand_wire::kafka::messages::ApiVersionsResponse;

use super::SUPPORTED;

pub fn handle(error_code: i16) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.error_code = error_code;
    r.api_keys = SUPPORTED
        .iter()
        .map(|&(k, lo, hi)| {
            let mut v = ApiVersion::default();
            v.api_key = k as i16;
            v.min_version = lo;
            v.max_version = hi;
            v
        })
        .collect();
    r
}
